"""Runs placed on a real two-node Ray cluster (tests/plugins/ray_cluster.py: a head and a second node on
127.0.0.1, token authentication on) through the Jobs API's HTTP interface: submitted, watched,
stopped and cancelled by the daemon (daemon/placement/ray_jobs.py); the run's supervisor
(daemon.shim) is the job's entrypoint. The home is on a filesystem the nodes share (the same
machine here), as on a cluster whose nodes mount it."""
from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest

from tests.helpers import scalar_steps, wait_for, writes_on

pytest_plugins = ["tests.plugins.ray_cluster"]
pytestmark = [pytest.mark.xdist_group("ray")]

WAIT = "180"
SYNTHETIC = ("--worker", "synthetic", "--algo", "emit", "--env", "none")


def submit_config(mosaic, config: dict) -> str:
    path = mosaic.home.root / f"config-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


def job_of(mosaic, run_id: str) -> str:
    """The run's submission id, once the daemon has submitted it (off its loop, a moment after)."""
    return wait_for(lambda: (mosaic.show(run_id)["resources"] or {}).get("job"), 30, 0.1,
                    what="the run's job").split(":", 1)[1]


def processes_of(run_dir) -> list[str]:
    """The processes whose command line names the run directory (its supervisor, its worker)."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(run_dir) in cmdline:
            found.append(f"{proc.info['pid']}: {cmdline[:200]}")
    return found


def record_now(cluster, job: str) -> dict:
    return cluster.job(job.split(":", 1)[1])


def finished(mosaic, run_id: str, timeout: str = WAIT) -> dict:
    mosaic.run("wait", run_id, "--timeout", timeout)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (run, (mosaic.home.run_dir(run_id) / "stderr.log").read_text()[-2000:])
    return run


def test_a_run_on_ray_is_a_job_whose_telemetry_arrives_like_a_local_runs(ray_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit(*SYNTHETIC, "--steps", "3000", "--set", "rate=1000", "--placement", "ray",
                           "--cpus", "1", "--mem", "256M", "--name", "on-ray")
    job = "ray:" + job_of(mosaic, run_id)
    assert job.startswith(f"ray:mosaic-{run_id}-"), job
    record = ray_daemon.job(job.split(":", 1)[1])      # the Jobs API's own record of it
    assert "-m daemon.shim" in record["entrypoint"] and str(home.run_dir(run_id)) in record["entrypoint"]
    assert record["metadata"]["mosaic_run_id"] == run_id
    actor = wait_for(lambda: ray_daemon.job_actor(job.split(":", 1)[1]), 30, 0.2, what="the job's supervisor actor")
    assert actor["required_resources"] == {"CPU": 1.0, "memory": 256 * 1024 * 1024}, actor
    env_vars = record["runtime_env"]["env_vars"]
    assert env_vars["MOSAIC_RUN_ID"] == run_id and env_vars["OMP_NUM_THREADS"] == "1"
    assert "HOME" not in env_vars and not any("TOKEN" in key for key in env_vars)   # not the daemon's whole env
    wait_for(lambda: mosaic.show(run_id)["resources"].get("queue") == "RUNNING", 60, 0.2, what="the job running")
    run = finished(mosaic, run_id)
    assert run["summary"]["steps"] == 3000
    assert run["resources"]["node"].endswith(f" ({record_now(ray_daemon, job)['driver_node_id'][:8]})")
    metrics = mosaic.run("metrics", run_id, "--csv", "--metric", "synthetic/value_0", check=True).stdout.splitlines()
    assert len(metrics) > 100, metrics[:5]
    # every events line once: the steps of a scalar in order, none twice
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and len(steps) == len(metrics) - 1
    assert record_now(ray_daemon, job)["status"] == "SUCCEEDED"
    # the cluster's token is in no file of the home (config, store, run directory, logs)
    token = ray_daemon.token.encode()
    for folder, _, files in os.walk(home.root):
        for name in files:
            try:
                data = open(os.path.join(folder, name), "rb").read()
            except OSError:
                continue
            assert token not in data, os.path.join(folder, name)


def test_cancel_ends_the_job_and_leaves_no_process(ray_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit(*SYNTHETIC, "--steps", "100000000", "--set", "rate=100", "--placement", "ray")
    wait_for(lambda: (home.run_dir(run_id) / "supervisor.json").exists() and mosaic.show(run_id)["state"] == "running",
             90, 0.2, what="the run running on its node")
    assert processes_of(home.run_dir(run_id))
    job_id = job_of(mosaic, run_id)
    # Ray's stop waits the supervisor's grace and more before its SIGKILL (Ray's own default: 3 s)
    assert int(ray_daemon.job(job_id)["runtime_env"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"]) >= 10
    mosaic.run("cancel", run_id, check=True)
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "cancelled" and run["reason"] == "cancelled by the user", run
    record = json.loads((home.run_dir(run_id) / "exit.json").read_text())   # the supervisor had its grace
    assert record["cancel_requested"]
    wait_for(lambda: not processes_of(home.run_dir(run_id)), 20, 0.2, what="no process of the run left")
    assert ray_daemon.wait_job(job_id, 30)["status"] == "STOPPED"


def test_a_job_stopped_outside_mosaic_says_so(ray_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit(*SYNTHETIC, "--steps", "100000000", "--set", "rate=100", "--placement", "ray")
    wait_for(lambda: mosaic.show(run_id)["state"] == "running", 90, 0.2, what="the run running")
    ray_daemon.stop_job(job_of(mosaic, run_id))        # what `ray job stop` does
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "cancelled" and "cancelled outside mosaic (ray job stop)" in run["reason"], run
    assert (home.run_dir(run_id) / "exit.json").exists()


def test_a_cluster_that_does_not_answer_is_said_in_one_line_and_no_run_is_made(ray_daemon, mosaic):
    from tests.plugins.ray_cluster import free_ports

    def refused(config: dict | None = None, *extra: str) -> str:
        args = [*SYNTHETIC, "--steps", "10", *extra]
        if config is not None:
            path = mosaic.home.root / f"config-{time.monotonic_ns()}.json"
            path.write_text(json.dumps(config))
            args = [str(path), *args]
        proc = mosaic.run("submit", *args)
        assert proc.returncode != 0, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        return lines[0]

    nobody = f"http://127.0.0.1:{free_ports(1)[0]}"
    line = refused({"placement": {"backend": "ray", "address": nobody}})
    assert f"the Ray cluster at {nobody} does not answer" in line, line
    line = refused({"placement": {"backend": "ray", "address": "ray://127.0.0.1:10001"}})
    assert "Ray Client's address" in line and "http://<head>:8265" in line, line
    assert "is for backend ray, not slurm" in refused({"placement": {"backend": "slurm", "resources": {"a": 1}}})
    assert mosaic.run("ls", "--json", check=True).stdout.strip() in ("[]", "")


def test_a_wrong_token_is_said_at_submit(ray_daemon, mosaic, monkeypatch):
    """The daemon reads the token where Ray's clients do (RAY_AUTH_TOKEN first)."""
    mosaic.run("daemon", "stop", check=True)
    monkeypatch.setenv("RAY_AUTH_TOKEN", "not-the-token")
    mosaic.run("daemon", "start", check=True)
    proc = mosaic.run("submit", *SYNTHETIC, "--steps", "10", "--placement", "ray")
    assert proc.returncode != 0 and "refused the token" in proc.stderr, proc.stderr
    assert "not-the-token" not in proc.stderr


