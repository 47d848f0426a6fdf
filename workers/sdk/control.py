"""A human's actions, from the app to a worker: both ends of the wire (docs/play.md).

A run with a human seat (the human worker, a MOSAIC LLM match with a ``human`` seat) creates
``RUN_DIR/control.fifo``, a named pipe, and reads it. A client holds a seat through the daemon
(the ``seat`` and ``act`` methods, docs/protocol.md); the daemon writes each of its messages
into the pipe as one JSON line (shorter than PIPE_BUF, so never interleaved):

    {"type": "seat", "seat": "0", "held_by": "app@laptop"}      a client took the seat (null: left it)
    {"type": "act", "seat": "0", "action": 2, "hold_ms": 150}    the human's action (a number, the
                                                                 typed text of a text env, or null:
                                                                 the key was released)

Why a FIFO: no port, no path length limit (a Unix socket's is 108 bytes), and nothing to
connect or reconnect: the daemon opens it non-blocking for each message, and a worker that is
not (yet) reading makes the open fail at once (ENXIO), which the daemon says in words.

Standard library only: the daemon imports the writing half.
"""
from __future__ import annotations

import errno
import json
import os
import select
import time
from typing import Any

CONTROL_FIFO = "control.fifo"
MAX_MESSAGE = 4000        # bytes of one line: under PIPE_BUF (4096), so a write is atomic
SEAT, ACT = "seat", "act"


class ControlError(Exception):
    """A message could not reach the worker: one line, naming why."""


# -- the daemon's half: write ---------------------------------------------------------------
def send(run_dir: str, message: dict[str, Any]) -> None:
    """Write one message line into the run's control pipe, or raise ControlError saying why it cannot reach the worker."""
    line = (json.dumps(message, separators=(",", ":")) + "\n").encode()
    if len(line) > MAX_MESSAGE:
        raise ControlError(f"message of {len(line)} bytes: at most {MAX_MESSAGE}")
    path = os.path.join(run_dir, CONTROL_FIFO)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ControlError("the run has no human seat (no control pipe in its directory)") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise ControlError("the run is not listening for the human yet (starting, or ended)") from None
        raise ControlError(f"cannot reach the run: {exc.strerror}") from None
    try:
        os.write(fd, line)
    except BlockingIOError:
        raise ControlError("the run is not reading its actions (its pipe is full)") from None
    finally:
        os.close(fd)


# -- the worker's half: read ----------------------------------------------------------------
class Controls:
    """The worker's end: creates the pipe, reads whole messages. ``seats``: who holds each seat
    (None: nobody, the seat is paused)."""

    def __init__(self, run_dir: str = "."):
        self.path = os.path.join(run_dir, CONTROL_FIFO)
        try:
            os.unlink(self.path)   # a pipe from an earlier start of the run
        except FileNotFoundError:
            pass
        os.mkfifo(self.path, 0o600)
        # read-write: the pipe never reports end-of-file when the daemon closes its end
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self.buffer = b""
        self.seats: dict[str, str | None] = {}
        self.waiting: list[dict[str, Any]] = []   # act messages of other seats, kept for their turn

    def poll(self, timeout: float = 0.0) -> list[dict[str, Any]]:
        """The messages that arrived, waiting up to ``timeout`` s for the first; seat messages
        update ``seats`` and are returned too."""
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return []
        try:
            while True:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                self.buffer += chunk
                if len(chunk) < 65536:
                    break
        except BlockingIOError:
            pass
        messages = []
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if not isinstance(message, dict):
                continue
            if message.get("type") == SEAT:
                self.seats[str(message.get("seat"))] = message.get("held_by")
            messages.append(message)
        return messages

    def next_action(self, seat: str, timeout: float) -> dict[str, Any] | None:
        """The next ``act`` message for ``seat`` within ``timeout`` s, or None; other seats' wait
        in ``waiting`` for their turn."""
        for i, message in enumerate(self.waiting):
            if str(message.get("seat")) == seat:
                return self.waiting.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            found = None
            for message in self.poll(max(0.0, deadline - time.monotonic())):
                if message.get("type") != ACT:
                    continue
                if found is None and str(message.get("seat")) == seat:
                    found = message
                else:
                    self.waiting.append(message)
            if found is not None or time.monotonic() >= deadline:
                return found

    def close(self) -> None:
        """Close the control pipe and remove its file."""
        os.close(self.fd)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class HumanAgent:
    """One agent of a learners' evaluation played by a person (the ray and XuanCe workers'
    ``params.human_agent``): a ``keymap`` event (its actions on the digits, or typed), then at each
    of its moves a ``play`` event saying it waits, with the legal actions, and the wait for the
    holder's action; an action not legal now is refused with the legal ones (``play`` with
    ``refused``) and waited for again, so the env never steps on it. ``emitter``: the worker's
    telemetry Emitter."""

    def __init__(self, agent: str, n_actions: int, emitter: Any, run_dir: str = "."):
        self.agent, self.n, self.emitter = str(agent), int(n_actions), emitter
        self.controls = Controls(run_dir)
        names = [str(i) for i in range(self.n)]
        emitter.keymap(self.agent, names, {key: i for i, key in zip(range(self.n), "0123456789")}, "turn", text=True)

    @property
    def held_by(self) -> str | None:
        """Who holds this agent's seat now (a client's label), or None: the seat waits."""
        return self.controls.seats.get(self.agent)

    def move(self, step: int, episode: int, legal: list[int] | None = None) -> int:
        """Wait for the seat holder's action at ``step``: one of ``legal`` (every action when None);
        an illegal one is refused with a ``play`` event and waited for again."""
        legal = list(range(self.n)) if legal is None else [int(a) for a in legal]
        said = [str(a) for a in legal]
        self.emitter.play(step, episode, self.agent, waiting=True, legal=said, held_by=self.held_by)
        while True:
            message = self.controls.next_action(self.agent, 1.0)
            if message is None:
                self.emitter.heartbeat(step, every=1.0)
                continue
            action = message.get("action")
            try:
                action = None if isinstance(action, bool) else int(action)
            except (TypeError, ValueError):
                action = None
            if action in legal:
                return action
            self.emitter.play(step, episode, self.agent, refused=True, waiting=True, legal=said,
                              held_by=self.held_by,
                              message=f"{message.get('action')!r} is not a legal action now: {', '.join(said)}")

    def moved(self, action: int, step: int, episode: int, agent_return: float | None = None) -> None:
        """A ``play`` event: the action played at ``step`` (and the agent's return so far)."""
        said = {} if agent_return is None else {"return": float(agent_return)}
        self.emitter.play(step, episode, self.agent, action=int(action), action_name=str(action),
                          held_by=self.held_by, **said)

    def close(self) -> None:
        """Close the agent's controls."""
        self.controls.close()

