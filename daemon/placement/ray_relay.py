"""The daemon's end of a Ray run whose home the nodes do not share (``placement.shared_home:
false``): its events come back through the job's log into the run directory here.

On the node, ``daemon.event_echo`` (the job's entrypoint) writes each line of the node's
``events.jsonl`` into the job's log with its byte offset in that file, then the end of the
worker's stderr and the supervisor's exit record. Each poll, for such a run, ``LogRelay.read``:

- reads the end of the job's log: the state API's ``GET /api/v0/logs/file?node_id=<the job's
  driver node>&filename=job-driver-<id>.log&lines=N`` (raw bytes; the dashboard's
  ``/api/jobs/<id>/logs`` has only the whole log, as text). ``N`` follows the run's rate (twice
  the lines of the last read, at least 1,000); a window that does not reach back to what the
  run directory has already is read again whole (``lines=-1``), once: a poll costs the lines
  since the last one, not the whole log;
- appends to the local ``events.jsonl`` the lines (or the part of a line) past what it holds,
  and fsyncs it. Where the job's lines begin in the local file (``base``: its size when the job's
  first line was to come) is kept in ``log_relay.json``, written before any line of the job is
  appended; after that the local file's own size is the cursor. So there is no second record to
  keep in step with the file: a daemon killed at any point (before, during or after an append)
  finds, on its next read, the file as far as it got (a torn append is a prefix: the rest of
  that line is appended) and goes on from there: no line lost, none twice;
- once the exit record is in the log (after every event line, on the node), writes the end of
  the worker's stderr into ``stderr.log`` and the record into ``exit.json``: ``_finish`` reads
  them as for any run.
"""
from __future__ import annotations

import base64
import json
import logging
import os
from typing import Any

from daemon.event_echo import EVENT, EVENT_PART, EXIT, MARK, STDERR
from daemon.home import EVENTS_FILE, EXIT_FILE, STDERR_FILE
from daemon.placement import PlacementError
from daemon.shim import write_json_atomic

log = logging.getLogger("mosaic.daemon.ray_relay")

RELAY_FILE = "log_relay.json"   # in the run directory: {"job": submission id, "base": its first line's offset here}
TAIL_LINES_MIN = 1000
TAIL_LINES_MAX = 200_000


def unshared(placement: dict[str, Any] | None) -> bool:
    """A Ray run whose home the nodes do not share."""
    placement = placement or {}
    return placement.get("backend") == "ray" and placement.get("shared_home") is False


def refusal(config: dict[str, Any]) -> str | None:
    """What such a run cannot do, said at submit in one line (None: nothing)."""
    if not unshared(config.get("placement")):
        return None
    why = "needs the home on a filesystem the Ray nodes share (placement.shared_home is false)"
    if (config.get("frames") or {}).get("enabled"):
        return f"frames: live frames reach this machine through the run directory: {why}"
    if config.get("record"):
        return f"record: the dataset would be written on the node: {why}"
    if config.get("checkpoint"):
        return f"checkpoint: the node cannot read {config['checkpoint']}: {why}"
    if config.get("dataset"):
        return f"dataset: the node cannot read {config['dataset']}: {why}"
    return None


def parse(log_bytes: bytes) -> tuple[list[tuple[int, bytes]], bytes | None, dict[str, Any] | None]:
    """The node's event lines in a piece of the job's log, each (offset in the node's file, its
    bytes there), the stderr's end and the exit record. What follows the last newline is a line
    being written: not read yet."""
    events: list[tuple[int, bytes]] = []
    stderr = record = None
    for line in log_bytes.split(b"\n")[:-1]:
        if not line.startswith(MARK):
            continue
        try:
            if line.startswith(EVENT):
                offset, _, data = line[len(EVENT):].partition(b" ")
                events.append((int(offset), data + b"\n"))
            elif line.startswith(EVENT_PART):
                offset, _, data = line[len(EVENT_PART):].partition(b" ")
                events.append((int(offset), data))
            elif line.startswith(STDERR):
                stderr = base64.b64decode(line[len(STDERR):])
            elif line.startswith(EXIT):
                record = json.loads(line[len(EXIT):])
        except ValueError:   # not ours after all (a line of the log that looks like it)
            continue
    return events, stderr, record


