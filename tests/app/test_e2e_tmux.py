"""End to end: the real `mosaic` in tmux, driven with send-keys and read with capture-pane.

Open the app, submit a short CleanRL PPO run on CartPole-v1 from the form, watch
it finish, quit (detach), start again and find the run and its history.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def mosaic_command(home) -> str:
    script = Path(sys.executable).parent / "mosaic"
    exe = str(script) if script.exists() else f"{sys.executable} -m mosaic_tui.cli"
    return f"cd {ROOT} && TERM=tmux-256color {exe} --home {home.root}; echo MOSAIC-EXITED $?; sleep 600"


class Tmux:
    """One tmux server per pane (`-L <name>`), so panes of tests running side by side never share one.

    On the shared default server, killing the last session makes the server exit, and a
    `new-session` from another test in that moment fails with "server exited unexpectedly".
    """

    def __init__(self, name: str):
        self.name = name

    def tmux(self, *args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        env = dict(os.environ)
        env.pop("TMUX", None)
        return subprocess.run(["tmux", "-L", self.name, *args], check=check, env=env, **kwargs)

    def start(self, command: str, width: int = 120, height: int = 40) -> None:
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), command)

    def restart(self, command: str) -> None:
        """Run `command` in the pane again, killing what ran there: the session and server stay."""
        self.tmux("respawn-pane", "-k", "-t", self.name, command)

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", self.name, *(["-l"] if literal else []), *keys)
        time.sleep(0.15)

    def type(self, text: str) -> None:
        self.keys(text, literal=True)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name, capture_output=True, text=True).stdout

    def wait_for(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {texts!r}; the pane shows:\n{screen}")

    def kill(self) -> None:
        self.tmux("kill-server", check=False, capture_output=True)


def test_submit_from_the_form_watch_detach_and_reattach(home, mosaic):
    pane = Tmux(f"mosaic-e2e-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(home))
        pane.wait_for("0 runs", "No runs yet", timeout=60)   # the app started the daemon
        pane.keys("n")
        pane.wait_for("Parameters of cleanrl ppo", "ready: ctrl+s submits", timeout=60)
        screen = pane.screen()
        assert "CartPole-v1" in screen
        pane.keys("Tab", "Tab", "Tab")       # worker -> algo -> env -> name
        pane.type("e2e-ppo")
        pane.wait_for("e2e-ppo")
        pane.keys("Tab")                     # -> steps
        pane.type("2048")
        screen = pane.wait_for("2048", "ready: ctrl+s submits")
        assert any("name" in line and "e2e-ppo" in line for line in screen.splitlines())
        assert any("steps" in line and "2048" in line for line in screen.splitlines())
        pane.keys("C-s")
        # the form opens the new run: live metrics until it succeeds
        pane.wait_for("e2e-ppo", "cleanrl/ppo", "CartPole-v1", timeout=60)
        screen = pane.wait_for("e2e-ppo", "succeeded", timeout=300)
        screen = pane.wait_for("charts/episodic_return", "┤", timeout=60)
        assert "2048/2048 steps" in screen
        pane.keys("q")                       # detach
        pane.wait_for("MOSAIC-EXITED 0", timeout=20)
        shown = mosaic.show("e2e-ppo")       # the daemon kept it
        assert shown["state"] == "succeeded"

        pane.restart(mosaic_command(home))   # reattach: back where we left, with the history
        screen = pane.wait_for("e2e-ppo", "succeeded", "charts/episodic_return", "┤", timeout=60)
        assert "Metrics" in screen and "Logs" in screen
        pane.keys("2")
        pane.wait_for("stderr (s)", timeout=10)
        pane.keys("Escape")
        screen = pane.wait_for("1 run ", timeout=10)
        row = next(line for line in screen.splitlines() if "e2e-ppo" in line)
        assert "cleanrl" in row and "ppo" in row and "CartPole-v1" in row and "succeeded" in row
        assert "100%" in row
        pane.keys("q")
        pane.wait_for("MOSAIC-EXITED 0", timeout=20)
    finally:
        pane.kill()
