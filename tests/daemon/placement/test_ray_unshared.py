"""Ray runs whose home the nodes do not share (``placement.shared_home: false``, docs/cluster.md):
the job works in a directory of its node's own (daemon.event_echo), and its events come back
through the job's log into the run directory of the daemon's home (daemon/placement/ray_relay.py).

On one machine the node's directory is still elsewhere than the home: each job is given its own
``MOSAIC_NODE_RUNS`` (a directory of the test's, not under the home), and the tests check that the
job wrote nothing into the home's run directory (no supervisor.json, no supervisor.log: the job's
supervisor writes those beside its events), so the events there came through the log.

The jobs run on the head node (``node:__internal_head__``): with both test nodes on one host, the
second node's jobs report the head's agent port, and their log would be asked of the wrong agent
(a fixture artefact; the state API's log endpoint asks the node by its id, which is right).
The first tests need no cluster: the echo and the relay against each other, over a log kept here.
"""
from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from daemon.event_echo import CONFIG_ENV, NODE_RUNS_ENV
from daemon.placement import ray_relay
from tests.daemon.placement.test_ray_placement import WAIT, job_of, submit_config
from tests.helpers import ROOT, wait_for
from workers.synthetic_worker import SyntheticDescriptor

pytest_plugins = ["tests.plugins.ray_cluster"]
pytestmark = [pytest.mark.xdist_group("ray")]

ON_HEAD = {"node:__internal_head__": 0.001}


# -- the echo and the relay, without a cluster ----------------------------------------------------
class LogOf:
    """A backend whose job log is a file here: node_log answers its last ``lines`` lines."""

    def __init__(self, path):
        self.path = path
        self.asked: list[int] = []

    def job(self, job_id):
        return {"driver_node_id": "n1"}

    def node_log(self, node_id, filename, lines):
        self.asked.append(lines)
        data = self.path.read_bytes()
        if lines == -1:
            return data
        pieces = data.split(b"\n")
        return b"\n".join(pieces[-(lines + 1):])


def echo_a_run(tmp_path, steps: int, *sets: str) -> tuple[subprocess.CompletedProcess, str, str]:
    """The synthetic worker under daemon.event_echo, as a job would run it; its stdout: the job's log."""
    home_run_dir = str(tmp_path / "home" / "runs" / "R1")
    config = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": steps, "seed": 1,
              "params": dict(s.split("=", 1) for s in sets), "run_id": "R1"}
    config["params"] = {k: json.loads(v) for k, v in config["params"].items()}
    config = SyntheticDescriptor().validate(config)     # as the daemon gives it: every default in it
    env = {**os.environ, CONFIG_ENV: base64.b64encode(json.dumps(config).encode()).decode(),
           NODE_RUNS_ENV: str(tmp_path / "node"), "MOSAIC_RUN_DIR": home_run_dir, "MOSAIC_RUN_ID": "R1"}
    shim = [sys.executable, "-m", "daemon.shim", home_run_dir, "--grace", "5", "--",
            sys.executable, "-m", "workers.synthetic_worker.cli", "--config", "config.json"]
    proc = subprocess.run([sys.executable, "-m", "daemon.event_echo", "R1", home_run_dir, "--", *shim],
                          cwd=ROOT, env=env, capture_output=True, timeout=120)
    return proc, home_run_dir, str(tmp_path / "node" / "R1")


def test_the_echo_runs_the_supervisor_on_the_node_and_the_relay_rebuilds_its_files(tmp_path):
    proc, home_run_dir, node_dir = echo_a_run(tmp_path, 2500, "rate=0", "raise_message=\"boom\"")
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]   # the supervisor's own status
    assert not os.path.exists(home_run_dir)            # nothing of the run at the home's path
    node_events = open(os.path.join(node_dir, "events.jsonl"), "rb").read()
    assert node_events.count(b"\n") > 2500   # more than the first window (1,000 lines)
    log = tmp_path / "job.log"
    log.write_bytes(b"Running entrypoint for job j: ...\n" + proc.stdout)
    local = tmp_path / "local"
    local.mkdir()
    (local / "events.jsonl").touch()
    backend = LogOf(log)
    relay = ray_relay.LogRelay(str(local), "j")
    assert relay.read(backend)
    assert backend.asked == [1000, -1]     # the window did not reach back to the start: read again whole
    assert (local / "events.jsonl").read_bytes() == node_events
    record = json.loads((local / "exit.json").read_text())
    assert record["returncode"] == 1 and record == json.load(open(os.path.join(node_dir, "exit.json")))
    assert b"boom" in (local / "stderr.log").read_bytes()


