"""workers/sdk/telemetry.py: the event checks, non-finite floats on the wire, and the Emitter's buffering
and its dropping of points a continued run logged already."""
from __future__ import annotations

import math
import os

import orjson
import pytest

from workers.sdk import telemetry as tm


@pytest.fixture
def pipe():
    r, w = os.pipe()
    os.set_blocking(r, False)
    yield r, w
    os.close(r)
    os.close(w)


def read_events(fd: int) -> list[dict]:
    try:
        data = os.read(fd, 1 << 20)
    except BlockingIOError:
        return []
    assert data.endswith(b"\n")               # whole lines only
    return [orjson.loads(x) for x in data.splitlines()]


def emitter(fd: int, **kw) -> tm.Emitter:
    return tm.Emitter(fd, flush_interval=kw.pop("flush_interval", 3600.0), **kw)


def test_a_float_goes_out_finite_or_as_a_word_and_comes_back_the_same():
    for value in (0.5, -3, math.inf, -math.inf):
        assert tm.float_of(tm._finite(value)) == value
    assert tm._finite(math.nan) == "nan" and math.isnan(tm.float_of("nan"))
    assert math.isnan(tm.float_of(None)) and math.isnan(tm.float_of("fast")) and math.isnan(tm.float_of([1]))
    assert tm.float_of(True) == 1.0


def test_an_episode_is_its_return_its_length_and_each_agents_return():
    ev = {"type": "episode", "return": 3.0, "length": 9, "agents": {"red": 1.0, "blue": 2.0}}
    assert tm.episode_scalars(ev) == [("episode/return", 3.0), ("episode/length", 9),
                                      ("episode/return/red", 1.0), ("episode/return/blue", 2.0)]
    assert tm.episode_scalars({"return": 1, "length": 2, "agents": [1]}) == [("episode/return", 1),
                                                                             ("episode/length", 2)]


@pytest.mark.parametrize("event, says", [
    ([1], "not a JSON object"),
    ({"v": 1, "type": "nope", "t": 1}, "unknown event type"),
    ({"v": 2, "type": "heartbeat", "t": 1}, "unsupported telemetry version"),
    ({"v": 1, "type": "heartbeat", "t": True}, "'t' must be a number"),
    ({"v": 1, "type": "scalar", "t": 1, "tag": "a", "step": 1}, "missing field 'value'"),
    ({"v": 1, "type": "scalar", "t": 1, "tag": "a", "value": 1.0, "step": True}, "'step' has type bool"),
    ({"v": 1, "type": "scalar", "t": 1, "tag": "a", "value": "fast", "step": 1}, "'value' is not a number"),
])
def test_a_bad_event_is_named(event, says):
    with pytest.raises(tm.EventError, match=says):
        tm.check_event(event)


def test_a_scalar_is_buffered_until_a_flush_and_written_as_whole_lines(pipe):
    r, w = pipe
    em = emitter(w)
    em.scalar("loss", math.nan, 3)
    em.scalar("lr", 1e-3, 3.0)
    assert read_events(r) == []
    em.flush()
    got = read_events(r)
    assert [(e["tag"], e["value"], e["step"]) for e in got] == [("loss", "nan", 3), ("lr", 1e-3, 3)]
    assert all(tm.check_event(e) for e in got) and em.lines_written == 2 and em.step == 3
    em.close()


def test_a_full_buffer_and_a_lifecycle_event_go_out_at_once(pipe):
    r, w = pipe
    em = emitter(w, max_buffer=200)
    for i in range(3):
        em.scalar("a", 1.0, i)                 # ~70 bytes each: the third fills the buffer
    assert [e["step"] for e in read_events(r)] == [0, 1, 2]
    em.scalar("a", 1.0, 3)
    em.run_failed("x" * 5000, step=4)
    got = read_events(r)
    assert [e["type"] for e in got] == ["scalar", "run_failed"] and len(got[1]["reason"]) == 4000
    em.close()


def test_a_paced_heartbeat_goes_out_once_per_interval(pipe):
    r, w = pipe
    em = emitter(w)
    assert em.heartbeat(step=1, every=3600.0) is True
    assert em.heartbeat(step=2, every=3600.0) is False
    assert em.heartbeat() is True
    em.flush()
    assert [e.get("step") for e in read_events(r)] == [1, None]
    em.close()


def test_points_a_continued_run_logged_already_are_dropped_but_the_missing_ones_at_its_step(pipe, monkeypatch):
    r, w = pipe
    monkeypatch.setenv(tm.LOGGED_UNTIL_ENV, "20")
    # the old process logged two "a" and the episode at step 20, but not "b"
    monkeypatch.setenv(tm.LOGGED_AT_UNTIL_ENV, '{"scalars": {"a": 2}, "episodes": 1}')
    em = emitter(w)
    em.scalar("a", 1.0, 10)                    # below: logged already
    em.episode(10, 1.0, 5)
    for tag in ("a", "a", "a", "b"):
        em.scalar(tag, 1.0, 20)
    em.episode(20, 2.0, 5)
    em.episode(20, 3.0, 5)
    em.scalar("a", 1.0, 21)
    em.flush()
    got = [(e["type"], e.get("tag"), e["step"]) for e in read_events(r)]
    assert got == [("scalar", "a", 20), ("scalar", "b", 20), ("episode", None, 20), ("scalar", "a", 21)]
    em.close()


def test_without_counts_every_point_up_to_the_step_is_dropped(pipe, monkeypatch):
    r, w = pipe
    monkeypatch.setenv(tm.LOGGED_UNTIL_ENV, "20")
    monkeypatch.delenv(tm.LOGGED_AT_UNTIL_ENV, raising=False)
    em = emitter(w)
    em.scalar("a", 1.0, 20)
    em.episode(20, 1.0, 1)
    em.scalar("a", 1.0, 21)
    em.flush()
    assert [e["step"] for e in read_events(r)] == [21]
    em.close()
