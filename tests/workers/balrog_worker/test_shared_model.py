"""The local model served once for several runs (``served: shared``; daemon/model_server.py):
real BALROG runs on the local Gemma GGUF through the daemon, one llama.cpp server between them."""
from __future__ import annotations

import json
import os
import signal

import pytest

from daemon import model_server, proctree
from daemon import protocol as P
from tests.helpers import start_daemon, stop_daemon, wait_for, wait_state
from tests.workers.balrog_worker.test_balrog_worker import BABYAI, events_of, llm_steps, submit

pytestmark = pytest.mark.slow

SHARED = ("served=shared", "n_threads=1", "max_text_history=2")


def server_records(home) -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in (home.root / "model_servers").glob("*.json")}


def server_processes() -> set[int]:
    """Every shared server process of this machine (the command line names the module)."""
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if b"workers.sdk.llm.served" in f.read():
                        pids.add(int(entry))
            except OSError:
                pass
    return pids


def played(home, run_id: str) -> tuple:
    """What must not depend on where the model runs: each episode's outcome and its actions."""
    results = json.loads((home.run_dir(run_id) / "results.json").read_text())
    actions = [(s["episode"], s["episode_step"], s["action"]) for s in llm_steps(events_of(home, run_id))]
    return ([(e["episode"], e["steps"], e["episode_return"], e["success"]) for e in results["episodes"]],
            sorted(actions))


def test_two_runs_share_one_server_that_outlives_a_daemon_restart_and_stops_after_them(daemon, mosaic):
    home = mosaic.home
    before = server_processes()
    sets = (*SHARED, "max_steps_per_episode=3")
    first = submit(mosaic, "naive", BABYAI, *sets)
    second = submit(mosaic, "naive", BABYAI, *sets)
    apart = submit(mosaic, "naive", BABYAI, *sets, "served=worker")   # its own copy: the reference
    wait_for(lambda: any(set(r["users"]) == {first, second} for r in server_records(home).values()),
             timeout=120, what="both runs on one server")
    (key, record), = server_records(home).items()
    assert server_processes() - before == {record["pid"]}      # one server for the two
    assert record["port"] and key.startswith("default-8192-") and record["n_threads"] == 1

    stop_daemon(home)
    assert proctree.is_alive(record["pid"], record["pid_start"])   # runs survive the daemon, so it does
    start_daemon(home)
    adopted = server_records(home)[key]      # the new daemon goes on with it, not with a new one
    assert adopted["pid"] == record["pid"] and set(adopted["users"]) <= {first, second}
    for run_id in (first, second, apart):
        run = wait_state(home, run_id, P.FINAL_STATES, timeout=600)
        assert run["state"] == P.SUCCEEDED, (run.get("reason"), run.get("stderr_tail"))
    assert home.daemon_log.read_text().count(f"shared model server {key} started") == 1
    steps = llm_steps(events_of(home, first))
    assert len(steps) >= 2 and all(s["error"] is None and s["valid"] for s in steps)
    assert played(home, first) == played(home, second) == played(home, apart)

    # no run uses it: gone after the grace period, and so is its record
    wait_for(lambda: not proctree.is_alive(record["pid"], record["pid_start"]),
             timeout=model_server.GRACE_SECONDS + 30, what="the idle server to stop")
    assert server_records(home) == {}


def test_a_killed_server_is_one_line_and_the_next_start_brings_it_back(daemon, mosaic):
    home = mosaic.home
    doomed = submit(mosaic, "naive", BABYAI, *SHARED, "max_steps_per_episode=200", "on_error=fail", "retries=1",
                    "backoff_s=0.1")
    wait_for(lambda: any(llm_steps(events_of(home, doomed))) if (home.run_dir(doomed) / "events.jsonl").exists()
             else False, timeout=180, what="the run's first call")
    (record,) = server_records(home).values()
    os.killpg(record["pid"], signal.SIGKILL)
    run = wait_state(home, doomed, P.FINAL_STATES, timeout=120)
    assert run["state"] == P.FAILED
    assert f"the shared model server {record['key']} (pid {record['pid']}, port {record['port']}) is gone" \
        in run["reason"] and "\n" not in run["reason"], run["reason"]

    again = submit(mosaic, "naive", BABYAI, *SHARED, "max_steps_per_episode=2")
    run = wait_state(home, again, P.FINAL_STATES, timeout=300)
    assert run["state"] == P.SUCCEEDED, (run.get("reason"), run.get("stderr_tail"))
    (restarted,) = server_records(home).values()
    assert restarted["pid"] != record["pid"] and restarted["key"] == record["key"]
