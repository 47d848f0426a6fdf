"""The Frames tab and `mosaic watch`'s frames pane: a real FastLane ring, half-blocks on screen."""
from __future__ import annotations

import copy
import json
import re

import numpy as np
import pytest

from tests.app.conftest import RUN_IDS, fixed_runs, load_fixed, make_app, screen_text, wait_until

SIZE = (120, 40)

pytestmark = pytest.mark.anyio



def frames_run(run_id: str) -> dict:
    run = copy.deepcopy(fixed_runs()[1])        # bravo, running
    run.update(id=run_id, name="pictures", rev=99)
    run["config"]["frames"] = {"enabled": True, "fps": 20, "max_dim": 300}
    return run


def cells_of(app, y: int) -> list[tuple[str, object]]:
    """(character, style) of every cell of screen line y."""
    strip = app.screen._compositor.render_strips()[y]
    cells = []
    for seg in strip:
        for ch in seg.text:
            cells.append((ch, seg.style))
    return cells


def canvas_origin(app):
    from mosaic_tui.widgets.frames_view import FrameCanvas
    canvas = app.screen.query_one(FrameCanvas)
    return canvas, canvas.content_region


def header(app) -> str:
    views = app.screen.query("FramesView")
    return str(views.first().header_text()) if views else ""


def frame_number(app) -> int:
    match = re.search(r"frame (\d+)", header(app))
    assert match, header(app)
    return int(match.group(1))


def expected_cells(frame: np.ndarray, cols: int, rows: int):
    """Independent of the renderer: block means of the frame fitted into the box."""
    from mosaic_tui.graphics.halfblock import fit_cells
    h0, w0 = frame.shape[:2]
    w, h = fit_cells(w0, h0, cols, rows)
    return w, h


async def test_frames_tab_draws_the_ring_and_steps_back_while_paused(home, writer):
    from workers.fastlane.demo import Patterns
    # a frame of four flat quadrants (colours known without any resizing maths), then demo patterns
    patterns = Patterns(160, 96)
    for n in range(1, 6):
        writer.publish(patterns.frame(n))
    quad = np.zeros((96, 160, 3), dtype=np.uint8)
    quad[:48, :80] = (250, 10, 10)
    quad[:48, 80:] = (10, 250, 10)
    quad[48:, :80] = (10, 10, 250)
    quad[48:, 80:] = (240, 240, 20)
    quad_n = writer.publish(quad)
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
        app.link.flush()
        await pilot.pause()
        app.open_run(writer.run_id, tab="frames")
        await wait_until(pilot, lambda: re.search(r"frame \d+", header(app)), what="a frame shown")
        await pilot.pause(0.1)
        assert frame_number(app) == quad_n
        text = header(app)
        assert "shared memory" in text and "160x96" in text and "graphics: halfblock" in text
        canvas, region = canvas_origin(app)
        w, h = expected_cells(quad, region.width, region.height)
        rows_used = h // 2
        left = region.x + (region.width - w) // 2
        top = region.y + (region.height - rows_used) // 2
        # sample each quadrant's centre cell: upper half-block, fg = top pixel, bg = bottom pixel
        for (fy, fx), colour in {(0.25, 0.25): (250, 10, 10), (0.25, 0.75): (10, 250, 10),
                                 (0.75, 0.25): (10, 10, 250), (0.75, 0.75): (240, 240, 20)}.items():
            y = top + int(rows_used * fy)
            x = left + int(w * fx)
            ch, style = cells_of(app, y)[x]
            assert ch == "\u2580", (x, y, ch)
            assert style.color.triplet == colour and style.bgcolor.triplet == colour, (x, y, style)
        # the image is framed by the widget's background: nothing is drawn outside the fitted box
        if left > region.x:
            ch, style = cells_of(app, top)[region.x]
            assert ch == " "

        # live: a newer frame replaces it
        for n in range(quad_n + 1, quad_n + 4):
            writer.publish(patterns.frame(n))
        await wait_until(pilot, lambda: frame_number(app) == quad_n + 3, what="the newest frame")
        # the shown cells are the demo pattern's colours (not the quadrants any more)
        ch, style = cells_of(app, top + rows_used // 2)[left + w // 2]
        assert style.color.triplet != (240, 240, 20)

        await pilot.press("space")
        assert "paused" in header(app)
        writer.publish(patterns.frame(quad_n + 4))       # ignored while paused
        await pilot.pause(0.2)
        assert frame_number(app) == quad_n + 3
        await pilot.press("left", "left", "left")
        assert frame_number(app) == quad_n
        ch, style = cells_of(app, top + int(rows_used * 0.25))[left + int(w * 0.25)]
        assert style.color.triplet == (250, 10, 10)          # the quadrant frame again
        await pilot.press("l")
        assert frame_number(app) == quad_n + 1
        await pilot.press("space")                            # resume: the newest again
        await wait_until(pilot, lambda: frame_number(app) == quad_n + 4, what="resumed")
        assert "paused" not in header(app)


async def test_no_frames_tab_for_a_run_without_frames(home):
    from textual.widgets import TabbedContent
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[1], tab="frames")        # a remembered Frames tab falls back to Metrics
        await pilot.pause(0.1)
        tabs = app.screen.query_one(TabbedContent)
        assert tabs.active == "metrics"
        assert not tabs.query("#frames")
        assert "Frames" not in screen_text(app)
        await pilot.press("4")
        assert tabs.active == "metrics"
        assert not app.screen.query("FramesView")


