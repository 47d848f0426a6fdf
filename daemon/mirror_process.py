"""A run mirrored to W&B and MLflow: the mirror process, ``python -m daemon.mirror RUN_DIR --home HOME``
(daemon/mirror.py's ``__main__`` runs ``main`` here; ``python -m daemon.mirror_process`` is the same).

One process a mirrored run, started by the daemon (RunManager) at nice 19 when the run starts and
again when a restarted daemon adopts it; the worker is never touched. It follows the run's
``events.jsonl`` (the file the daemon ingests) from the byte offset each target has mirrored,
kept in the run's ``mirror.json``, and hands the points to each target: every scalar and every
episode (as ``episode/return``, ``episode/length``, ``episode/return/<agent>``: the points of
``mosaic metrics``), the run's config, tags and note, and at the end its last checkpoint. It ends
once the store records the run as ended and everything is mirrored. It takes ``mirror.lock``: a
second mirror of the run (a daemon SIGKILLed and restarted while the first one lives on) waits
until the first has ended, then goes on from its offsets, so no point is mirrored twice. ``--once`` mirrors a finished run and stops
(``mosaic export RUN --wandb|--mlflow``): the same code.

A target that fails (no network, a bad URI, an exception) is kept once in mirror.json, which the
daemon says on the run (a ``warning`` event and the run's summary: RunManager._mirror_warnings),
its offset kept, and tried again only after a back-off (60 s, doubling, at
most 15 min): the run is never slowed or stopped by it. Secrets (W&B's key, MLflow's
credentials) are read from the environment by the libraries themselves and never written
anywhere by this module (tracking URIs are written without their user:password part).

W&B and MLflow are imported in this process only (by its targets, daemon/mirror_targets.py), never
by the daemon or the app, which start it through daemon/mirror.py.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
from typing import Any

from daemon import protocol as P
from daemon.analytics import update_analytics
from daemon.home import CONFIG_FILE, EVENTS_FILE, Home
from daemon.ingest import split_events
from daemon.mirror import LOCK_FILE, STATE_FILE, TARGETS, home_settings, mirror_root, run_targets
from daemon.mirror_targets import RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS, MlflowTarget, Target, WandbTarget
from daemon.shim import write_json_atomic
from daemon.store import read_run
from workers.sdk import telemetry as tm

log = logging.getLogger("mosaic.mirror")

PAGE_BYTES = 4 * 1024 * 1024
POLL_SECONDS = 1.0
META_SECONDS = 5.0                  # tags and note read again from the store this often
ARTIFACT_MAX_MB = 512               # a final checkpoint bigger than this is recorded by path, not copied


# -- reading the run ---------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    """A point's value as the daemon's history and the exports read it (telemetry.float_of); None
    for what is no number at all (a missing value, a stray string): not mirrored."""
    if value is None or (isinstance(value, str) and value not in tm.NONFINITE):
        return None
    return tm.float_of(value)


def read_page(path: str, offset: int) -> tuple[int, list[dict[str, Any]]]:
    """The complete lines from ``offset`` (a page), parsed as the daemon's ingest parses them;
    returns the offset after them. A line still being written is left for the next read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return offset, []
    try:
        data = os.pread(fd, PAGE_BYTES, offset)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) < PAGE_BYTES:
                return offset, []
            # one line longer than a page (the ingest refuses it as over-long): step over it
            skip = offset + len(data)
            while True:
                more = os.pread(fd, PAGE_BYTES, skip)
                if not more:
                    return offset, []
                nl = more.find(b"\n")
                if nl >= 0:
                    return skip + nl + 1, []
                skip += len(more)
    finally:
        os.close(fd)
    _raws, parsed, used, _long = split_events(data[:cut])
    return offset + (used or cut), parsed


