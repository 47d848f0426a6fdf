"""Reading a run's events.jsonl: validation, the run summary, backlog reads.

The worker appends lines; the daemon reads them from the byte offset it
reached last (kept in the store), so every line is taken exactly once, also
across daemon restarts. A line that is not a valid event (a stray print,
binary garbage, a line over MAX_EVENT_LINE) is kept in the file, counted, and
shown to clients as an ``invalid`` event -- never silently dropped.

Offsets are byte offsets into events.jsonl. An ``events`` notification names
the range [from, to) it covers; a client's cursor is the last ``to`` it saw.
"""
from __future__ import annotations

import math
import operator
import os
import time
from collections import deque
from typing import Any

from daemon.protocol import RETURNS_KEPT, dumps, loads
from workers.sdk import telemetry as tm

MAX_EVENT_LINE = 1024 * 1024   # a longer line is recorded as invalid, not parsed
READ_CHUNK = 1024 * 1024       # bytes read per pass, so one chatty run cannot stall the loop
WARNINGS_KEPT = 20              # a run's warnings kept in its summary (each target says it once)
# Episode returns kept in the summary: the sparkline and the smoothed return,
# the mean of the last N (clients let N go up to this). 100 floats keep the
# summary, sent to clients twice a second, at about 1 KB.
_TYPE_KEY = "type"
_event_type = operator.itemgetter(_TYPE_KEY)
_scalar_tag = operator.itemgetter("tag")
_event_step = operator.itemgetter("step")


def _invalid(raw: bytes, error: str) -> bytes:
    sample = raw[:200].decode("utf-8", errors="replace")
    return dumps({"v": tm.VERSION, "type": tm.INVALID, "t": time.time(), "raw": sample, "error": error})


def _split_well_formed(data: bytes) -> tuple[list[bytes], list[dict[str, Any]], int] | None:
    """The fast path of split_events: every complete line one event object.

    All lines are parsed by one orjson call, as the elements of one JSON array,
    instead of one call each from a Python loop: about 3x less daemon CPU per
    line. None when any line is not plainly a valid event (blank, too long,
    not ``{...}``, not JSON, not an event), and the caller takes the careful
    path. Each line starting with ``{`` and ending with ``}``, and the array
    having exactly one element per line, means the elements are the lines.
    """
    last = data.rfind(b"\n")
    if last < 0:
        return None
    body = data[:last]
    if body[:1] != b"{" or body[-1:] != b"}":
        return None
    lines = body.split(b"\n")
    # every line starts with "{" and ends with "}": counted in C rather than
    # looked at line by line (a per-line Python check cost a fifth of the ingest)
    if body.count(b"}\n{") != len(lines) - 1:
        return None
    if len(body) > MAX_EVENT_LINE and max(map(len, lines)) > MAX_EVENT_LINE:
        return None
    try:
        events = loads(b"[" + body.replace(b"\n", b",") + b"]")
    except ValueError:
        return None
    if len(events) != len(lines):
        return None
    # every element an object whose "type" is an event type: checked in C (map/set), and a
    # "type" that is no string (a list cannot even be looked up in a set) takes the careful path
    try:
        if set(map(type, events)) != {dict} or not set(map(_event_type, events)) <= tm.EVENT_TYPES:
            return None
    except (KeyError, TypeError):
        return None
    return lines, events, last + 1


def split_events(data: bytes) -> tuple[list[bytes], list[dict[str, Any]], int, bool]:
    """Validate the complete lines of data.

    Returns (raw event lines for clients, parsed events, bytes consumed, inside
    an over-long line). An incomplete last line is not consumed unless it is
    already too long; then it is consumed, recorded as invalid, and the caller
    must skip the rest of it up to its newline.
    """
    fast = _split_well_formed(data)
    if fast is not None and len(data) - fast[2] <= MAX_EVENT_LINE:
        return fast[0], fast[1], fast[2], False
    return _split_line_by_line(data)


