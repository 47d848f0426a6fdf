"""daemon/ingest.py: splitting a chunk of events.jsonl, the run summary, backlog reads, points at a step."""
from __future__ import annotations

import orjson

from daemon import ingest
from daemon.ingest import RunTail, points_at_step, read_range, read_verbatim_range, split_events
from workers.sdk import telemetry as tm


def line(kind: str, **fields) -> bytes:
    return orjson.dumps({"v": 1, "type": kind, "t": fields.pop("t", 1.0), **fields})


def scalar(tag: str, value, step: int, t: float = 1.0) -> bytes:
    return line(tm.SCALAR, tag=tag, value=value, step=step, t=t)


def episode(step: int, ret, length: int = 10, **extra) -> bytes:
    return line(tm.EPISODE, step=step, length=length, **{"return": ret}, **extra)


# -- split_events -----------------------------------------------------------------------------

def test_well_formed_lines_are_taken_whole_and_a_partial_last_line_is_left():
    data = scalar("a", 1.0, 1) + b"\n" + scalar("a", 2.0, 2) + b"\n" + b'{"v":1,"ty'
    raws, parsed, used, long_line = split_events(data)
    assert raws == [scalar("a", 1.0, 1), scalar("a", 2.0, 2)]
    assert [e["value"] for e in parsed] == [1.0, 2.0]
    assert used == data.rindex(b'{"v":1,"ty')
    assert long_line is False


def test_bad_lines_become_invalid_events_in_place_and_blank_lines_are_skipped():
    data = b"\n".join([scalar("a", 1.0, 1), b"a stray print", b"", b'{"x": 1}', b"[1, 2]",
                       line("no_such_type"), scalar("a", 2.0, 2)]) + b"\n"
    raws, parsed, used, _ = split_events(data)
    assert used == len(data)
    assert [e["type"] for e in parsed] == ["scalar", "invalid", "invalid", "invalid", "invalid", "scalar"]
    assert parsed[1]["raw"] == "a stray print" and parsed[1]["error"].startswith("not JSON")
    assert parsed[2]["error"] == parsed[3]["error"] == parsed[4]["error"] == "not a telemetry event"
    assert raws[0] == scalar("a", 1.0, 1) and orjson.loads(raws[1])["type"] == "invalid"


def test_a_type_that_is_no_string_takes_the_careful_path():
    data = b'{"v":1,"type":["scalar"],"t":1}\n' + scalar("a", 1.0, 1) + b"\n"
    assert ingest._split_well_formed(data) is None
    _, parsed, _, _ = split_events(data)
    assert [e["type"] for e in parsed] == ["invalid", "scalar"]


def test_the_fast_path_and_the_careful_path_agree_on_good_lines():
    data = b"\n".join(scalar("t", float(i), i) for i in range(50)) + b"\n"
    fast = ingest._split_well_formed(data)
    careful = ingest._split_line_by_line(data)
    assert fast is not None
    assert fast[0] == careful[0] and fast[1] == careful[1] and fast[2] == careful[2] == len(data)


def test_an_endless_line_is_consumed_as_one_invalid_event_and_flagged(monkeypatch):
    monkeypatch.setattr(ingest, "MAX_EVENT_LINE", 64)
    data = scalar("a", 1.0, 1) + b"\n" + b"x" * 200        # no newline, over the limit
    raws, parsed, used, long_line = split_events(data)
    assert used == len(data) and long_line is True
    assert [e["type"] for e in parsed] == ["scalar", "invalid"]
    assert "longer than 64" in parsed[1]["error"]


def test_a_complete_line_over_the_limit_is_invalid_and_the_next_is_kept(monkeypatch):
    monkeypatch.setattr(ingest, "MAX_EVENT_LINE", 64)
    data = b'{"v":1,"type":"scalar","t":1,"tag":"' + b"y" * 100 + b'","value":1,"step":1}\n' \
        + scalar("a", 1.0, 2) + b"\n"
    _, parsed, used, long_line = split_events(data)
    assert used == len(data) and not long_line
    assert [e["type"] for e in parsed] == ["invalid", "scalar"]


# -- the summary ------------------------------------------------------------------------------

def absorb(tail: RunTail, *lines: bytes):
    return tail._absorb([orjson.loads(raw) for raw in lines])


