"""The app and the CLI on a "laptop" driving a daemon on a "server" over a real OpenSSH link.

The server is this machine: Debian's openssh-server started by the test on
127.0.0.1 and a spare port, with its own host key and a throwaway client key
in a temp dir, and stopped at the end. The server's daemon has a home of its
own; nothing but the ssh-forwarded socket joins the two.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from daemon.home import Home
from tests.helpers import ROOT, _stop_everything, wait_for
from tests.plugins.sshd import SSHD, running_sshd

pytestmark = pytest.mark.skipif(not (os.path.exists(SSHD) and shutil.which("ssh")),
                                reason="openssh-server and openssh-client are needed")


@pytest.fixture
def sshd():
    """A real sshd on 127.0.0.1:<spare port> for this user; yields (ssh config file, host alias, process)."""
    with running_sshd() as server:
        yield server


@pytest.fixture
def server_home():
    path = tempfile.mkdtemp(prefix="mhs-", dir="/tmp")
    h = Home.resolve(path)
    yield h
    _stop_everything(h)
    shutil.rmtree(path, ignore_errors=True)


def remote_mosaic() -> str:
    """How the server runs mosaic: this checkout with this venv."""
    return f"cd {shlex.quote(str(ROOT))} && PYTHONPATH={shlex.quote(str(ROOT))} {shlex.quote(sys.executable)} -m mosaic_tui.cli"


def laptop(home, *args, ssh=None, check=True, timeout=120, env=None):
    cmd = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root)]
    if ssh:
        config, host, remote_home = ssh
        cmd += ["--ssh", host, "--ssh-config", config, "--remote-mosaic", remote_mosaic(), "--remote-home", remote_home]
    proc = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout, cwd=str(ROOT),
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"mosaic {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.mark.anyio
async def test_the_app_over_an_ssh_forwarded_socket_shows_a_runs_plot_and_frames_and_survives_a_dropped_link(
        sshd, server_home, home):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.remote import SSHForward
    from tests.app.conftest import wait_until
    config, host, sshd_proc = sshd
    ssh = (config, host, str(server_home.root))
    # the CLI over --ssh starts the server's daemon and submits there (a run long enough for a loaded
    # machine: it is cancelled at the end)
    run_id = laptop(home, "submit", "--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "40000",
                    "--set", "rate=400", "--frames", "--fps", "10", "--name", "far", ssh=ssh).stdout.strip()
    assert (server_home.runs_dir / run_id / "events.jsonl").exists()   # it is the server's run
    assert not home.db.exists()                                        # and nothing happened here
    forward = SSHForward(host, str(server_home.root), config, remote_mosaic()).start()
    try:
        # --socket (and $MOSAIC_SOCKET) on any command
        out = json.loads(laptop(home, "--socket", str(forward.local), "show", "far", "--json").stdout)
        assert out["id"] == run_id
        listed = json.loads(laptop(home, "ls", "--json", env={"MOSAIC_SOCKET": str(forward.local)}).stdout)
        assert [r["id"] for r in listed] == [run_id]
        app = MosaicApp(Home.resolve(home.root, forward.local), restore=False, remember=False, cursor_blink=False,
                        all_workers=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: run_id in app.link.runs, what="the server's run listed")
            app.open_run(run_id)

            def points():
                series = app.link.series.get(run_id)
                return sum(len(s) for s in series.tags.values()) if series else 0
            await wait_until(pilot, lambda: points() > 50, what="the run's telemetry over ssh")
            from mosaic_tui.widgets.metrics_pane import MetricsPane
            await wait_until(pilot, lambda: "synthetic/value_0" in app.screen.query_one(MetricsPane).plots,
                             what="its plot")
            await pilot.press("4")
            from mosaic_tui.widgets.frames_view import SOURCE_RELAY, FramesView
            view = app.screen.query_one(FramesView)
            await wait_until(pilot, lambda: view.source == SOURCE_RELAY and re.search(r"frame \d+", str(view.header_text())),
                             what="a frame through the daemon's relay")
            # the link drops: ssh dies; the watcher reopens it and the app reconnects by itself
            before = points()
            os.kill(forward.proc.pid, signal.SIGKILL)
            await wait_until(pilot, lambda: forward.restarts >= 1, timeout=30, what="the forwarding reopened")
            await wait_until(pilot, lambda: app.link.connected and points() > before + 50, timeout=60,
                             what="telemetry again after the reconnect")
    finally:
        forward.stop()
        laptop(home, "--socket", str(server_home.socket_path), "cancel", "far", check=False)
    assert not forward.local.exists()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_any_ending_of_the_client_ends_its_ssh_forward(sshd, server_home, home, sig):
    """`mosaic --ssh` killed with SIGTERM (or SIGKILL: no code of the client runs) leaves no
    ssh -N forward; after SIGTERM its socket file is gone too (after SIGKILL the next
    `mosaic --ssh` removes it)."""
    import psutil
    config, host, _ = sshd
    run_id = laptop(home, "submit", "--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000",
                    "--set", "rate=50", "--name", "long", ssh=(config, host, str(server_home.root))).stdout.strip()
    cmd = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "--ssh", host, "--ssh-config", config,
           "--remote-mosaic", remote_mosaic(), "--remote-home", str(server_home.root), "wait", run_id]
    client = subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def forward():
            for child in psutil.Process(client.pid).children():
                line = child.cmdline()
                if line and line[0] == "ssh" and "-N" in line:
                    return child, Path(line[line.index("-L") + 1].split(":")[0])
            return None
        ssh, local = wait_for(forward, 60, 0.1, "the client's ssh -N forward")
        wait_for(local.exists, 30, 0.1, "the forwarded socket")
        os.kill(client.pid, getattr(signal, sig))
        assert client.wait(30) == -getattr(signal, sig)
        wait_for(lambda: not ssh.is_running() or ssh.status() == psutil.STATUS_ZOMBIE, 10, 0.1,
                 "the ssh forward to end with its client")
        if sig == "SIGTERM":
            assert not local.exists()
        else:
            assert local.exists()
            laptop(home, "ls", ssh=(config, host, str(server_home.root)))
            assert not local.exists()
    finally:
        if client.poll() is None:
            client.kill()
        laptop(home, "--socket", str(server_home.socket_path), "cancel", run_id, check=False)


def test_the_sockets_of_gone_clients_are_removed_and_live_ones_kept(tmp_path):
    """A SIGKILLed client leaves its forward's socket: the next client removes it, by its pid (an
    older version's, named without one, when nothing listens on it); a live client's stays."""
    import socket

    from mosaic_tui.remote import remove_stale_sockets
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()

    def bound(name: str, listen: bool = False) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(tmp_path / name))
        if listen:
            s.listen()
        return s
    held = [bound(f"ssh-{gone.pid}-0123456789ab.sock"), bound(f"ssh-{os.getpid()}-0123456789ab.sock"),
            bound("ssh-aaaaaaaaaaaa.sock"), bound("ssh-bbbbbbbbbbbb.sock", listen=True)]
    try:
        removed = remove_stale_sockets(tmp_path)
    finally:
        for s in held:
            s.close()
    assert sorted(p.name for p in removed) == sorted([f"ssh-{gone.pid}-0123456789ab.sock", "ssh-aaaaaaaaaaaa.sock"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"ssh-{os.getpid()}-0123456789ab.sock",
                                                                 "ssh-bbbbbbbbbbbb.sock"])
