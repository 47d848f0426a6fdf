"""The telemetry wire: every event type round-trips from the emitter through the daemon's ingest."""
from __future__ import annotations

import json
import os
import tempfile

import pytest

from daemon.ingest import MAX_EVENT_LINE, RunTail, split_events
from workers.sdk import telemetry as tm


def _emit_all(em: tm.Emitter) -> None:
    em.run_started(worker="w", algo="a", env="e", total_steps=100)
    em.scalar("losses/loss", 0.5, 10)
    em.scalar("losses/diverged", float("nan"), 11)
    em.episode(12, 200.0, 200, env_index=1, agents={"agent_0": 100.0})
    em.checkpoint_saved("checkpoints/model.pt", 50)
    em.dataset_saved("/runs/x/dataset.hdf5", 5012, 20)
    em.heartbeat(60)
    em.phase("CartPole-v1", 70, index=1)
    em.llm_step(step=75, agent="0", reply="go forward", action="go forward", valid=True, latency_s=0.2)
    em.keymap("0", ["left", "right"], {"left": 0, "right": 1}, "turn", rate=15.0, hold_ms=150, noop=None)
    em.play(76, 0, "0", action=1, action_name="right", reward=1.0, waiting=True, held_by="app#1")
    em.run_failed("it broke", step=80)
    em.run_stopped(85, "/runs/x/checkpoints/stop_0001.pt", save_s=0.25)
    em.emit(tm.make_event(tm.RESTARTED, step=85, checkpoint="/runs/x/checkpoints/stop_0001.pt", restarts=1))
    em.run_completed(step=100)
    em.close()


def test_every_event_type_round_trips():
    fd, path = tempfile.mkstemp()
    em = tm.Emitter(fd, flush_interval=60)
    _emit_all(em)
    os.close(fd)
    data = open(path, "rb").read()
    os.unlink(path)
    raws, events, used, _ = split_events(data)
    assert used == len(data)
    assert [e["type"] for e in events] == [tm.RUN_STARTED, tm.SCALAR, tm.SCALAR, tm.EPISODE,
                                           tm.CHECKPOINT_SAVED, tm.DATASET_SAVED, tm.HEARTBEAT, tm.PHASE, tm.LLM_STEP,
                                           tm.KEYMAP, tm.PLAY, tm.RUN_FAILED, tm.RUN_STOPPED, tm.RESTARTED, tm.RUN_COMPLETED]
    emitted_types = {e["type"] for e in events}
    # the test covers every type; invalid and warning are the daemon's side's (ingest, daemon/mirror.py)
    assert emitted_types | {tm.INVALID, tm.WARNING} == tm.EVENT_TYPES
    warning = tm.encode(tm.make_event(tm.WARNING, message="mlflow mirror: cannot open", source="mirror/mlflow"))
    (parsed,) = split_events(warning)[1]
    assert tm.check_event(parsed) is parsed and parsed["message"] == "mlflow mirror: cannot open"
    for event in events:
        assert tm.check_event(event) is event
    assert events[2]["value"] == "nan"
    assert events[3]["return"] == 200.0 and events[3]["agents"] == {"agent_0": 100.0}
    assert em.lines_written == 15
    # what the daemon's ingest keeps of them: the stop, then the seam that clears it
    tail = RunTail("r", "/nonexistent", 0, {})
    tail._absorb(events[:13])
    assert tail.stopped == {"step": 85, "checkpoint": "/runs/x/checkpoints/stop_0001.pt"}
    assert tail.last_checkpoint == {"path": "checkpoints/model.pt", "step": 50}   # the periodic one
    tail._absorb(events[13:])
    assert tail.stopped is None and tail.failed_reason is None and tail.completed


@pytest.mark.parametrize("event, problem", [
    ({"v": 1, "type": "scalar", "t": 1.0, "tag": "x", "step": 1}, "missing field 'value'"),
    ({"v": 1, "type": "scalar", "t": 1.0, "tag": "x", "value": "high", "step": 1}, "not a number"),
    ({"v": 1, "type": "scalar", "t": 1.0, "tag": "x", "value": 1.0, "step": 1.5}, "has type float"),
    ({"v": 1, "type": "sclar", "t": 1.0}, "unknown event type"),
    ({"v": 2, "type": "heartbeat", "t": 1.0}, "unsupported telemetry version"),
    ([1, 2], "not a JSON object"),
])
def test_check_event_names_the_problem(event, problem):
    with pytest.raises(tm.EventError, match=problem):
        tm.check_event(event)


