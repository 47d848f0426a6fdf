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
