"""How a worker's run ends when it does not complete: one path and one wording for every worker.

``workers.sdk.worker_cli.serve`` calls a worker's entry point through ``guarded``;
the entry point trains or plays, ends with ``emitter.run_completed`` and returns
the exit status. Everything else ends here:

- a cancel (SIGTERM/SIGINT: ``Cancelled``, raised wherever the main thread was):
  ``run_failed`` with the reason ``cancelled (SIGTERM)`` at the last step the run
  reported, then the process dies of that signal, so its exit status tells the
  supervisor what happened. A library that turns ``Cancelled`` into an error of its
  own (Ray's Cython code, jax, a pipe broken by env processes that got the signal
  first) counts as the cancel as well: what decides is that a stop signal came.
- ``RunFailed``: a failure the worker has already worded for the runs table (an LLM
  call that failed for good, a CleanRL script that exited with a code); reported as
  it is, the process exits with its code or dies of its signal.
- a stop: the entry point saved a checkpoint and raised ``Stopped``: ``run_stopped``
  with its step and checkpoint, exit status ``STOPPED_EXIT`` (the daemon's "stopped").
- ``ConfigError`` raised while setting up: ``invalid config: ...``, exit status 2.
- any other exception: ``TypeName: message``, then a blank line and the traceback's
  end; the whole traceback goes to stderr.log.

Cleanup (closing frames, envs, seats, engines) is the entry point's own ``finally``:
it has run by the time the guard reports.
"""
from __future__ import annotations

import signal
import sys
import traceback
from typing import Callable

from workers.sdk.config import ConfigError
from workers.sdk.stop import STOPPED_EXIT, Cancelled, Stopped, StopSignals, die_of
from workers.sdk.telemetry import Emitter

# how much of a traceback's end goes into the run's reason (the whole of it is in stderr.log)
TRACEBACK_CHARS = 3000


class RunFailed(Exception):
    """A failure already worded for the person reading the runs table: reported as it is.
    ``code``: the process's exit status; ``signum``: the process dies of that signal instead
    (the worker's child was killed by it, and the supervisor should see the same)."""

    def __init__(self, reason: str, code: int = 1, signum: int | None = None):
        super().__init__(reason)
        self.code = code
        self.signum = signum


def cancel_reason(signum: int) -> str:
    """The reason a run cancelled by ``signum`` ends with: ``cancelled (SIGTERM)``."""
    return f"cancelled ({signal.Signals(signum).name})"


def failure_reason(exc: BaseException) -> str:
    """``TypeName: message`` and, after a blank line, the end of the traceback being handled."""
    tail = traceback.format_exc()
    return f"{type(exc).__name__}: {exc}\n\n{tail[-TRACEBACK_CHARS:]}"


def guarded(emitter: Emitter, stop: StopSignals, call: Callable[[], int | None], prog: str) -> int:
    """Run ``call`` (the worker's entry point) and end the run as it ended; the exit status."""
    try:
        code = call()
        return 0 if code is None else int(code)
    except BaseException as exc:  # noqa: BLE001 -- every way out is reported on the wire
        if stop.received is not None or isinstance(exc, Cancelled):
            end_cancelled(emitter, stop.received or exc.signum, prog)
        if isinstance(exc, Stopped):
            emitter.run_stopped(exc.step, exc.checkpoint, exc.save_s)
            sys.stderr.write(f"{prog}: stopped at step {exc.step}, checkpoint {exc.checkpoint}\n")
            return STOPPED_EXIT
        if isinstance(exc, RunFailed):
            emitter.run_failed(str(exc), step=emitter.step)
            emitter.close()
            if exc.signum is not None:
                die_of(exc.signum)
            return exc.code
        if isinstance(exc, ConfigError):
            emitter.run_failed(f"invalid config: {exc}", step=emitter.step)
            return 2
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        traceback.print_exc()
        emitter.run_failed(failure_reason(exc), step=emitter.step)
        return 1
    finally:
        emitter.close()


def end_cancelled(emitter: Emitter, signum: int, prog: str) -> None:
    """The end of a cancelled run: its reason on the wire at the last step, flushed, a line in
    stderr.log, env processes a library started with multiprocessing (XuanCe's) terminated,
    then death by the signal."""
    emitter.run_failed(cancel_reason(signum), step=emitter.step)
    emitter.close()
    sys.stderr.write(f"{prog}: stopped by {signal.Signals(signum).name}\n")
    sys.stderr.flush()
    multiprocessing = sys.modules.get("multiprocessing")
    if multiprocessing is not None:
        for child in multiprocessing.active_children():
            child.terminate()
    die_of(signum)
