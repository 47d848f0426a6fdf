"""Supervision with real processes: how runs end, cancel, pause, queueing."""
from __future__ import annotations

import json
import os
import time

import pytest

from daemon import proctree
from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state


def _pids_of(home, run_id: str) -> tuple[int, list[int]]:
    """The supervisor's pid and its live descendants."""
    sup = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())
    return sup["supervisor_pid"], proctree.descendants(sup["supervisor_pid"])


def test_success_records_exit_code_zero(daemon, mosaic):
    run_id = mosaic.synthetic(500, "rate=0")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == P.SUCCEEDED and run["exit_code"] == 0 and run["reason"] is None
    assert run["summary"]["steps"] == 500 and run["summary"]["completed"]
    assert run["started_at"] <= run["ended_at"]


def test_failure_names_the_exit_code_and_keeps_stderr(daemon, mosaic):
    run_id = mosaic.synthetic(50, "exit_code=3")
    proc = mosaic.run("wait", run_id, "--timeout", "60")
    assert proc.returncode == 3  # mosaic wait: not succeeded
    run = mosaic.show(run_id)
    assert run["state"] == P.FAILED and run["exit_code"] == 3
    assert run["reason"].startswith("worker exited with code 3: synthetic failure")


def test_worker_raising_leaves_its_traceback(daemon, mosaic):
    run_id = mosaic.synthetic(10, "raise_message=the reward went sideways")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 3
    run = mosaic.show(run_id)
    assert run["state"] == P.FAILED and run["exit_code"] == 1
    assert run["reason"] == "worker exited with code 1"
    assert "RuntimeError: the reward went sideways" in run["stderr_tail"]
    assert "Traceback" in mosaic.run("logs", run_id, "--stream", "stderr", check=True).stdout


def test_death_by_signal_is_named(daemon, mosaic):
    for sig in ("SIGSEGV", "SIGKILL"):
        run_id = mosaic.synthetic(20, f"die_by_signal={sig}")
        mosaic.run("wait", run_id, "--timeout", "60")
        run = mosaic.show(run_id)
        assert run["state"] == P.FAILED
        assert run["exit_signal"] == sig
        assert run["reason"] == f"worker killed by {sig}"


