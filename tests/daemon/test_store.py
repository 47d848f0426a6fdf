"""The SQLite run store."""
from __future__ import annotations

import time

import pytest

from daemon.store import Store, new_ulid, read_run


def _run(run_id: str, name: str) -> dict:
    return {"id": run_id, "name": name, "worker": "w", "algo": "a", "env": "e", "config": {"x": 1},
            "state": "queued", "created_at": time.time()}


def test_ulids_sort_by_time_and_are_unique():
    ids = [new_ulid(1000.0 + i) for i in range(50)]
    assert ids == sorted(ids) and len(set(ids)) == 50 and all(len(i) == 26 for i in ids)


def test_revisions_and_tombstones(tmp_path):
    store = Store(tmp_path / "m.db")
    a = store.create_run(_run(new_ulid(), "a"))
    b = store.create_run(_run(new_ulid(), "b"))
    assert b["rev"] == a["rev"] + 1
    updated = store.update_run(a["id"], state="running", summary={"steps": 5})
    assert updated["rev"] == b["rev"] + 1 and updated["summary"] == {"steps": 5}
    rev = store.delete_run(b["id"])
    rows, tombs = store.changed_since(a["rev"])
    assert [r["id"] for r in rows] == [a["id"]] and tombs == [(b["id"], rev)]
    assert store.rev == rev
    store.close()
    reopened = Store(tmp_path / "m.db")  # durable
    assert reopened.get(a["id"])["state"] == "running" and reopened.rev == rev


def test_another_process_reads_a_runs_columns_without_writing(tmp_path):
    """read_run (the mirror's view of its run): the columns the store wrote, JSON ones parsed;
    None for a run that is not there; a column that does not exist is refused by name."""
    store = Store(tmp_path / "m.db")
    run = store.create_run(_run(new_ulid(), "seen"))
    store.update_run(run["id"], state="running", tags=["baseline"], note="lr too high")
    rev = store.rev
    assert read_run(tmp_path / "m.db", run["id"], ("state", "tags", "note", "name", "config")) == {
        "state": "running", "tags": ["baseline"], "note": "lr too high", "name": "seen", "config": {"x": 1}}
    assert read_run(tmp_path / "m.db", "no-such-run", ("state",)) is None
    with pytest.raises(ValueError, match="no column colour"):
        read_run(tmp_path / "m.db", run["id"], ("state", "colour"))
    assert store.rev == rev


def test_resolve_by_name_and_prefix(tmp_path):
    store = Store(tmp_path / "m.db")
    ids = [new_ulid() for _ in range(3)]
    for i, run_id in enumerate(ids):
        store.create_run(_run(run_id, f"run-{i}"))
    assert [r["id"] for r in store.resolve("run-1")] == [ids[1]]
    assert [r["id"] for r in store.resolve(ids[2].lower())] == [ids[2]]
    assert len(store.resolve(ids[0][:3])) == 3  # ambiguous prefix: all of them
    assert store.resolve("nothing") == []
    assert store.resolve("%") == []


def test_wire_rows_are_what_the_parsed_rows_encode_to(tmp_path):
    """list(wire=True) leaves config and summary as stored text for the answer;
    decoded, the answer equals the parsed rows -- also for a summary holding NaN,
    which the store's JSON text keeps as a token no JSON parser takes."""
    from daemon.protocol import dumps, loads
    s = Store(tmp_path / "m.db")
    a = s.create_run(_run(new_ulid(), "a"))
    s.update_run(a["id"], summary={"last_return": float("nan"), "returns": [1.0, float("inf")], "steps": 3})
    b = s.create_run(_run(new_ulid(), "b"))
    s.update_run(b["id"], summary={"last_return": 2.5, "returns": [2.5], "steps": 7})
    sent = loads(dumps({"runs": s.list(wire=True)}))["runs"]
    by_name = {r["name"]: r for r in sent}
    assert by_name["a"]["summary"] == {"last_return": None, "returns": [1.0, None], "steps": 3}
    assert by_name["b"] == loads(dumps(s.get(b["id"])))
    rows, _ = s.changed_since(0, wire=True)
    assert loads(dumps(rows)) == loads(dumps(s.list()))
    assert s.count_by_state() == {"queued": 2}


def test_ids_made_in_one_millisecond_sort_in_the_order_they_were_made():
    ids = [new_ulid(2000.0) for _ in range(500)]
    assert ids == sorted(ids) and len(set(ids)) == 500


def test_brief_listing_is_the_full_listing_cut_down_and_follows_changes(tmp_path):
    """list_brief (what `mosaic ls` asks for) carries what a listing shows, equal to the
    full rows' values, the mean of the last N returns as fmt.smoothed_return has it
    (also for NaN in a summary), and is never stale: a changed, added or deleted run
    shows in the next listing although brief rows are cached."""
    from daemon.protocol import dumps, loads
    from mosaic_tui import fmt
    s = Store(tmp_path / "m.db")
    a = s.create_run(dict(_run(new_ulid(), "a"), config={"x": 1, "mode": "eval", "steps": 900}))
    s.update_run(a["id"], state="running", summary={"steps": 30, "total_steps": 900, "sps": 12.5,
                                                    "returns": [1.0, float("nan"), 5.0, 7.0, 9.0],
                                                    "best_return": 9.0, "best_step": 30, "lines": 99})
    b = s.create_run(_run(new_ulid(), "b"))
    brief = lambda **kw: loads(dumps({"runs": s.list_brief(**kw)}))["runs"]  # noqa: E731
    full = {r["id"]: r for r in loads(dumps({"runs": s.list(wire=True)}))["runs"]}
    rows = brief(returns=3)
    assert [r["id"] for r in rows] == [a["id"], b["id"]]
    for row in rows:
        whole = full[row["id"]]
        for key in ("name", "worker", "state", "started_at", "rev", "note", "tags"):
            assert row[key] == whole[key], key
        assert row["config"] == {"mode": whole["config"].get("mode"), "steps": whole["config"].get("steps")}
        assert fmt.smoothed_return(row, 3) == fmt.smoothed_return(whole, 3)
        assert fmt.progress_text(row) == fmt.progress_text(whole) and fmt.run_label(row) == fmt.run_label(whole)
        assert "lines" not in row["summary"] and "stderr_tail" not in row
    assert rows[0]["summary"]["mean_return"] == 7.0 and fmt.run_label(rows[0]) == "a [eval]"
    assert brief(returns=5)[0]["summary"]["mean_return"] == 5.5  # another window: not the cached row
    s.update_run(a["id"], note="changed", summary={"steps": 40, "returns": [2.0]})
    s.delete_run(b["id"])
    c = s.create_run(_run(new_ulid(), "c"))
    rows = brief(returns=3)
    assert [r["name"] for r in rows] == ["a", "c"]
    assert rows[0]["note"] == "changed" and rows[0]["summary"]["steps"] == 40
    assert rows[0]["summary"]["mean_return"] == 2.0
    assert [r["id"] for r in brief(states=["queued"], returns=3)] == [c["id"]]
    assert brief(states=[], returns=3) == []
