"""Plots a researcher can read: short round ticks, RLlib's per-iteration reports
without stripes, returns and losses first, timings folded, pinned tags on top."""
from __future__ import annotations

import json
import re

import pytest

from tests.app.conftest import FIXED_NOW, RUN_IDS, load_fixed, make_app, screen_text, wait_until

SIZE = (120, 40)
pytestmark = pytest.mark.anyio

ENG = re.compile(r"^-?\d+(\.\d+)?(e-?\d+|[kMGT])?$")


def scalar(tag: str, value: float, step: int) -> dict:
    return {"v": 1, "type": "scalar", "t": FIXED_NOW - 1000 + step / 100, "tag": tag, "value": value, "step": step}


def axis_labels(plot) -> tuple[list[str], list[str]]:
    """(y tick labels, x tick labels) as drawn."""
    lines = plot.render().plain.splitlines()
    ys = [line.split("┤")[0].strip() for line in lines if "┤" in line]
    xs = lines[-1].split()
    return [y for y in ys if y], xs


async def open_metrics(pilot, app, events, run=RUN_IDS[0]):
    await load_fixed(pilot, app, events_for=())
    app.link.feed_events(run, events)
    app.link.flush()
    app.open_run(run)
    await pilot.pause(0.5)
    from mosaic_tui.widgets.metrics_pane import MetricsPane
    return app.screen.query_one(MetricsPane)


async def test_ticks_are_short_and_round(home):
    from mosaic_tui import fmt
    events = []
    for step in range(1, 4138):
        events.append(scalar("losses/tiny", 1.27e-4 + 1.59e-4 * (step % 97) / 96, step))
        events.append(scalar("charts/big", -2.1e6 + 600.0 * step, step))
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_metrics(pilot, app, events)
        await pilot.press("0")      # no smoothing: the raw range
        await pilot.pause(0.2)
        tiny_y, tiny_x = axis_labels(pane.plots["losses/tiny"])
        big_y, big_x = axis_labels(pane.plots["charts/big"])
        for label in tiny_y + big_y:
            assert len(label) <= 8 and ENG.match(label), label
        assert all("e-4" in label for label in tiny_y), tiny_y          # 1.5e-4, not 0.000150
        assert any(label.endswith("M") for label in big_y), big_y        # -2M, not -2000000.0
        for labels in (tiny_x, big_x):
            values = [fmt.eng_value(label) for label in labels]
            assert len(values) >= 3 and all(v % 500 == 0 for v in values), labels   # 0, 1k, 1.5k: not 4137


async def test_iteration_reports_make_no_stripes(home):
    # RLlib hands over an iteration's episodes together, all at the iteration's
    # last step: two iterations of 200 steps, fifty episodes each, returns rising
    events = []
    for i in range(1, 3):
        for j in range(50):
            events.append({"v": 1, "type": "episode", "t": FIXED_NOW - 1000 + i, "step": 200 * i,
                           "return": 500.0 * (i - 1) + 10.0 * j, "length": 20})
        events.append(scalar("env_runners/episode_return_mean", 100.0 * i, 200 * i))
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_metrics(pilot, app, events)
        await pilot.press("0")
        await pilot.pause(0.2)
        lines = pane.plots["episode/return"].render().plain.splitlines()
        rows = [line.split("┤", 1)[1] if "┤" in line else line.split("│", 1)[-1]
                for line in lines if "┤" in line or line.lstrip().startswith("│")]
        width = max(len(r) for r in rows)
        dots_per_column = [sum(1 for r in rows if c < len(r) and 0x2800 < ord(r[c]) <= 0x28FF)
                           for c in range(width)]
        # a rising line crosses at most a few rows per column; a stripe fills its column
        assert max(dots_per_column) <= 2, dots_per_column
        # a per-iteration mean sits in the middle of its iteration: the first at step 100
        ser = pane.plots["env_runners/episode_return_mean"].lines[0].series
        assert ser.plot_steps()[:2].tolist() == [100.0, 300.0]
        assert ser.steps[:2].tolist() == [200.0, 400.0]       # the telemetry keeps what was reported


RLLIB_TAGS = ["learners/default_policy/entropy", "timers/training_iteration", "learners/default_policy/policy_loss",
              "env_runners/episode_return_mean", "time_this_iter_s", "env_runners/env_step_timer",
              "env_runners/num_env_steps_sampled_lifetime_throughput/throughput_since_last_reduce",
              "learners/default_policy/vf_loss", "env_runners/num_episodes"]


def grid_tags(pane, grid: str) -> list[str]:
    return [p.tag for p in pane.query_one(grid).children]


