"""The telemetry wire: JSON lines a worker writes and the daemon reads.

This is the single definition of that wire. The emitter below (used by every
worker) and the daemon's ingest (``daemon.ingest``) both import the event types
and field names from here, so the two ends cannot disagree on a key name -- the
bug that made MOSAIC drop events silently.

One event is one line: a JSON object with ``v`` (wire version), ``type``, ``t``
(wall-clock seconds) and the fields listed in ``EVENT_FIELDS`` for its type.
docs/telemetry.md documents every type with an example.

Standard library and orjson only: workers import this before torch, the
daemon imports it on its hot path.
"""
from __future__ import annotations

import math
import os
import threading
import time
from typing import Any, Iterable

import orjson

# numpy scalars and arrays are common in what workers hand over; the newline
# ends the line in the same call.
_ORJSON_OPTIONS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE

VERSION = 1

RUN_STARTED = "run_started"
SCALAR = "scalar"
EPISODE = "episode"
CHECKPOINT_SAVED = "checkpoint_saved"
DATASET_SAVED = "dataset_saved"
HEARTBEAT = "heartbeat"
# How often a worker says it is alive while it has nothing else to say (the run's last
# event time moves on): ``Emitter.heartbeat(step, every=HEARTBEAT_SECONDS)`` from a hot
# loop, or a worker's wait on a child process (CleanRL's script) wakes this often to beat.
HEARTBEAT_SECONDS = 10.0
PHASE = "phase"
RUN_COMPLETED = "run_completed"
RUN_FAILED = "run_failed"
# a worker told to stop saved a checkpoint and ended: the run is "stopped" and can be continued
RUN_STOPPED = "run_stopped"
# written by the daemon when a run is continued: the seam between the run's two processes
RESTARTED = "restarted"
# In a continued run's environment: the last step its history holds (see Emitter.logged_until).
LOGGED_UNTIL_ENV = "MOSAIC_LOGGED_UNTIL"
# ... and what it holds at that very step: {"scalars": {tag: count}, "episodes": count} (JSON)
LOGGED_AT_UNTIL_ENV = "MOSAIC_LOGGED_AT_UNTIL"
# One language-model call of an LLM agent: what it saw, what it was asked, what it
# answered and the action taken from that. While a reply streams in, the worker
# writes the same step again with ``partial: true`` and the reply so far (at most
# a few a second, see workers/sdk/llm/stream.py); the last one, without
# ``partial``, is the record.
LLM_STEP = "llm_step"
# A human seat (docs/play.md): its controls once (the env's actions, the keys bound to them,
# the timing mode), then one ``play`` per step it takes part in (what was done and what came of
# it, whether the env waits for the human, a refused typed move and the legal ones).
KEYMAP = "keymap"
PLAY = "play"
# Written by the daemon's ingest, never by a worker: a line that was not a
# valid event (non-JSON, binary garbage, oversized). Keeps the stream total.
INVALID = "invalid"
# Written on the daemon's side, never by a worker: something beside the run went wrong
# and the run goes on (a W&B or MLflow mirror that cannot write: daemon/mirror.py), said once.
WARNING = "warning"