def test_a_run_asking_for_a_custom_resource_runs_on_the_node_that_has_it(ray_daemon, mosaic):
    run_id = submit_config(mosaic, {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 500,
                                    "placement": {"backend": "ray", "resources": {ray_daemon.resource: 1}}})
    run = finished(mosaic, run_id)
    second = ray_daemon.node_ids["second"]
    assert run["resources"]["node"].endswith(f" ({second[:8]})"), run["resources"]
    record = ray_daemon.job(job_of(mosaic, run_id))
    assert record["driver_node_id"] == second, record


def test_runs_on_ray_survive_their_daemon_killed_and_are_readopted(ray_daemon, mosaic):
    """Two runs at once (one list of the cluster's jobs a poll); the jobs go on with no daemon."""
    home = mosaic.home
    runs = [mosaic.submit(*SYNTHETIC, "--steps", "4000", "--set", "rate=400", "--placement", "ray") for _ in range(2)]
    wait_for(lambda: all(mosaic.show(r)["summary"].get("steps", 0) > 400 for r in runs), 90, 0.2,
             what="the runs under way")
    os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
    going_on = [writes_on(home, run_id) for run_id in runs]
    wait_for(lambda: all(grew() for grew in going_on), 60, 0.1, what="the jobs writing on with no daemon")
    mosaic.run("daemon", "start", check=True)
    for run_id in runs:
        run = finished(mosaic, run_id)
        assert run["summary"]["steps"] == 4000, run
        steps = scalar_steps(home, run_id, "synthetic/value_0")
        assert steps == sorted(set(steps))


