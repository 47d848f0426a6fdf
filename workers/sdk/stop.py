"""Graceful stop, the same in every worker process.

The daemon cancels a run with SIGTERM to its process tree (SIGINT from a
terminal is taken the same way). ``workers.sdk.worker_cli.serve`` installs
``StopSignals`` before a worker's entry point runs: the signal raises
``Cancelled`` in the main thread, the entry point's ``finally`` blocks clean
up, and ``workers.sdk.guard`` reports the cancel and makes the process die of
the signal, so that its exit status tells the supervisor how the run ended.
"""
from __future__ import annotations

import os
import signal


class Cancelled(BaseException):
    """SIGTERM/SIGINT arrived: raised in the main thread to unwind training to the cleanup
    (a BaseException, so the library's ``except Exception`` does not swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopSignals:
    """After ``install()`` the first SIGTERM or SIGINT raises Cancelled; later ones
    are ignored, so they cannot interrupt the cleanup. ``received`` is the signal
    number once one came (a library may turn Cancelled into its own error: ask this)."""

    def __init__(self) -> None:
        self.received: int | None = None

    def install(self) -> "StopSignals":
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        return self

    @property
    def name(self) -> str | None:
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
