"""Graceful stop, the same in every worker process.

The daemon cancels a run with SIGTERM to its process tree (SIGINT from a
terminal is taken the same way). ``workers.sdk.worker_cli.serve`` installs
``StopSignals`` before a worker's entry point runs: the signal raises
``Cancelled`` in the main thread, the entry point's ``finally`` blocks clean
up, and ``workers.sdk.guard`` reports the cancel and makes the process die of
the signal, so that its exit status tells the supervisor how the run ended.

A stop (``mosaic stop``: SIGUSR1 from the supervisor) is not an exception: it
sets ``SIGNALS.stop_requested``, and a worker that can stop looks at it at its
safe points (between epochs, iterations, episodes), saves a checkpoint and
raises ``Stopped``; the guard reports ``run_stopped`` and exits with
``STOPPED_EXIT``. ``mosaic continue`` starts the run again from that checkpoint.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Callable

STOP_SIGNAL = signal.SIGUSR1   # "checkpoint at the next safe point, then end": the supervisor forwards it
STOPPED_EXIT = 75              # the exit status of a worker that stopped with its checkpoint (EX_TEMPFAIL)


class Cancelled(BaseException):
    """SIGTERM/SIGINT arrived: raised in the main thread to unwind training to the cleanup
    (a BaseException, so the library's ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Stopped(BaseException):
    """Raised by an entry point at a safe point once a stop's checkpoint is saved: the run ends
    "stopped" at ``step``, to be continued from ``checkpoint``."""

    def __init__(self, step: int, checkpoint: str, save_s: float | None = None):
        super().__init__(f"stopped at step {step}")
        self.step, self.checkpoint, self.save_s = int(step), str(checkpoint), save_s

    @classmethod
    def after(cls, save: Callable[[], str], step: int) -> "Stopped":
        """Save (``save()`` returns the checkpoint's path), write its manifest (run, step, sha256:
        workers.sdk.rundir) and the Stopped to raise, timed."""
        from workers.sdk.rundir import write_manifest
        started = time.monotonic()
        path = save()
        write_manifest(path, step)   # checked before the run continues from it
        return cls(step, path, time.monotonic() - started)


class StopSignals:
    """After ``install()`` the first SIGTERM or SIGINT raises Cancelled; later ones
    are ignored, so they cannot interrupt the cleanup. ``received`` is the signal
    number once one came (a library may turn Cancelled into its own error: ask this).
    STOP_SIGNAL sets ``stop_requested``, for the worker to act on at its next safe point."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.stop_requested = False

    def install(self) -> "StopSignals":
        """Handle SIGTERM and SIGINT (a cancel) and the stop signal; again after a library installed its own."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        return self.listen_for_stop()

    def listen_for_stop(self) -> "StopSignals":
        """STOP_SIGNAL sets ``stop_requested`` (alone: for a worker with its own SIGTERM handling)."""
        signal.signal(STOP_SIGNAL, self._on_stop)
        return self

    def _on_stop(self, signum, frame) -> None:
        self.stop_requested = True

    @property
    def name(self) -> str | None:
        """The received signal's name (SIGTERM), or None."""
        return None if self.received is None else signal.Signals(self.received).name

    def _on_signal(self, signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.received = signum
        raise Cancelled(signum)


def die_of(signum: int) -> None:
    """End this process by ``signum`` with its default action (the supervisor reads the signal)."""
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


# Signal handlers belong to the process: one StopSignals for it, installed by worker_cli.serve.
# A library that installs its own handlers (ray.init does) is followed by SIGNALS.install() again.
SIGNALS = StopSignals()