def test_mosaic_stop_reaches_the_job_and_continue_places_it_again(ray_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit(*SYNTHETIC, "--steps", "20000", "--set", "rate=2000", "--placement", "ray",
                           "--name", "stop-on-ray")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 1000, 90, 0.2, what="the run under way")
    first_job = job_of(mosaic, run_id)
    assert mosaic.run("stop", run_id, "--timeout", "120").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]["step"]
    assert ray_daemon.wait_job(first_job, 30)["status"] == "SUCCEEDED"   # the supervisor ended it, not Ray
    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["restarts"] == 1, run
    assert job_of(mosaic, run_id) != first_job                 # a new job (a new submission id), the same run
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and any(s > at for s in steps)


# -- real workers on the cluster's nodes ------------------------------------------------------
def test_a_cleanrl_ppo_run_trains_on_ray(ray_daemon, mosaic):
    pytest.importorskip("torch")
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "2048",
                           "--set", "num-steps=128", "--placement", "ray", "--cpus", "1")
    run = finished(mosaic, run_id, "300")
    assert run["summary"]["steps"] == 2048 and run["summary"]["episodes"] > 10
    returns = mosaic.run("metrics", run_id, "--csv", "--metric", "charts/episodic_return", check=True).stdout
    assert len(returns.splitlines()) > 10


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
def test_a_tianshou_dqn_run_trains_on_ray(ray_daemon, mosaic):
    pytest.importorskip("tianshou")
    run_id = submit_config(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 600,
                                    "params": {"epoch_num_steps": 300, "test_envs": 1, "test_step_num_episodes": 2,
                                               "hidden_sizes": [32]},
                                    "placement": {"backend": "ray", "cpus": 1}})
    run = finished(mosaic, run_id, "300")
    assert run["summary"]["steps"] == 600 and run["summary"]["episodes"] > 5
    tags = run["summary"]["tags"]
    loss = next(t for t in tags if "loss" in t)
    assert len(mosaic.run("metrics", run_id, "--csv", "--metric", loss, check=True).stdout.splitlines()) > 2


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
def test_a_xuance_ppo_run_trains_on_ray(ray_daemon, mosaic):
    pytest.importorskip("xuance")
    run_id = mosaic.submit("--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1024",
                           "--set", "parallels=4", "--set", "horizon_size=64", "--set", "n_epochs=1",
                           "--placement", "ray", "--cpus", "1")
    run = finished(mosaic, run_id, "300")
    assert run["summary"]["steps"] == 1024 and run["summary"]["episodes"] > 0
    tag = next(t for t in run["summary"]["tags"] if not t.startswith("system/"))
    assert len(mosaic.run("metrics", run_id, "--csv", "--metric", tag, check=True).stdout.splitlines()) > 2