def _split_line_by_line(data: bytes) -> tuple[list[bytes], list[dict[str, Any]], int, bool]:
    """split_events' careful path: each line on its own, bad ones recorded as invalid events."""
    raws: list[bytes] = []
    parsed: list[dict[str, Any]] = []
    pos = 0
    end = len(data)
    types = tm.EVENT_TYPES
    long_line = False
    while pos < end:
        nl = data.find(b"\n", pos)
        if nl < 0:
            if end - pos > MAX_EVENT_LINE:  # an endless line: count what we have, skip on
                raws.append(_invalid(data[pos:pos + 200], f"line longer than {MAX_EVENT_LINE} bytes"))
                parsed.append(loads(raws[-1]))
                pos = end
                long_line = True
            break
        line = data[pos:nl]
        pos = nl + 1
        if not line.strip():
            continue
        if len(line) > MAX_EVENT_LINE:
            raw = _invalid(line, f"line longer than {MAX_EVENT_LINE} bytes")
        else:
            try:
                event = loads(line)
            except ValueError as exc:
                raw = _invalid(line, f"not JSON: {exc}")
            else:
                kind = event.get(_TYPE_KEY) if type(event) is dict else None
                if type(kind) is str and kind in types:
                    raws.append(line)
                    parsed.append(event)
                    continue
                raw = _invalid(line, "not a telemetry event")
        raws.append(raw)
        parsed.append(loads(raw))
    return raws, parsed, pos, long_line


