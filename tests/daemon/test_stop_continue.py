"""Stop a run with a checkpoint and continue it as the same run: the daemon's side, through the real
CLI, daemon, supervisor and the synthetic worker (which checkpoints the step it stopped at).

The real workers' stops and continues (Jumanji, Tianshou) are in their own tests; these check what
every worker gets from the daemon: the state, the seam, the events and the history across it.
"""
from __future__ import annotations

import json

from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state, worker_scalar
from tests.workers.cleanrl_worker.test_cleanrl_worker import USER_SCRIPT


def _events(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _stop_when_under_way(daemon, mosaic, run_id: str, steps: int = 2000) -> dict:
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= steps, 60, what="the run to be under way")
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
        wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 100, 60, what="the run to be under way")
        mosaic.run("stop", run_id, "--no-wait", check=True)
        run = wait_state(home, run_id, [P.FAILED, P.STOPPED, P.CANCELLED], timeout=60)
        assert run["state"] == P.FAILED, run
        assert run["reason"].startswith("did not stop within 1 s of the stop request"), run["reason"]
        assert not list((home.run_dir(run_id) / "checkpoints").glob("stop_*"))   # nothing half-written
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
    # a run that cannot stop says why and names cancel: a CleanRL-style script of one's own
    # without a main loop mosaic finds (it trains in a while loop)
    script = tmp_path / "my_agent.py"
    script.write_text(USER_SCRIPT)
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", str(script), "--env", "CartPole-v1",
                           "--steps", "100000000")
    wait_state(daemon, run_id, [P.RUNNING], timeout=120)
    refused = mosaic.run("stop", run_id)
    assert refused.returncode != 0 and "has no training loop mosaic can find" in refused.stderr
    assert f"mosaic cancel {mosaic.show(run_id)['name']}" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    mosaic.run("cancel", run_id, check=True)


def test_a_stop_sent_while_the_run_starts_waits_for_its_handler(daemon, mosaic):
    """Asked before the worker wrote a line (its stop handler not yet in place): the signal goes
    once it runs, and does not kill it."""
    run_id = mosaic.synthetic(10**6, "rate=2000", "startup_seconds=3")
    assert mosaic.run("stop", run_id, "--no-wait", check=True).stdout.split()[-1] in (P.QUEUED, P.STARTING)
    run = wait_state(daemon, run_id, [P.STOPPED, P.FAILED, P.SUCCEEDED], timeout=60)
    assert run["state"] == P.STOPPED, run


def test_runs_stopped_by_a_shutdown_continue_when_the_daemon_starts_again(home, mosaic):
    import os
    import signal

    from daemon import proctree
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"stop_runs_on_shutdown": True,
                                                         "continue_after_shutdown": True}))
    mosaic.run("daemon", "start", check=True)
    try:
        run_id = mosaic.synthetic(10**6, "rate=5000")
        wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 1000, 60, what="the run under way")
        pid = int(home.pid_file.read_text())
        os.kill(pid, signal.SIGTERM)   # as a host's shutdown does
        wait_for(lambda: not proctree.is_alive(pid), 60, what="the daemon to exit")
        ended = json.loads((home.run_dir(run_id) / "exit.json").read_text())
        assert ended["returncode"] == 75 and ended["stop_requested"]
        assert "run_stopped" in [e["type"] for e in _events(home, run_id)]
        assert home.shutdown_stops_file.exists()
        # the next start continues it, as the same run
        mosaic.run("daemon", "start", check=True)
        run = wait_state(home, run_id, [P.RUNNING], timeout=60)
        assert run["restarts"] == 1 and not home.shutdown_stops_file.exists()
        mosaic.run("cancel", run_id, check=True)
    finally:
        mosaic.run("daemon", "stop")


def test_without_the_setting_a_shutdown_leaves_runs_training(daemon, mosaic):
    import os
    import signal

    from daemon import proctree
    run_id = mosaic.synthetic(10**6, "rate=5000")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 1000, 60, what="the run under way")
    pid = int(daemon.pid_file.read_text())
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not proctree.is_alive(pid), 60, what="the daemon to exit")
    assert not (daemon.run_dir(run_id) / "exit.json").exists()   # still training, under its supervisor
    assert mosaic.show(run_id)["state"] == P.RUNNING              # (the next command's daemon adopts it)
    mosaic.run("cancel", run_id, check=True)


