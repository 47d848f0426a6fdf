"""The report view's figure (`f`, mosaic_tui/screens/report.py): drawn as a sixel image where the
terminal draws images, as a half-block preview with a line saying so where it does not; drawn
again for the new groups when `b` changes the grouping; `F` the next figure, `s` saves it."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from mosaic_tui.graphics.detect import Capabilities
from tests.app.conftest import make_app
from tests.app.report_setup import open_report, results_runs, wait_until

pytestmark = pytest.mark.anyio


def finished_runs() -> list[dict]:
    return [r for r in results_runs() if r["state"] == P.SUCCEEDED]


def sixel_terminal() -> Capabilities:
    return Capabilities(graphics="sixel", colors="truecolor", cell_px=(10, 20), cell_px_measured=True,
                        in_tmux=False, kitty=False, sixel=True, reason="the terminal answered DA1 with 4",
                        sixel_colors=256, background=(0, 0, 0))


async def test_the_figure_as_sixel_follows_the_grouping(home, tmp_path):
    from mosaic_tui.widgets.frames_view import FrameCanvas
    app = make_app(home, graphics=sixel_terminal())
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(pilot, app, finished_runs())
        canvas = screen.query_one(FrameCanvas)
        assert not canvas.display or not screen.figure_shown
        await pilot.press("f")
        await wait_until(pilot, lambda: screen.figure_for is not None and screen.figure_for[1] == id(screen.whole),
                         "the figure")
        await pilot.pause(0.2)
        assert canvas.frame is not None and canvas.frame.ndim == 3
        assert canvas.drawn_as == "sixel"
        data, cells = canvas.image_sequence()
        assert data.startswith("\x1bP") and cells.width > 20          # a sixel sequence, most of the width
        header = str(screen.query_one("#figure-header").render())
        assert "intervals" in header and "graphics: sixel" in header and "2 groups" in header
        first = canvas.frame

        # b: by the param alone; the figure is drawn again for the new report
        await pilot.press("b")
        await wait_until(pilot, lambda: screen.whole is not None and screen.whole["by"] == ["rate"]
                         and screen.figure_for is not None and screen.figure_for[1] == id(screen.whole),
                         "the figure of the new grouping")
        assert canvas.frame is not first
        assert [g["group"] for g in screen.whole["groups"]] == ["10", "20"]

        # F: the next figure, the performance profiles
        await pilot.press("F")
        await wait_until(pilot, lambda: screen.figure_for is not None and screen.figure_for[0] == "profiles",
                         "the profiles")
        assert "profiles" in str(screen.query_one("#figure-header").render())
        drawn = canvas.frame.shape

        # a smaller terminal: drawn again for the canvas' new size
        await pilot.resize_terminal(90, 30)
        await wait_until(pilot, lambda: screen.figure_for is not None
                         and screen.figure_for[2:] == tuple(canvas.size) and canvas.size.width == 90, "the new size")
        assert canvas.frame.shape[1] < drawn[1]

        # s: the figure as PDF, SVG and PNG in the exports folder
        await pilot.press("s")
        await wait_until(pilot, lambda: len(screen.last_figure) == 3, "the saved figure")
        assert [p.rsplit(".", 1)[1] for p in screen.last_figure] == ["pdf", "svg", "png"]
        assert open(screen.last_figure[1]).read().count('id="profile-') == 2

        # f again: the table is back
        await pilot.press("f")
        await pilot.pause()
        assert not screen.figure_shown and screen.query_one("#report-scroll").display


async def test_the_figure_where_the_terminal_draws_no_images(home):
    from mosaic_tui.widgets.frames_view import FrameCanvas
    app = make_app(home)                 # no capabilities: half-blocks
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(pilot, app, finished_runs())
        await pilot.press("f")
        await wait_until(pilot, lambda: screen.figure_for is not None, "the figure")
        await pilot.pause(0.2)
        canvas = screen.query_one(FrameCanvas)
        assert canvas.drawn_as == "halfblock" and canvas.frame is not None
        header = str(screen.query_one("#figure-header").render())
        assert "this terminal draws no images" in header and "s saves the figure" in header
        # curves need the runs' episodes from the daemon: without one, a line says so
        for _ in range(3):
            await pilot.press("F")
        await wait_until(pilot, lambda: screen.figure_note != "", "the curves' note")
        assert "curves: learning curves need the daemon" in str(screen.query_one("#figure-header").render())


async def test_learning_curves_from_the_daemon(daemon, mosaic):
    """Real synthetic-worker runs: the curves read each run's episodes from the daemon."""
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.report import ReportScreen
    from tests.cli.test_report import MEANS, _submit
    from tests.helpers import wait_state
    ids = [_submit(mosaic, f"c-s{seed}", seed, every, 0) for seed, every in ((1, 50), (2, 100))]
    ids += [_submit(mosaic, "d-s1", 1, 100, 30)]
    for rid in ids:
        wait_state(mosaic.home, rid, "succeeded", timeout=120)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False, graphics=sixel_terminal())
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(app.link.runs) == 3 and app.link.connected, "the runs")
        screen = ReportScreen("3 runs", lambda r: r["id"] in ids, [["return_offset"]])
        app.push_screen(screen)
        await wait_until(pilot, lambda: screen.whole is not None, "the bootstrap")
        for _ in range(3):                                     # from intervals: profiles, poi, curves
            await pilot.press("F")
        await wait_until(pilot, lambda: screen.figure_for is not None and screen.figure_for[0] == "curves",
                         "the curves", rounds=1200)
        assert screen.query_one("FrameCanvas").drawn_as == "sixel"
        curve = screen.curve
        assert list(curve["groups"]) == ["0", "30"] and curve["grid"][-1] == 1000
        # at the last step each run's score is the report's: the mean of its last 20 returns
        assert curve["groups"]["0"]["mean"][-1] == pytest.approx((MEANS[50] + MEANS[100]) / 2)
        assert curve["groups"]["30"]["mean"][-1] == pytest.approx(MEANS[100] + 30)