def test_cancel_kills_the_whole_tree_even_if_it_ignores_sigterm(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    with connect(home) as c:
        c.call(P.STATUS)
    # a short grace keeps the test fast; the worker ignores SIGTERM, so only SIGKILL ends it
    (home.root / "settings.json").write_text(json.dumps({"grace_seconds": 1.0}))
    mosaic.run("daemon", "stop", check=True)
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.synthetic(10_000_000, "rate=1000", "children=3", "ignore_sigterm=true")
    wait_state(home, run_id, P.RUNNING)
    sup, tree = wait_for(lambda: (lambda p: p if len(p[1]) >= 4 else None)(_pids_of(home, run_id)),
                         what="worker and its 3 children")
    proc = mosaic.run("cancel", run_id)
    assert proc.returncode == 0, proc.stderr
    run = mosaic.show(run_id)
    assert run["state"] == P.CANCELLED
    assert run["exit_signal"] == "SIGKILL"  # SIGTERM was ignored, the escalation killed it
    for pid in [sup, *tree]:
        assert not proctree.is_alive(pid), f"process {pid} survived the cancel"
        assert not os.path.exists(f"/proc/{pid}") or proctree.state(pid) in (None, "Z")
    mosaic.run("daemon", "stop")


def test_leftover_children_are_killed_when_the_worker_ends(daemon, mosaic):
    run_id = mosaic.synthetic(10, "children=2", "die_by_signal=SIGKILL")
    mosaic.run("wait", run_id, "--timeout", "60")
    events = [json.loads(line) for line in (daemon.run_dir(run_id) / "events.jsonl").read_text().splitlines()]
    children = events[0]["children"]
    assert len(children) == 2
    for pid in children:
        wait_for(lambda: not proctree.is_alive(pid), 10, what=f"child {pid} to die")


def test_pause_stops_every_process_and_resume_continues(daemon, mosaic):
    run_id = mosaic.synthetic(10_000_000, "rate=500", "children=2")
    wait_state(daemon, run_id, P.RUNNING)
    sup, tree = wait_for(lambda: (lambda p: p if len(p[1]) >= 3 else None)(_pids_of(daemon, run_id)))
    assert mosaic.run("pause", run_id).returncode == 0
    wait_for(lambda: all(proctree.state(p) == "T" for p in tree), 10, what="tree stopped")
    assert proctree.state(sup) != "T"  # the supervisor stays free to act on a cancel
    size = (daemon.run_dir(run_id) / "events.jsonl").stat().st_size
    time.sleep(0.6)
    assert (daemon.run_dir(run_id) / "events.jsonl").stat().st_size == size  # nothing written while paused
    assert mosaic.show(run_id)["state"] == P.PAUSED
    assert mosaic.run("resume", run_id).returncode == 0
    wait_for(lambda: all(proctree.state(p) != "T" for p in tree), 10, what="tree continued")
    wait_for(lambda: (daemon.run_dir(run_id) / "events.jsonl").stat().st_size > size, 10)
    # cancel a paused run: it must still die (SIGCONT before SIGTERM)
    mosaic.run("pause", run_id, check=True)
    mosaic.run("cancel", run_id, check=True)
    assert mosaic.show(run_id)["state"] == P.CANCELLED
    for pid in tree:
        assert not proctree.is_alive(pid)


def test_concurrency_limit_queues_runs(home, mosaic):
    mosaic.run("daemon", "start", "--max-runs", "1", check=True)
    first = mosaic.synthetic(1500, "rate=1000")
    second = mosaic.synthetic(100, "rate=0")
    assert mosaic.show(second)["state"] == P.QUEUED
    third = mosaic.synthetic(100, "rate=0")
    with connect(home) as c:
        c.call(P.CANCEL, run=third)
    assert mosaic.show(third)["state"] == P.CANCELLED  # a queued run is cancelled at once
    assert mosaic.run("wait", second, "--timeout", "60").returncode == 0
    a, b = mosaic.show(first), mosaic.show(second)
    assert b["started_at"] >= a["ended_at"]  # it waited for the slot
    mosaic.run("daemon", "stop")


def test_delete_refuses_active_runs_and_removes_files(daemon, mosaic):
    run_id = mosaic.synthetic(10_000_000, "rate=100")
    wait_state(daemon, run_id, P.RUNNING)
    proc = mosaic.run("delete", run_id, "-y")
    assert proc.returncode == 1 and "cancel it first" in proc.stderr
    mosaic.run("cancel", run_id, check=True)
    mosaic.run("delete", run_id, "-y", check=True)
    assert not daemon.run_dir(run_id).exists()
    assert "no runs" in mosaic.run("ls", check=True).stdout


def test_two_clients_cancelling_once(daemon, mosaic):
    run_id = mosaic.synthetic(10_000_000, "rate=100")
    wait_state(daemon, run_id, P.RUNNING)
    with connect(daemon) as a, connect(daemon) as b:
        ra = a.call(P.CANCEL, run=run_id)
        rb = b.call(P.CANCEL, run=run_id)
    assert ra["cancel_requested"] and rb["cancel_requested"]
    assert rb["rev"] == ra["rev"]  # the second cancel changed nothing
    assert wait_state(daemon, run_id, P.CANCELLED)["state"] == P.CANCELLED


def test_stop_tree_catches_processes_forked_while_it_stops_the_tree(tmp_path):
    """A tree that forks as fast as it can while being paused: a single list-then-stop
    pass lets children born in between run on; stop_tree repeats until a pass finds
    nothing new, so afterwards every process of the tree is stopped and none is born."""
    import signal
    import subprocess
    import sys
    forker = tmp_path / "forker.py"
    forker.write_text(
        "import os, time\n"
        "for _ in range(400):\n"
        "    if os.fork() == 0:\n"
        "        if os.fork() == 0:\n"          # grandchildren too
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "time.sleep(60)\n")
    root = subprocess.Popen(["sh", "-c", f"{sys.executable} {forker}; sleep 60"], start_new_session=True)
    try:
        wait_for(lambda: len(proctree.descendants(root.pid)) > 50, 30, what="a busy tree")
        stopped = proctree.stop_tree(root.pid)
        tree = proctree.descendants(root.pid)
        assert set(tree) <= set(stopped), "processes stop_tree never signalled"

        def running() -> dict:
            states = {pid: proctree.state(pid) for pid in tree}
            return {pid: s for pid, s in states.items() if s not in ("T", "t", "Z", None)}
        # each of the ~800 sleeping processes must be scheduled once to act on its SIGSTOP:
        # on a loaded machine that takes more than a moment (a process that escaped would
        # not stop at all, and the tree would grow: checked below)
        deadline = time.monotonic() + 15
        while running() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = running()
        assert not left, f"{len(left)} of {len(tree)} processes escaped the pause"
        time.sleep(0.3)
        assert proctree.descendants(root.pid) == tree          # nothing born while stopped
    finally:
        proctree.signal_tree(root.pid, signal.SIGKILL, include_root=True)
        root.wait()


@pytest.mark.parametrize("config", [
    {"worker": "balrog", "algo": "random", "env": "BabyAI-GoToRedBallGrey-v0",
     "params": {"episodes": 100000, "max_steps_per_episode": 64}},
    {"worker": "mosaic_llm", "algo": "play", "env": "tictactoe_v3",
     "params": {"episodes": 100000, "seats": ["random", "random"]}},
], ids=["balrog", "mosaic_llm"])
def test_an_llm_worker_cancelled_reports_it_with_its_step_and_dies_of_the_signal(tmp_path, config):
    """SIGTERM as the daemon's cancel sends it, while the worker plays (random agents: no model).
    The run's last event says so, with the step reached, and the exit status is the signal's."""
    import signal
    import subprocess
    import sys

    from daemon.discovery import discover

    def read_events(run_dir) -> list[dict]:
        return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]

    worker = discover()[0][config["worker"]]
    validated = worker.validate({**config, "seed": 1, "run_id": "cancel-me"})
    (tmp_path / "config.json").write_text(json.dumps(validated))
    with open(tmp_path / "events.jsonl", "ab") as out, open(tmp_path / "stderr.log", "ab") as err:
        proc = subprocess.Popen(worker.command(validated), cwd=tmp_path, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        deadline = time.monotonic() + 120
        while sum(e["type"] == "episode" for e in read_events(tmp_path)) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "stderr.log").read_text()[-2000:]
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    last = read_events(tmp_path)[-1]
    assert last["type"] == "run_failed" and last["reason"] == "cancelled (SIGTERM)" and last["step"] > 0
