"""Runs placed on a real Slurm cluster (tests/plugins/slurm_cluster.py: munged, slurmctld and slurmd on
127.0.0.1) through Slurm's own commands: submitted with sbatch, watched with squeue and scontrol,
cancelled and signalled with scancel; the run's supervisor (daemon.shim) is the job's process.
The home is on a filesystem the node shares (the same machine here), as on a cluster."""
from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import time

import pytest

from daemon import proctree
from tests.helpers import events_of, processes_marked, scalar_steps, wait_for, writes_on
from tests.plugins.slurm_cluster import MARKER

pytest_plugins = ["tests.plugins.slurm_cluster"]
pytestmark = [pytest.mark.xdist_group("slurm")]

WAIT = "180"


def job_of(mosaic, run_id: str) -> str:
    """The run's Slurm job id: the daemon records it once sbatch has answered, which can be a moment
    after the submit returned."""
    job = wait_for(lambda: (mosaic.show(run_id)["resources"] or {}).get("job"), 60, 0.1, what="the run's Slurm job")
    return job.split(":", 1)[1]


def test_a_run_on_slurm_is_a_job_whose_telemetry_arrives_like_a_local_runs(slurm_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "3000",
                           "--set", "rate=1000", "--placement", "slurm", "--cpus", "1", "--time", "10",
                           "--name", "on-slurm")
    job_of(mosaic, run_id)
    run = mosaic.show(run_id)
    job = run["resources"]["job"]
    assert job.startswith("slurm:") and run["config"]["placement"]["backend"] == "slurm"
    info = slurm_daemon.job_info(job.split(":", 1)[1])      # the scheduler's own record of it
    assert info["JobName"] == f"mosaic-{run_id}" and info["WorkDir"] == str(home.run_dir(run_id))
    assert info["TimeLimit"] == "00:10:00" and info["NumCPUs"] == "1"
    assert (home.run_dir(run_id) / "job.sh").read_text().splitlines()[-1].startswith("exec ")
    wait_for(lambda: mosaic.show(run_id)["resources"].get("queue") == "RUNNING", 60, 0.2, what="the job running")
    assert mosaic.show(run_id)["resources"]["node"] == slurm_daemon.node
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", run
    assert run["summary"]["steps"] == 3000
    metrics = mosaic.run("metrics", run_id, "--csv", "--metric", "synthetic/value_0", check=True).stdout.splitlines()
    assert len(metrics) > 100, metrics[:5]
    # every events line once: the steps of a scalar in order, none twice
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and len(steps) == len(metrics) - 1


def test_cancel_ends_the_job_and_leaves_no_process(slurm_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000000",
                           "--set", "rate=100", "--placement", "slurm")
    wait_for(lambda: (home.run_dir(run_id) / "supervisor.json").exists() and mosaic.show(run_id)["state"] == "running",
             90, 0.2, what="the run running on its node")
    supervisor = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())
    job_id = job_of(mosaic, run_id)
    mosaic.run("cancel", run_id, check=True)
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "cancelled", run
    for pid, start in ((supervisor["supervisor_pid"], supervisor["supervisor_start"]),
                       (supervisor["worker_pid"], supervisor["worker_start"])):
        assert not proctree.is_alive(pid, start) or proctree.state(pid) == "Z"
    wait_for(lambda: slurm_daemon.job_state(job_id) in ("COMPLETED", "CANCELLED"), 30, 0.2, what="the job to end")


def test_a_job_cancelled_outside_mosaic_says_so(slurm_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000000",
                           "--set", "rate=100", "--placement", "slurm")
    wait_for(lambda: mosaic.show(run_id)["state"] == "running", 90, 0.2, what="the run running")
    slurm_daemon.run("scancel", job_of(mosaic, run_id))
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "cancelled" and "cancelled outside mosaic (scancel)" in run["reason"], run
    assert (home.run_dir(run_id) / "exit.json").exists()


