"""The longest time the daemon's event loop was held by one piece of work, and by which.

Every line a worker writes waits behind whatever the loop is doing: a client's request, a
run's ingest, the summaries' store write, a history's save, a garbage collection. Each of
those is timed here; ``status`` reports the longest (``stalls``), so a delivery-latency
tail (bench_telemetry's p99) names its cause instead of being guessed at.

    with STALLS.timed("ingest"):
        ...
"""
from __future__ import annotations

import gc
import time
from contextlib import contextmanager
from typing import Any, Iterator


class StallMeter:
    def __init__(self) -> None:
        self.longest = 0.0
        self.what: str | None = None
        self.count = 0                  # pieces of work timed
        self.since = time.time()        # the window's start (the daemon's, or the last reset)
        self._gc_started: float | None = None

    def record(self, what: str, seconds: float) -> None:
        self.count += 1
        if seconds > self.longest:
            self.longest, self.what = seconds, what

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.record(what, time.perf_counter() - started)

    def watch_collections(self) -> None:
        """Time the garbage collector's passes too (gc.callbacks)."""
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            self.record(f"garbage collection (generation {info.get('generation')})",
                        time.perf_counter() - self._gc_started)
            self._gc_started = None

    def wire(self, reset: bool = False) -> dict[str, Any]:
        """The longest so far, and since when; ``reset``: start a new window after this answer."""
        out = {"longest_ms": round(self.longest * 1000, 3), "in": self.what, "timed": self.count,
               "since": self.since}
        if reset:
            self.longest, self.what, self.count, self.since = 0.0, None, 0, time.time()
        return out


STALLS = StallMeter()