def test_the_relay_repeats_nothing_and_loses_nothing_wherever_it_was_killed(tmp_path):
    """The local file's size is the cursor: a torn append (a daemon killed in its write) is a prefix,
    whose rest comes on the next read; a read after a whole append adds nothing."""
    node = b"".join(b'{"type": "scalar", "step": %d, "tag": "t", "value": %d}\n' % (i, i) for i in range(50))
    node += b'{"type": "scal'     # the worker died mid-line: echoed at the end without its newline
    lines, at = [], 0
    for line in node.split(b"\n")[:-1]:
        lines.append(b"\x1emosaic-event %d %s\n" % (at, line))
        at += len(line) + 1
    lines.append(b"\x1emosaic-eventpart %d %s\n" % (at, node[at:]))
    lines.append(b'\x1emosaic-exit {"returncode": 0, "signal": null}\n')
    log = tmp_path / "job.log"
    local = tmp_path / "run"
    local.mkdir()
    events = local / "events.jsonl"
    events.write_bytes(b'{"type": "before"}\n')    # what the run had before this job
    backend = LogOf(log)
    log.write_bytes(b"".join(lines[:20]) + lines[20][:30])    # a log line being written: not read yet
    relay = ray_relay.LogRelay(str(local), "j")
    assert not relay.read(backend)
    base = len(b'{"type": "before"}\n')
    assert json.loads((local / ray_relay.RELAY_FILE).read_text()) == {"job": "j", "base": base}
    assert events.read_bytes()[base:] == node[:sum(len(x) + 1 for x in node.split(b"\n")[:20])]
    # killed in the middle of its next append: the file holds part of a line
    before = events.read_bytes()
    log.write_bytes(b"".join(lines))
    relay2 = ray_relay.LogRelay(str(local), "j")      # a new daemon
    relay2.append(ray_relay.parse(log.read_bytes())[0], base)
    torn = events.read_bytes()
    events.write_bytes(torn[:len(before) + 37])
    assert ray_relay.LogRelay(str(local), "j").read(backend)
    assert events.read_bytes() == b'{"type": "before"}\n' + node
    # read again (killed before anything else was kept): nothing more
    os.unlink(local / "exit.json")
    assert ray_relay.LogRelay(str(local), "j").read(backend)
    assert events.read_bytes() == b'{"type": "before"}\n' + node


def test_what_an_unshared_run_cannot_do_is_refused_at_submit():
    config = {"placement": {"backend": "ray", "shared_home": False}}
    assert ray_relay.refusal(config) is None
    assert ray_relay.refusal({**config, "placement": {"backend": "ray"}, "frames": {"enabled": True}}) is None
    assert "frames" in ray_relay.refusal({**config, "frames": {"enabled": True}})
    assert "record" in ray_relay.refusal({**config, "record": {"episodes": 3}})
    assert "cannot read /x/model.pt" in ray_relay.refusal({**config, "checkpoint": "/x/model.pt"})


# -- on a real two-node Ray --------------------------------------------------------------------------
def unshared(tmp_path, **config) -> dict:
    node_runs = tmp_path / "node"
    return {"worker": "synthetic", "algo": "emit", "env": "none", **config,
            "placement": {"backend": "ray", "resources": ON_HEAD,
                          "runtime_env": {"env_vars": {NODE_RUNS_ENV: str(node_runs)}}}}


def node_dir(tmp_path, run_id: str):
    return tmp_path / "node" / run_id


def lines_of(path) -> list[bytes]:
    return open(path, "rb").read().splitlines(keepends=True)


def settled(mosaic, run_id: str, timeout: str = WAIT) -> dict:
    mosaic.run("wait", run_id, "--timeout", timeout)
    return mosaic.show(run_id)


def assert_only_through_the_log(mosaic, tmp_path, run_id: str) -> None:
    """The node's events file and the home's, line for line; the job wrote nothing into the home."""
    home_dir = mosaic.home.run_dir(run_id)
    node = node_dir(tmp_path, run_id)
    assert not str(node).startswith(str(mosaic.home.root))
    assert lines_of(home_dir / "events.jsonl") == lines_of(node / "events.jsonl")
    assert (node / "supervisor.json").exists() and (node / "supervisor.log").exists()
    assert not (home_dir / "supervisor.json").exists() and not (home_dir / "supervisor.log").exists()


def value_steps(mosaic, run_id: str) -> list[int]:
    rows = mosaic.run("metrics", run_id, "--csv", "--metric", "synthetic/value_0", check=True).stdout.splitlines()
    return [int(row.split(",")[1]) for row in rows[1:]]   # tag,step,value,t


