"""Upgrading while runs train: a daemon of this version re-adopts runs an older one started, under
that version's supervisor (tests/fixtures/supervisor_178c97b, pinned: it has no SIGUSR1 handler),
and a client of this version meets daemons older than itself.

The older daemon itself cannot run here (its whole tree would have to be pinned): what it did to
start a run, the test does (the same store row, run directory and supervisor command), then the
current daemon takes over as it does after `git pull` and `mosaic daemon restart`. A daemon older
than the client is a socket that answers hello as 178c97b's did.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from daemon import proctree
from daemon import protocol as P
from daemon.store import Store, new_ulid
from tests.helpers import ROOT, connect, events_of, kill_until_gone, processes_marked, wait_for, wait_state

OLD_SUPERVISOR = ROOT / "tests" / "fixtures" / "supervisor_178c97b"


def _start_under_old_supervisor(home, name: str, steps: int = 10**7) -> tuple[str, int]:
    """A synthetic run started as 178c97b's daemon started it: its record, its directory, and
    its supervisor (178c97b's shim); returns the run's id and that supervisor's pid."""
    from daemon import discovery
    desc = discovery.discover()[0]["synthetic"]
    config = desc.validate(desc.canonical_config({"worker": "synthetic", "algo": "emit", "env": "none",
                                                  "steps": steps, "seed": 1, "name": name,
                                                  "params": {"rate": 2000.0, "episode_every": 200}}))
    run_id = new_ulid()
    config.update(run_id=run_id, name=name)
    home.ensure()
    run_dir = home.run_dir(run_id)
    for sub in ("", "checkpoints", "tensorboard"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    (run_dir / "events.jsonl").touch()
    env = {**os.environ, "MOSAIC_RUN_ID": run_id, "MOSAIC_RUN_DIR": str(run_dir),
           "MOSAIC_HOME": str(home.root), "PYTHONUNBUFFERED": "1"}
    # `python -m daemon.shim` of 178c97b: its package first on the path of the supervisor alone
    # (the worker it starts is this checkout's, as a PYTHONPATH would not leave it)
    shim = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(OLD_SUPERVISOR)!r}); "
                                  f"from daemon.shim import main; sys.exit(main())"]
    with open(run_dir / "supervisor.log", "ab") as out:
        popen = subprocess.Popen([*shim, str(run_dir), "--grace", "5", "--nice", "10", "--",
                                  *desc.command(config)], cwd=run_dir, env=env, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
    store = Store(home.db)
    try:
        store.create_run({"id": run_id, "name": name, "worker": "synthetic", "algo": "emit", "env": "none",
                          "config": config, "state": P.QUEUED, "created_at": time.time(),
                          "summary": {"total_steps": steps}, "sweep": None, "trial": None})
        store.update_run(run_id, state=P.STARTING, started_at=time.time(), pid=popen.pid,
                         pid_start=proctree.start_time(popen.pid), resources={})
    finally:
        store.close()
    # the test's child: reaped by a thread, so its end is seen as the daemon would see it
    threading.Thread(target=popen.wait, daemon=True).start()
    wait_for(lambda: (run_dir / "supervisor.json").exists(), 30, what="the old supervisor's record")
    assert "capabilities" not in json.loads((run_dir / "supervisor.json").read_text())
    return run_id, popen.pid


def _adopted_and_under_way(home, mosaic, run_id: str) -> dict:
    mosaic.run("daemon", "start", check=True)
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 500, 60, what="the re-adopted run's steps")
    return mosaic.show(run_id)


def _end(mosaic, run_id: str) -> None:
    """The daemon stopped, and whatever of the run a failed test left (an orphaned worker is no
    supervisor's to end)."""
    mosaic.run("daemon", "stop")
    kill_until_gone(lambda: processes_marked("MOSAIC_RUN_ID", run_id), 20)


def _worker_pid(home, run_id: str) -> int:
    return json.loads((home.run_dir(run_id) / "supervisor.json").read_text())["worker_pid"]