def test_buffering_writes_whole_lines_only():
    r, w = os.pipe()
    em = tm.Emitter(w, flush_interval=60, max_buffer=1 << 20)
    for i in range(100):
        em.scalar("x", i, i)
    assert em.lines_written == 0  # buffered: a scalar is not a syscall
    em.flush()
    data = os.read(r, 1 << 20)
    assert data.count(b"\n") == 100 and data.endswith(b"\n")
    em.close()
    os.close(r)
    os.close(w)


def test_ingest_counts_bad_lines_and_keeps_going(tmp_path):
    ok = tm.encode(tm.make_event(tm.SCALAR, tag="a", value=1.0, step=1))
    path = tmp_path / "events.jsonl"
    path.write_bytes(ok + b"plain print\n" + b"\x00\xff\xfe\n" + b'{"type":"nope"}\n' +
                     b"y" * (MAX_EVENT_LINE + 5) + b"\n" + ok + b'{"v":1,"type":"sca')
    tail = RunTail("r", str(path))
    chunks = []
    while (chunk := tail.read_new()) is not None:
        chunks.append(chunk)
    s = tail.summary()
    assert s["lines"] == 6 and s["invalid"] == 4
    # the partial last line waits for its newline... unless the worker is gone
    assert tail.offset == path.stat().st_size - len(b'{"v":1,"type":"sca')
    start, end, raws = tail.read_new(final=True)
    assert end == path.stat().st_size and b"partial line at exit" in raws[-1]
    assert tail.summary()["invalid"] == 5
    # ranges are contiguous
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


def test_child_process_writes_through_inherited_fd(tmp_path):
    """A script the worker runs reaches the same channel (MOSAIC_TELEMETRY_FD)."""
    import subprocess
    import sys
    path = tmp_path / "events.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    env = dict(os.environ, MOSAIC_TELEMETRY_FD=str(fd))
    subprocess.run([sys.executable, "-c", "from workers.sdk.telemetry import get_emitter; "
                    "e = get_emitter(); e.scalar('child', 1.0, 1)"], env=env, pass_fds=(fd,), check=True)
    os.close(fd)
    _, events, _, _ = split_events(path.read_bytes())
    assert events[0]["tag"] == "child"


def test_backlog_reads_page_to_the_end_including_a_final_partial_line(tmp_path):
    """Paging read_range from 0 reaches `end`, whatever lies before it."""
    from daemon.ingest import read_range
    ok = tm.encode(tm.make_event(tm.SCALAR, tag="a", value=1.0, step=1))
    path = tmp_path / "events.jsonl"
    path.write_bytes(ok * 3 + b"z" * (MAX_EVENT_LINE + 100) + b"\n" + ok + b'{"cut')
    tail = RunTail("r", str(path))
    while tail.read_new(final=True) is not None:
        pass
    end = tail.offset
    assert end == path.stat().st_size
    offset, events = 0, []
    for _ in range(100):
        offset, _, parsed = read_range(str(path), offset, end, 4096)
        events += parsed
        if offset >= end:
            break
    assert offset == end
    assert [e["type"] for e in events] == ["scalar"] * 3 + ["invalid", "scalar", "invalid"]
    assert events[-1]["error"] == "partial line at exit"


def test_final_drain_of_a_large_backlog_keeps_lines_whole(tmp_path):
    """A run that ends with megabytes not yet read: chunk boundaries cut lines,
    and none of those cuts may pass for a 'partial line at exit'."""
    from daemon.ingest import READ_CHUNK
    path = tmp_path / "events.jsonl"
    pad = "x" * 100_000
    with open(path, "wb") as f:
        for step in range(1, 60):
            f.write(tm.encode({"v": 1, "type": "scalar", "t": 1.0, "tag": "a", "value": 1.0, "step": step,
                               "pad": pad}))
        f.write(b'{"v":1,"type":"scal')  # and a real partial line at the very end
    assert path.stat().st_size > 5 * READ_CHUNK
    tail = RunTail("r", str(path))
    ranges = []
    while (chunk := tail.read_new(final=True)) is not None:
        ranges.append(chunk[:2])
    s = tail.summary()
    assert s["lines"] == 60 and s["invalid"] == 1 and s["steps"] == 59
    assert tail.offset == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


