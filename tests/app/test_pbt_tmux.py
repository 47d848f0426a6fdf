"""A PBT sweep's lineage in the real app in tmux at 80x24: `S` on a member's row opens the sweep
screen, whose lanes gain a copy mark and a line at each exploit while the population trains."""
from __future__ import annotations

import os
import shutil
import uuid

import pytest

from daemon import protocol as P
from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import connect

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

# 60 steps a second, a boundary every 600 of 2400 steps: an exploit every ~10 s, three in all (a loaded
# machine's app takes a while to start: the population trains long enough to be seen training)
SPEC = {"name": "pbt-tmux", "seed": 5,
        "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 2400, "seed": 1,
                 "params": {"rate": 60, "episode_every": 20}},
        "params": {"gain": {"uniform": [-1.0, 1.0]}}, "objective": {"tag": "episode/return", "last": 3},
        "pbt": {"population": 4, "interval": 600, "mutations": {"gain": {"factors": [0.8, 1.2]}}}}


def test_the_lineage_grows_on_the_sweep_screen_at_80x24(daemon, home):
    pane = Tmux(f"mosaic-pbt-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(home), width=80, height=24)
        pane.wait_for("No runs yet", timeout=60)   # the app is up before the sweep starts
        with connect(daemon) as client:
            client.call(P.SWEEP, spec=SPEC)
        pane.wait_for("pbt-tmux-m0", timeout=60)
        pane.keys("S")
        screen = pane.wait_for("lineage gain", "m0 ", "m3 ", timeout=60)
        first = pane.wait_for("m0 ", "copied m", "·  running  ·", timeout=120)   # a copy drawn, live
        screen = pane.wait_for("·  finished  ·", timeout=180)
        import time
        time.sleep(11)   # the runs' "run ended" toasts (10 s) fade
        screen = pane.screen()
        capture = os.environ.get("MOSAIC_PBT_CAPTURE")   # a copy of the pane with its colours, to look at
        if capture:
            with open(capture, "w") as f:
                f.write(pane.tmux("capture-pane", "-e", "-p", "-t", pane.name, capture_output=True, text=True).stdout)
        copies = [line for line in screen.splitlines() if " copied m" in line]
        assert len(copies) == 3, screen
        assert copies[0].lstrip().startswith("g2 ") and copies[-1].lstrip().startswith("g0 ")   # latest first
        lanes = [line for line in screen.splitlines() if line.lstrip()[:3] in ("m0 ", "m1 ", "m2 ", "m3 ")]
        assert len(lanes) == 4 and all(len(line) <= 80 for line in lanes), screen
        with connect(daemon) as client:
            sweep = client.call(P.SWEEP_GET, sweep="pbt-tmux")
        members = {m["id"]: m["member"] for m in sweep["members"]}
        for record in sweep["lineage"]:
            assert f"m{members[record['recipient']]} copied m{members[record['donor']]}" in screen
        assert "copied m" in first
    finally:
        pane.kill()