def test_a_stop_a_re_adopted_older_supervisor_cannot_take_is_refused_and_cancel_ends_it(home, mosaic):
    run_id, shim_pid = _start_under_old_supervisor(home, "old-one")
    try:
        run = _adopted_and_under_way(home, mosaic, run_id)
        assert run["state"] == P.RUNNING and run["pid"] == shim_pid
        refused = mosaic.run("stop", run_id, "--timeout", "30", timeout=60)
        assert refused.returncode != 0, refused.stdout
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "supervisor is from an older mosaic" in refused.stderr and "mosaic cancel old-one" in refused.stderr
        # nothing was sent: the old supervisor and its worker train on, the run with them
        assert proctree.is_alive(shim_pid) and proctree.is_alive(_worker_pid(home, run_id))
        # the daemon sees a supervisor's end at once (its pidfd): steps it took in after the refusal
        # prove that supervisor, and its worker, went on
        at = mosaic.show(run_id)["summary"].get("steps", 0)
        wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > at, 30, 0.1, what="steps after the refusal")
        run = mosaic.show(run_id)
        assert run["state"] == P.RUNNING and not run["stop_requested"], run["reason"]
        assert proctree.is_alive(shim_pid)

        # what that supervisor understands, it is sent: SIGTERM, and nothing of the run is left
        assert mosaic.run("cancel", run_id).returncode == 0
        run = mosaic.show(run_id)
        assert run["state"] == P.CANCELLED, run
        assert json.loads((home.run_dir(run_id) / "exit.json").read_text())["cancel_requested"] is True
        assert processes_marked("MOSAIC_RUN_ID", run_id) == set()
    finally:
        _end(mosaic, run_id)


def test_a_lost_run_whose_processes_run_on_says_so_and_is_cancelled(home, mosaic):
    """The issue's ending: the old supervisor died of a SIGUSR1 (what the daemon sent before it read
    supervisors' records) and its worker trains on, a child of init."""
    run_id, shim_pid = _start_under_old_supervisor(home, "orphaned")
    try:
        _adopted_and_under_way(home, mosaic, run_id)
        worker = _worker_pid(home, run_id)
        os.kill(shim_pid, signal.SIGUSR1)
        run = wait_state(home, run_id, [P.LOST], timeout=30)
        assert proctree.is_alive(worker)
        assert run["resources"]["orphans"][0][0] == worker, run["resources"]
        assert f"pids {worker}" in run["reason"] and "mosaic cancel orphaned" in run["reason"], run["reason"]
        listing = mosaic.run("ls", check=True).stdout
        assert "lost, still running" in next(line for line in listing.splitlines() if "orphaned" in line)
        refused = mosaic.run("continue", run_id)
        assert refused.returncode != 0 and "its processes still run" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
        # a daemon started later knows them still (the record holds them)
        mosaic.run("daemon", "restart", check=True)
        assert "lost, still running" in mosaic.run("ls", check=True).stdout

        done = mosaic.run("cancel", run_id)
        assert done.returncode == 0, done.stdout + done.stderr
        run = mosaic.show(run_id)
        assert run["state"] == P.CANCELLED and "after it was lost" in run["reason"], run
        assert not run["resources"].get("orphans")
        assert not proctree.is_alive(worker) and processes_marked("MOSAIC_RUN_ID", run_id) == set()
        assert "still running" not in mosaic.run("ls", check=True).stdout
    finally:
        _end(mosaic, run_id)


def test_a_lost_run_whose_processes_end_outside_mosaic_is_no_longer_said_to_run(home, mosaic):
    """`kill PID` of the worker, the issue's way out: the run stays lost, with what it wrote meanwhile."""
    run_id, shim_pid = _start_under_old_supervisor(home, "killed-by-hand")
    try:
        _adopted_and_under_way(home, mosaic, run_id)
        worker = _worker_pid(home, run_id)
        os.kill(shim_pid, signal.SIGKILL)
        at_loss = wait_state(home, run_id, [P.LOST], timeout=30)["summary"]["steps"]
        wait_for(lambda: max(e.get("step") or 0 for e in events_of(home, run_id)) > at_loss + 200, 30,
                 what="the orphaned worker's steps")
        os.kill(worker, signal.SIGTERM)
        run = wait_for(lambda: (lambda r: r if not r["resources"].get("orphans") else None)(mosaic.show(run_id)),
                       30, what="the daemon to see the orphaned worker's end")
        assert run["state"] == P.LOST and run["reason"].endswith("ran on without it until they ended"), run["reason"]
        assert run["summary"]["steps"] > at_loss + 200   # what it wrote unsupervised was read
        assert "still running" not in mosaic.run("ls", check=True).stdout
    finally:
        _end(mosaic, run_id)