def points_of(events: list[dict[str, Any]]) -> tuple[list[tuple[str, int, float, float]], list[dict[str, Any]]]:
    """(tag, step, value, t) of every scalar and episode tag, as the daemon's metrics method gives
    them, and the checkpoints the events announce ({path, step}) with the seams of a continued run
    among them ({"restarted": step}: what came before was an earlier process's)."""
    points = []
    checkpoints = []
    for ev in events:
        kind = ev.get("type")
        if kind == tm.SCALAR:
            value = _number(ev.get("value"))
            if value is not None:
                points.append((ev["tag"], ev.get("step"), value, ev.get("t")))
        elif kind == tm.EPISODE:
            for tag, raw in tm.episode_scalars(ev):
                value = _number(raw)
                if value is not None:
                    points.append((tag, ev.get("step"), value, ev.get("t")))
        elif kind == tm.CHECKPOINT_SAVED:
            checkpoints.append({"path": ev.get("path"), "step": ev.get("step")})
        elif kind == tm.RUN_STOPPED and ev.get("checkpoint"):
            checkpoints.append({"path": ev["checkpoint"], "step": ev.get("step")})
        elif kind == tm.RESTARTED:
            checkpoints.append({"restarted": ev.get("step")})
    return points, checkpoints


class RunRow:
    """The run's row in the store (state, tags, note), read-only, beside the daemon."""

    def __init__(self, home: Home, run_id: str):
        self.home = home
        self.run_id = run_id

    def read(self) -> dict[str, Any] | None:
        """The run's state, tags and note; None once the run (or its whole home) is gone."""
        if not os.path.exists(self.home.db) or not os.path.isdir(self.home.run_dir(self.run_id)):
            return None
        try:
            row = read_run(self.home.db, self.run_id, ("state", "tags", "note", "name"))
        except sqlite3.Error:
            return {}   # busy or unreadable this time: nothing known, nothing decided
        return None if row is None else {**row, "note": row["note"] or ""}