async def test_returns_and_losses_first_timings_folded_pins_remembered(home):
    events = [scalar(tag, float(k), 200 * k) for k in range(1, 6) for tag in RLLIB_TAGS]
    events += [{"v": 1, "type": "episode", "t": FIXED_NOW - 900, "step": 200, "return": 9.0, "length": 9}]
    app = make_app(home, remember=True)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_metrics(pilot, app, events)
        assert grid_tags(pane, "#main-plots") == [
            "episode/return", "env_runners/episode_return_mean", "episode/length",
            "learners/default_policy/entropy", "learners/default_policy/policy_loss",
            "learners/default_policy/vf_loss", "env_runners/num_episodes"]
        assert sorted(grid_tags(pane, "#timing-plots")) == sorted([
            "timers/training_iteration", "time_this_iter_s", "env_runners/env_step_timer",
            "env_runners/num_env_steps_sampled_lifetime_throughput/throughput_since_last_reduce"])
        from textual.widgets import Collapsible
        folder = pane.query_one("#timings", Collapsible)
        assert folder.collapsed and "timings and throughput: 4 tags" in screen_text(app) + str(folder.title)
        assert "timers/training_iteration" not in screen_text(app)
        await pilot.press("f")
        await pilot.pause(0.2)
        assert not folder.collapsed
        # pin the entropy plot, then a timing: both go to the top, in pin order
        pane.plots["learners/default_policy/entropy"].focus()
        await pilot.press("m")
        await pilot.pause(0.2)
        pane.plots["timers/training_iteration"].focus()
        await pilot.press("m")
        await pilot.pause(0.3)
        assert grid_tags(pane, "#main-plots")[:3] == ["learners/default_policy/entropy",
                                                      "timers/training_iteration", "episode/return"]
        assert "timers/training_iteration" not in grid_tags(pane, "#timing-plots")
        assert app.focused is pane.plots["timers/training_iteration"]
        await pilot.press("q")
    saved = json.loads((home.root / "ui-state.json").read_text())
    assert saved["pinned_tags"] == ["learners/default_policy/entropy", "timers/training_iteration"]

    app = make_app(home, restore=True, remember=True)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app, events_for=())
        app.link.feed_events(RUN_IDS[0], events)
        app.link.flush()
        await wait_until(pilot, lambda: app.screen.query("MetricsPane"), what="the run reopened")
        await pilot.pause(1.2)
        pane = app.screen.query_one("MetricsPane")
        await wait_until(pilot, lambda: len(pane.plots) == len(RLLIB_TAGS) + 2, what="every plot")
        assert grid_tags(pane, "#main-plots")[:2] == ["learners/default_policy/entropy", "timers/training_iteration"]
        # unpinning sends a tag back to its group
        pane.plots["timers/training_iteration"].focus()
        await pilot.press("m")
        await pilot.pause(0.3)
        assert "timers/training_iteration" in grid_tags(pane, "#timing-plots")
        assert app.ui_state["pinned_tags"] == ["learners/default_policy/entropy"]


def test_plot_steps_grow_like_a_full_pass():
    # the app extends the x of a live series as points arrive; it must equal placing them all at once
    import numpy as np

    from mosaic_tui.series import Series, spread_steps
    rng = np.random.default_rng(14)
    for _ in range(200):
        steps = np.sort(rng.integers(0, 50, size=int(rng.integers(1, 60)))).astype(float)
        series, i = Series(), 0
        while i < len(steps):
            chunk = steps[i:i + int(rng.integers(1, 5))]
            series.extend(chunk, np.zeros(len(chunk)), np.zeros(len(chunk)))
            i += len(chunk)
            assert np.allclose(series.plot_steps(), spread_steps(series.steps))
    # two episodes at 200 share (0, 200], three at 400 share (200, 400], one at 600 sits at 500
    assert np.allclose(spread_steps(np.array([200.0, 200, 400, 400, 400, 600])),
                       [50, 150, 200 + 200 / 6, 300, 400 - 200 / 6, 500])


def test_ticks_that_would_share_a_row_are_thinned_top_down():
    """plotext keeps one of two labels on a row by set order (PYTHONHASHSEED): never hand it two."""
    from mosaic_tui.widgets.metric_plot import apart
    assert apart([50.0, 100.0], 2.4, 133.4, 2) == [100.0]
    assert apart([0.0, 50.0, 100.0], 0.0, 100.0, 9) == [0.0, 50.0, 100.0]
    assert apart([0.0, 25.0, 50.0, 75.0, 100.0], 0.0, 100.0, 3) == [0.0, 50.0, 100.0]
