"""A run's scalar history at a bounded size (daemon/history.py): exact while a tag is short,
buckets that hold their points' count, mean, min, max and last once it is long; saved, loaded,
rebuilt from the events file; served by the daemon with the offset to follow the run from."""
from __future__ import annotations

import os
import random
import signal

import numpy as np
import pytest

from daemon import protocol as P
from daemon.history import COUNT, FINITE, HI, HISTORY_FILE, LAST, LO, STEP, SUM, RunHistory, T
from tests.helpers import connect, wait_for, wait_state


def _events(n: int, tags: list[str], seed: int = 1, odd: bool = True) -> list[dict]:
    """Scalars round-robin over tags with some NaN, inf and "nan" values, episodes (with
    agents) and events that are no scalars mixed in."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        value = rng.gauss(0, 5)
        if odd and i % 53 == 0:
            value = rng.choice(["nan", float("nan"), float("inf"), "-inf"])
        out.append({"v": 1, "type": "scalar", "t": 1000.0 + i, "tag": tags[i % len(tags)], "value": value,
                    "step": i})
        if odd and i % 97 == 0:
            out.append({"v": 1, "type": "episode", "t": 1000.0 + i, "step": i, "return": rng.random(),
                        "length": 10, "agents": {"a0": 1.5, "a1": -2.0}})
        if odd and i % 211 == 0:
            out.append({"v": 1, "type": "phase", "t": 1000.0 + i, "name": "train", "step": i})
    return out


def _add(history: RunHistory, events: list[dict], chunk: int) -> None:
    for k in range(0, len(events), chunk):
        history.add_events(events[k:k + chunk], k + chunk)


def _tag_floats(values) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def test_a_short_tag_is_its_points_exactly_as_the_app_reads_them():
    from mosaic_tui.series import RunSeries
    events = _events(3000, ["a", "b", "c"])
    events.insert(5, {"v": 1, "type": "scalar", "t": 7.0, "tag": "nostep", "value": True})  # no step: 0
    history = RunHistory()
    _add(history, events, 700)
    wire = history.wire()
    reference = RunSeries()
    reference.absorb(events)
    assert sorted(wire["tags"]) == sorted(reference.tags)
    for tag, ref in reference.tags.items():
        got = wire["tags"][tag]
        assert got["size"] == 1 and got["n"] == ref.n and "count" not in got
        np.testing.assert_array_equal(_tag_floats(got["step"]), ref.steps)
        np.testing.assert_array_equal(_tag_floats(got["value"]), ref.values)   # NaN and ±inf as they were
        np.testing.assert_array_equal(_tag_floats(got["t"]), ref.walls)
    assert wire["offset"] == history.covered and wire["t0"] == 1000.0


@pytest.mark.parametrize("chunk", [1, 333, 5000])
def test_buckets_hold_their_points_count_mean_min_max_and_last(monkeypatch, chunk):
    from daemon import history as H
    monkeypatch.setattr(H, "MAX_BUCKETS", 64)
    monkeypatch.setattr(H, "SETTLE_EVERY", 1000)
    events = _events(20_000, ["x", "y", "z"], seed=chunk)
    h = RunHistory()
    _add(h, events, chunk)
    h.settle()
    for tag in ("x", "y", "z", "episode/return", "episode/return/a1"):
        points = [e for e in events if e.get("tag") == tag] if "/" not in tag else \
            [dict(e, value=e["return"] if tag == "episode/return" else e["agents"]["a1"]) for e in events
             if e["type"] == "episode"]
        th = h.tags[tag]
        cols = th.buckets()
        assert cols.shape[1] <= 64
        assert cols[COUNT].sum() == len(points)
        values = np.array([float(p["value"]) for p in points])
        ends = np.cumsum(cols[COUNT]).astype(int)
        starts = ends - cols[COUNT].astype(int)
        for b, (i, j) in enumerate(zip(starts, ends)):
            v = values[i:j]
            fin = v[np.isfinite(v)]
            assert cols[STEP, b] == points[j - 1]["step"] and cols[T, b] == points[j - 1]["t"]
            np.testing.assert_array_equal(cols[LAST, b], v[-1])
            assert cols[FINITE, b] == len(fin)
            assert cols[SUM, b] == pytest.approx(fin.sum(), abs=1e-9)
            if len(fin):
                assert (cols[LO, b], cols[HI, b]) == (fin.min(), fin.max())
            else:
                assert np.isnan(cols[LO, b]) and np.isnan(cols[HI, b])
        if len(points) > 64:
            assert th.size > 1
    wire = h.wire(["x"])["tags"]["x"]
    assert wire["n"] == len([e for e in events if e.get("tag") == "x"]) and len(wire["value"]) <= 64


def test_the_same_points_in_other_chunks_make_the_same_history(monkeypatch):
    from daemon import history as H
    monkeypatch.setattr(H, "MAX_BUCKETS", 128)
    monkeypatch.setattr(H, "SETTLE_EVERY", 500)
    events = _events(30_000, ["p", "q"], seed=3)
    wires = []
    for chunk in (7, 1000, 30_000):
        h = RunHistory()
        _add(h, events, chunk)
        h.covered = 0
        wires.append(P.dumps(h.wire()))      # as sent: NaN as null (NaN != NaN in a list compare)
    assert wires[0] == wires[1] == wires[2]


def test_a_saved_history_loads_as_it_was_and_a_torn_one_is_rebuilt(tmp_path, monkeypatch):
    from daemon import history as H
    monkeypatch.setattr(H, "MAX_BUCKETS", 64)
    h = RunHistory()
    _add(h, _events(10_001, ["a", "b"]), 999)   # leaves a bucket being filled (a carry)
    path = str(tmp_path / HISTORY_FILE)
    h.save(path)
    loaded = RunHistory.load(path)
    assert loaded is not None and loaded.covered == h.covered and loaded.saved_at == h.covered
    assert P.dumps(loaded.wire()) == P.dumps(h.wire())
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])
    assert RunHistory.load(path) is None
    assert RunHistory.load(str(tmp_path / "missing.npz")) is None


def test_a_history_caught_up_from_the_file_in_pieces_is_the_one_the_ingest_makes(tmp_path, monkeypatch):
    import asyncio

    from daemon import history as H
    monkeypatch.setattr(H, "MAX_BUCKETS", 64)
    monkeypatch.setattr(H, "CATCH_UP_CHUNK", 4096)      # a few dozen lines a piece
    lines = [P.dumps(e) for e in _events(6000, ["a", "b"])]   # as orjson writes them: NaN and inf as null
    events = [P.loads(line) for line in lines]
    lines.insert(100, b"not json at all")                 # kept in the file, not in the history
    (tmp_path / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    size = (tmp_path / "events.jsonl").stat().st_size
    built = asyncio.run(H.Histories().get("r1", str(tmp_path), size))
    assert built.covered == size
    whole = RunHistory()
    whole.add_events(events, size)
    assert P.dumps(built.wire()) == P.dumps(whole.wire())
    assert P.dumps(RunHistory.load(str(tmp_path / HISTORY_FILE)).wire()) == P.dumps(whole.wire())


def _history(home, run: str) -> dict:
    with connect(home) as client:
        return client.call(P.HISTORY, run=run)


def _values_in_file(home, run_id: str, tag: str) -> np.ndarray:
    import json
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return np.array([e["value"] for e in map(json.loads, lines) if e.get("tag") == tag], dtype=np.float64)


def test_the_daemon_serves_a_long_runs_history_and_rebuilds_it_after_a_kill(daemon, mosaic):
    from daemon.history import MAX_BUCKETS
    tag = "synthetic/value_0"
    steps = MAX_BUCKETS * 2 + 123
    run = mosaic.synthetic(steps, "rate=0", "tags=1", "episode_every=0", name="long")
    wait_state(daemon, run, P.SUCCEEDED, timeout=120)
    record = mosaic.show(run)
    saved = daemon.run_dir(record["id"]) / HISTORY_FILE
    assert saved.exists()                    # the ingest built it and the run's end saved it
    first = _history(daemon, run)
    assert first["offset"] == record["ingest_offset"]
    got = first["tags"][tag]
    values = _values_in_file(daemon, record["id"], tag)
    assert got["n"] == steps == len(values) and got["size"] > 1 and len(got["value"]) <= MAX_BUCKETS
    assert (min(got["lo"]), max(got["hi"]), got["last"][-1]) == (values.min(), values.max(), values[-1])
    assert sum(c * m for c, m in zip(got["finite"], got["value"])) == pytest.approx(values.sum())
    # a daemon killed, its saved history gone or torn: the next request rebuilds it from the events
    for damage in ("delete", "tear"):
        pid = int(daemon.pid_file.read_text())
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z",
                 what="the daemon gone")
        if damage == "delete":
            saved.unlink()
        else:
            saved.write_bytes(saved.read_bytes()[:100])
        mosaic.run("daemon", "start", check=True)
        assert _history(daemon, run) == first
        assert RunHistory.load(str(saved)).covered == record["ingest_offset"]


def test_a_live_run_followed_from_its_history_offset_misses_and_repeats_nothing(daemon, mosaic):
    from daemon.history import MAX_BUCKETS
    tag = "synthetic/value_0"
    steps = MAX_BUCKETS * 3
    run = mosaic.synthetic(steps, "rate=4000", "tags=1", "episode_every=0", name="live")
    wait_for(lambda: mosaic.show(run)["summary"].get("steps", 0) > MAX_BUCKETS, timeout=60, what="a long history")
    with connect(daemon) as client:
        history = client.call(P.HISTORY, run=run)
        assert mosaic.show(run)["state"] == P.RUNNING
        got = history["tags"][tag]
        client.call(P.SUBSCRIBE, events=[run], cursors={history["run"]: history["offset"]})
        live_steps: list[int] = []
        for method, params in client.notifications(timeout=30):
            if method == P.NOTIFY_EVENTS:
                live_steps += [e["step"] for e in params["events"] if e.get("tag") == tag]
            if live_steps and live_steps[-1] == steps:
                break
    # the synthetic worker's steps run 1..steps: the first live point follows the history's last
    assert got["n"] + len(live_steps) == steps
    assert got["step"][-1] == got["n"]
    assert live_steps == list(range(got["n"] + 1, steps + 1))


def test_one_tag_chunks_from_the_ingest_go_straight_to_numpy_with_the_same_result(monkeypatch):
    """RunTail hands over a plain-scalar chunk's steps and tags: a chunk of one tag skips the
    lists. Same history as the general path, mixed with it (small chunks, other tags)."""
    from daemon import history as H
    monkeypatch.setattr(H, "MAX_BUCKETS", 64)
    events = [e for e in _events(20_000, ["only"], seed=5) if e["type"] == "scalar"]
    fast, general = RunHistory(), RunHistory()
    k = 0
    listed = False
    for size in [300, 7, 5000, 256, 11, 3000] * 4:
        chunk = events[k:k + size]
        if not chunk:
            break
        fast.add_events(chunk, k + size, ([e["step"] for e in chunk], {"only"}))
        general.add_events(chunk, k + size)
        if len(chunk) >= 256:
            # taken straight into numpy: nothing of it waits in the lists (a 300-point chunk
            # would, on the general path: it settles 2,048 at a time)
            assert fast._tag == [], f"a {len(chunk)}-point one-tag chunk went through the lists"
            listed = listed or bool(general._tag)
        k += size
    assert listed, "the general path kept such a chunk in its lists: the two paths were compared"
    assert P.dumps(fast.wire()) == P.dumps(general.wire())