# type -> {field: (python types accepted, required)}
_NUM = (int, float)
# Floats as JSON carries them: numbers, or "nan"/"inf"/"-inf" since JSON has no
# literal for those (a diverging loss is worth seeing, not dropping).
_FLOAT = (int, float, str)
NONFINITE = frozenset({"nan", "inf", "-inf"})
EVENT_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    RUN_STARTED: {
        "worker": ((str,), True),
        "algo": ((str,), True),
        "env": ((str,), True),
        "total_steps": ((int, type(None)), False),
        "pid": ((int,), False),
        "upstream": ((str,), False),
    },
    SCALAR: {
        "tag": ((str,), True),
        "value": (_FLOAT, True),
        "step": ((int,), True),
    },
    EPISODE: {
        "step": ((int,), True),
        "return": (_FLOAT, True),
        "length": ((int,), True),
        "env_index": ((int,), False),
        "agents": ((dict,), False),
    },
    CHECKPOINT_SAVED: {
        "step": ((int,), True),
        "path": ((str,), True),
        "cpu_s": (_FLOAT, False),
    },
    DATASET_SAVED: {
        "path": ((str,), True),
        "transitions": ((int,), True),
        "episodes": ((int,), True),
    },
    HEARTBEAT: {
        "step": ((int,), False),
    },
    PHASE: {
        "step": ((int,), True),
        "name": ((str,), True),
        "index": ((int,), False),
        "cpu_s": (_FLOAT, False),
    },
    RUN_COMPLETED: {
        "step": ((int,), False),
    },
    RUN_FAILED: {
        "reason": ((str,), True),
        "step": ((int,), False),
    },
    RUN_STOPPED: {
        "step": ((int,), True),
        "checkpoint": ((str,), True),
        "save_s": (_FLOAT, False),
    },
    RESTARTED: {
        "step": ((int,), True),
        "checkpoint": ((str,), True),
        "restarts": ((int,), True),
        "skipped": ((list,), False),
        "requeued": ((bool,), False),   # continued by the daemon after the scheduler stopped it
    },
    KEYMAP: {
        "seat": ((str,), True),
        "actions": ((list,), True),
        "keys": ((dict,), True),
        "mode": ((str,), True),
        "rate": (_FLOAT, False),
        "hold_ms": ((int,), False),
        "text": ((bool,), False),
        "noop": ((int, type(None)), False),
        "frames": ((bool,), False),
    },
    PLAY: {
        "step": ((int,), True),
        "episode": ((int,), True),
        "seat": ((str,), True),
        "action": ((int, str, type(None)), False),
        "action_name": ((str,), False),
        "reward": (_FLOAT, False),
        "return": (_FLOAT, False),
        "waiting": ((bool,), False),
        "held_by": ((str, type(None)), False),
        "message": ((str,), False),
        "legal": ((list,), False),
        "refused": ((bool,), False),
        "ended": ((bool,), False),
        "waiting_for": ((list,), False),
        "objective": ((str,), False),
    },
    LLM_STEP: {
        "step": ((int,), True),
        "agent": ((str,), True),
        "episode": ((int,), False),
        "observation": ((str,), False),
        "prompt": ((str,), False),
        "reply": ((str,), True),
        "action": ((str, type(None)), False),
        "valid": ((bool,), False),
        "tokens_in": ((int,), False),
        "tokens_out": ((int,), False),
        "latency_s": (_FLOAT, False),
        "cost": (_FLOAT, False),
        "error": ((str, type(None)), False),
        "partial": ((bool,), False),
    },
    INVALID: {
        "raw": ((str,), True),
        "error": ((str,), True),
    },
    WARNING: {
        "message": ((str,), True),
        "source": ((str,), False),
    },
}
EVENT_TYPES = frozenset(EVENT_FIELDS)


# Episodes as scalar tags. An episode event is one record (return, length, each
# agent's return); every reader that shows it as a curve -- the daemon's
# `metrics` method, a run's tag list, the app's plots -- maps it through
# ``episode_scalars``, so `mosaic metrics RUN --tag episode/return` and the
# app's Metrics tab hold the same points.
EPISODE_RETURN_TAG = "episode/return"
EPISODE_LENGTH_TAG = "episode/length"


def episode_scalars(event: dict[str, Any]) -> list[tuple[str, Any]]:
    """(tag, value) pairs of an episode event: episode/return, episode/length, and
    episode/return/<agent> for each agent of a multi-agent episode."""
    pairs = [(EPISODE_RETURN_TAG, event.get("return")), (EPISODE_LENGTH_TAG, event.get("length"))]
    agents = event.get("agents")
    if isinstance(agents, dict):
        pairs.extend((f"{EPISODE_RETURN_TAG}/{agent}", value) for agent, value in agents.items())
    return pairs


class EventError(ValueError):
    """A line that is JSON but not a valid telemetry event."""


def make_event(event_type: str, t: float | None = None, **fields: Any) -> dict[str, Any]:
    """Build one event dict, checked against ``EVENT_FIELDS``."""
    event = {"v": VERSION, "type": event_type, "t": time.time() if t is None else t}
    event.update(fields)
    check_event(event)
    return event