def test_the_summary_counts_steps_episodes_best_return_and_tags():
    tail = RunTail("r", "/nonexistent")
    absorb(tail, line(tm.RUN_STARTED, worker="w", algo="a", env="e", total_steps=100),
           scalar("loss", 0.5, 10, t=1.0), episode(20, 3.0, t=2.0), episode(30, 7.5, t=3.0),
           episode(40, "nan", t=4.0), episode(50, 5.0, t=5.0))
    s = tail.summary()
    assert s["started"] and s["total_steps"] == 100
    assert s["steps"] == 50 and s["episodes"] == 4 and s["lines"] == 6
    assert s["best_return"] == 7.5 and s["best_step"] == 30       # "nan" is never the best
    assert s["returns"] == [3.0, 7.5, "nan", 5.0] and s["last_return"] == 5.0
    assert s["tags"] == ["episode/length", "episode/return", "loss"]
    assert s["last_event_t"] == 5.0


def test_system_samples_go_to_the_summary_and_are_no_progress():
    tail = RunTail("r", "/nonexistent")
    absorb(tail, scalar("x", 1.0, 7), scalar("system/cpu_percent", 55.0, 10_000))
    assert tail.steps == 7
    assert tail.system == {"cpu_percent": 55.0}


def test_a_plain_scalar_chunk_returns_its_steps_and_tags_and_counts_as_the_loop_would():
    events = [orjson.loads(scalar("a" if i % 2 else "b", 1.0, i, t=float(i))) for i in range(10)]
    fast, slow = RunTail("r", "/x"), RunTail("r", "/x")
    plain = fast._absorb(events)
    assert plain == (list(range(10)), {"a", "b"})
    for ev in events:                       # one at a time: a mixed chunk's loop
        slow._absorb([ev, orjson.loads(line(tm.HEARTBEAT, step=ev["step"], t=ev["t"]))])
    assert fast.steps == slow.steps == 9
    assert fast.tags == slow.tags and fast.last_event_t == slow.last_event_t == 9.0


def test_a_restart_clears_how_the_last_process_ended():
    tail = RunTail("r", "/x")
    absorb(tail, line(tm.RUN_STOPPED, step=5, checkpoint="c"), line(tm.RUN_FAILED, reason="boom", step=5))
    assert tail.stopped == {"step": 5, "checkpoint": "c"} and tail.failed_reason == "boom"
    absorb(tail, line(tm.RESTARTED, step=5))
    assert tail.stopped is None and tail.failed_reason is None and not tail.completed


def test_llm_steps_are_counted_and_partial_ones_are_not():
    tail = RunTail("r", "/x")
    absorb(tail, line(tm.LLM_STEP, step=1, agent="a", reply="r", partial=True),
           line(tm.LLM_STEP, step=1, agent="a", reply="r", valid=False, tokens_in=3, tokens_out=4, cost=0.5),
           line(tm.LLM_STEP, step=2, agent="a", reply="r", error="timeout", tokens_in=1, cost=0.25))
    assert tail.llm == {"calls": 2, "invalid": 1, "errors": 1, "tokens_in": 4, "tokens_out": 4, "cost": 0.75}


def test_a_warning_is_kept_once():
    tail = RunTail("r", "/x")
    absorb(tail, line(tm.WARNING, message="mirror down"), line(tm.WARNING, message="mirror down"))
    assert tail.warnings == ["mirror down"]


def test_the_rate_is_taken_over_the_events_own_times():
    tail = RunTail("r", "/x")
    absorb(tail, scalar("a", 1.0, 100, t=10.0))
    absorb(tail, scalar("a", 1.0, 200, t=11.0))
    assert tail.sps is None                      # under the 2 s window
    absorb(tail, scalar("a", 1.0, 500, t=14.0))
    assert tail.sps == 100.0                     # (500 - 100) / (14 - 10)


def test_a_summary_from_before_best_return_takes_the_best_kept_return():
    tail = RunTail("r", "/x", summary={"returns": [1.0, "nan", 4.0, 2.0]})
    assert tail.best_return == 4.0 and tail.best_step is None


# -- reading the file -------------------------------------------------------------------------