# -- the supervisor's signal file (how a stop reaches a Ray job), without a cluster ---------------
def test_the_supervisor_acts_on_its_signal_file_as_on_the_signal(tmp_path):
    import subprocess
    import sys

    from tests.helpers import ROOT
    worker = ("import signal, sys, time\n"
              "signal.signal(signal.SIGUSR1, lambda *a: sys.exit(42))\n"
              "print('{}', flush=True)\n"
              "time.sleep(60)\n")
    for name, expected in (("USR1", {"returncode": 42, "stop_requested": True, "cancel_requested": False}),
                           ("TERM", {"signal_name": "SIGTERM", "cancel_requested": True})):
        run_dir = tmp_path / name
        run_dir.mkdir()
        request = run_dir / "signal.request"
        request.write_text("USR1\n")     # left from an earlier start: not this one's
        shim = subprocess.Popen([sys.executable, "-m", "daemon.shim", str(run_dir), "--grace", "5",
                                 "--signal-file", str(request), "--", sys.executable, "-c", worker], cwd=ROOT)
        try:
            wait_for(lambda: (run_dir / "events.jsonl").exists() and (run_dir / "events.jsonl").read_text(), 30,
                     0.05, what="the worker started")
            # the worker's handler is in place (it printed after setting it); the stale request is
            # gone without being acted on: a request of no signal, read and removed, proves the
            # supervisor's loop went round since, and the supervisor still runs
            wait_for(lambda: not request.exists(), 10, 0.05, what="the stale request removed")
            request.write_text("HUP\n")
            wait_for(lambda: not request.exists() or shim.poll() is not None, 10, 0.05,
                     what="the supervisor to read its signal file")
            assert not request.exists() and shim.poll() is None
            request.write_text(name + "\n")
            assert shim.wait(timeout=20) == 0
        finally:
            if shim.poll() is None:   # the supervisor's TERM ends its worker within the grace
                shim.terminate()
                shim.wait(timeout=20)
        record = json.loads((run_dir / "exit.json").read_text())
        assert {k: record.get(k) for k in expected} == expected, record
        assert not request.exists()


def test_a_ray_runs_frames_are_spilled_by_the_job_and_relayed(ray_daemon, mosaic, tmp_path):
    """Frames on Ray (a home the nodes share): daemon.frame_spill runs in the job beside the
    supervisor, and the daemon's relay sends them from the run directory, as for Slurm. The
    node's FastLane segments are in a directory the daemon does not look in (MOSAIC_SHM_DIR of
    the job's runtime_env), as a real node's /dev/shm is out of its reach."""
    from daemon import protocol as P
    from tests.helpers import connect
    node_shm = tmp_path / "node-shm"
    node_shm.mkdir()
    run_id = submit_config(mosaic, {
        "worker": "synthetic", "algo": "emit", "env": "none", "steps": 100000000, "params": {"rate": 100},
        "frames": {"enabled": True, "fps": 20, "max_dim": 120},
        "placement": {"backend": "ray", "runtime_env": {"env_vars": {"MOSAIC_SHM_DIR": str(node_shm)}}}})
    spilled = mosaic.home.run_dir(run_id) / "frames" / "stream-0.json"
    client = connect(mosaic.home, name="viewer")
    try:
        wait_for(lambda: spilled.exists(), 90, 0.2, what="the job's first spilled frame")
        assert any(node_shm.iterdir())
        client.call(P.FRAMES, run=run_id, fps=10, max_dim=120)
        frame = None
        for method, params in client.notifications(20.0):
            if method == P.NOTIFY_FRAME:
                frame = params
                break
        assert frame is not None and frame["run"] == run_id and max(frame["width"], frame["height"]) <= 120
    finally:
        client.close()
        mosaic.run("cancel", run_id)
    mosaic.run("wait", run_id, "--timeout", "60")
    assert mosaic.show(run_id)["state"] == "cancelled"


