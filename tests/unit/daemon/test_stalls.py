"""daemon/stalls.py: the longest piece of work that held the daemon's loop, and which."""
from __future__ import annotations

import gc

from daemon.stalls import StallMeter


def test_the_longest_piece_of_work_is_kept_with_its_name():
    meter = StallMeter()
    meter.record("ingest", 0.002)
    meter.record("request status", 0.010)
    meter.record("flush", 0.004)
    wire = meter.wire()
    assert wire["longest_ms"] == 10.0 and wire["in"] == "request status" and wire["timed"] == 3


def test_a_reset_starts_a_new_window_after_its_answer():
    meter = StallMeter()
    meter.record("ingest", 0.5)
    since = meter.since
    assert meter.wire(reset=True)["longest_ms"] == 500.0
    wire = meter.wire()
    assert wire == {"longest_ms": 0.0, "in": None, "timed": 0, "since": wire["since"]} and wire["since"] >= since


def test_timed_work_counts_even_when_it_raises():
    meter = StallMeter()
    try:
        with meter.timed("a failing request"):
            raise ValueError("x")
    except ValueError:
        pass
    assert meter.count == 1 and meter.what == "a failing request"


def test_a_garbage_collection_is_timed_by_its_generation():
    meter = StallMeter()
    meter.watch_collections()
    meter.watch_collections()                  # once only
    try:
        assert gc.callbacks.count(meter._on_gc) == 1
        gc.collect(1)
        assert meter.what == "garbage collection (generation 1)" and meter.count >= 1
    finally:
        gc.callbacks.remove(meter._on_gc)