def test_what_slurm_refuses_is_said_in_one_line_and_no_run_is_made(slurm_daemon, mosaic):
    def refused(*extra: str) -> str:
        proc = mosaic.run("submit", "--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10",
                          *extra)
        assert proc.returncode != 0, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        return lines[0]

    assert "invalid partition" in refused("--placement", "slurm", "--partition", "nosuch").lower()
    assert "is not an amount of memory" in refused("--placement", "slurm", "--mem", "lots")
    # well formed, but more than any node has: the scheduler's own refusal, in its words
    said = refused("--placement", "slurm", "--mem", "999999G")
    assert said.startswith("mosaic: error: placement: sbatch: ") and said.endswith("(asked: mem=999999G)"), said
    assert "is not a wall time" in refused("--placement", "slurm", "--time", "2h")
    assert "add --placement slurm" in refused("--cpus", "4")
    assert mosaic.run("ls", "--json", check=True).stdout.strip() in ("[]", "")


def test_a_run_on_slurm_survives_its_daemon_killed_and_is_readopted(slurm_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "4000",
                           "--set", "rate=400", "--placement", "slurm")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 400, 90, 0.2, what="the run under way")
    os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
    wait_for(writes_on(home, run_id), 60, 0.1, what="the job writing on with no daemon")
    mosaic.run("daemon", "start", check=True)
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["summary"]["steps"] == 4000, run


def test_mosaic_stop_signals_the_job_and_continue_places_it_again(slurm_daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "20000",
                           "--set", "rate=2000", "--placement", "slurm", "--name", "stop-on-slurm")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 1000, 90, 0.2, what="the run under way")
    first_job = job_of(mosaic, run_id)
    assert mosaic.run("stop", run_id, "--timeout", "120").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]["step"]
    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["restarts"] == 1, run
    assert job_of(mosaic, run_id) != first_job                 # a new job, the same run
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and any(s > at for s in steps)


def test_a_cleanrl_run_trains_on_slurm(slurm_daemon, mosaic):
    """A real worker on the node: CleanRL's PPO, its scalars and episodes in the run's history."""
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "4096",
                           "--set", "num-steps=128", "--placement", "slurm", "--cpus", "1")
    mosaic.run("wait", run_id, "--timeout", "300")
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (run, (mosaic.home.run_dir(run_id) / "stderr.log").read_text()[-2000:])
    assert run["summary"]["steps"] == 4096 and run["summary"]["episodes"] > 10
    returns = mosaic.run("metrics", run_id, "--csv", "--metric", "charts/episodic_return", check=True).stdout
    assert len(returns.splitlines()) > 10


def test_a_run_at_its_wall_time_is_stopped_requeued_and_finishes_as_one_run(slurm_daemon, mosaic):
    """--time 1 with --requeue: Slurm's warning (--signal=B:USR1@60, sent at its next time-limit check,
    within 30 s of the start) stops the run with a checkpoint; the daemon continues it as a new job of
    the same run, again and again, until every step is done: one run, one continuous step axis."""
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "4000",
                           "--set", "rate=100", "--placement", "slurm", "--time", "1", "--requeue",
                           "--name", "requeued")
    first_job = job_of(mosaic, run_id)
    wait_for(lambda: mosaic.show(run_id)["state"] in ("succeeded", "failed", "cancelled", "lost"), 240, 0.5,
             what="the run to finish across its jobs")
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["summary"]["steps"] == 4000, run
    assert run["restarts"] >= 1 and job_of(mosaic, run_id) != first_job, run
    seams = [e for e in events_of(home, run_id) if e["type"] == "restarted"]
    assert len(seams) == run["restarts"] and all(e.get("requeued") for e in seams), seams
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and steps[-1] >= 3990, steps[-5:]   # none twice, none missing at the end
    assert (home.run_dir(run_id) / "exit-0.json").exists()


