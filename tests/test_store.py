"""The SQLite run store."""
from __future__ import annotations

import time

from daemon.store import Store, new_ulid


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