def test_split_events_fast_path_agrees_with_the_careful_path():
    """split_events parses a chunk of well-formed lines with one orjson call; any chunk
    it takes must come out exactly as the line-by-line path makes it, and every chunk
    with a bad line must be left to that path (lines that only join into valid JSON,
    blank lines, garbage, partial last lines)."""
    import random

    from daemon import ingest
    good = [b'{"v":1,"type":"scalar","t":1.5,"tag":"a","value":%d,"step":%d}' % (i, i) for i in range(50)]
    tricky = [b'{"v":1,"type":"scalar","t":1,"tag":"a","value":1,"step":1},{"v":1,"type":"scalar","t":1}',
              b'{"v":1,"type":"scalar","t":1,"tag":"a","value":[{}', b'{"x":1}]}', b'', b'   ', b'garbage',
              b'{"v":1,"type":"nonsense"}', b'[1,2]', b'{"v":1,"type":"scalar"', b'"type":"scalar"}',
              b'{"v":1,"type":"scalar","t":1,"tag":"\\u00e9","value":NaN,"step":1}', b'{}', b'{"type":1}']
    rng = random.Random(5)
    fast_taken = 0
    for trial in range(400):
        lines = [rng.choice(good) for _ in range(rng.randint(1, 20))]
        if trial % 2:
            lines.insert(rng.randint(0, len(lines)), rng.choice(tricky))
        data = b"\n".join(lines) + b"\n" + (rng.choice(good)[:rng.randint(0, 30)] if trial % 3 else b"")
        got = ingest.split_events(data)
        want = ingest._split_line_by_line(data)
        fast_taken += ingest._split_well_formed(data) is not None
        assert got[2:] == want[2:], data
        assert len(got[0]) == len(want[0])
        for (raw_got, ev_got), (raw_want, ev_want) in zip(zip(got[0], got[1]), zip(want[0], want[1])):
            if ev_want["type"] == "invalid":      # stamped with the time: compare what it says
                assert ev_got["type"] == "invalid" and ev_got["raw"] == ev_want["raw"]
                assert ev_got["error"] == ev_want["error"]
            else:
                assert raw_got == raw_want and ev_got == ev_want
    assert 100 < fast_taken < 400          # both paths were exercised


def test_backlog_is_taken_verbatim_only_before_the_first_irregular_line(tmp_path):
    """RunTail.irregular_from marks where lines stop being plain events; below it a
    backlog read splits lines without parsing them, and gets what read_range parses."""
    from daemon.ingest import read_range, read_verbatim_range
    ok = [tm.encode(tm.make_event(tm.SCALAR, tag="a", value=1.0, step=i)) for i in range(1, 201)]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(ok[:100]))
    tail = RunTail("r", str(path))
    tail.read_new()
    clean_end = tail.offset
    assert tail.irregular_from is None and tail.summary()["irregular_from"] is None
    with open(path, "ab") as f:
        f.write(b"a stray print\n" + b"".join(ok[100:]))
    tail.read_new()
    assert tail.irregular_from == clean_end
    # verbatim up to the irregular chunk: exactly the careful reader's lines
    nxt, raws = read_verbatim_range(str(path), 0, tail.irregular_from, 1 << 20)
    assert nxt == clean_end
    assert raws == read_range(str(path), 0, clean_end, 1 << 20)[1] == [line.rstrip(b"\n") for line in ok[:100]]
    # a summary from before irregular_from existed trusts nothing; a fresh one everything
    assert RunTail("r", str(path), summary={"lines": 5}).irregular_from == 0
    assert RunTail("r", str(path), summary={}).irregular_from is None
    # blank lines are not events either
    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(ok[0] + b"\n" + ok[1])
    t2 = RunTail("r", str(blank))
    t2.read_new()
    assert t2.irregular_from == 0


