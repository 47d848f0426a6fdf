"""Cursor resume: a client that reconnects with its last cursor gets exactly what it missed."""
from __future__ import annotations

import json
import time

from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state, worker_scalar


def _scalar_steps(events):
    return [e["step"] for e in events if worker_scalar(e)]


BACKLOG = 256 * 1024    # bytes written past a dropped client's cursor before it reconnects


def _final_size(daemon, run_id: str) -> float:
    """The events file's size once the run has ended, else infinity."""
    with connect(daemon) as c:
        ended = c.call(P.GET, run=run_id)["state"] in P.FINAL_STATES
    return (daemon.run_dir(run_id) / "events.jsonl").stat().st_size if ended else float("inf")


def test_resume_from_cursor_no_gap_no_duplicate(daemon, mosaic):
    total = 20000
    run_id = mosaic.synthetic(total, "rate=8000", "tags=1", "episode_every=0")
    received: list[int] = []
    backlogs: list[int] = []
    cursor = 0
    events_file = daemon.run_dir(run_id) / "events.jsonl"
    # three connections, each dropped mid-stream; the last one reads to the end. Each reconnects
    # only once the file has grown well past its cursor: the daemon serves that backlog from the
    # file (its catch-up path), not the live chunks a client at the read position gets.
    for round_ in range(4):
        if round_:
            wait_for(lambda: events_file.stat().st_size >= min(cursor + BACKLOG, _final_size(daemon, run_id)),
                     60, 0.02, "the file to grow past the cursor")
            backlogs.append(events_file.stat().st_size - cursor)
        with connect(daemon, f"reader-{round_}") as c:
            sub = c.call(P.SUBSCRIBE, events=[run_id], cursors={run_id: cursor})
            assert sub["cursors"][run_id] == cursor
            deadline = time.monotonic() + (0.4 if round_ < 3 else 60)
            for method, params in c.notifications(timeout=1):
                if method == P.NOTIFY_EVENTS:
                    assert params["from"] == cursor, "a gap or an overlap between notifications"
                    received.extend(_scalar_steps(params["events"]))
                    cursor = params["to"]
                if time.monotonic() > deadline or len(received) >= total:
                    break
        if len(received) >= total:
            break
    wait_state(daemon, run_id, P.SUCCEEDED)
    assert received == list(range(1, total + 1))
    assert cursor <= events_file.stat().st_size
    assert backlogs and max(backlogs) >= BACKLOG, backlogs      # a real backlog was caught up


def test_subscribe_all_runs_history_then_live(daemon, mosaic):
    done = mosaic.synthetic(300, "rate=0")
    mosaic.run("wait", done, check=True)
    with connect(daemon) as c:
        c.call(P.SUBSCRIBE, runs=True, rev=0, events="*")
        live = c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 300,
                                        "params": {"rate": 1000}})
        steps = {done: [], live["id"]: []}
        records = []
        synced = False
        deadline = time.monotonic() + 60
        for method, params in c.notifications(timeout=2):
            if method == P.NOTIFY_EVENTS:
                steps[params["run"]].extend(_scalar_steps(params["events"]))
            elif method == P.NOTIFY_RUN:
                records.append(params)
            elif method == P.NOTIFY_SYNCED:
                synced = True
            if len(steps[done]) == 300 and len(steps[live["id"]]) == 300 or time.monotonic() > deadline:
                break
    assert steps[done] == list(range(1, 301))
    assert steps[live["id"]] == list(range(1, 301))
    assert synced
    revs = [r["rev"] for r in records]
    assert revs == sorted(revs)
    assert {r["run"]["id"] for r in records if "run" in r} == {done, live["id"]}


def test_run_revisions_resume_includes_deletions(daemon, mosaic):
    a = mosaic.synthetic(10, "rate=0")
    mosaic.run("wait", a, check=True)
    with connect(daemon) as c:
        rev = c.call(P.LIST)["rev"]
    mosaic.run("delete", a, "-y", check=True)
    b = mosaic.synthetic(10, "rate=0")
    mosaic.run("wait", b, check=True)
    with connect(daemon) as c:
        c.call(P.SUBSCRIBE, runs=True, rev=rev)
        notes = []
        for method, params in c.notifications(timeout=0.5):
            notes.append(params)
    assert notes[0] == {"rev": rev + 1, "deleted": a}
    assert [n["run"]["id"] for n in notes[1:]] and all(n["run"]["id"] == b for n in notes[1:])
    assert notes[-1]["run"]["state"] == P.SUCCEEDED


def test_slow_client_is_served_from_disk_when_it_reads_again(daemon, mosaic):
    """A subscriber that stops reading is not fed from memory; it catches up later."""
    total = 60000
    run_id = mosaic.synthetic(total, "rate=0", "tags=1", "episode_every=0", "payload_bytes=200")
    with connect(daemon) as c:
        c.call(P.SUBSCRIBE, events=[run_id])
        wait_state(daemon, run_id, P.SUCCEEDED)  # meanwhile this client read nothing
        with connect(daemon) as other:
            assert other.call(P.STATUS)["rss_bytes"] < 200 * 1024 * 1024
        got, cursor = [], 0
        for method, params in c.notifications(timeout=3):
            if method == P.NOTIFY_EVENTS:
                assert params["from"] == cursor
                cursor = params["to"]
                got.extend(_scalar_steps(params["events"]))
            if len(got) >= total:
                break
    assert got == list(range(1, total + 1))
    lines = (daemon.run_dir(run_id) / "events.jsonl").read_bytes().count(b"\n")
    assert lines == total + 2  # run_started + scalars + run_completed: all in the file once
    assert json.loads((daemon.run_dir(run_id) / "events.jsonl").read_bytes().splitlines()[0])["type"] == "run_started"


def test_unsubscribe_one_run_keeps_the_others(daemon, mosaic):
    a = mosaic.synthetic(100000, "rate=300", "tags=1", "episode_every=0")
    b = mosaic.synthetic(100000, "rate=300", "tags=1", "episode_every=0")
    wait_state(daemon, a, P.RUNNING)
    wait_state(daemon, b, P.RUNNING)
    with connect(daemon) as c:
        c.call(P.SUBSCRIBE, events=[a, b])
        before: set[str] = set()
        deadline = time.monotonic() + 30
        for method, params in c.notifications(timeout=1.0):    # both runs' events arrive
            if method == P.NOTIFY_EVENTS:
                before.add(params["run"])
            if before == {a, b} or time.monotonic() > deadline:
                break
        assert before == {a, b}
        c.call(P.UNSUBSCRIBE, events=[a])
        c.pending.clear()  # replies come after the notifications sent before them
        seen = set()
        deadline = time.monotonic() + 1.5
        for method, params in c.notifications(timeout=1.0):
            if method == P.NOTIFY_EVENTS:
                seen.add(params["run"])
            if time.monotonic() > deadline:
                break
        assert seen == {b}
    for run_id in (a, b):
        mosaic.run("cancel", run_id, check=True)
