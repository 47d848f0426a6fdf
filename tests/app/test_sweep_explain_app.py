"""The sweep explained in the app, against a real daemon and a running sweep: the slice plots gain a
point as each trial finishes, Optuna's importances come once two have, and `i` changes the evaluator."""
from __future__ import annotations

import pytest
import yaml

from tests.app.conftest import screen_text, wait_until

pytestmark = pytest.mark.anyio


def _why(app) -> str:
    from textual.widgets import Static
    return str(app.screen.query_one("#sweep-why", Static).render())


async def test_the_sweep_screen_explains_a_running_sweep_as_its_trials_finish(daemon, mosaic, tmp_path):
    from mosaic_tui import sweep_explain as X
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.sweep import SweepScreen
    from mosaic_tui.widgets.slice_plot import SlicePlot
    # a trial's value is return_offset + 35 (the last 3 episodes of 40 steps, one every 5); frame_pattern
    # changes nothing. 8 steps a second: each trial runs for 5 s, several of the screen's refreshes
    spec = {"name": "live", "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 1,
                                     "params": {"rate": 8, "episode_every": 5}},
            "params": {"return_offset": [0, 50, 100], "frame_pattern": ["noise", "cartpole"]}, "trials": 4,
            "parallel": 1, "objective": {"tag": "episode/return", "last": 3}}
    path = tmp_path / "live.yaml"
    path.write_text(yaml.safe_dump(spec))
    mosaic.run("sweep", str(path), check=True)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(170, 48)) as pilot:
        await app.push_screen(SweepScreen("live"))
        screen = app.screen

        def points() -> list[int]:
            return [len(p.plot["points"]) for p in screen.query(SlicePlot)]
        await wait_until(pilot, lambda: screen.sweep is not None and points() == [1, 1], 60, "one finished trial")
        plots = {p.border_title: p for p in screen.query(SlicePlot)}
        assert set(plots) == {"return_offset", "frame_pattern"}
        assert str(plots["return_offset"].render()).count("●") == 1          # the point, drawn
        assert "has 1 finished trial" in _why(app) and screen.importances is None
        # the next refresh after a trial finishes: a point more in each plot (on a busy machine the
        # daemon's answers can lag a trial or two behind)
        await wait_until(pilot, lambda: points()[0] >= 2 and points()[0] == points()[1], 90, "more finished trials")
        await wait_until(pilot, lambda: screen.importances is not None, 60, "the importances")
        assert set(screen.importances) == {"return_offset", "frame_pattern"}
        await wait_until(pilot, lambda: screen.sweep["state"] == "finished" and points() == [4, 4], 90,
                         "the sweep to finish")
        await wait_until(pilot, lambda: screen.importances is not None and screen._explained[1][-1][0] == 3, 60,
                         "the importances of all four trials")
        sweep = screen.sweep
        # Optuna's default evaluator on the four trials; the offset is what matters
        assert screen.importances == X.importances(sweep, "ped-anova")
        assert list(screen.importances)[0] == "return_offset"
        best = X.best_trials(sweep)[0]
        assert best["params"]["return_offset"] == 100 and best["value"] == 135
        why = _why(app)
        assert "importance (PED-ANOVA, i: next)" in why and why.index("return_offset  ") < why.index("frame_pattern  ")
        first = next(line for line in why.splitlines() if line.startswith("#1 "))
        assert first.startswith(f"#1 trial {best['trial']}  135 over 1 seed  ") and "return_offset=100" in first
        assert "config synthetic emit on none, 40 steps, episode_every=5  rate=8" in why
        assert str(plots["return_offset"].render()).count("●") >= 3          # trials at 3 offsets: 3 columns at least
        assert "return_offset" in screen_text(app)
        await pilot.press("i")                                  # fANOVA, from a thread
        await wait_until(pilot, lambda: screen.importances is not None, 60, "fANOVA's importances")
        assert screen.importances == X.importances(sweep, "fanova", seed=0)
        assert "importance (fANOVA, i: next)" in _why(app)