def test_requeue_is_refused_for_a_run_that_cannot_stop(slurm_daemon, mosaic, tmp_path):
    from tests.workers.cleanrl_worker.test_cleanrl_worker import (
        USER_SCRIPT,  # a CleanRL-style script whose loop mosaic cannot find
    )
    script = tmp_path / "my_agent.py"
    script.write_text(USER_SCRIPT)
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", str(script), "--env", "CartPole-v1",
                      "--steps", "1000", "--placement", "slurm", "--time", "5", "--requeue")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "requeue: " in proc.stderr and "has no training loop mosaic can find" in proc.stderr, proc.stderr
    assert mosaic.run("ls", "--json", check=True).stdout.strip() in ("[]", "")


def test_a_job_slurm_forgot_without_an_exit_record_is_lost_with_the_reason(slurm_daemon, mosaic):
    """The daemon dies; the job dies with no supervisor's record (SIGKILL to all of it); the controller
    restarts without its saved state, so it forgets the job (and no accounting is kept here): the new
    daemon marks the run lost, saying why, instead of leaving it running."""
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000000",
                           "--set", "rate=50", "--placement", "slurm")
    wait_for(lambda: mosaic.show(run_id)["state"] == "running", 90, 0.2, what="the run running")
    job_id = job_of(mosaic, run_id)
    os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
    slurm_daemon.run("scancel", "--signal=KILL", "--full", job_id)
    wait_for(lambda: slurm_daemon.job_state(job_id) not in ("RUNNING", "COMPLETING"), 30, 0.2, what="the job's end")
    # as when its node died: the supervisor's exit record never reached the shared filesystem
    (home.run_dir(run_id) / "exit.json").unlink(missing_ok=True)
    slurm_daemon.stop_controller()
    try:
        slurm_daemon.start_controller(clear_state=True)
    finally:
        if "slurmctld" not in slurm_daemon.procs:
            slurm_daemon.start_controller()
    assert slurm_daemon.run("scontrol", "show", "job", job_id, check=False).returncode != 0   # forgotten
    mosaic.run("daemon", "start", check=True)
    mosaic.run("wait", run_id, "--timeout", "60")
    run = mosaic.show(run_id)
    assert run["state"] == "lost" and f"job slurm:{job_id}" in run["reason"], run
    assert "forgotten" in run["reason"] and "accounting" in run["reason"], run["reason"]


def cluster_commands(cluster) -> set[str]:
    """The names of the programs running now with the cluster's marker (its daemons, the Slurm
    commands a daemon of the test runs, jobs)."""
    names = set()
    for pid in processes_marked(MARKER, cluster.env[MARKER]):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                names.add(os.path.basename(f.read().split(b"\0")[0].decode(errors="replace")))
        except OSError:
            continue
    return names


def test_a_controller_restart_mid_run_leaves_the_run_going_and_a_down_one_refuses_submits(slurm_daemon, mosaic):
    """slurmctld away for a while (its state kept): the run trains on, the daemon answers every
    client meanwhile, a submit says in one line that the controller does not answer and makes no
    run; the controller back, the run is read again and succeeds whole."""
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "6000",
                           "--set", "rate=300", "--placement", "slurm", "--name", "through-restart")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 300, 90, 0.2, what="the run under way")
    slurm_daemon.stop_controller()
    try:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            submitting = pool.submit(mosaic.run, "submit", "--worker", "synthetic", "--algo", "emit", "--env",
                                     "none", "--steps", "10", "--placement", "slurm")
            wait_for(lambda: "sbatch" in cluster_commands(slurm_daemon), 30, 0.05, what="the submit's sbatch waiting")
            # while sbatch waits for the controller, the daemon answers others at once
            for _ in range(3):
                t0 = time.monotonic()
                mosaic.run("ls", "--json", check=True)
                assert time.monotonic() - t0 < 5, "the daemon stalled while a scheduler command waited"
            assert not submitting.done()
            refused = submitting.result()
        assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "Unable to contact slurm controller" in refused.stderr, refused.stderr
        took = time.monotonic() - started
        steps_during = mosaic.show(run_id)["summary"].get("steps", 0)
        assert steps_during > 300, steps_during
    finally:
        slurm_daemon.start_controller()
    assert [r["name"] for r in json.loads(mosaic.run("ls", "--json", check=True).stdout)] == ["through-restart"]
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["summary"]["steps"] == 6000, (run, took)
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps))