class LogRelay:
    """One run's job: its log into its run directory. Called from the daemon's cluster thread."""

    def __init__(self, run_dir: str, job_id: str):
        self.run_dir = run_dir
        self.job_id = job_id
        self.node_id: str | None = None
        self.lines = TAIL_LINES_MIN
        self.gap_said = False

    @property
    def events_path(self) -> str:
        return os.path.join(self.run_dir, EVENTS_FILE)

    def base(self) -> int:
        """Where this job's lines begin in the local events file (its size before the first)."""
        path = os.path.join(self.run_dir, RELAY_FILE)
        try:
            with open(path) as f:
                kept = json.load(f)
            if kept.get("job") == self.job_id:
                return int(kept["base"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        base = os.path.getsize(self.events_path) if os.path.exists(self.events_path) else 0
        write_json_atomic(path, {"job": self.job_id, "base": base})
        return base

    def append(self, events: list[tuple[int, bytes]], base: int) -> tuple[int, bool]:
        """The lines past what the local file holds, appended and fsynced: (how many, whether
        a line before the first of them is missing from ``events``)."""
        with open(self.events_path, "ab") as f:
            size = os.fstat(f.fileno()).st_size
            chunks = []
            for offset, data in events:
                at = base + offset
                if at + len(data) <= size:     # here already
                    continue
                if at > size:                  # lines between are not in this piece of the log
                    if chunks:
                        break
                    return 0, True
                chunks.append(data[size - at:])
                size = at + len(data)
            if chunks:
                f.write(b"".join(chunks))
                f.flush()
                os.fsync(f.fileno())
        return len(chunks), False

    def read(self, backend) -> bool:
        """One read of the job's log into the run directory; True once its exit record is there."""
        if os.path.exists(os.path.join(self.run_dir, EXIT_FILE)):
            return True
        if self.node_id is None:
            job = backend.job(self.job_id) or {}
            self.node_id = job.get("driver_node_id") or None
            if self.node_id is None:   # not started on a node yet
                return False
        base = self.base()
        lines = self.lines
        while True:
            events, stderr, record = parse(backend.node_log(self.node_id, f"job-driver-{self.job_id}.log", lines))
            appended, gap = self.append(events, base)
            if not gap or lines == -1:
                break
            lines = -1   # the window began after what is here: the whole log, once
        self.lines = min(TAIL_LINES_MAX, max(TAIL_LINES_MIN, 2 * appended + 100))
        if gap and not self.gap_said:
            self.gap_said = True
            log.warning("job %s: its log lacks event lines before offset %d of the node's file: they are lost",
                        self.job_id, events[0][0] if events else -1)
        if record is None:
            return False
        if stderr is not None:
            tmp = os.path.join(self.run_dir, f"{STDERR_FILE}.tmp{os.getpid()}")
            with open(tmp, "wb") as f:
                f.write(stderr)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, os.path.join(self.run_dir, STDERR_FILE))
        write_json_atomic(os.path.join(self.run_dir, EXIT_FILE), record)
        return True


def relay_all(backend, runs: list, statuses: dict, relays: dict[str, LogRelay]) -> None:
    """For each unshared run of one engine (ActiveRuns and the poll's JobStatus of each), its job's
    log into its run directory; the ending of a job that left no record, said for such a run."""
    for active in runs:
        job_id = active.job.id
        status = statuses.get(job_id)
        if not unshared(active.placement) or status is None or status.pending or status.gone:
            continue
        relay = relays.get(active.run_id)
        if relay is None or relay.job_id != job_id:
            relay = relays[active.run_id] = LogRelay(active.run_dir, job_id)
        try:
            done = relay.read(backend)
        except PlacementError as exc:
            log.warning("run %s: cannot read the log of job %s: %s", active.run_id, job_id, exc)
            done = False
            if status.ended:
                status.ending = f"the job ended ({status.state}) and its log could not be read: {exc}"
        except OSError as exc:
            log.warning("run %s: cannot write what job %s's log brought: %s", active.run_id, job_id, exc)
            done = False
        except Exception:  # noqa: BLE001 -- a bug here must not stop the daemon's polls
            log.exception("run %s: relaying job %s's log failed", active.run_id, job_id)
            done = False
        if status.ended and not done and status.state not in ("STOPPED", "FAILED") \
                and "could not be read" not in status.ending:
            status.ending = (f"the job ended ({status.state}) and its log holds no exit record of the "
                             f"supervisor (the node's run directory is not shared)")
        if status.ended:
            relays.pop(active.run_id, None)