class RunTail:
    """Follows one run's events file and keeps its summary."""

    def __init__(self, run_id: str, path: str, offset: int = 0, summary: dict[str, Any] | None = None):
        self.run_id = run_id
        self.path = path
        self.offset = offset
        self.fd: int | None = None
        self.skipping = False  # inside an over-long line, dropping bytes until its newline
        s = summary or {}
        self.steps: int = s.get("steps", 0)
        self.total_steps: int | None = s.get("total_steps")
        self.lines: int = s.get("lines", 0)
        self.invalid: int = s.get("invalid", 0)
        self.episodes: int = s.get("episodes", 0)
        self.last_return = s.get("last_return")
        self.returns: deque = deque(s.get("returns", []), maxlen=RETURNS_KEPT)
        # the best episode return of the whole run and the step it came at
        self.best_return: float | None = s.get("best_return")
        self.best_step: int | None = s.get("best_step")
        if "best_return" not in s:
            # a summary stored before the best was kept: the best of the returns it has, step unknown
            kept = [r for r in self.returns if type(r) in (int, float) and math.isfinite(r)]
            self.best_return = max(kept) if kept else None
        self.tags: set[str] = set(s.get("tags", []))
        self.sps: float | None = s.get("sps")
        self.started = bool(s.get("started"))
        self.completed = bool(s.get("completed"))
        self.failed_reason: str | None = s.get("failed_reason")
        self.last_event_t: float | None = s.get("last_event_t")
        self.checkpoints: list[str] = s.get("checkpoints", [])
        # the newest checkpoint the worker saved on its schedule (checkpoint_saved) and its step:
        # where "mosaic continue" goes on from after a failure (a stop's has its own, ``stopped``)
        self.last_checkpoint: dict[str, Any] | None = s.get("last_checkpoint")
        # run_stopped: {"step", "checkpoint"} of the stop that ended the run's last process
        self.stopped: dict[str, Any] | None = s.get("stopped")
        # the run's recorded offline dataset: {"path", "transitions", "episodes"} (dataset_saved)
        self.dataset: dict[str, Any] | None = s.get("dataset")
        self.phase: str | None = s.get("phase")
        # what went wrong beside the run, said once each (warning events: a failing W&B/MLflow mirror)
        self.warnings: list[str] = list(s.get("warnings") or [])
        # The offset of the first chunk whose bytes are not just its events'
        # lines (an invalid, blank or partial line), None while there is none.
        # Backlog reads below it split lines without parsing them again. A
        # summary from before this field was kept: unknown, so irregular from 0.
        self.irregular_from: int | None = s.get("irregular_from") if "irregular_from" in s else (
            0 if s.get("lines") else None)
        # LLM workers: final llm_step events only (partial ones are a reply still streaming)
        self.llm: dict[str, Any] = dict(s.get("llm") or {})
        # the last system/* sample of the run (daemon.resources): {"cpu_percent": ..., "rss_mb": ...}
        self.system: dict[str, Any] = dict(s.get("system") or {})
        self._rate_mark: tuple[float, int] | None = None
        # the run's scalar history (daemon.history.RunHistory), fed the events parsed here while
        # it covers exactly what was read (attached at offset 0, or once caught up to the tail)
        self.history: Any = None

    def summary(self) -> dict[str, Any]:
        return {
            "steps": self.steps, "total_steps": self.total_steps, "lines": self.lines,
            "invalid": self.invalid, "episodes": self.episodes, "last_return": self.last_return,
            "returns": list(self.returns), "best_return": self.best_return, "best_step": self.best_step,
            "tags": sorted(self.tags), "sps": self.sps,
            "started": self.started, "completed": self.completed, "failed_reason": self.failed_reason,
            "last_event_t": self.last_event_t, "checkpoints": self.checkpoints[-20:], "phase": self.phase,
            "last_checkpoint": self.last_checkpoint, "stopped": self.stopped,
            "irregular_from": self.irregular_from,
            "dataset": self.dataset,
            **({"llm": dict(self.llm)} if self.llm else {}),
            **({"warnings": list(self.warnings)} if self.warnings else {}),
            "system": self.system,
        }

    def _open(self) -> bool:
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
        return True

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def read_new(self, final: bool = False) -> tuple[int, int, list[bytes]] | None:
        """Take the complete lines appended since the last call.

        Returns (from, to, raw events) or None when nothing new. ``final`` is
        set once the worker has exited: a last line without a newline (a crash
        mid-write) is then taken as an invalid event instead of waited for.
        """
        if not self._open():
            return None
        data = os.pread(self.fd, READ_CHUNK, self.offset)
        if not data:
            return None
        # Ranges handed out are contiguous: skipped bytes belong to the range
        # that skips them, so a client's cursor never has to jump.
        start = self.offset
        skipped = 0
        if self.skipping:
            nl = data.find(b"\n")
            if nl < 0:
                self.offset += len(data)
                if self.history is not None:
                    self.history.add_events([], self.offset)
                return start, self.offset, []
            skipped = nl + 1
            data = data[skipped:]
            self.skipping = False
        requested = READ_CHUNK - skipped
        raws, parsed, used, self.skipping = split_events(data)
        if used == 0 and len(data) == READ_CHUNK:
            # one line wider than a chunk: widen the window so it is taken (or found too long)
            requested = MAX_EVENT_LINE + 2
            data = os.pread(self.fd, requested, start + skipped)
            raws, parsed, used, self.skipping = split_events(data)
        at_eof = len(data) < requested
        # Only bytes that run to the end of the file can be a partial last line;
        # a line cut by the chunk boundary is taken whole on the next read.
        if final and at_eof and used < len(data) and not self.skipping:
            tail = data[used:]
            raw = _invalid(tail, "partial line at exit")
            raws.append(raw)
            parsed.append(loads(raw))
            used = len(data)
        if used == 0 and not raws and not skipped:
            return None
        if self.irregular_from is None and (skipped or not _is_verbatim(raws, data, used)):
            self.irregular_from = start
        self.offset = start + skipped + used
        plain = self._absorb(parsed)
        if self.history is not None:
            self.history.add_events(parsed, self.offset, plain)
        return start, self.offset, raws

    def _absorb_scalars(self, events: list[dict[str, Any]]) -> tuple[list[int], set[str]] | None:
        """_absorb for a chunk of plain scalars (most of a busy run's chunks), in
        map/set/max calls instead of a loop: their steps and tags (the history takes
        them), or None, and nothing changed, when the chunk holds anything else
        (another type, a system/ tag, a step that is not an integer) and needs the loop."""
        try:
            if set(map(_event_type, events)) != {tm.SCALAR}:
                return None
            tags = set(map(_scalar_tag, events))
            steps = list(map(_event_step, events))
        except KeyError:
            return None
        if set(map(type, tags)) != {str} or any(tag.startswith("system/") for tag in tags):
            return None
        if set(map(type, steps)) != {int}:
            return None
        self.lines += len(events)
        self.tags |= tags
        t = events[-1].get("t")
        if isinstance(t, (int, float)):
            self.last_event_t = t
        top = max(steps)
        if top > self.steps:
            self.steps = top
            self._update_rate()
        return steps, tags

    def _absorb(self, events: list[dict[str, Any]]) -> tuple[list[int], set[str]] | None:
        """Count a chunk into the summary; its steps and tags when it was plain scalars."""
        if events:
            plain = self._absorb_scalars(events)
            if plain is not None:
                return plain
        self.lines += len(events)
        steps = self.steps
        for ev in events:
            kind = ev["type"]
            if kind == tm.SCALAR:
                tag = ev.get("tag", "?")
                self.tags.add(tag)
                if tag.startswith("system/"):
                    self.system[tag[7:]] = ev.get("value")
                    continue  # the daemon's sample of the run, at the run's step: no progress
                step = ev.get("step")
            elif kind == tm.EPISODE:
                self.episodes += 1
                self.tags.update(tag for tag, _ in tm.episode_scalars(ev))
                ret = ev.get("return")
                self.last_return = ret
                self.returns.append(ret)
                step = ev.get("step")
                if (type(ret) in (int, float) and math.isfinite(ret)
                        and (self.best_return is None or ret > self.best_return)):
                    self.best_return = ret
                    self.best_step = step if type(step) is int else None
            elif kind == tm.INVALID:
                self.invalid += 1
                continue
            elif kind == tm.RUN_STARTED:
                self.started = True
                if ev.get("total_steps"):
                    self.total_steps = ev["total_steps"]
                continue
            elif kind == tm.RUN_COMPLETED:
                self.completed = True
                step = ev.get("step")
            elif kind == tm.RUN_FAILED:
                self.failed_reason = ev.get("reason")
                step = ev.get("step")
            elif kind == tm.CHECKPOINT_SAVED:
                self.checkpoints.append(ev.get("path", ""))
                step = ev.get("step")
                self.last_checkpoint = {"path": ev.get("path", ""), "step": step}
            elif kind == tm.RUN_STOPPED:
                step = ev.get("step")
                self.stopped = {"step": step, "checkpoint": ev.get("checkpoint")}
            elif kind == tm.RESTARTED:
                # the seam of a continued run: what ended its last process no longer holds
                self.completed, self.failed_reason, self.stopped = False, None, None
                continue
            elif kind == tm.DATASET_SAVED:
                self.dataset = {key: ev.get(key) for key in ("path", "transitions", "episodes")}
                continue
            elif kind == tm.LLM_STEP:
                if ev.get("partial"):
                    continue
                self._absorb_llm(ev)
                step = ev.get("step")
            elif kind == tm.PHASE:
                self.phase = ev.get("name")
                step = ev.get("step")
            elif kind == tm.WARNING:
                # once each: the daemon puts a mirror's warning in the summary as it writes the event
                message = str(ev.get("message"))
                if message not in self.warnings and len(self.warnings) < WARNINGS_KEPT:
                    self.warnings.append(message)
                continue
            else:
                step = ev.get("step")
            if type(step) is int and step > steps:
                steps = step
        if events:
            t = events[-1].get("t")
            if isinstance(t, (int, float)):
                self.last_event_t = t
        if steps != self.steps or (self.sps is None and (self.completed or self.failed_reason)):
            self.steps = max(steps, self.steps)
            self._update_rate()

    def _absorb_llm(self, ev: dict[str, Any]) -> None:
        """Counts of a run's LLM calls: calls, invalid actions, failed calls, tokens, cost."""
        llm = self.llm
        llm["calls"] = llm.get("calls", 0) + 1
        if ev.get("valid") is False:
            llm["invalid"] = llm.get("invalid", 0) + 1
        if ev.get("error"):
            llm["errors"] = llm.get("errors", 0) + 1
        for key in ("tokens_in", "tokens_out"):
            if type(ev.get(key)) is int:
                llm[key] = llm.get(key, 0) + ev[key]
        cost = ev.get("cost")
        if type(cost) in (int, float) and math.isfinite(cost):
            llm["cost"] = round(llm.get("cost", 0.0) + cost, 6)

    def _update_rate(self) -> None:
        """Steps per second over the last few seconds, by the events' own times (a backlog read
        at once, or a script's burst of buffered lines, has the rate it was written at)."""
        now = self.last_event_t
        if now is None:
            return
        if self._rate_mark is None:
            self._rate_mark = (now, self.steps)
            return
        t0, s0 = self._rate_mark
        if now - t0 >= 2.0 or (self.sps is None and (self.completed or self.failed_reason) and now > t0):
            # a run that ended before two seconds of steps gets its rate over what it had
            self.sps = round((self.steps - s0) / (now - t0), 1)
            self._rate_mark = (now, self.steps)


