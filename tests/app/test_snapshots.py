"""Snapshots of the main screens (pytest-textual-snapshot) on fixed data.

Update after an intended change with: pytest tests/app/test_snapshots.py --snapshot-update
"""
from __future__ import annotations

import pytest

from tests.app.conftest import (
    FIXED_NOW,
    RUN_IDS,
    FakeDaemon,
    fixed_events,
    fixed_home,
    fixed_runs,
    load_fixed,
    make_app,
    use_fake,
    wait_until,
)

SIZE = (120, 40)
SNAP_HOME = "/tmp/mosaic-snapshot-home"   # fixed: the title shows the home's path
# one home for the module, at one path: its tests run in one xdist process, one after another
pytestmark = pytest.mark.xdist_group("snapshots")


@pytest.fixture
def home():
    yield from fixed_home(SNAP_HOME)
LOG = "\n".join([f"global_step={i * 512}, episodic_return={i % 37}.0" for i in range(2000)]
                + ["SPS: 1234", "training done"]) + "\n"


def write_log(home) -> None:
    run_dir = home.run_dir(RUN_IDS[0])
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "stderr.log").write_text(LOG)


def test_runs_screen(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_runs_screen_filtered_and_selected(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        await pilot.press("space", "j", "j", "space", "j", "slash", *"a", "enter")   # the first and third rows
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_runs_screen_high_contrast(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        pilot.app.theme = "mosaic-high-contrast"
        await pilot.pause(0.3)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_run_metrics(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        pilot.app.open_run(RUN_IDS[0])
        await pilot.pause(0.5)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_run_logs(home, snap_compare):
    write_log(home)

    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        pilot.app.open_run(RUN_IDS[0], tab="logs")
        await pilot.pause(0.5)
        await pilot.press("slash", *"SPS", "enter")
        await pilot.pause(0.2)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_run_config(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        pilot.app.open_run(RUN_IDS[2], tab="config")
        await pilot.pause(0.5)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_new_run_form_with_an_invalid_field(home, snap_compare):
    fake = FakeDaemon()

    async def run_before(pilot):
        use_fake(pilot.app, fake)
        await load_fixed(pilot, pilot.app)
        await pilot.press("n")
        # the parameter fields mount a few at a time after the schema comes: the form is whole once
        # they all are (a fixed pause drew half a form on a loaded machine)
        from mosaic_tui.screens.new_run import NewRunScreen
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, NewRunScreen) and pilot.app.screen.schema
                         is not None and not pilot.app.screen.loading_schema, what="the whole form")
        await pilot.pause(0.3)
        pilot.app.screen.field("steps").editor.value = "-3"
        await pilot.pause(0.2)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_compare(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        pilot.app.open_compare([RUN_IDS[0], RUN_IDS[1]])
        await pilot.pause(0.5)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_workers(home, snap_compare):
    fake = FakeDaemon()

    async def run_before(pilot):
        use_fake(pilot.app, fake)
        await load_fixed(pilot, pilot.app)
        await pilot.press("w")
        await pilot.pause(0.4)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def test_help(home, snap_compare):
    async def run_before(pilot):
        await load_fixed(pilot, pilot.app)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
    assert snap_compare(make_app(home), terminal_size=SIZE, run_before=run_before)


def watch_app(home):
    from mosaic_tui.watch import WatchApp
    return WatchApp(home, "bravo", connect=False, clock=lambda: FIXED_NOW)


async def load_watch(pilot):
    app = pilot.app
    app.link.load(fixed_runs(), rev=20)
    app.link.feed_events(RUN_IDS[1], fixed_events())
    app.link.flush()
    await pilot.pause(0.3)
    app.refresh_view()
    await pilot.pause(0.2)
    # a plot drawn moments before the last points waits out its redraw budget
    # (metric_plot.py) before it shows them: draw every plot now, with all its data
    import time
    plots = [plot for plot in app.query("MetricPlot") if plot.display and plot.lines]
    for plot in plots:
        plot._next_draw_at = 0.0
        plot.refresh()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            plot._cache_key is None or plot._cache_key[-1] != plot.data_key() for plot in plots):
        await pilot.pause(0.05)
    await pilot.pause(0.1)


def test_watch_80x12(home, snap_compare):
    assert snap_compare(watch_app(home), terminal_size=(80, 12), run_before=load_watch)


def test_watch_60x8(home, snap_compare):
    assert snap_compare(watch_app(home), terminal_size=(60, 8), run_before=load_watch)