def test_a_run_pending_on_resources_reads_short_and_its_cancel_ends_it(ray_daemon, mosaic):
    """--cpus 4 on a cluster of 2-CPU nodes: Ray holds the job PENDING, and after its stop too, until
    a node that fits joins. `ls` says `pending (resources)`, `show` Ray's own words; the cancel ends
    the run in mosaic's record at once, saying what Ray took, and the run can be deleted."""
    run_id = mosaic.submit(*SYNTHETIC, "--steps", "10", "--placement", "ray", "--cpus", "4")
    job = job_of(mosaic, run_id)
    try:
        wait_for(lambda: mosaic.show(run_id)["resources"].get("queue_reason") == "resources", 30, 0.2,
                 what="the job pending on resources")
        status = mosaic.run("daemon", "status", check=True).stdout
        assert "1 on a cluster (no slot)" in status, status
        line = next(row for row in mosaic.run("ls", check=True).stdout.splitlines() if row.startswith(run_id[:10]))
        assert " pending (resources) " in line and "It may be waiting" not in line, line
        shown = mosaic.run("show", run_id, check=True).stdout
        assert "queue says: Job has not started yet. It may be waiting for resources" in shown, shown
        proc = mosaic.run("cancel", run_id)
        assert proc.returncode == 0, proc.stderr
        run = mosaic.show(run_id)
        assert run["state"] == "cancelled", run
        assert run["reason"].startswith(f"cancelled by the user; ray took the cancel of job ray:{job}, which never "
                                        f"started"), run["reason"]
        assert ray_daemon.job(job)["status"] == "PENDING"     # as the reason says: Ray still holds it
        assert mosaic.run("delete", run_id, "--yes").returncode == 0
    finally:
        ray_daemon.stop_job(job)


def test_a_run_whose_ray_cluster_is_gone_is_lost_saying_why_and_can_be_deleted(ray_daemon, mosaic, monkeypatch):
    """The daemon is killed with two runs pending on Ray, and comes back where its Ray answers no
    more (nothing listens at RAY_ADDRESS): a cancel ends one at once, saying Ray was not told; the
    other is lost after cluster_gone_seconds, saying why, instead of pending for ever, across
    restarts; the daemon says once that it cannot poll; both can be deleted."""
    from tests.plugins.ray_cluster import free_ports
    home = mosaic.home
    runs = [mosaic.submit(*SYNTHETIC, "--steps", "10", "--placement", "ray", "--cpus", "4") for _ in range(2)]
    jobs = [job_of(mosaic, run_id) for run_id in runs]
    try:
        wait_for(lambda: all(mosaic.show(r)["resources"].get("queue") == "PENDING" for r in runs), 30, 0.2,
                 what="the jobs pending")
        os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
        monkeypatch.setenv("RAY_ADDRESS", f"http://127.0.0.1:{free_ports(1)[0]}")
        mosaic.run("daemon", "start", check=True)
        assert mosaic.run("cancel", runs[0]).returncode == 0
        run = mosaic.show(runs[0])
        assert run["state"] == "cancelled", run
        assert run["reason"].startswith("cancelled by the user; ray was not told (the Ray cluster at "), run["reason"]
        assert run["reason"].endswith(f"job ray:{jobs[0]}, which never started, may still be queued there"), run
        # the first daemon's poll has found Ray gone before it is stopped (the count below is one a daemon)
        wait_for(lambda: home.daemon_log.read_text().count("cannot poll ray") == 1, 60, 0.2,
                 what="the daemon saying it cannot poll ray")
        mosaic.run("daemon", "stop", check=True)
        (home.root / "settings.json").write_text(json.dumps({"cluster_poll_seconds": 0.5,
                                                             "cluster_gone_seconds": 2}))
        mosaic.run("daemon", "start", check=True)
        mosaic.run("wait", runs[1], "--timeout", "60")
        run = mosaic.show(runs[1])
        assert run["state"] == "lost", run
        assert run["reason"].startswith(f"job ray:{jobs[1]}: ray has not answered for "), run["reason"]
        assert "does not answer" in run["reason"] and "cluster_gone_seconds" in run["reason"], run["reason"]
        assert home.daemon_log.read_text().count("cannot poll ray") == 2   # once by each daemon
        for run_id in runs:
            assert mosaic.run("delete", run_id, "--yes").returncode == 0
    finally:
        for job in jobs:
            ray_daemon.stop_job(job)