def _is_verbatim(raws: list[bytes], data: bytes, used: int) -> bool:
    """Are the first ``used`` bytes of data exactly these lines, each with its newline?"""
    if not raws:
        return used == 0
    return len(data) >= used and data[used - 1:used] == b"\n" and b"\n".join(raws) == data[:used - 1]


def read_verbatim_range(path: str, start: int, end: int, max_bytes: int) -> tuple[int, list[bytes]]:
    """The lines between start and end of a range known to hold only valid events
    (below the run's ``irregular_from``): split at newlines, not parsed again.

    What read_range returns as raw lines, at the cost of a split: a client
    catching up on a backlog is served without the daemon parsing it twice.
    """
    if start >= end:
        return start, []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return start, []
    try:
        data = os.pread(fd, min(max_bytes, end - start), start)
    finally:
        os.close(fd)
    last = data.rfind(b"\n")
    if last < 0:  # one line wider than the window: the careful reader widens it
        return start, []
    return start + last + 1, data[:last].split(b"\n")


def read_range(path: str, start: int, end: int, max_bytes: int) -> tuple[int, list[bytes], list[dict[str, Any]]]:
    """Complete, validated events between byte offsets start and end (a backlog read).

    ``end`` is a line boundary the daemon has ingested up to; nothing past it is
    read. Returns (offset after the last line taken, raw lines, parsed events).
    """
    if start >= end:
        return start, [], []
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return start, [], []
    try:
        data = os.pread(fd, min(max_bytes, end - start), start)
        raws, parsed, used, long_line = split_events(data)
        if used == 0 and len(data) < end - start:
            # one line wider than the window: widen it to that line
            data = os.pread(fd, min(MAX_EVENT_LINE + 2, end - start), start)
            raws, parsed, used, long_line = split_events(data)
        if used < len(data) and start + len(data) == end and not long_line:
            # ``end`` is a boundary the ingest set: unterminated bytes right
            # before it are the partial last line of a worker that died mid-write
            # (the ingest took it as such), not a line still being written.
            raws.append(_invalid(data[used:], "partial line at exit"))
            parsed.append(loads(raws[-1]))
            used = len(data)
        while long_line:  # an over-long line goes on past the window: step over the rest of it
            more = os.pread(fd, min(1 << 20, end - start - used), start + used)
            if not more:
                break
            nl = more.find(b"\n")
            used += len(more) if nl < 0 else nl + 1
            long_line = nl < 0
    finally:
        os.close(fd)
    return start + used, raws, parsed


