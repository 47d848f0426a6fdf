"""The sweep screen's slice plots in a narrow terminal: as many as fit side by side, each whole,
the others a `v` away (drawn past the box's edge they were cut off unseen)."""
from __future__ import annotations

import pytest

from tests.app.conftest import make_app, screen_text

pytestmark = pytest.mark.anyio

PARAMS = {"return_offset": {"kind": "uniform", "low": 0, "high": 100, "log": False},
          "episode_every": {"kind": "int", "low": 4, "high": 10, "log": False},
          "frame_pattern": {"kind": "categorical", "values": ["noise", "cartpole"]}}


def sweep_record() -> dict:
    """What the daemon's sweep_get gives for a finished random sweep of three params."""
    trials = []
    for k, (offset, every, pattern) in enumerate([(85.4, 7, "noise"), (50.5, 4, "noise"), (43.6, 4, "cartpole"),
                                                  (12.7, 8, "noise")]):
        value = offset + 28.0
        trials.append({"trial": k, "state": "complete", "params": {"return_offset": offset, "episode_every": every,
                                                                   "frame_pattern": pattern},
                       "value": value, "mean": value, "std": 0.0, "min": value, "max": value,
                       "runs": [{"id": f"01RUN{k}", "name": f"why-t{k}-s7"}]})
    return {"id": "01SWEEP", "name": "why", "state": "finished", "groups": 4, "runs": 4, "trials": trials,
            "spec": {"params": PARAMS, "sampler": "random", "pruner": {"type": "none"},
                     "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"},
                     "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 7,
                              "params": {"rate": 0}}}}


async def test_slice_plots_fit_the_terminal_and_v_shows_the_next(home):
    from mosaic_tui.screens.sweep import SweepScreen
    from mosaic_tui.widgets.slice_plot import SlicePlot
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = SweepScreen("why")
        await app.push_screen(screen)
        screen.sweep = None
        screen.show(sweep_record())
        await pilot.pause(0.3)

        def shown() -> list[str]:
            return [p.border_title for p in screen.query(SlicePlot) if p.display]
        box = screen.query_one("#sweep-slices")
        assert shown() == ["return_offset"]
        for plot in screen.query(SlicePlot):
            if plot.display:   # whole: inside the box and the terminal
                assert plot.region.right <= box.region.right <= 80 and plot.size.width >= 24
        text = screen_text(app)
        assert "slices 1-1 of 3 (v: next)" in text, text
        await pilot.press("v")
        await pilot.pause(0.2)
        assert shown() == ["episode_every"] and "slices 2-2 of 3" in screen_text(app)
        await pilot.press("v", "v")
        await pilot.pause(0.2)
        assert shown() == ["return_offset"]

        await pilot.resize_terminal(170, 40)     # wide: all three side by side, v has nothing to do
        await pilot.pause(0.5)
        assert shown() == ["return_offset", "episode_every", "frame_pattern"]
        assert "slices" not in screen_text(app) and not screen.check_action("next_slices", ())