def test_a_job_over_its_memory_request_ends_its_run_saying_so(slurm_daemon, mosaic):
    """--mem 100M and a worker that fills 400 MB: Slurm kills the job (the fixture enforces --mem
    through jobacct_gather/linux's OverMemoryKill); the run fails with the memory limit in words."""
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000",
                           "--set", "rate=100", "--set", "allocate_mb=400", "--placement", "slurm", "--mem", "100M")
    mosaic.run("wait", run_id, "--timeout", "120")
    run = mosaic.show(run_id)
    assert run["state"] == "failed", run
    assert "used more memory than it asked for (placement.mem)" in run["reason"], run["reason"]
    assert run["reason"].startswith(f"job {run['resources']['job']}: "), run["reason"]
    # the kill took the supervisor too (no exit record): the run ended when Slurm says the job did
    assert not (mosaic.home.run_dir(run_id) / "exit.json").exists()
    info = slurm_daemon.job_info(job_of(mosaic, run_id))
    assert run["ended_at"] == time.mktime(time.strptime(info["EndTime"], "%Y-%m-%dT%H:%M:%S")), (run, info)


def test_a_sweeps_trials_are_placed_on_slurm_beyond_the_local_slots(slurm_daemon, mosaic, tmp_path):
    """A sweep whose base has a Slurm placement: every trial is a job, and they run side by side on
    the cluster although the daemon's own machine allows one run at a time."""
    import yaml
    home = mosaic.home
    mosaic.run("daemon", "stop", check=True)
    (home.root / "settings.json").write_text(json.dumps({"cluster_poll_seconds": 0.5, "max_concurrent_runs": 1}))
    mosaic.run("daemon", "start", check=True)
    base = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 600, "seed": 1,
            "params": {"rate": 100, "episode_every": 50}, "placement": {"backend": "slurm", "cpus": 1}}
    spec = {"name": "on-slurm", "base": base, "parallel": 2, "params": {"return_offset": [0, 100]},
            "objective": {"tag": "episode/return", "last": 2}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    proc = mosaic.run("sweep", str(path), "--wait", "--timeout", "180")
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(mosaic.run("ls", "--json", check=True).stdout)
    assert len(runs) == 2 and {r["state"] for r in runs} == {"succeeded"}, runs
    assert all(r["resources"]["job"].startswith("slurm:") for r in runs)
    first, second = sorted(runs, key=lambda r: r["started_at"])
    assert second["started_at"] < first["ended_at"], "the trials ran one after the other"
    sweep = json.loads(mosaic.run("sweeps", "on-slurm", "--json", check=True).stdout)
    assert [t["state"] for t in sweep["trials"]] == ["complete", "complete"], sweep["trials"]
    # a placement Slurm refuses is said once, for the sweep, before any trial
    spec["base"] = {**base, "placement": {"backend": "slurm", "partition": "nosuch"}}
    spec["name"] = "refused"
    path.write_text(yaml.safe_dump(spec))
    refused = mosaic.run("sweep", str(path))
    assert refused.returncode != 0 and "invalid partition" in refused.stderr.lower(), refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    assert len(json.loads(mosaic.run("ls", "--json", check=True).stdout)) == 2


def test_pending_running_and_finished_jobs_are_readopted_after_a_daemon_sigkill(slurm_daemon, mosaic):
    """One run finishes while no daemon runs, one runs on, one waits for memory (pending,
    Resources): a new daemon takes all three back, each in its state, every events line once."""
    home = mosaic.home
    emit = ["--worker", "synthetic", "--algo", "emit", "--env", "none", "--placement", "slurm", "--cpus", "1"]
    short = mosaic.submit(*emit, "--steps", "400", "--set", "rate=100", "--name", "short")
    long = mosaic.submit(*emit, "--steps", "100000000", "--set", "rate=100", "--name", "long")
    # each running job holds its CPU's share of the node's memory (DefMemPerCPU): 13G waits for both
    waiting = mosaic.submit(*emit, "--steps", "300", "--set", "rate=300", "--mem", "13G", "--name", "waiting")
    wait_for(lambda: all(mosaic.show(r)["state"] == "running" for r in (short, long)), 90, 0.2, what="two running")
    wait_for(lambda: mosaic.show(waiting)["resources"].get("queue_reason") == "Resources", 30, 0.2,
             what="the third pending for resources")
    os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
    wait_for(lambda: (home.run_dir(short) / "exit.json").exists(), 60, 0.2, what="the short run's end, unwatched")
    mosaic.run("daemon", "start", check=True)
    wait_for(lambda: mosaic.show(short)["state"] == "succeeded", 30, 0.2, what="the finished run recorded")
    assert mosaic.show(short)["summary"]["steps"] == 400
    assert mosaic.show(long)["state"] == "running"
    run = mosaic.show(waiting)
    assert run["state"] == "starting" and run["resources"]["queue"] == "PENDING", run["resources"]
    assert run["resources"]["queue_reason"] == "Resources"
    mosaic.run("cancel", long, check=True)
    mosaic.run("wait", waiting, "--timeout", WAIT)
    assert mosaic.show(waiting)["state"] == "succeeded" and mosaic.show(long)["state"] == "cancelled"
    for run_id, tag in ((short, "synthetic/value_0"), (long, "synthetic/value_0"), (waiting, "synthetic/value_0")):
        steps = scalar_steps(home, run_id, tag)
        metrics = mosaic.run("metrics", run_id, "--csv", "--metric", tag, check=True).stdout.splitlines()
        assert steps == sorted(set(steps)) and len(metrics) - 1 == len(steps), run_id


def test_without_slurms_commands_a_submit_says_so_in_one_line(home, mosaic, monkeypatch, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))   # the daemon's PATH: no sbatch (it runs its own Python by path)
    mosaic.run("daemon", "start", check=True)
    try:
        proc = mosaic.run("submit", "--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10",
                          "--placement", "slurm")
        assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "sbatch not found: Slurm's commands are not installed" in proc.stderr, proc.stderr
        assert mosaic.run("ls", "--json", check=True).stdout.strip() in ("[]", "")
    finally:
        mosaic.run("daemon", "stop")