def test_a_paced_heartbeat_goes_out_once_per_interval_and_a_plain_one_always():
    """``heartbeat(step, every=s)``: a worker beats from its hot loop, the SDK keeps the pace
    (XuanCe's step hook calls it at every env step)."""
    fd, path = tempfile.mkstemp()
    em = tm.Emitter(fd, flush_interval=60)
    sent = [em.heartbeat(step, every=3600.0) for step in range(1, 1001)]
    assert sent == [True] + [False] * 999                 # the first one, then nothing within the hour
    assert em.heartbeat(2000) is True                     # without `every`: always
    assert em.heartbeat(2001, every=0.0) is True          # an interval that has passed
    assert em.heartbeat(2002, every=3600.0) is False      # and the paced clock counts the plain beats too
    em.close()
    os.close(fd)
    _, events, _, _ = split_events(open(path, "rb").read())
    os.unlink(path)
    assert [(e["type"], e["step"]) for e in events] == [(tm.HEARTBEAT, 1), (tm.HEARTBEAT, 2000), (tm.HEARTBEAT, 2001)]


def test_summary_of_a_scalar_chunk_is_what_the_event_loop_makes(monkeypatch):
    """RunTail._absorb_scalars (a chunk of plain scalars, in map/set calls) leaves the
    summary the per-event loop leaves, chunk after chunk; anything it does not handle
    (a system/ tag, a step that is not an integer, another type) goes to the loop."""
    def scalar(tag, step, t=100.0):
        return {"v": 1, "type": "scalar", "t": t, "tag": tag, "value": 0.5, "step": step}

    chunks = [
        [scalar("a", s, 100.0 + s) for s in (5, 3, 9, 7)],           # steps out of order: the max counts
        [scalar("b", 2), scalar("a", 4)],                               # lower than the summary's step
        [scalar("c", 12), {"v": 1, "type": "scalar", "tag": "d", "value": 1.0, "step": 11}],  # last has no t
        [scalar("system/cpu_percent", 50), scalar("e", 13)],           # a system/ sample: the loop
        [scalar("f", 14.0), scalar("f", 15)],                           # a float step: the loop
        [scalar("g", True), scalar("g", 16)],                           # a bool step: the loop
        [scalar("h", 17), {"v": 1, "type": "episode", "t": 1.0, "step": 18, "return": 2.0, "length": 3}],
        [{"v": 1, "type": "scalar", "t": 1.0, "value": 1.0, "step": 19}],  # no tag: the loop ("?")
    ]
    fast, slow = RunTail("r", "/nonexistent"), RunTail("r", "/nonexistent")
    took_fast = []
    for chunk in chunks:
        took_fast.append(fast._absorb_scalars([dict(e) for e in chunk]) is not None)   # its steps, or None
        if not took_fast[-1]:
            fast._absorb([dict(e) for e in chunk])
        monkeypatch.setattr(slow, "_absorb_scalars", lambda events: None)
        slow._absorb([dict(e) for e in chunk])
        assert fast.summary() == slow.summary(), chunk
    assert took_fast == [True, True, True, False, False, False, False, False]
    assert fast.steps == 19 and fast.lines == 17 and "system/cpu_percent" in fast.tags


def test_a_type_that_is_no_string_is_an_invalid_line_not_a_crash():
    """A line whose "type" is a list or an object cannot be looked up in the set of event
    types (TypeError: unhashable): it stopped the run's ingest at that line, for good.
    It is an invalid event, and the lines around it are taken."""
    good = b'{"v":1,"type":"scalar","t":1.0,"tag":"a","value":1.0,"step":%d}'
    data = b"\n".join([good % 1, b'{"v":1,"type":["scalar"]}', good % 2, b'{"type":{"a":1}}', good % 3]) + b"\n"
    raws, parsed, used, _ = split_events(data)
    assert used == len(data)
    assert [e["type"] for e in parsed] == ["scalar", "invalid", "scalar", "invalid", "scalar"]
    assert [e["step"] for e in parsed if e["type"] == "scalar"] == [1, 2, 3]
    assert all("not a telemetry event" in e["error"] for e in parsed if e["type"] == "invalid")