async def test_frames_tab_present_for_a_run_with_frames(home, writer):
    from textual.widgets import TabbedContent
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
        app.link.flush()
        await pilot.pause()
        app.open_run(writer.run_id)
        await pilot.pause(0.1)
        assert "Frames" in screen_text(app)
        await pilot.press("4")
        assert app.screen.query_one(TabbedContent).active == "frames"
        assert "no frame yet" in header(app)
        writer.publish(np.full((40, 60, 3), 200, dtype=np.uint8))
        await wait_until(pilot, lambda: "frame 1" in header(app), what="first frame")


async def open_frames(app, pilot, writer):
    app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
    app.link.flush()
    await pilot.pause()
    app.open_run(writer.run_id, tab="frames")
    writer.publish(np.full((40, 60, 3), (30, 60, 200), dtype=np.uint8))
    await wait_until(pilot, lambda: "frame 1" in header(app), what="first frame")
    await pilot.pause(0.1)
    return app.screen.query_one("FrameCanvas")


async def test_sixel_frames_are_placed_and_fall_back_under_a_notification(home, writer):
    from textual.geometry import Region

    from mosaic_tui.graphics.detect import detect
    app = make_app(home, graphics=detect("sixel", fd=-1))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        canvas = await open_frames(app, pilot, writer)
        assert canvas.drawn_as == "sixel"
        assert "graphics: sixel" in header(app) and "drawn as" not in header(app)
        lines = canvas.render_lines(Region(0, 0, *canvas.size))
        # the image rides on the last line as one zero-width control segment
        image = [seg for seg in lines[-1] if seg.control and "\x1bP" in seg.text]
        assert len(image) == 1 and image[0].text.endswith("\x1b\\")
        assert all(strip.cell_length == canvas.size.width for strip in lines)
        # a toast over the canvas: half-blocks until it goes, so the image cannot cover it
        app.notify("submitted", timeout=30)
        await wait_until(pilot, lambda: canvas.drawn_as.startswith("halfblock"), what="fallback")
        assert "drawn as half-blocks: a notification is on top" in header(app)
        app.clear_notifications()
        await wait_until(pilot, lambda: canvas.drawn_as == "sixel", what="image again")


async def test_kitty_images_are_deleted_when_the_tab_is_left(home, writer):
    from mosaic_tui.graphics.detect import detect
    app = make_app(home, graphics=detect("kitty", fd=-1))
    async with app.run_test(size=SIZE) as pilot:
        written: list[str] = []
        real_write = app._driver.write
        app._driver.write = lambda data: (written.append(data), real_write(data))
        canvas = await open_frames(app, pilot, writer)
        assert canvas.drawn_as == "kitty"
        assert not any("a=d" in data for data in written)
        await pilot.press("1")                         # the Metrics tab
        await wait_until(pilot, lambda: any("\x1b_Ga=d,d=I,i=7301" in data for data in written),
                         what="kitty delete")