def test_metrics_follow_reads_a_slurm_run_as_a_local_one(slurm_daemon, mosaic):
    """`mosaic metrics --follow` started while the job runs prints every point once, and ends with
    the run."""
    import subprocess
    import sys

    from tests.helpers import ROOT
    home = mosaic.home
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "2000",
                           "--set", "rate=400", "--placement", "slurm", "--name", "followed")
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 100, 90, 0.2, what="the run under way")
    follow = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "metrics", run_id,
                             "--follow", "--csv", "--metric", "synthetic/value_0"],
                            capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert follow.returncode == 0, follow.stderr
    assert mosaic.show(run_id)["state"] == "succeeded"
    rows = follow.stdout.splitlines()[1:]   # tag,step,value,wall_time
    steps = [int(r.split(",")[1]) for r in rows]
    assert steps == sorted(set(steps)) and steps == scalar_steps(home, run_id, "synthetic/value_0")


def test_a_job_whose_node_fails_ends_its_run_saying_so(slurm_daemon, mosaic):
    """The node set DOWN under a running job (as Slurm does to a node that stops answering): Slurm
    ends the job NODE_FAIL and the run fails with that reason in words; the node comes back after."""
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000000",
                           "--set", "rate=50", "--placement", "slurm")
    wait_for(lambda: mosaic.show(run_id)["state"] == "running", 90, 0.2, what="the run running")
    node = slurm_daemon.node
    slurm_daemon.run("scontrol", "update", f"NodeName={node}", "State=DOWN", "Reason=mosaic-test")
    try:
        mosaic.run("wait", run_id, "--timeout", "120")
        run = mosaic.show(run_id)
    finally:
        slurm_daemon.run("scontrol", "update", f"NodeName={node}", "State=RESUME", check=False)
        wait_for(lambda: slurm_daemon.node_state() in ("idle", "mixed", "allocated"), 60, 0.5, what="the node back")
    assert run["state"] in ("failed", "lost") and "node failed" in run["reason"], run["reason"]


