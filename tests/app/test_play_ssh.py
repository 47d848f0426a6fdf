"""`mosaic --ssh HOST play ENV` over a real OpenSSH link (the sshd of tests/cli/test_remote.py): the
play runs on the server's daemon, the app here draws its frames through the daemon's relay, and
the keys sent to the pane walk MiniGrid-Empty-5x5 (seed 0) to its goal; detached with its second
episode to play, the exit line's `cancel` command (with the --ssh options it needs) ends it."""
from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import uuid

import pytest

from tests.app.test_e2e_tmux import Tmux
from tests.cli.test_remote import laptop, remote_mosaic, server_home, sshd  # noqa: F401 -- fixtures
from tests.helpers import ROOT, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def test_a_play_over_ssh_reaches_the_goal(sshd, server_home, home):  # noqa: F811 -- fixtures
    config, host, _ = sshd
    command = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "--ssh", host,
               "--ssh-config", config, "--remote-mosaic", remote_mosaic(), "--remote-home", str(server_home.root),
               "play", "MiniGrid-Empty-5x5-v0", "--seed", "0", "--episodes", "2", "--name", "far-play"]
    pane = Tmux(f"mosaic-play-ssh-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(f"cd {ROOT} && TERM=tmux-256color {shlex.join(command)}; echo MOSAIC-EXITED $?; sleep 600")
        screen = pane.wait_for("you hold the seat", "forward", timeout=120)
        pane.wait_for("relay", "frame 1", timeout=60)      # no shared memory here: the daemon's relay
        for key in ("Up", "Up", "Right", "Up", "Up"):
            pane.keys(key)
        screen = pane.wait_for("episode 1 ended", timeout=60)
        assert re.search(r"return 0\.\d+", screen), screen
        pane.keys("q")
        assert "MOSAIC-EXITED 0" in pane.wait_for("MOSAIC-EXITED", timeout=30)
        said = pane.tmux("capture-pane", "-p", "-J", "-t", pane.name, capture_output=True, text=True).stdout
    finally:
        pane.kill()
    cancel = re.search(r"`(mosaic [^`]* cancel far-play)` ends it", said)
    assert cancel, said
    words = shlex.split(cancel.group(1))
    assert words[words.index("--ssh") + 1] == host and words[words.index("--ssh-config") + 1] == config
    proc = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", *words[1:]], capture_output=True, text=True,
                          cwd=str(ROOT), timeout=120)
    assert proc.returncode == 0, proc.stderr
    # the server's run, in the server's store
    socket = ["--socket", str(server_home.socket_path)]
    run = wait_for(lambda: (lambda r: r if r["state"] == "cancelled" else None)(
        json.loads(laptop(home, *socket, "show", "far-play", "--json").stdout)), 60, 0.5, what="the play cancelled")
    rows = laptop(home, *socket, "metrics", "far-play", "--csv", "--metric", "episode/return").stdout.splitlines()
    assert len(rows) == 2 and float(rows[1].split(",")[2]) > 0, rows
    moves = (server_home.run_dir(run["id"]) / "moves.jsonl").read_text().splitlines()
    assert [json.loads(m)["action"] for m in moves] == [2, 2, 1, 2, 2]
    assert not home.db.exists()           # nothing ran here


@pytest.mark.anyio
async def test_after_the_ssh_link_drops_and_comes_back_the_first_key_plays(sshd, server_home, home):  # noqa: F811
    """The app over a real ssh forward holds a play's seat; ssh is killed (the daemon leaves the seat
    with the lost connection), the forward reopens and the app reconnects: the first key after that
    plays, the seat taken again before it (it was refused, "take it first", and lost)."""
    import os
    import signal

    from daemon.home import Home
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.remote import SSHForward
    from mosaic_tui.screens.play import PlayScreen
    from tests.app.conftest import screen_text, wait_until
    from tests.cli.test_remote import laptop as cli
    config, host, _ = sshd
    run_id = cli(home, "submit", "--worker", "human", "--algo", "play", "--env", "MiniGrid-Empty-5x5-v0", "--seed",
                 "0", "--set", "episodes=1", "--name", "relinked",
                 ssh=(config, host, str(server_home.root))).stdout.strip()
    moves = server_home.run_dir(run_id) / "moves.jsonl"

    def moved() -> int:
        return len(moves.read_text().splitlines()) if moves.exists() else 0
    forward = SSHForward(host, str(server_home.root), config, remote_mosaic()).start()
    try:
        app = MosaicApp(Home.resolve(home.root, forward.local), restore=False, remember=False, cursor_blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: run_id in app.link.runs, timeout=60, what="the server's play listed")
            app.open_play(run_id)
            await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding
                             and app.screen.state.last, timeout=120, what="the seat and the first episode")
            screen = app.screen
            await pilot.press("up")
            await wait_until(pilot, lambda: moved() == 1, timeout=30, what="the first move")
            client = app.link.client
            os.kill(forward.proc.pid, signal.SIGKILL)
            await wait_until(pilot, lambda: app.link.connected and app.link.client is not client, timeout=60,
                             what="the app connected again")
            await pilot.press("up")
            await wait_until(pilot, lambda: moved() == 2, timeout=30, what="the first key after the reconnect")
            assert screen.holding and "take it first" not in screen_text(app)
    finally:
        forward.stop()
        cli(home, "--socket", str(server_home.socket_path), "cancel", "relinked", check=False)