async def test_kitty_inside_tmux_draws_half_blocks(home, writer):
    from mosaic_tui.graphics.detect import detect
    caps = detect("kitty", fd=-1)
    caps.in_tmux = True
    app = make_app(home, graphics=caps)
    async with app.run_test(size=SIZE) as pilot:
        canvas = await open_frames(app, pilot, writer)
        assert canvas.drawn_as == "halfblock (kitty through tmux)"
        assert "graphics: kitty (drawn as half-blocks: kitty through tmux)" in header(app)


async def test_watch_frames_pane_toggles(home, writer):
    from mosaic_tui.watch import WatchApp
    from tests.app.conftest import FIXED_NOW
    writer.publish(np.full((40, 60, 3), (30, 60, 200), dtype=np.uint8))
    app = WatchApp(home, "pictures", connect=False, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(100, 20)) as pilot:
        app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
        app.link.flush()
        await pilot.pause()
        app.pick_run()
        await wait_until(pilot, lambda: app.screen.query("FramesView") and "frame 1" in
                         str(app.screen.query_one("FramesView").header_text()), what="watch frames")
        assert app.screen.has_class("-frames")
        assert "(30, 60, 200)" in repr([str(s.style) for s in app.screen._compositor.render_strips()[5]]) or \
            any(seg.style and seg.style.bgcolor and seg.style.bgcolor.triplet == (30, 60, 200)
                for strip in app.screen._compositor.render_strips() for seg in strip)
        await pilot.press("f")
        assert not app.screen.has_class("-frames")
        await pilot.press("f")
        assert app.screen.has_class("-frames")


async def test_relay_through_a_real_daemon(daemon, mosaic, tmp_path):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.widgets.frames_view import FramesView
    config = tmp_path / "frames.json"
    config.write_text(json.dumps({"worker": "synthetic", "algo": "emit", "env": "none", "steps": 100000,
                                  "params": {"rate": 200}, "frames": {"enabled": True, "fps": 20, "max_dim": 300}}))
    rid = mosaic.submit(str(config))
    try:
        app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: rid in app.link.runs and app.link.connected, what="run listed")
            app.open_run(rid, tab="frames")
            await wait_until(pilot, lambda: app.screen.query("FramesView") and
                             re.search(r"frame \d+", header(app)) and "shared memory" in header(app),
                             timeout=30, what="frames from shared memory")
            view = FramesView(rid, relay=True, id="relayed")
            await app.screen.mount(view)
            await wait_until(pilot, lambda: view.current is not None, timeout=30, what="a relayed frame")
            text = str(view.header_text())
            assert "relay" in text and "shared memory" not in text
            n, frame = view.current
            assert frame.dtype == np.uint8 and frame.ndim == 3 and max(frame.shape[:2]) <= 320
            first = n
            await wait_until(pilot, lambda: view.current[0] > first, timeout=10, what="relay keeps going")
    finally:
        mosaic.run("cancel", rid)


async def test_a_new_sixel_frame_repaints_only_the_line_that_carries_the_image(home, writer):
    """Same size and place: only the canvas' last line is repainted, and it carries the new image."""
    from mosaic_tui.graphics.detect import detect
    app = make_app(home, graphics=detect("sixel", fd=-1))
    async with app.run_test(size=SIZE) as pilot:
        canvas = await open_frames(app, pilot, writer)
        assert canvas.drawn_as == "sixel"
        refreshed = []
        real_refresh = canvas.refresh
        canvas.refresh = lambda *regions, **kw: (refreshed.append(regions), real_refresh(*regions, **kw))[1]
        lines_seen = []
        real_render = canvas.render_lines
        canvas.render_lines = lambda crop: (lines := real_render(crop), lines_seen.append(lines))[0]
        writer.publish(np.full((40, 60, 3), (200, 40, 10), dtype=np.uint8))
        await wait_until(pilot, lambda: canvas.key == 2 and lines_seen, what="the new frame rendered")
        width, height = canvas.size
        assert refreshed and all(regions and all(r.y == height - 1 and r.height == 1 for r in regions)
                                 for regions in refreshed), refreshed
        image = [seg.text for seg in lines_seen[-1][-1] if seg.control]
        # the new frame's colour is among the image's registers: 200,40,10 -> 78%,16%,4%
        assert len(image) == 1 and "\x1bP0;1;0q" in image[0] and "2;78;16;4" in image[0]