def test_a_failing_mirror_of_a_slurm_run_writes_nothing_into_the_nodes_events_file(slurm_daemon, mosaic):
    """A cluster run's events file is the node's (over a shared file system): the mirror says its
    failure in mirror.log and mirror.json, never with a line of its own in that file."""
    from tests.plugins.base import free_port
    home = mosaic.home
    port = free_port()     # nothing listens there
    mosaic.run("daemon", "stop", check=True)
    (home.root / "settings.json").write_text(json.dumps({
        "cluster_poll_seconds": 0.5, "mirrors": {"mlflow": {"tracking_uri": f"http://127.0.0.1:{port}"}}}))
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "3000",
                           "--set", "rate=500", "--placement", "slurm", "--cpus", "1", "--time", "10",
                           "--mirror", "mlflow")
    run_dir = home.run_dir(run_id)
    wait_for(lambda: (run_dir / "mirror.log").exists() and "cannot open" in (run_dir / "mirror.log").read_text(),
             120, 0.2, what="the mirror's failure in its log")
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded" and run["summary"]["invalid"] == 0, run
    assert not [e for e in events_of(home, run_id) if e["type"] == "warning"]
    warned = json.loads((run_dir / "mirror.json").read_text())["mlflow"]["warned"]
    assert run["summary"]["warnings"] == [warned]      # the daemon took it from mirror.json
    steps = scalar_steps(home, run_id, "synthetic/value_0")
    assert steps == sorted(set(steps)) and steps[-1] >= 2990


def test_a_held_job_takes_no_slot_and_its_cancel_ends_the_run_at_slurms_end(slurm_daemon, mosaic):
    """A job Slurm holds (sbatch --hold: pending, JobHeldUser) is no local slot in `daemon status`;
    cancelled, it ends at once: its supervisor never ran, so no exit record is waited for, and the
    run's ended_at is the scheduler's EndTime, not when the daemon saw it."""
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10",
                           "--placement", "slurm", "--sbatch-arg=--hold")
    wait_for(lambda: mosaic.show(run_id)["resources"].get("queue_reason") == "JobHeldUser", 30, 0.2,
             what="the job held")
    status = mosaic.run("daemon", "status", check=True).stdout
    assert "; 0/" in status and "slots busy, 1 on a cluster (no slot)" in status, status
    assert "pending (JobHeldUser)" in mosaic.run("ls", check=True).stdout
    job_id = job_of(mosaic, run_id)
    mosaic.run("cancel", run_id, check=True)
    run = mosaic.show(run_id)
    assert run["state"] == "cancelled", run
    assert run["reason"] == f"cancelled by the user; slurm confirmed that job slurm:{job_id} ended (CANCELLED)", run
    info = slurm_daemon.job_info(job_id)
    assert "BatchHost" not in info, info   # it never ran
    assert run["ended_at"] == time.mktime(time.strptime(info["EndTime"], "%Y-%m-%dT%H:%M:%S")), (run, info)
    assert mosaic.run("delete", run_id, "--yes").returncode == 0
