"""`mosaic play` in a real terminal (tmux): the app opens on the Play screen, the keys sent to the
pane walk MiniGrid-Empty-5x5 (seed 0) to its goal, the pane shows the return, and the run ends
succeeded with a positive return in the store and in `mosaic metrics`; at 80x24 the screen still
draws its seat line, its numbers and its key map."""
from __future__ import annotations

import json
import re
import shutil
import sys
import uuid
from pathlib import Path

import pytest

from tests.app.test_e2e_tmux import Tmux
from tests.helpers import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

ENV = "MiniGrid-Empty-5x5-v0"


def play_command(home, *args: str) -> str:
    script = Path(sys.executable).parent / "mosaic"
    exe = str(script) if script.exists() else f"{sys.executable} -m mosaic_tui.cli"
    return (f"cd {ROOT} && TERM=tmux-256color {exe} --home {home.root} play {' '.join(args)}; "
            f"echo MOSAIC-EXITED $?; sleep 600")


def the_play(mosaic) -> dict:
    runs = json.loads(mosaic.run("ls", "--json", check=True).stdout)
    assert len(runs) == 1 and runs[0]["worker"] == "human", runs
    return runs[0]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_mosaic_play_in_tmux_walks_to_the_goal(home, mosaic, size):
    pane = Tmux(f"mosaic-play-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(play_command(home, ENV, "--seed", "0", "--episodes", "1"), width=size[0], height=size[1])
        screen = pane.wait_for("you hold the seat", "forward", "turn: one step a key", timeout=90)
        for shown in ("step 0", "return 0", "left", "right", "pickup", "toggle", "esc Back"):
            assert shown in screen, (shown, screen)
        assert re.search(r"↑\s+forward", screen), screen
        pane.wait_for("frame 1")                 # the first frame, through FastLane
        pane.keys("x")                           # plays nothing: said, nothing sent
        pane.wait_for("x plays nothing here")
        for key in ("Up", "Up", "Right", "Up", "Up"):
            pane.keys(key)
        screen = pane.wait_for("the play ended: succeeded", timeout=60)
        found = re.search(r"return (0\.\d+)", screen)
        assert found and float(found.group(1)) > 0, screen
        run = the_play(mosaic)
        assert run["state"] == "succeeded" and run["summary"]["returns"][-1] > 0, run
        rows = mosaic.run("metrics", run["id"], "--csv", "--metric", "episode/return", check=True).stdout.splitlines()
        assert len(rows) == 2 and float(rows[1].split(",")[2]) == pytest.approx(float(found.group(1)), abs=1e-3)
        pane.keys("q")                           # detach: the app ends, the finished play says nothing more
        screen = pane.wait_for("MOSAIC-EXITED", timeout=30)
        assert "MOSAIC-EXITED 0" in screen, screen
    finally:
        pane.kill()