def test_an_unshared_run_comes_back_through_the_job_log_every_line_once(ray_daemon, mosaic, tmp_path):
    path = mosaic.home.root / "config.json"
    path.write_text(json.dumps(unshared(tmp_path)))
    run_id = mosaic.submit(str(path), "--steps", "3000", "--set", "rate=1000", "--no-shared-home")
    run = settled(mosaic, run_id)
    assert run["state"] == "succeeded" and run["exit_code"] == 0, run
    assert run["config"]["placement"]["shared_home"] is False
    assert run["summary"]["steps"] == 3000
    assert_only_through_the_log(mosaic, tmp_path, run_id)
    steps = value_steps(mosaic, run_id)
    node_steps = [json.loads(line)["step"] for line in lines_of(node_dir(tmp_path, run_id) / "events.jsonl")
                  if b'"synthetic/value_0"' in line]
    assert steps == node_steps and steps == sorted(set(steps)) and len(steps) > 100
    record = ray_daemon.job(job_of(mosaic, run_id))
    assert record["entrypoint"].startswith("exec ") and "daemon.event_echo" in record["entrypoint"]
    assert record["metadata"]["mosaic_shared_home"] == "false"


def test_an_unshared_run_survives_its_daemon_killed_with_every_line_once(ray_daemon, mosaic, tmp_path):
    home = mosaic.home
    run_id = submit_config(mosaic, {**unshared(tmp_path, steps=6000, params={"rate": 600}),
                                    "placement": {**unshared(tmp_path)["placement"], "shared_home": False}})
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > 600, 120, 0.2, what="the run under way")
    job = job_of(mosaic, run_id)
    os.kill(int(home.pid_file.read_text()), signal.SIGKILL)
    # the job goes on with no daemon; its lines wait in its log
    logged = len(ray_daemon.job_logs(job))
    wait_for(lambda: len(ray_daemon.job_logs(job)) > logged, 60, 0.2, what="the job logging on with no daemon")
    mosaic.run("daemon", "start", check=True)
    run = settled(mosaic, run_id)
    assert run["state"] == "succeeded" and run["summary"]["steps"] == 6000, run
    assert_only_through_the_log(mosaic, tmp_path, run_id)
    steps = value_steps(mosaic, run_id)
    assert steps == sorted(set(steps)) and len(steps) == len(set(steps))


def test_an_unshared_run_that_fails_says_why(ray_daemon, mosaic, tmp_path):
    run_id = submit_config(mosaic, {**unshared(tmp_path, steps=200, params={"rate": 0,
                                                                               "raise_message": "the env broke"}),
                                    "placement": {**unshared(tmp_path)["placement"], "shared_home": False}})
    run = settled(mosaic, run_id)
    assert run["state"] == "failed" and run["exit_code"] == 1, run
    assert "the env broke" in run["reason"] or "the env broke" in (run.get("stderr_tail") or ""), run
    assert_only_through_the_log(mosaic, tmp_path, run_id)


def test_an_unshared_run_cannot_stop_but_cancels_and_refuses_frames(ray_daemon, mosaic, tmp_path):
    placement = {**unshared(tmp_path)["placement"], "shared_home": False}
    proc = mosaic.run("submit", str(_config(mosaic, {**unshared(tmp_path, steps=10), "placement": placement})),
                      "--frames")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "frames" in proc.stderr and "shared_home is false" in proc.stderr, proc.stderr
    run_id = submit_config(mosaic, {**unshared(tmp_path, steps=100000000, params={"rate": 100}),
                                    "placement": placement})
    wait_for(lambda: mosaic.show(run_id)["state"] == "running", 120, 0.2, what="the run running")
    proc = mosaic.run("stop", run_id, "--timeout", "30")
    assert proc.returncode != 0 and "cannot stop and continue" in proc.stderr, proc.stderr
    mosaic.run("cancel", run_id, check=True)
    run = settled(mosaic, run_id)
    assert run["state"] == "cancelled" and run["reason"] == "cancelled by the user", run
    record = json.loads((mosaic.home.run_dir(run_id) / "exit.json").read_text())   # through the log
    assert record["cancel_requested"]
    assert_only_through_the_log(mosaic, tmp_path, run_id)


def _config(mosaic, config: dict):
    path = mosaic.home.root / f"config-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
def test_a_cleanrl_ppo_run_trains_on_an_unshared_node(ray_daemon, mosaic, tmp_path):
    pytest.importorskip("torch")
    run_id = submit_config(mosaic, {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 2048,
                                    "params": {"num-steps": 128},
                                    "placement": {**unshared(tmp_path)["placement"], "shared_home": False,
                                                  "cpus": 1}})
    run = settled(mosaic, run_id, "300")
    assert run["state"] == "succeeded", run
    assert run["summary"]["steps"] == 2048 and run["summary"]["episodes"] > 10
    returns = mosaic.run("metrics", run_id, "--csv", "--metric", "charts/episodic_return", check=True).stdout
    assert len(returns.splitlines()) > 10
    assert_only_through_the_log(mosaic, tmp_path, run_id)
