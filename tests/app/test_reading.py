"""Reading the app: `?` grouped by purpose and scrollable, long log lines
wrapped or scrolled sideways, workers' capabilities as a table."""
from __future__ import annotations

import pytest

from tests.app.conftest import RUN_IDS, load_fixed, make_app, screen_text, use_fake

pytestmark = pytest.mark.anyio


async def test_help_groups_keys_by_purpose_and_scrolls(home):
    app = make_app(home)
    async with app.run_test(size=(100, 24)) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[0])
        await pilot.pause(0.3)
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        from mosaic_tui.screens.help import HelpScreen
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        groups = help_screen.groups()
        assert list(groups) == ["Navigation", "Runs", "View", "App"]
        ids = {name: {bid for _, _, bid in rows} for name, rows in groups.items()}
        assert {"run.metrics", "run.logs", "run.back", "metrics.down"} <= ids["Navigation"]
        assert {"run.cancel", "run.pause", "run.delete", "run.clone"} <= ids["Runs"]
        assert {"metrics.logy", "metrics.smooth_more", "metrics.filter", "metrics.pin"} <= ids["View"]
        assert {"app.quit", "app.help"} <= ids["App"]
        text = screen_text(app)
        assert text.index("Navigation") < text.index("Runs")
        keys = help_screen.query_one("#help-keys")
        assert keys.max_scroll_y > 0          # more keys than rows: it has to scroll
        await pilot.press("j", "j", "j")
        await pilot.pause(0.1)
        assert keys.scroll_y == 3
        await pilot.press("k")
        await pilot.pause(0.1)
        assert keys.scroll_y == 2
        await pilot.press("down", "down")
        await pilot.pause(0.1)
        assert keys.scroll_y == 4
        await pilot.press("up")
        await pilot.pause(0.1)
        assert keys.scroll_y == 3
        await pilot.press("G")
        await pilot.pause(0.1)
        assert keys.scroll_y == keys.max_scroll_y and "app.quit" in screen_text(app)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_logs_wrap_long_lines_or_scroll_sideways(home):
    run_dir = home.run_dir(RUN_IDS[0])
    run_dir.mkdir(parents=True)
    long_line = "Traceback detail: " + "x" * 240 + " TAILMARK"
    lines = [f"line {i}" for i in range(40)] + [long_line, "the last line"]
    (run_dir / "stderr.log").write_text("\n".join(lines) + "\n")
    app = make_app(home)
    async with app.run_test(size=(100, 20)) as pilot:
        await load_fixed(pilot, app, events_for=())
        app.open_run(RUN_IDS[0], tab="logs")
        await pilot.pause(0.3)
        from mosaic_tui.widgets.log_view import LogView
        view = app.screen.query_one(LogView)
        assert app.focused is view
        assert "Traceback detail" in screen_text(app) and "TAILMARK" not in screen_text(app)
        # sideways: l and the right arrow
        await pilot.press(*["l"] * 10)
        await pilot.pause(0.1)
        assert view.scroll_x == 10
        await pilot.press("right", "h", "h")
        await pilot.pause(0.1)
        assert view.scroll_x == 9
        # wrapped: the whole line on screen, the end of the file still shown
        await pilot.press("w")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert view.wrap and view.scroll_x == 0
        assert "TAILMARK" in text and "the last line" in text and "Traceback detail" in text
        assert "wrapped (w)" in str(app.screen.query_one("#logs-bar").render())
        await pilot.press("g")                  # the top, wrapped too
        await pilot.pause(0.2)
        assert "line 0" in screen_text(app) and "TAILMARK" not in screen_text(app)
        await pilot.press("w")
        await pilot.pause(0.2)
        assert not view.wrap


async def test_workers_capabilities_are_a_table(home, fake_daemon):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        use_fake(app, fake_daemon)
        await load_fixed(pilot, app)
        await pilot.press("w")
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "{" not in text and '"paradigms"' not in text      # not raw JSON
        for label, value in (("algorithms", "emit"), ("env families", "none"), ("multi-agent", "no"),
                             ("frames", "yes"), ("checkpoints", "no"), ("evaluation", "no"), ("pause", "yes"),
                             ("GPU", "no"), ("max agents", "1")):
            line = next((ln for ln in text.splitlines() if ln.strip().startswith(label + " ")), None)
            assert line is not None, label
            assert line.split(label, 1)[1].split()[0] == value, line