# -- a client newer than its daemon -------------------------------------------------------------
class OlderDaemon:
    """A socket answering as an older daemon: hello as ``hello`` says, every method it lacks with
    METHOD_NOT_FOUND, as 178c97b answered `stop`."""

    def __init__(self, home, hello: dict, lacks: set[str]):
        home.ensure()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(home.socket_path))
        self.sock.listen(8)
        self.hello, self.lacks, self.asked = hello, lacks, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn, conn.makefile("rb") as lines:
                for line in lines:
                    req = json.loads(line)
                    self.asked.append(req["method"])
                    if req["method"] == P.HELLO:
                        reply = {"jsonrpc": "2.0", "id": req["id"], "result": self.hello}
                    elif req["method"] in self.lacks:
                        reply = {"jsonrpc": "2.0", "id": req["id"], "error": {
                            "code": P.METHOD_NOT_FOUND, "message": f"unknown method {req['method']!r}"}}
                    else:
                        reply = {"jsonrpc": "2.0", "id": req["id"], "result": {
                            "pid": self.hello["pid"], "epoch": "x", "uptime": 5.0, "home": "h", "socket": "s",
                            "runs": {}, "active": 0, "max_concurrent": 2, "clients": 1, "rss_bytes": 0, "rev": 0}}
                    conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        self.sock.close()


def test_a_client_newer_than_its_daemon_says_so_and_how_to_restart_it(home, mosaic):
    from daemon.version import version
    hello = {"protocol": 1, "epoch": "1a2-7", "pid": 4242, "home": str(home.root), "rev": 0, "placement": None}
    old = OlderDaemon(home, hello, {P.STOP, P.CONTINUE, P.SEAT, P.ACT})
    try:
        refused = mosaic.run("stop", "some-run")
        assert refused.returncode != 0
        line = refused.stderr.strip()
        assert len(line.splitlines()) == 1, line
        assert "is older than this mosaic" in line and "has no 'stop'" in line and "pid 4242" in line, line
        assert "`mosaic daemon restart`" in line and "re-adopted" in line and version() in line, line
        status = mosaic.run("daemon", "status")
        assert status.returncode == 0 and "version ?" in status.stdout
        assert "the daemon is older than this mosaic" in status.stdout and "mosaic daemon restart" in status.stdout
    finally:
        old.close()
        home.socket_path.unlink()
    # one that lists its methods is not even asked for one it lacks
    old = OlderDaemon(home, {**hello, "version": "0.0.9", "methods": sorted(P.METHODS - {P.STOP})}, set())
    try:
        refused = mosaic.run("stop", "some-run")
        assert "version 0.0.9" in refused.stderr and "has no 'stop'" in refused.stderr, refused.stderr
        assert P.STOP not in old.asked
    finally:
        old.close()


def test_hello_and_status_carry_the_version_and_restart_re_adopts_the_runs(daemon, mosaic):
    from daemon.version import version
    with connect(daemon) as client:
        assert client.info["version"] == version() and set(client.info["methods"]) == P.METHODS
        before = client.call(P.STATUS)
    assert before["version"] == version()
    status = mosaic.run("daemon", "status", check=True).stdout
    assert f"version {version()}" in status and "this mosaic is" not in status

    run_id = mosaic.synthetic(10**7, "rate=2000")
    run = wait_state(daemon, run_id, [P.RUNNING], timeout=60)
    out = mosaic.run("daemon", "restart", check=True).stdout
    assert out.startswith("daemon restarted") and "1 active run re-adopted" in out, out
    with connect(daemon) as client:
        assert client.info["pid"] != before["pid"]
        again = client.call(P.GET, run=run_id)
    assert again["state"] == P.RUNNING and again["pid"] == run["pid"]   # the same supervisor, adopted
    steps = again["summary"].get("steps", 0)
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) > steps, 30, what="the run's new steps")
    mosaic.run("cancel", run_id, check=True)
