"""Stop a run with a checkpoint and continue it as the same run: the daemon's side, through the real
CLI, daemon, supervisor and the synthetic worker (which checkpoints the step it stopped at).

The real workers' stops and continues (Jumanji, Tianshou) are in their own tests; these check what
every worker gets from the daemon: the state, the seam, the events and the history across it.
"""
from __future__ import annotations

import json

from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state, worker_scalar


def _events(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _stop_when_under_way(daemon, mosaic, run_id: str, steps: int = 2000) -> dict:
    wait_for(lambda: mosaic.show(run_id)["summary"]["steps"] >= steps, 60, what="the run to be under way")
    stopped = mosaic.run("stop", run_id, "--timeout", "60")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    return mosaic.show(run_id)


def test_a_stopped_run_continues_as_the_same_run_to_its_last_step(daemon, mosaic):
    run_id = mosaic.synthetic(30000, "rate=5000", "episode_every=500", name="long-one")
    run = _stop_when_under_way(daemon, mosaic, run_id)
    assert run["state"] == P.STOPPED and run["exit_code"] == 75
    stop_step = run["summary"]["stopped"]["step"]
    assert 2000 <= stop_step < 30000 and run["reason"].startswith(f"stopped at step {stop_step}")
    checkpoint = run["summary"]["stopped"]["checkpoint"]
    assert json.loads(open(checkpoint).read()) == {"step": stop_step}
    assert mosaic.run("ls").stdout.count("stopped") >= 1

    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == P.SUCCEEDED and run["id"] == run_id and run["name"] == "long-one"
    assert run["restarts"] == 1 and run["config"]["continue_from"] == checkpoint
    assert run["summary"]["steps"] == 30000 and run["summary"]["completed"]

    events = _events(daemon, run_id)
    kinds = [e["type"] for e in events]
    assert kinds.count("run_started") == 2 and kinds.count("restarted") == 1 and kinds[-1] == "run_completed"
    seam = kinds.index("restarted")
    assert kinds[seam - 1] == "run_stopped" and events[seam]["step"] == stop_step
    # every step once and in order across the seam
    steps = [e["step"] for e in events if worker_scalar(e)]
    assert steps == list(range(1, 30001))
    # the first process's end is kept beside the second's
    assert json.loads((daemon.run_dir(run_id) / "exit-0.json").read_text())["returncode"] == 75
    assert json.loads((daemon.run_dir(run_id) / "exit.json").read_text())["returncode"] == 0
    # what a client reads of it: the history has every step once, in order
    with connect(daemon) as client:
        history = client.call(P.HISTORY, run=run_id, tags=["synthetic/value_0"])
    tag = history["tags"]["synthetic/value_0"]
    assert tag["n"] == 15000 and tag["step"] == sorted(set(tag["step"]))   # every other step: 2 tags


def test_a_stop_that_outlasts_its_grace_fails_the_run_saying_so(home, mosaic):
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"stop_grace_seconds": 1}))
    mosaic.run("daemon", "start", check=True)
    try:
        run_id = mosaic.synthetic(10**7, "rate=2000", "stop_save_seconds=30")
        wait_for(lambda: mosaic.show(run_id)["summary"]["steps"] >= 100, 60, what="the run to be under way")
        mosaic.run("stop", run_id, "--no-wait", check=True)
        run = wait_state(home, run_id, [P.FAILED, P.STOPPED, P.CANCELLED], timeout=60)
        assert run["state"] == P.FAILED, run
        assert run["reason"].startswith("did not stop within 1 s of the stop request"), run["reason"]
        assert not (home.run_dir(run_id) / "checkpoints" / "stop.json").exists()   # nothing half-written
        refused = mosaic.run("continue", run_id)
        assert refused.returncode != 0 and "no checkpoint to continue from" in refused.stderr
    finally:
        mosaic.run("daemon", "stop")


def test_stop_and_continue_refuse_what_they_cannot_do_in_one_line(daemon, mosaic, tmp_path):
    done = mosaic.synthetic(50, "rate=0")
    wait_state(daemon, done, [P.SUCCEEDED])
    refused = mosaic.run("stop", done)
    assert refused.returncode != 0 and refused.stderr.strip().endswith(f"is {P.SUCCEEDED}, not active")
    refused = mosaic.run("continue", done)
    assert refused.returncode != 0 and "only a stopped run" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    # a worker that cannot stop yet says so and names cancel
    config = tmp_path / "ex.json"
    config.write_text(json.dumps({"worker": "balrog", "algo": "random", "env": "BabyAI-GoToRedBallGrey-v0",
                                  "params": {"episodes": 100000}}))
    run_id = mosaic.submit(str(config))
    wait_state(daemon, run_id, [P.RUNNING], timeout=120)
    refused = mosaic.run("stop", run_id)
    assert refused.returncode != 0 and "cannot stop a run and continue it yet" in refused.stderr
    assert f"mosaic cancel {mosaic.show(run_id)['name']}" in refused.stderr
    mosaic.run("cancel", run_id, check=True)


def test_a_stop_sent_while_the_run_starts_waits_for_its_handler(daemon, mosaic):
    """Asked before the worker wrote a line (its stop handler not yet in place): the signal goes
    once it runs, and does not kill it."""
    run_id = mosaic.synthetic(10**6, "rate=2000", "startup_seconds=3")
    assert mosaic.run("stop", run_id, "--no-wait", check=True).stdout.split()[-1] in (P.QUEUED, P.STARTING)
    run = wait_state(daemon, run_id, [P.STOPPED, P.FAILED, P.SUCCEEDED], timeout=60)
    assert run["state"] == P.STOPPED, run
