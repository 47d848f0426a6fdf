"""daemon/history.py: a tag's points in buckets (count, finite, sum, min, max, last), merged in pairs."""
from __future__ import annotations

import math

import numpy as np
import pytest

from daemon import history as H
from daemon.history import RunHistory, TagHistory
from workers.sdk import telemetry as tm


def arrays(values, first_step: int = 1):
    n = len(values)
    step = np.arange(first_step, first_step + n, dtype=np.float64)
    return step, H._floats(list(values)), step * 10.0


def scalar(tag: str, value, step: int, t: float | None = None) -> dict:
    return {"v": 1, "type": tm.SCALAR, "tag": tag, "value": value, "step": step, "t": float(step) if t is None else t}


def test_a_bucket_holds_its_points_count_finite_sum_min_max_and_last():
    step, value, t = arrays([1.0, math.nan, 3.0, -2.0, math.inf, 5.0])
    b = H._buckets(step, value, t, 3)
    assert b.shape == (H.ROWS, 2)
    assert b[H.STEP].tolist() == [3.0, 6.0] and b[H.T].tolist() == [30.0, 60.0]
    assert b[H.COUNT].tolist() == [3, 3] and b[H.FINITE].tolist() == [2, 2]
    assert b[H.SUM].tolist() == [4.0, 3.0]
    assert b[H.LO].tolist() == [1.0, -2.0] and b[H.HI].tolist() == [3.0, 5.0]   # inf is not finite
    assert b[H.LAST].tolist() == [3.0, 5.0]


def test_values_are_read_as_the_app_reads_them():
    assert H._floats([1, 2.5]).tolist() == [1.0, 2.5]
    got = H._floats([1, "nan", "inf", "-inf", None, "junk"])
    assert got[0] == 1.0 and math.isnan(got[1]) and got[2] == math.inf and got[3] == -math.inf
    assert math.isnan(got[4]) and math.isnan(got[5])


def test_infinities_go_on_the_wire_as_strings_and_nan_as_null():
    assert H._wire_floats(np.array([1.0, math.inf, -math.inf])) == [1.0, "inf", "-inf"]
    out = H._wire_floats(np.array([math.nan]))
    assert len(out) == 1 and math.isnan(out[0])      # orjson writes NaN as null


def test_a_short_tag_is_sent_as_its_points_exactly():
    h = TagHistory()
    h.add(*arrays([1.0, 2.0, math.inf]))
    wire = h.wire()
    assert wire == {"n": 3, "size": 1, "step": [1.0, 2.0, 3.0], "t": [10.0, 20.0, 30.0], "value": [1.0, 2.0, "inf"]}


def test_reaching_max_buckets_merges_neighbours_in_pairs(monkeypatch):
    monkeypatch.setattr(H, "MAX_BUCKETS", 4)
    h = TagHistory()
    h.add(*arrays([2.0, 1.0, 3.0, 4.0, 5.0]))      # 4 buckets -> merged to 2 of 2 points, then one carried
    assert h.size == 2 and h.n == 2
    assert h.cols[H.COUNT, :2].tolist() == [2, 2] and h.cols[H.SUM, :2].tolist() == [3.0, 7.0]
    assert h.cols[H.LO, :2].tolist() == [1.0, 3.0] and h.cols[H.HI, :2].tolist() == [2.0, 4.0]
    assert h.cols[H.LAST, :2].tolist() == [1.0, 4.0] and h.cols[H.STEP, :2].tolist() == [2.0, 4.0]
    assert h.carry is not None and h.carry[1].tolist() == [5.0]
    wire = h.wire()                                   # the partial bucket last, a bucket of one point
    assert wire["n"] == 5 and wire["size"] == 2 and wire["count"] == [2, 2, 1]
    assert wire["value"] == [1.5, 3.5, 5.0] and wire["last"] == [1.0, 4.0, 5.0]
    assert wire["lo"] == [1.0, 3.0, 5.0] and wire["hi"] == [2.0, 4.0, 5.0] and wire["finite"] == [2, 2, 1]