def check_event(event: Any) -> dict[str, Any]:
    """Validate a decoded event; return it or raise EventError naming the problem."""
    if not isinstance(event, dict):
        raise EventError("event is not a JSON object")
    event_type = event.get("type")
    spec = EVENT_FIELDS.get(event_type) if isinstance(event_type, str) else None
    if spec is None:
        raise EventError(f"unknown event type {event_type!r}")
    if event.get("v") != VERSION:
        raise EventError(f"unsupported telemetry version {event.get('v')!r}")
    if not isinstance(event.get("t"), _NUM) or isinstance(event.get("t"), bool):
        raise EventError("field 't' must be a number")
    for name, (types, required) in spec.items():
        if name not in event:
            if required:
                raise EventError(f"{event_type}: missing field {name!r}")
            continue
        value = event[name]
        # bool is an int to Python: accepted only where the field is a flag
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise EventError(f"{event_type}: field {name!r} has type {type(value).__name__}")
        if types is _FLOAT and isinstance(value, str) and value not in NONFINITE:
            raise EventError(f"{event_type}: field {name!r} is not a number")
    return event


def encode(event: dict[str, Any]) -> bytes:
    """One event as one line of UTF-8 JSON (orjson: ~0.5 us, against ~11 us for json.dumps)."""
    return orjson.dumps(event, default=_default, option=_ORJSON_OPTIONS)


def _default(obj: Any) -> Any:
    # numpy scalars and arrays (workers hand them over from torch/numpy code)
    if hasattr(obj, "item"):
        return obj.item()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _finite(value: float) -> float | str:
    """A float JSON can carry: itself, or "nan"/"inf"/"-inf"."""
    value = float(value)
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


_NONFINITE_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def float_of(value: Any) -> float:
    """A float as it was carried (``_finite``'s inverse): a number, "nan"/"inf"/"-inf", or NaN
    for anything else (a missing value, a stray string). The app's series, the daemon's
    history and the exports read values through this one function."""
    if isinstance(value, str):
        return _NONFINITE_VALUES.get(value, math.nan)
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


