"""`mosaic --ssh HOST play ENV` over a real OpenSSH link (the sshd of tests/test_remote.py): the
play runs on the server's daemon, the app here draws its frames through the daemon's relay, and
the keys sent to the pane walk MiniGrid-Empty-5x5 (seed 0) to its goal."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import sys
import uuid

import pytest

from tests.app.test_e2e_tmux import Tmux
from tests.helpers import ROOT
from tests.test_remote import laptop, remote_mosaic, server_home, sshd  # noqa: F401 -- fixtures

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def test_a_play_over_ssh_reaches_the_goal(sshd, server_home, home):  # noqa: F811 -- fixtures
    config, host, _ = sshd
    command = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "--ssh", host,
               "--ssh-config", config, "--remote-mosaic", remote_mosaic(), "--remote-home", str(server_home.root),
               "play", "MiniGrid-Empty-5x5-v0", "--seed", "0", "--episodes", "1", "--name", "far-play"]
    pane = Tmux(f"mosaic-play-ssh-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(f"cd {ROOT} && TERM=tmux-256color {shlex.join(command)}; echo MOSAIC-EXITED $?; sleep 600")
        screen = pane.wait_for("you hold the seat", "forward", timeout=120)
        pane.wait_for("relay", "frame 1", timeout=60)      # no shared memory here: the daemon's relay
        for key in ("Up", "Up", "Right", "Up", "Up"):
            pane.keys(key)
        screen = pane.wait_for("the play ended: succeeded", timeout=60)
        assert re.search(r"return 0\.\d+", screen), screen
        pane.keys("q")
        assert "MOSAIC-EXITED 0" in pane.wait_for("MOSAIC-EXITED", timeout=30)
    finally:
        pane.kill()
    # the server's run, in the server's store
    socket = ["--socket", str(server_home.socket_path)]
    run = json.loads(laptop(home, *socket, "show", "far-play", "--json").stdout)
    assert run["state"] == "succeeded"
    rows = laptop(home, *socket, "metrics", "far-play", "--csv", "--metric", "episode/return").stdout.splitlines()
    assert len(rows) == 2 and float(rows[1].split(",")[2]) > 0, rows
    moves = (server_home.run_dir(run["id"]) / "moves.jsonl").read_text().splitlines()
    assert [json.loads(m)["action"] for m in moves] == [2, 2, 1, 2, 2]
    assert not home.db.exists()           # nothing ran here