def test_a_torn_or_foreign_checkpoint_is_refused_and_the_last_good_one_used(daemon, mosaic):
    """Every stop's checkpoint has a manifest (run, step, bytes, sha256). A torn one (truncated) is
    refused in one line when it is the only one; with an earlier stop's checkpoint whole, the run
    continues from that one, and the seam says what was passed over. Another run's checkpoint
    (its manifest names another algorithm) is refused the same way."""
    import os
    run_id = mosaic.synthetic(10**6, "rate=5000", name="torn")
    first = _stop_when_under_way(daemon, mosaic, run_id, steps=1000)["summary"]["stopped"]
    manifest = json.loads(open(first["checkpoint"] + ".manifest.json").read())
    assert manifest["step"] == first["step"] and manifest["run_id"] == run_id and len(manifest["sha256"]) == 64
    # torn, and the only one: refused, naming it
    with open(first["checkpoint"], "r+b") as f:
        f.truncate(3)
    refused = mosaic.run("continue", run_id)
    assert refused.returncode != 0
    assert refused.stderr.strip() == (f"mosaic: error: run torn cannot continue: {first['checkpoint']} is torn: "
                                      f"3 bytes where {manifest['bytes']} were saved")
    with open(first["checkpoint"], "w") as f:   # mended
        json.dump({"step": first["step"]}, f)
    assert mosaic.run("continue", run_id).returncode == 0
    wait_state(daemon, run_id, [P.RUNNING])
    second = _stop_when_under_way(daemon, mosaic, run_id, steps=first["step"] + 1000)["summary"]["stopped"]
    assert second["step"] > first["step"]
    # the newer one torn: the run goes on from the older one, the seam naming what it passed over
    with open(second["checkpoint"], "r+b") as f:
        f.truncate(2)
    assert mosaic.run("continue", run_id).returncode == 0
    seam = [e for e in _events(daemon, run_id) if e["type"] == "restarted"][-1]
    assert seam["step"] == first["step"] and seam["checkpoint"] == first["checkpoint"]
    assert seam["skipped"] == [f"{second['checkpoint']} is torn: 2 bytes where "
                               f"{json.loads(open(second['checkpoint'] + '.manifest.json').read())['bytes']} were saved"]
    mosaic.run("cancel", run_id, check=True)
    # another run's checkpoint, put in its place: refused, naming what differs
    other = json.loads(open(first["checkpoint"] + ".manifest.json").read())
    other["algo"] = "ppo"
    for path in (first["checkpoint"], second["checkpoint"]):
        os.unlink(path + ".manifest.json")
    with open(first["checkpoint"] + ".manifest.json", "w") as f:
        json.dump(other, f)
    refused = mosaic.run("continue", run_id)
    assert refused.returncode != 0 and "is a checkpoint of another run (algo 'ppo', not 'emit')" in refused.stderr


def test_a_submitted_config_never_continues_another_run(daemon, mosaic, tmp_path):
    """continue_from is set by the daemon alone: a config copied from a continued run's record is a
    new run, from its first step."""
    first = mosaic.synthetic(30000, "rate=5000", name="source")
    at = _stop_when_under_way(daemon, mosaic, first, steps=1000)["summary"]["stopped"]
    config = {**mosaic.show(first)["config"], "name": "copy", "steps": 200, "continue_from": at["checkpoint"]}
    config.pop("run_id")
    path = tmp_path / "copy.json"
    path.write_text(json.dumps(config))
    copy = mosaic.submit(str(path))
    run = wait_state(daemon, copy, [P.SUCCEEDED, P.FAILED])
    assert run["state"] == P.SUCCEEDED and run["config"]["continue_from"] is None
    steps = [e["step"] for e in _events(daemon, copy) if worker_scalar(e)]
    assert steps == list(range(1, 201))


def test_no_system_sample_is_taken_after_a_run_stopped_or_completed(home, mosaic):
    """The daemon samples a run's process tree (system/*) while it trains; once the worker said it
    stopped (or completed), what is left is its teardown: no sample lands after the stop's line,
    between it and the continue's seam, nor after the run's last line."""
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"resource_sample_seconds": 0.2}))
    mosaic.run("daemon", "start", check=True)
    try:
        # each process lives 2 s after its last line: ten sampler passes
        run_id = mosaic.synthetic(6000, "rate=2000", "linger_seconds=2")
        wait_for(lambda: any(e["type"] == "scalar" and e["tag"].startswith("system/") for e in _events(home, run_id)),
                 60, 0.1, what="the first system sample")
        assert mosaic.run("stop", run_id, "--timeout", "60").returncode == 0
        assert mosaic.run("continue", run_id, "--wait").returncode == 0
        events = _events(home, run_id)
        kinds = [e["type"] for e in events]
        stop, seam = kinds.index("run_stopped"), kinds.index("restarted")
        assert kinds[seam - 1] == "run_stopped", events[stop:seam]
        assert kinds[-1] == "run_completed", events[kinds.index("run_completed"):]
        samples = [e for e in events[seam:] if e["type"] == "scalar" and e["tag"].startswith("system/")]
        assert samples, "the continued process was sampled too"
    finally:
        mosaic.run("daemon", "stop")
