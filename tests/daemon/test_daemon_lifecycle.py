"""The daemon process: start, stop, one per home, stale sockets, deep homes, crash and re-adoption."""
from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

from daemon import proctree
from daemon import protocol as P
from daemon.home import Home
from tests.helpers import ROOT, Mosaic, connect, wait_for, wait_state


def _daemon_pid(home) -> int:
    return int(home.pid_file.read_text())


def test_start_status_stop(home, mosaic):
    proc = mosaic.run("daemon", "status")
    assert proc.returncode == 1 and "no daemon running" in proc.stdout
    mosaic.run("daemon", "start", check=True)
    status = json.loads(mosaic.run("daemon", "status", "--json", check=True).stdout)
    assert status["running"] and status["home"] == str(home.root)
    pid = status["pid"]
    # detached: own session, output in the home's log
    assert os.getsid(pid) == pid
    assert home.daemon_log.exists()
    # private socket in a private directory
    assert stat.S_IMODE(os.stat(home.socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(home.socket_path.parent).st_mode) == 0o700
    assert "already running" in mosaic.run("daemon", "start", check=True).stdout
    mosaic.run("daemon", "stop", check=True)
    assert not proctree.is_alive(pid)
    assert not home.socket_path.exists()


def test_any_command_starts_the_daemon(home, mosaic):
    assert "no runs" in mosaic.run("ls", check=True).stdout
    assert json.loads(mosaic.run("daemon", "status", "--json", check=True).stdout)["running"]
    mosaic.run("daemon", "stop", check=True)


def test_exactly_one_daemon_when_started_at_once(home):
    procs = [subprocess.Popen([sys.executable, "-m", "daemon", "--home", str(home.root)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=str(ROOT))
             for _ in range(4)]
    wait_for(lambda: sum(p.poll() is not None for p in procs) == 3, 30, what="3 of 4 daemons to give up")
    losers = [p for p in procs if p.poll() is not None]
    assert all(p.returncode == 3 for p in losers)
    assert all(b"already running" in p.stderr.read() for p in losers)
    winner = next(p for p in procs if p.poll() is None)
    wait_for(lambda: home.socket_path.exists(), 20, what="the winner's socket")
    with connect(home) as c:
        assert c.info["pid"] == winner.pid
    winner.send_signal(signal.SIGTERM)
    assert winner.wait(10) == 0


def test_stale_socket_of_a_killed_daemon_is_replaced(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    pid = _daemon_pid(home)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not proctree.is_alive(pid), 10)
    assert home.socket_path.exists()  # left behind
    mosaic.run("daemon", "start", check=True)
    assert _daemon_pid(home) != pid
    with connect(home) as c:
        assert c.call(P.STATUS)["pid"] == _daemon_pid(home)
    mosaic.run("daemon", "stop", check=True)


def test_deep_home_gets_a_short_socket_path():
    base = tempfile.mkdtemp(prefix="mh-deep-", dir="/tmp")
    deep = os.path.join(base, *(["a-rather-long-directory-name"] * 6))
    home = Home.resolve(deep)
    assert len(os.fsencode(home.root / "run" / "daemon.sock")) > 107
    assert len(os.fsencode(home.socket_path)) <= 107
    m = Mosaic(home)
    try:
        m.run("daemon", "start", check=True)
        run_id = m.synthetic(50, "rate=0")
        assert m.run("wait", run_id, "--timeout", "60").returncode == 0
        assert stat.S_IMODE(os.stat(home.socket_path.parent).st_mode) == 0o700
    finally:
        m.run("daemon", "stop")
        shutil.rmtree(base, ignore_errors=True)


def test_sigkill_daemon_runs_keep_training_and_are_readopted(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    long_run = mosaic.synthetic(6000, "rate=1000", "tags=1", "episode_every=0")
    short_run = mosaic.synthetic(800, "rate=1000", "tags=1", "episode_every=0", "exit_code=5")
    wait_state(home, long_run, P.RUNNING)
    wait_state(home, short_run, P.RUNNING)
    pid = _daemon_pid(home)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not proctree.is_alive(pid), 10)
    # no daemon: the short run finishes unobserved, the long one keeps writing
    events = home.run_dir(long_run) / "events.jsonl"
    size = events.stat().st_size
    wait_for(lambda: (home.run_dir(short_run) / "exit.json").exists(), 30, what="short run to end")
    assert events.stat().st_size > size
    # the supervisor's exit record: the status, and what the worker cost (CPU, peak RSS)
    record = json.loads((home.run_dir(short_run) / "exit.json").read_text())
    assert record["returncode"] == 5 and record["cpu_s"] > 0 and record["max_rss_mb"] > 5
    # any command brings the daemon back, which re-adopts
    assert mosaic.run("ls", check=True).returncode == 0
    short = mosaic.show(short_run)
    assert short["state"] == P.FAILED and short["exit_code"] == 5  # the real exit status
    assert mosaic.show(long_run)["state"] == P.RUNNING
    assert mosaic.run("wait", long_run, "--timeout", "60").returncode == 0
    run = mosaic.show(long_run)
    assert run["summary"]["steps"] == 6000
    # every line the worker wrote is in the file exactly once
    steps = [json.loads(l)["step"] for l in events.read_text().splitlines() if '"scalar"' in l]
    assert steps == list(range(1, 6001))
    mosaic.run("daemon", "stop")


def test_a_pid_reused_by_another_program_is_not_adopted(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.synthetic(10_000_000, "rate=100")
    wait_state(home, run_id, P.RUNNING)
    mosaic.run("daemon", "stop", check=True)
    # simulate: the supervisor is gone and its pid now names an unrelated process
    sup = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())
    proctree.signal_tree(sup["supervisor_pid"], signal.SIGKILL, include_root=True)
    wait_for(lambda: not proctree.is_alive(sup["supervisor_pid"]), 10)
    (home.run_dir(run_id) / "exit.json").unlink(missing_ok=True)
    impostor = subprocess.Popen(["sleep", "60"])
    from daemon.store import Store
    store = Store(home.db)
    store.update_run(run_id, pid=impostor.pid)  # the recorded pid, reused; its start time differs
    store.close()
    try:
        run = mosaic.show(run_id)
        assert run["state"] == P.LOST
        assert "pid reused" in run["reason"]
        assert impostor.poll() is None  # and the impostor was left alone
    finally:
        impostor.kill()
        mosaic.run("daemon", "stop")