# -- the process -------------------------------------------------------------------------------
class Mirror:
    def __init__(self, run_dir: str, home: Home, targets: list[str] | None, once: bool):
        self.run_dir = os.path.abspath(run_dir)
        self.home = home
        self.home_root = str(home.root)
        self.once = once
        with open(os.path.join(self.run_dir, CONFIG_FILE)) as f:
            self.config = json.load(f)
        self.run_id = self.config.get("run_id") or os.path.basename(self.run_dir)
        self.name = self.config.get("name") or self.run_id
        self.worker = self.config.get("worker") or ""
        self.events = os.path.join(self.run_dir, EVENTS_FILE)
        self.record = RunRow(home, self.run_id)
        settings = home_settings(home)
        self.artifact_max_mb = float(settings.get("artifact_max_mb", ARTIFACT_MAX_MB))
        self.state_path = os.path.join(self.run_dir, STATE_FILE)
        self.settings = settings
        self.names = targets if targets is not None else run_targets(self.config, settings)
        self.saved: dict[str, Any] = {}
        self.targets: list[Target] = []
        self._meta_at = 0.0
        self.stopping = False   # SIGTERM: leave at the next page's end, W&B flushed, the offsets kept

    def load(self) -> None:
        """The targets, from where mirror.json says each one got to (read under the lock: a mirror
        that held it before moved the offsets on)."""
        try:
            with open(self.state_path) as f:
                self.saved = json.load(f)
        except (FileNotFoundError, ValueError):
            self.saved = {}
        kinds = {"wandb": WandbTarget, "mlflow": MlflowTarget}
        self.targets = [kinds[t](self, self.settings.get(t) or {}, self.saved.setdefault(t, {})) for t in self.names]

    def save(self) -> None:
        write_json_atomic(self.state_path, self.saved)

    def fail(self, target: Target, what: str, exc: BaseException) -> None:
        """A target failed: kept once in mirror.json (``warned``), which the daemon says on the run
        (a warning event, the summary), and tried again after a back-off."""
        message = f"{target.name} mirror: cannot {what}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        log.warning("run %s: %s", self.run_id, message)
        target.opened = False
        target.retry_at = time.monotonic() + target.backoff
        target.backoff = min(RETRY_MAX_SECONDS, target.backoff * 2)
        if not target.state.get("warned"):
            target.state["warned"] = message
            self.save()
            if self.once:
                print(message, file=sys.stderr)

    def _open(self, target: Target) -> bool:
        if target.opened:
            return True
        if time.monotonic() < target.retry_at:
            return False
        try:
            target.open()
        except Exception as exc:  # noqa: BLE001 -- any library error is the target's failure, not the run's
            self.fail(target, "open", exc)
            return False
        target.opened = True
        log.info("run %s: mirrored to %s from byte %d", self.run_id, target.where(), target.offset)
        target.backoff = RETRY_FIRST_SECONDS
        self.save()
        update_analytics(self.run_dir, **{target.name: target.analytics()})
        return True

    def pump(self, target: Target) -> None:
        """Mirror what the events file holds past the target's offset."""
        if not self._open(target):
            return
        try:
            while True:
                offset = target.offset
                nxt, events = read_page(self.events, offset)
                if nxt == offset:
                    break
                points, checkpoints = points_of(events)
                if points:
                    target.write(points)
                if checkpoints:
                    self._note_checkpoints(target, checkpoints)
                target.state["offset"] = nxt
                self.save()
                if self.stopping:
                    break
        except Exception as exc:  # noqa: BLE001
            self.fail(target, "write", exc)

    def _note_checkpoints(self, target: Target, announced: list[dict[str, Any]]) -> None:
        """The checkpoints of the run's current process, in the order saved, each once by its
        absolute path (a stop announces its checkpoint twice: saved, then stopped at; relative and
        absolute). A seam (``restarted``) clears them: the earlier process's checkpoints, its stop's
        among them, are where the run went on from, not its model."""
        kept = target.state.setdefault("checkpoints", [])
        saved = []
        for point in announced:
            if "restarted" in point:
                kept.clear()
                continue
            path = point.get("path") or ""
            path = path if os.path.isabs(path) else os.path.join(self.run_dir, path)
            kept[:] = [p for p in kept if p.get("path") != path] + [{"path": path, "step": point.get("step")}]
            saved.append(kept[-1])
        del kept[:-20]
        if saved:
            update_analytics(self.run_dir, checkpoints=saved)

    def sync_meta(self, record: dict[str, Any]) -> None:
        for target in self.targets:
            if target.opened:
                try:
                    target.meta(list(record.get("tags") or []), record.get("note") or "")
                except Exception as exc:  # noqa: BLE001
                    self.fail(target, "set the tags and note", exc)

    def finish(self, state: str | None, record: dict[str, Any]) -> None:
        """The last pages, the tags and note as they are now, the last checkpoint; then close."""
        for target in self.targets:
            if not target.opened and target.state.get("closed_offset") == os.path.getsize(self.events):
                continue   # mirrored and closed already (by the mirror before this one, or an export)
            self.pump(target)
            if not target.opened:
                continue
            try:
                target.meta(list(record.get("tags") or []), record.get("note") or "")
                saved = target.state.get("checkpoints") or []
                # the model of a run is its final checkpoint: a stopped run's is where `mosaic continue`
                # goes on from, not a model (uploaded, it would stand as the model of a run that went on)
                last = saved[-1] if saved and state != P.STOPPED else None
                if last and last.get("path") and target.state.get("checkpoint_logged") != last["path"]:
                    path = last["path"] if os.path.isabs(last["path"]) else os.path.join(self.run_dir, last["path"])
                    if os.path.exists(path):
                        target.checkpoint(path, last.get("step"))
                    target.state["checkpoint_logged"] = last["path"]
                target.close(state)
                log.info("run %s: %s closed at byte %d (the run %s)", self.run_id, target.name, target.offset, state)
                target.opened = False
                target.state["closed_offset"] = target.offset
                self.save()
            except Exception as exc:  # noqa: BLE001
                self.fail(target, "finish", exc)

    def leave(self) -> None:
        """Stopped (SIGTERM) before the run ended: W&B's rows flushed to its files (its run.log is
        asynchronous: a SIGKILLed mirror loses what W&B had not written yet), the offsets kept; the
        daemon starts a mirror again when it adopts the run, which goes on from there."""
        for target in self.targets:
            if target.opened and isinstance(target, WandbTarget):
                try:
                    target.run.finish(exit_code=0)
                except Exception as exc:  # noqa: BLE001
                    log.warning("run %s: W&B's finish failed: %s", self.run_id, exc)
        self.save()
        log.info("run %s: mirror stopped; offsets kept", self.run_id)

    def run(self) -> int:
        if not self.names:
            return 0
        lock = open(os.path.join(self.run_dir, LOCK_FILE), "a")
        # Another mirror of the run holds it: one that outlived a SIGKILLed daemon (it finishes the
        # run, and this one then finds everything mirrored), or one still closing before a continue.
        fcntl.flock(lock, fcntl.LOCK_EX)
        log.info("run %s: mirror %d to %s", self.run_id, os.getpid(), ", ".join(self.names))
        self.load()
        self.save()
        if self.once:
            record = self.record.read() or {}
            for target in self.targets:
                if target.state.get("closed_offset") != os.path.getsize(self.events):
                    self._open(target)
            self.finish(record.get("state"), record)
            failed = [t for t in self.targets if t.state.get("offset", 0) < os.path.getsize(self.events)]
            for target in self.targets:
                print(json.dumps({"target": target.name, "where": target.where() if target.state.get("run_id") else None,
                                  **{k: v for k, v in target.state.items() if k not in ("checkpoints",)}}))
            return 1 if failed else 0
        while True:
            record = self.record.read()
            if record is None:   # the run was deleted
                return 0
            if record.get("state") in P.FINAL_STATES:
                # the daemon records the end after it read the whole file: this pass takes the rest
                self.finish(record["state"], record)
                return 0
            for target in self.targets:
                self.pump(target)
            if self.stopping:
                self.leave()
                return 0
            if record and time.monotonic() - self._meta_at >= META_SECONDS:
                self._meta_at = time.monotonic()
                self.sync_meta(record)
            time.sleep(POLL_SECONDS)