def test_a_run_shorter_than_the_rate_window_still_gets_its_steps_per_second(daemon, mosaic):
    """The rate is measured over 2 s of the events' own times; a run that ended sooner (a short
    CleanRL run, whose lines also come in buffered bursts) showed '-' for steps/s."""
    run_id = mosaic.synthetic(600, "rate=1000", "tags=1", "episode_every=0", name="short")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 0
    sps = mosaic.show(run_id)["summary"]["sps"]
    assert sps is not None and 300 < sps < 1500, sps
    assert "steps/s: -" not in mosaic.run("show", run_id, check=True).stdout


def test_status_names_the_longest_stall_of_the_daemon_loop(daemon, mosaic):
    """daemon/stalls.py: each piece of the loop's work is timed; status names the longest, and a
    reset starts a new window (bench_telemetry reads it while it measures latency)."""
    from daemon import protocol as P
    from tests.helpers import connect
    run_id = mosaic.synthetic(300, "rate=1000", "tags=2", name="stalled")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 0
    with connect(daemon) as c:
        first = c.call(P.STATUS, reset_stalls=True)["stalls"]
        assert first["longest_ms"] > 0 and first["timed"] > 10 and first["in"]
        assert any(first["in"].startswith(kind) for kind in ("request ", "ingest", "summary flush", "resource",
                                                              "garbage collection")), first
        after = c.call(P.STATUS)["stalls"]
        assert after["since"] > first["since"] and after["timed"] <= 2 and after["in"] in (None, "request status")


def _update(em: tm.Emitter, end: int) -> None:
    """One update as CleanRL's PPO logs it: the episode ending at the rollout's last step, then the
    update's scalars, all at that step."""
    em.episode(end - 2, 10.0, 10)
    em.episode(end, 20.0, 10)
    em.scalar("losses/value_loss", 0.5, end)
    em.scalar("charts/SPS", 100.0, end)


def test_a_run_killed_between_two_lines_of_a_step_gets_the_missing_ones_when_continued(tmp_path, monkeypatch):
    """The old process died after step 12's value loss and before its SPS (a CI failure: SPS at that
    step was never logged). The daemon counts what step 12 holds (points_at_step); the continued
    emitter, training 5..16 again from the checkpoint at 4, drops exactly those: every point once."""
    from daemon.ingest import points_at_step
    path = tmp_path / "events.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    first = tm.Emitter(fd)
    for end in (4, 8):
        _update(first, end)
    first.episode(10, 10.0, 10)
    first.episode(12, 20.0, 10)
    first.flush()
    os.write(fd, b"a library's print, not an event \xff\n")
    first.scalar("losses/value_loss", 0.5, 12)
    first.flush()                                   # ... and SIGKILL, before charts/SPS at 12
    held = points_at_step(str(path), 12, after=4)
    assert held == {"scalars": {"losses/value_loss": 1}, "episodes": 1}
    for chunk in (7, 64, 100):   # read back in pieces that cut lines anywhere
        assert points_at_step(str(path), 12, after=4, chunk=chunk) == held, chunk

    monkeypatch.setenv(tm.LOGGED_UNTIL_ENV, "12")
    monkeypatch.setenv(tm.LOGGED_AT_UNTIL_ENV, json.dumps(held))
    again = tm.Emitter(fd)
    for end in (8, 12, 16):                         # from the checkpoint at 4
        _update(again, end)
    again.close()
    events = [e for e in split_events(path.read_bytes())[1] if e["type"] in (tm.SCALAR, tm.EPISODE)]
    points = [(e["type"], e.get("tag"), e["step"]) for e in events]
    assert sorted(points) == sorted(set(points)), "a point logged twice"
    for tag in ("losses/value_loss", "charts/SPS"):
        assert [s for kind, t, s in points if t == tag] == [4, 8, 12, 16], tag
    assert [s for kind, t, s in points if kind == tm.EPISODE] == [2, 4, 6, 8, 10, 12, 14, 16]
