"""Stop and continue from the keyboard, in the real app in tmux: `z` on a training run's screen
stops it with its checkpoint (the state says stopped), `z` again continues it, and the plot goes
on from where it stopped, on the same axis."""
from __future__ import annotations

import re
import shutil
import uuid

import pytest

from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def steps_shown(screen: str) -> float:
    """The header's "43.4k/400.0k steps": the steps done (-1 when not shown)."""
    found = re.search(r"([\d.,]+)([kM]?)/[\d.,]+[kM]? steps", screen)
    if not found:
        return -1
    return float(found.group(1).replace(",", "")) * {"": 1, "k": 1e3, "M": 1e6}[found.group(2)]


def test_z_stops_a_run_and_z_continues_it_and_the_plot_goes_on(home, mosaic):
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "400000",
                           "--set", "num-steps=128", "--set", "update-epochs=1", "--name", "zz-ppo")
    wait_for(lambda: (mosaic.show(run_id)["summary"] or {}).get("steps", 0) > 2000, 120, 0.2, what="training")
    pane = Tmux(f"mosaic-stop-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(home))
        pane.wait_for("zz-ppo", "running", timeout=60)
        pane.keys("Enter")                                   # the run's screen: live metrics
        pane.wait_for("charts/episodic_return", "┤", "running", timeout=60)
        pane.keys("z")
        screen = pane.wait_for("stopped", timeout=120)
        stopped_at = mosaic.show(run_id)["summary"]["stopped"]["step"]
        assert 0 < stopped_at < 400000
        assert "┤" in screen                                 # the plot stays, up to the stop
        pane.keys("z")                                       # continue
        pane.wait_for("running", timeout=60)
        wait_for(lambda: steps_shown(pane.screen()) > stopped_at + 4096, 180, 0.5,
                 what="the steps shown to go on past the stop")
        screen = pane.screen()
        assert "┤" in screen and "charts/episodic_return" in screen
        run = mosaic.show(run_id)
        assert run["state"] == "running" and run["restarts"] == 1
        mosaic.run("cancel", run_id)
    finally:
        pane.kill()
