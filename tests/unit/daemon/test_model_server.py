"""daemon/model_server.py: who still uses a shared model server, and when it stops."""
from __future__ import annotations

import os

from daemon import model_server as ms
from daemon import proctree
from workers.sdk.llm import served


def record(users, idle_since=None, **more):
    return {"key": "k", "pid": 1, "port": 1, "users": list(users), "idle_since": idle_since, **more}


def test_live_users_keep_only_the_runs_still_running():
    assert ms.live_users(record(["b", "a", "gone"]), live={"a", "b", "other"}) == ["a", "b"]
    assert ms.live_users(record([]), live={"a"}) == []


def test_a_server_is_idle_from_its_last_user_on_and_busy_again_with_a_new_one():
    idle = ms.with_users(record(["a"]), [], now=100.0)
    assert idle["users"] == [] and idle["idle_since"] == 100.0
    # idle already: the first moment counts, a later sweep does not move it
    assert ms.with_users(idle, [], now=130.0)["idle_since"] == 100.0
    busy = ms.with_users(idle, ["b", "b"], now=140.0)
    assert busy["users"] == ["b"] and busy["idle_since"] is None


def test_a_server_stops_only_after_the_grace_with_no_live_run():
    assert not ms.should_stop(record(["a"], idle_since=None), {"a"}, now=1000.0, grace=20)
    assert not ms.should_stop(record([], idle_since=990.0), set(), now=1000.0, grace=20)   # a continue may come
    assert ms.should_stop(record([], idle_since=980.0), set(), now=1000.0, grace=20)
    # a user that ended while no daemon watched does not keep it, once idle that long
    assert not ms.should_stop(record(["gone"], idle_since=None), set(), now=1000.0, grace=20)
    assert ms.should_stop(ms.with_users(record(["gone"]), [], now=970.0), set(), now=1000.0, grace=20)


def test_is_running_needs_the_same_process_not_only_its_pid():
    me = os.getpid()
    assert ms.is_running(record([], pid=me, pid_start=proctree.start_time(me)))
    assert not ms.is_running(record([], pid=me, pid_start=proctree.start_time(me) + 1))   # the pid reused
    assert not ms.is_running(record([], pid=None))


def test_release_and_sweep_on_the_records_of_a_home(tmp_path):
    servers = ms.ModelServers(str(tmp_path), grace_seconds=20)
    me = os.getpid()
    alive = record(["r1", "r2"], pid=me, pid_start=proctree.start_time(me))
    servers._write("alive", alive)
    servers._write("dead", record(["r1"], pid=me, pid_start=proctree.start_time(me) + 1))
    servers.release("r1")
    assert servers.records()["alive"]["users"] == ["r2"]
    servers.sweep(live={"r2"})
    assert set(servers.records()) == {"alive"}          # a dead server is forgotten: the next start restarts it
    assert servers.records()["alive"]["idle_since"] is None
    servers.sweep(live=set())                            # r2 ended while no daemon watched
    assert servers.records()["alive"]["users"] == [] and servers.records()["alive"]["idle_since"] is not None
    assert served.read_record(str(tmp_path), "alive")["port"] == 1