def points_at_step(path: str, step: int, after: int, max_bytes: int = 64 << 20,
                   chunk: int = 1 << 20) -> dict[str, Any]:
    """The scalars (by tag) and episodes a run's events file holds at ``step``, counted from its end.

    For a run continued from a checkpoint older than its last logged step (``step``): the old
    process may have died between two lines of that step (its ``charts/SPS`` written, its episode
    not), so the new one drops at that step only as many of each as are there already. Read back
    to a point at or below the checkpoint's step ``after`` (nothing there is trained again), across
    the seams of earlier continues, or ``max_bytes`` (past it an undercount: a point logged twice,
    never one lost).
    """
    scalars: dict[str, int] = {}
    episodes = 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return {"scalars": scalars, "episodes": episodes}
    try:
        end = os.fstat(fd).st_size
        floor = max(0, end - max_bytes)
        tail = b""      # the start of a line whose rest was read in the chunk before
        done = False
        while end > floor and not done:
            start = max(floor, end - chunk)
            data = os.pread(fd, end - start, start) + tail
            end = start
            lines = data.split(b"\n")
            tail = lines.pop(0) if start > floor else b""
            for raw in reversed(lines):
                try:
                    ev = loads(raw)
                except ValueError:   # the partial last line of a process that died mid-write
                    continue
                if not isinstance(ev, dict):
                    continue
                kind = ev.get("type")
                if kind not in (tm.SCALAR, tm.EPISODE) or not isinstance(ev.get("step"), int):
                    continue
                if ev["step"] <= after:
                    done = True
                    break
                if ev["step"] == step:
                    if kind == tm.SCALAR:
                        scalars[str(ev.get("tag"))] = scalars.get(str(ev.get("tag")), 0) + 1
                    else:
                        episodes += 1
    finally:
        os.close(fd)
    return {"scalars": scalars, "episodes": episodes}