def test_a_bucket_of_no_finite_point_has_no_mean_min_or_max(monkeypatch):
    monkeypatch.setattr(H, "MAX_BUCKETS", 4)
    h = TagHistory()
    h.add(*arrays([math.nan, math.nan, 1.0, 3.0]))
    wire = h.wire()
    assert wire["size"] == 2 and wire["finite"] == [0, 2]
    assert math.isnan(wire["value"][0]) and wire["value"][1] == 2.0
    assert math.isnan(wire["lo"][0]) and math.isnan(wire["hi"][0])


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_the_same_points_in_any_chunks_make_the_same_buckets(monkeypatch, chunk):
    monkeypatch.setattr(H, "MAX_BUCKETS", 8)
    values = [float((i * 37) % 11) for i in range(100)]
    whole, pieces = TagHistory(), TagHistory()
    whole.add(*arrays(values))
    step, value, t = arrays(values)
    for i in range(0, len(values), chunk):
        pieces.add(step[i:i + chunk], value[i:i + chunk], t[i:i + chunk])
    assert whole.size == pieces.size
    np.testing.assert_array_equal(whole.buckets(), pieces.buckets())


def test_tags_are_bucketed_apart_each_in_file_order_with_episodes_as_their_tags():
    h = RunHistory()
    events = [scalar("a", 1.0, 1), scalar("b", 10.0, 1), scalar("a", 2.0, 2),
              {"v": 1, "type": tm.EPISODE, "step": 3, "t": 3.0, "return": 7.0, "length": 4,
               "agents": {"p0": 3.0, "p1": 4.0}},
              {"v": 1, "type": tm.HEARTBEAT, "t": 3.5}, scalar("a", 3.0, 4)]
    h.add_events(events, offset=123)
    wire = h.wire()
    assert wire["offset"] == 123 and wire["t0"] == 1.0
    tags = wire["tags"]
    assert set(tags) == {"a", "b", "episode/return", "episode/length", "episode/return/p0", "episode/return/p1"}
    assert tags["a"]["value"] == [1.0, 2.0, 3.0] and tags["a"]["step"] == [1.0, 2.0, 4.0]
    assert tags["episode/return/p1"]["value"] == [4.0] and tags["episode/length"]["value"] == [4.0]
    assert h.wire(["b", "missing"])["tags"].keys() == {"b"}


def test_a_plain_chunk_and_the_event_loop_give_the_same_history():
    events = [scalar("a" if i % 3 else "b", float(i), i) for i in range(1, 40)]
    plain, loop = RunHistory(), RunHistory()
    plain.add_events(events, 10, (list(range(1, 40)), {"a", "b"}))
    for ev in events:
        loop.add_events([ev, {"v": 1, "type": tm.HEARTBEAT, "t": 0.0}], 10)
    assert plain.wire() == loop.wire()


def test_one_tag_in_a_big_chunk_goes_straight_in_after_the_points_before_it():
    h = RunHistory()
    h.add_events([scalar("a", -1.0, 0)], 1)                      # waits in the lists
    big = [scalar("a", float(i), i) for i in range(1, 300)]
    h.add_events(big, 2, ([ev["step"] for ev in big], {"a"}))
    assert h.wire()["tags"]["a"]["value"][:3] == [-1.0, 1.0, 2.0]


def test_missing_steps_and_times_count_as_zero():
    h = RunHistory()
    h.add_events([{"v": 1, "type": tm.SCALAR, "tag": "a", "value": 1.0},
                  {"v": 1, "type": tm.SCALAR, "tag": "a", "value": 2.0, "step": 5, "t": 9.0}], 1)
    wire = h.wire()["tags"]["a"]
    assert wire["step"] == [0.0, 5.0] and wire["t"] == [0.0, 9.0]


def test_a_saved_history_loads_as_it_was_and_another_format_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(H, "MAX_BUCKETS", 4)
    h = RunHistory()
    h.add_events([scalar("a", float(i), i) for i in range(11)] + [scalar("b", "inf", 3)], 999)
    path = str(tmp_path / H.HISTORY_FILE)
    h.save(path)
    assert h.saved_at == 999
    back = RunHistory.load(path)
    assert back is not None and back.covered == 999 and back.wire() == h.wire()
    monkeypatch.setattr(H, "FORMAT", H.FORMAT + 1)
    assert RunHistory.load(path) is None
    (tmp_path / "torn.npz").write_bytes(b"PK\x03\x04 not a zip")
    assert RunHistory.load(str(tmp_path / "torn.npz")) is None
    assert RunHistory.load(str(tmp_path / "none.npz")) is None