def test_read_new_takes_complete_lines_and_a_partial_last_line_only_at_the_end(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(scalar("a", 1.0, 1) + b"\n" + b'{"v":1,"type":"sca')
    tail = RunTail("r", str(path))
    start, end, raws = tail.read_new()
    assert (start, raws) == (0, [scalar("a", 1.0, 1)]) and end == len(scalar("a", 1.0, 1)) + 1
    assert tail.read_new() is None
    start, end, raws = tail.read_new(final=True)
    assert end == path.stat().st_size and orjson.loads(raws[0])["error"] == "partial line at exit"
    assert tail.irregular_from == start
    tail.close()


def test_a_backlog_read_up_to_an_ingest_boundary_takes_the_partial_line_as_invalid(tmp_path):
    path = tmp_path / "events.jsonl"
    good = scalar("a", 1.0, 1) + b"\n"
    path.write_bytes(good + b'{"v":1,"ty')
    end = path.stat().st_size
    nxt, raws, parsed = read_range(str(path), 0, end, 1 << 20)
    assert nxt == end and [e["type"] for e in parsed] == ["scalar", "invalid"]
    # a window that stops before the end leaves the line for the next page
    nxt, raws, parsed = read_range(str(path), 0, end + 100, 1 << 20)
    assert nxt == len(good) and len(parsed) == 1


def test_a_verbatim_read_splits_lines_without_parsing(tmp_path):
    path = tmp_path / "events.jsonl"
    lines = [scalar("a", float(i), i) for i in range(3)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    nxt, raws = read_verbatim_range(str(path), 0, path.stat().st_size, 1 << 20)
    assert nxt == path.stat().st_size and raws == lines
    assert read_verbatim_range(str(path), 0, path.stat().st_size, 5) == (0, [])   # no whole line fits


def test_missing_files_read_as_nothing(tmp_path):
    missing = str(tmp_path / "none")
    assert read_range(missing, 0, 10, 100) == (0, [], [])
    assert read_verbatim_range(missing, 0, 10, 100) == (0, [])
    assert points_at_step(missing, 5, 0) == {"scalars": {}, "episodes": 0}


# -- points_at_step ---------------------------------------------------------------------------

def test_points_at_step_counts_each_tag_and_the_episodes_at_that_step_only(tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [scalar("a", 1.0, 10), episode(10, 1.0),
            scalar("a", 1.0, 20), scalar("a", 2.0, 20), scalar("b", 1.0, 20), episode(20, 2.0),
            line(tm.HEARTBEAT, step=20), scalar("a", 1.0, 30)]
    path.write_bytes(b"\n".join(rows) + b"\n" + b'{"v":1,"type":"scal')     # a partial last line
    assert points_at_step(str(path), 20, after=10) == {"scalars": {"a": 2, "b": 1}, "episodes": 1}


def test_points_at_step_stops_at_the_checkpoint_step(tmp_path):
    path = tmp_path / "events.jsonl"
    # an earlier process logged step 20 too, before a point at or below the checkpoint (15)
    rows = [scalar("a", 1.0, 20), scalar("a", 1.0, 12), scalar("a", 1.0, 20), episode(20, 1.0)]
    path.write_bytes(b"\n".join(rows) + b"\n")
    assert points_at_step(str(path), 20, after=15) == {"scalars": {"a": 1}, "episodes": 1}


def test_points_at_step_reads_back_across_chunks_without_cutting_a_line(tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [scalar("a", 1.0, 1)] + [scalar(f"tag{i}", float(i), 50) for i in range(40)]
    path.write_bytes(b"\n".join(rows) + b"\n")
    got = points_at_step(str(path), 50, after=1, chunk=37)     # chunks shorter than a line
    assert got == {"scalars": {f"tag{i}": 1 for i in range(40)}, "episodes": 0}


def test_points_at_step_reads_no_further_back_than_max_bytes(tmp_path):
    path = tmp_path / "events.jsonl"
    rows = [scalar("a", 1.0, 50) for _ in range(10)]
    path.write_bytes(b"\n".join(rows) + b"\n")
    one = len(rows[0]) + 1
    got = points_at_step(str(path), 50, after=1, max_bytes=3 * one, chunk=one)
    assert got["scalars"]["a"] <= 3          # an undercount past it, never an overcount
