"""The real `mosaic` started again and again under CPU load, with a large "since the app last
closed" summary and a run's screen to reopen: it always draws, and `q` always quits (issue 29,
item 1). A busy-loop process per core runs at nice 0 meanwhile, as on the loaded machine where
six launches in a row started to a blank screen that ignored q. The last launch goes over a
real OpenSSH forward (`mosaic --ssh`), whose daemon keeps a summary of its own."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from daemon import protocol as P
from daemon.home import Home
from mosaic_tui import uistate
from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.cli.test_remote import remote_mosaic, server_home, sshd  # noqa: F401  (fixtures)
from tests.helpers import ROOT, wait_state

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

RUNS = 12
LAUNCHES = 4


def busy_cores() -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]


def away_since_an_hour(home: Home, run_to_reopen: str) -> None:
    """ui-state as an app left it an hour ago, before any of the runs: each is news, and the
    run's screen (its Metrics tab) is reopened under the summary."""
    uistate.save_state(home, {"last_seen": {"t": time.time() - 3600, "runs": {}},
                              "screen": "run", "run": run_to_reopen, "tab": "metrics"})


def launch_and_quit(pane: Tmux, command: str, q_after: float, first: bool) -> str:
    """Start the app, press q after ``q_after`` seconds (again each second if need be, as a user
    would); return the screen it showed. It must have drawn something and ended, exit code 0."""
    (pane.start if first else pane.restart)(command)
    time.sleep(q_after)
    deadline = time.monotonic() + 45
    shown = ""
    while time.monotonic() < deadline:
        screen = pane.screen()
        if "MOSAIC-EXITED" in screen:
            assert "MOSAIC-EXITED 0" in screen, screen
            return shown
        if screen.strip():
            shown = screen
        pane.keys("q")
        time.sleep(1.0)
    raise AssertionError(f"the app did not quit on q in 45 s; the pane shows:\n{pane.screen()}")


def test_the_app_starts_and_quits_under_load_with_a_large_away_summary(daemon, mosaic, sshd, server_home):  # noqa: F811
    ids = [mosaic.synthetic(5, "rate=0", "episode_every=2", name=f"away-{i:02d}") for i in range(RUNS)]
    for run_id in ids:
        wait_state(daemon, run_id, P.FINAL_STATES, timeout=120)
    config, host, _ = sshd
    far = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", "--home", str(server_home.root), "--ssh", host,
                          "--ssh-config", config, "--remote-mosaic", remote_mosaic(), "--remote-home",
                          str(server_home.root), "submit", "--worker", "synthetic", "--algo", "emit", "--env", "none",
                          "--steps", "5", "--set", "rate=0", "--name", "far-away"],
                         capture_output=True, text=True, timeout=120, check=True).stdout.strip()
    wait_state(server_home, far, P.FINAL_STATES, timeout=120)
    pane = Tmux(f"mosaic-load-{uuid.uuid4().hex[:8]}")
    busy = busy_cores()
    try:
        for i in range(LAUNCHES):
            away_since_an_hour(daemon, ids[i])
            # q at once (while the first screens mount), or once it has had time to draw
            shown = launch_and_quit(pane, mosaic_command(daemon), q_after=0.3 if i % 2 == 0 else 3.0,
                                    first=i == 0)
            if i % 2:
                assert "away-" in shown, shown        # it drew, under load, before q
        # over ssh: the remote daemon's own summary (ui-state-<hash>.json for HOST:<its socket>)
        label = f"{host}:{server_home.socket_path}"
        away_since_an_hour(Home.resolve(daemon.root, "/unused", label), far)
        ssh = (f"cd {ROOT} && TERM=tmux-256color {sys.executable} -m "
               f"mosaic_tui.cli --home {daemon.root} --ssh {host} --ssh-config {config} --remote-mosaic "
               f"'{remote_mosaic()}' --remote-home {server_home.root}; echo MOSAIC-EXITED $?; sleep 600")
        shown = launch_and_quit(pane, ssh, q_after=6.0, first=False)
        assert "far-away" in shown and "away-00" not in shown, shown   # the server's runs, not the local ones
        assert json.loads(uistate.state_path(Home.resolve(daemon.root, "/unused", label)).read_text())[
            "last_seen"]["runs"] == {far: "succeeded"}
    finally:
        for proc in busy:
            proc.kill()
        pane.kill()