def _remove_dead_scratch(parent: str) -> None:
    """The temporary directories of mirrors that were killed (named RUN-PID): gone with their process."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name.rpartition("-")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.mirror")
    parser.add_argument("run_dir")
    parser.add_argument("--home", required=True)
    parser.add_argument("--targets", help="comma-separated: wandb,mlflow (default: the run's own)")
    parser.add_argument("--once", action="store_true", help="mirror what the run holds and stop (mosaic export)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    # MLflow keeps an installation id under XDG_CONFIG_HOME (~/.config): under the home instead
    os.environ["XDG_CONFIG_HOME"] = os.path.join(mirror_root(args.home), "config")
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    mirror_holder: list[Mirror] = []
    signal.signal(signal.SIGTERM, lambda *_: [setattr(m, "stopping", True) for m in mirror_holder])
    if targets is not None and any(t not in TARGETS for t in targets):
        print(f"unknown mirror target in {args.targets!r} (known: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    # W&B makes temporary directories at import (wandb-media, wandb-artifacts): in the home, this
    # mirror's own, removed when it ends, so none is left in the machine's /tmp
    scratch = os.path.join(mirror_root(args.home), "tmp", f"{os.path.basename(os.path.normpath(args.run_dir))}"
                                                           f"-{os.getpid()}")
    _remove_dead_scratch(os.path.dirname(scratch))
    os.makedirs(scratch, exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    try:
        mirror = Mirror(args.run_dir, Home.resolve(args.home), targets, args.once)
        mirror_holder.append(mirror)
        return mirror.run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