class Emitter:
    """Buffered writer of telemetry events to a file descriptor.

    A scalar is appended to an in-memory buffer, not written: the buffer goes
    out in one ``write`` when it exceeds ``max_buffer`` bytes, when
    ``flush_interval`` seconds have passed, on lifecycle events, and at exit.
    Every write carries whole lines only, so several processes appending to the
    same O_APPEND file (a worker and the script it runs) never interleave
    within a line.
    """

    def __init__(self, fd: int, flush_interval: float = 0.1, max_buffer: int = 64 * 1024):
        self.fd = fd
        # A run continued from a checkpoint older than its last logged step trains those steps
        # again: their scalars and episodes are in the run's history already, and are not logged
        # twice (the daemon sets LOGGED_UNTIL_ENV from the config's logged_until; -1: none).
        self.logged_until = int(os.environ.get(LOGGED_UNTIL_ENV) or -1)
        # At that step itself only as many of each as the history holds: the old process may have
        # died between two lines of it (None: drop all, a daemon that did not count them).
        at_until = orjson.loads(os.environ.get(LOGGED_AT_UNTIL_ENV) or "null")
        self._held_at_until: dict[str, int] | None = None if at_until is None else {
            **{SCALAR + ":" + tag: int(n) for tag, n in at_until.get("scalars", {}).items()},
            EPISODE: int(at_until.get("episodes", 0))}
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.lines_written = 0
        # the step of the latest event that had one: where a cancel or a failure says the run was
        self.step: int | None = None
        # One growing bytearray, not a list of lines: orjson returns each line in a block
        # it over-allocated and then shrank, and holding ~800 of those alive until the
        # flush fragmented malloc's heap (2.3 us a line, against 0.3 us copied at once).
        self._buf = bytearray()
        self._buf_lines = 0
        self._lock = threading.Lock()
        self._closed = False
        self._last_flush = time.monotonic()
        self._last_beat = -math.inf
        self._timer = threading.Thread(target=self._flush_loop, name="telemetry-flush", daemon=True)
        self._timer.start()

    # -- event helpers -------------------------------------------------
    def run_started(self, worker: str, algo: str, env: str, total_steps: int | None = None, **extra: Any) -> None:
        """The run's first event: what trains (worker, algorithm, env), its step budget and this
        process's pid; written at once."""
        self.emit(make_event(RUN_STARTED, worker=worker, algo=algo, env=env,
                             total_steps=total_steps, pid=os.getpid(), **extra), flush=True)

    def scalar(self, tag: str, value: float, step: int) -> None:
        """One metric point, buffered (the hot path: ~1.2 us). A non-finite value goes as "nan"/"inf"/"-inf";
        a point a continued run logged already (``logged_until``) is dropped."""
        # Hot path: skip make_event's checks, the types are forced here.
        self.step = step = int(step)
        if step <= self.logged_until and self._logged_already(step, SCALAR + ":" + str(tag)):
            return
        self.emit({"v": VERSION, "type": SCALAR, "t": time.time(), "tag": str(tag),
                   "value": _finite(value), "step": step})

    def scalars(self, values: dict[str, float], step: int) -> None:
        """Several metrics at one step: ``scalar`` for each."""
        for tag, value in values.items():
            self.scalar(tag, value, step)

    def episode(self, step: int, episode_return: float, length: int, **extra: Any) -> None:
        """An episode that ended at ``step``: its return and length, and ``extra`` fields (``agents``: each
        agent's return, read as ``episode/return/<agent>``). Dropped as ``scalar`` drops a repeated point."""
        self.step = step = int(step)
        if step <= self.logged_until and self._logged_already(step, EPISODE):
            return
        self.emit(make_event(EPISODE, step=step, length=int(length),
                             **{"return": _finite(episode_return)}, **extra))

    def _logged_already(self, step: int, key: str) -> bool:
        """Is this point (at or below logged_until) in the run's history already?"""
        if step < self.logged_until or self._held_at_until is None:
            return True
        held = self._held_at_until.get(key, 0)
        if held:
            self._held_at_until[key] = held - 1
        return held > 0

    def checkpoint_saved(self, path: str, step: int) -> None:
        """A checkpoint written at ``path`` (what ``mosaic continue`` and ``eval`` find); written at once."""
        # cpu_s: the process's CPU seconds so far (every thread): from one phase or
        # checkpoint to the next, what that stretch cost, whatever else ran on the machine
        self.step = step = int(step)
        self.emit(make_event(CHECKPOINT_SAVED, path=str(path), step=step,
                             cpu_s=round(time.process_time(), 4)), flush=True)

    def dataset_saved(self, path: str, transitions: int, episodes: int) -> None:
        """The run's recorded dataset is complete at ``path`` (workers/sdk/dataset.py); written at once."""
        self.emit(make_event(DATASET_SAVED, path=str(path), transitions=int(transitions),
                             episodes=int(episodes)), flush=True)

    def heartbeat(self, step: int | None = None, every: float | None = None) -> bool:
        """A heartbeat event. With ``every`` (seconds, e.g. HEARTBEAT_SECONDS), only when that
        long has passed since the last one: a worker may call it at every env step and the
        emitter keeps the pace. True when one was sent."""
        now = time.monotonic()
        if every is not None and now - self._last_beat < every:
            return False
        self._last_beat = now
        fields = {}
        if step is not None:
            self.step = fields["step"] = int(step)
        self.emit(make_event(HEARTBEAT, **fields))
        return True

    def phase(self, name: str, step: int, index: int | None = None) -> None:
        """The run enters a phase (``train``, ``eval``, an epoch with ``index``), with the CPU seconds
        spent so far; written at once."""
        fields = {} if index is None else {"index": int(index)}
        self.step = step = int(step)
        self.emit(make_event(PHASE, name=name, step=step, cpu_s=round(time.process_time(), 4), **fields),
                  flush=True)

    def llm_step(self, step: int, agent: str, reply: str, **fields: Any) -> None:
        """One LLM call (``partial=True`` while its reply is still streaming in)."""
        if "latency_s" in fields and fields["latency_s"] is not None:
            fields["latency_s"] = _finite(fields["latency_s"])
        if "cost" in fields and fields["cost"] is not None:
            fields["cost"] = _finite(fields["cost"])
        fields = {key: value for key, value in fields.items() if value is not None or key in ("action", "error")}
        self.emit(make_event(LLM_STEP, step=int(step), agent=str(agent), reply=str(reply), **fields))

    def keymap(self, seat: str, actions: list[str], keys: dict[str, int], mode: str, **fields: Any) -> None:
        """A human seat's controls (docs/play.md), written at once: the app draws them."""
        self.emit(make_event(KEYMAP, seat=str(seat), actions=list(actions), keys=dict(keys), mode=mode, **fields),
                  flush=True)

    def play(self, step: int, episode: int, seat: str, **fields: Any) -> None:
        """A human seat's step, written at once: the person waits to see what came of the key."""
        self.step = step = int(step)
        self.emit(make_event(PLAY, step=step, episode=int(episode), seat=str(seat), **fields), flush=True)

    def run_completed(self, step: int | None = None) -> None:
        """The run ended as it should: its last event; written at once."""
        fields = {} if step is None else {"step": int(step)}
        self.emit(make_event(RUN_COMPLETED, **fields), flush=True)

    def run_stopped(self, step: int, checkpoint: str, save_s: float | None = None) -> None:
        """The run stopped at ``step`` on a stop request with its resume ``checkpoint`` (``save_s``: how long
        the save took); written at once."""
        fields = {} if save_s is None else {"save_s": round(save_s, 3)}
        self.step = step = int(step)
        self.emit(make_event(RUN_STOPPED, step=step, checkpoint=str(checkpoint), **fields), flush=True)

    def run_failed(self, reason: str, step: int | None = None) -> None:
        """The run failed: ``reason`` (up to 4,000 characters) is what users read; written at once."""
        fields = {} if step is None else {"step": int(step)}
        self.emit(make_event(RUN_FAILED, reason=str(reason)[:4000], **fields), flush=True)

    # -- buffering -----------------------------------------------------
    def emit(self, event: dict[str, Any], flush: bool = False) -> None:
        """Buffer one event (already checked, e.g. by ``make_event``); the buffer goes out now with ``flush``,
        when it holds ``max_buffer`` bytes, or ``flush_interval`` seconds after the last write."""
        line = encode(event)
        with self._lock:
            self._buf += line
            self._buf_lines += 1
            if flush or len(self._buf) >= self.max_buffer or \
                    time.monotonic() - self._last_flush >= self.flush_interval:
                self._flush_locked()

    def emit_many(self, events: Iterable[dict[str, Any]]) -> None:
        """``emit`` each event, in order."""
        for event in events:
            self.emit(event)

    def flush(self) -> None:
        """Write what is buffered, whole lines in one ``write`` (retried until all of it is out)."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        self._last_flush = time.monotonic()
        if not self._buf:
            return
        data, lines = self._buf, self._buf_lines
        self._buf = bytearray()
        self._buf_lines = 0
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.lines_written += lines

    def _flush_loop(self) -> None:
        while not self._closed:
            time.sleep(self.flush_interval)
            try:
                self.flush()
            except OSError:
                return

    def close(self) -> None:
        """Flush, and stop the timer thread's flushes (the descriptor stays open: it is the process's)."""
        self.flush()
        self._closed = True


_emitter: Emitter | None = None


def telemetry_fd_from_env() -> int | None:
    """The telemetry descriptor a parent process passed in ``MOSAIC_TELEMETRY_FD``, if any."""
    value = os.environ.get("MOSAIC_TELEMETRY_FD")
    return int(value) if value and value.isdigit() else None


def get_emitter() -> Emitter:
    """The process-wide emitter.

    In a worker process ``take_stdout()`` has set it up. In a child the worker
    spawned (a CleanRL script), it writes to the inherited descriptor named by
    ``MOSAIC_TELEMETRY_FD``.
    """
    global _emitter
    if _emitter is None:
        fd = telemetry_fd_from_env()
        if fd is None:
            raise RuntimeError("no telemetry channel: MOSAIC_TELEMETRY_FD is not set")
        _emitter = Emitter(fd)
        import atexit
        atexit.register(_emitter.close)
    return _emitter


def take_stdout(stray_output_path: str = "stdout.log") -> Emitter:
    """Make this process's stdout the telemetry channel, and only that.

    The supervisor points fd 1 at ``events.jsonl``. Libraries print to stdout
    (progress bars, CleanRL's prints): such text must not land among the events.
    So fd 1 is duplicated to a private descriptor for telemetry, and fd 1 itself
    is pointed at ``stdout.log`` in the run directory. Children inherit both:
    the private descriptor is exported as ``MOSAIC_TELEMETRY_FD``.
    """
    global _emitter
    import sys
    sys.stdout.flush()
    telemetry_fd = os.dup(1)
    os.set_inheritable(telemetry_fd, True)
    log_fd = os.open(stray_output_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log_fd, 1)
    os.close(log_fd)
    os.environ["MOSAIC_TELEMETRY_FD"] = str(telemetry_fd)
    _emitter = Emitter(telemetry_fd)
    import atexit
    atexit.register(_emitter.close)
    return _emitter