async def test_a_live_runs_record_changes_never_repaint_the_frames_tab_in_full(home, writer):
    """A running run's record changes twice a second. The title line follows it,
    the runs table under the run screen and the hidden Config tab catch up when
    they are shown, and none of it lays out or repaints the whole screen: that
    re-sends the image (and cost ~10% of a core at 30 fps)."""
    from daemon import protocol as P
    from mosaic_tui import fmt
    from mosaic_tui.graphics.detect import detect
    app = make_app(home, graphics=detect("sixel", fd=-1))
    async with app.run_test(size=SIZE) as pilot:
        canvas = await open_frames(app, pilot, writer)
        assert app._background_screens == []          # an opaque screen hides the runs table
        compositor = app.screen._compositor
        full = []
        real_full = compositor.render_full_update
        compositor.render_full_update = lambda *a, **kw: (full.append(1), real_full(*a, **kw))[1]
        covered = app.screen_stack[-2]
        covered_updates = []    # the covered runs table does no work until it is shown
        real_refresh_runs = covered.refresh_runs
        covered.refresh_runs = lambda *a: (covered_updates.append(1), real_refresh_runs(*a))[1]
        layouts = []        # a new layout of the screen: its widgets placed again, then repainted
        real_layout = app.screen._refresh_layout
        app.screen._refresh_layout = lambda *a, **kw: (layouts.append(1), real_layout(*a, **kw))[1]
        run = frames_run(writer.run_id)
        for i in range(1, 7):
            run = copy.deepcopy(run)
            run["rev"] = 100 + i
            run["summary"]["steps"] = 1111 * i
            app.link.feed(P.NOTIFY_RUN, {"run": run, "rev": 100 + i})
            app.link.flush()
            writer.publish(np.full((40, 60, 3), (20 * i, 40, 10), dtype=np.uint8))
            await pilot.pause(0.06)
        steps = fmt.num(6666)
        await wait_until(pilot, lambda: f"{steps}/" in screen_text(app), what="the title's new step count")
        await wait_until(pilot, lambda: canvas.key == 7, what="the last frame")
        assert full == [], f"{len(full)} full repaints"
        assert layouts == [], f"{len(layouts)} layouts"
        assert covered_updates == []
        # the Config tab, hidden meanwhile, shows the latest record when opened
        await pilot.press("3")
        await wait_until(pilot, lambda: f"steps  {steps}" in screen_text(app).replace(" " * 3, " " * 2),
                         what="the Config tab's step count")
        # and the runs table, covered meanwhile, when we go back to it
        await pilot.press("escape")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "RunsScreen", what="the runs screen")
        await wait_until(pilot, lambda: steps in screen_text(app), what="the runs table's step count")


async def test_only_a_translucent_screen_keeps_the_screen_under_it_visible(home):
    """Our full screens are opaque (app.tcss): nothing under them is drawn. A modal (help, the away
    summary, a confirmation) is translucent and keeps the screen under it in view, and so does a
    translucent screen of a plugin's."""
    from textual.screen import ModalScreen
    from textual.widgets import Static

    class Translucent(ModalScreen[None]):
        def on_mount(self) -> None:
            self.styles.background = "black 50%"    # inline: over app.tcss' opaque Screen rule

        def compose(self):
            yield Static("over the table")

    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        assert [type(s).__name__ for s in app._background_screens] == ["RunsScreen"]
        assert "bravo" in screen_text(app)              # the table under the help box
        await pilot.press("escape")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "RunsScreen", what="runs")
        app.push_screen(Translucent())
        await wait_until(pilot, lambda: "over the table" in screen_text(app), what="the translucent screen")
        assert [type(s).__name__ for s in app._background_screens] == ["RunsScreen"]
        assert "bravo" in screen_text(app)              # a run's name, from the table under it
