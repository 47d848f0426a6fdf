"""The compare screen chooses its runs by a query (`/`): every run the query keeps is compared,
and a wrong query gets one line that points at its mistake, the runs compared staying."""
from __future__ import annotations

import pytest

from tests.app.conftest import RUN_IDS, load_fixed, make_app

pytestmark = pytest.mark.anyio


async def test_compare_the_runs_a_query_keeps(home):
    from mosaic_tui.screens.compare import CompareScreen
    app = make_app(home)
    async with app.run_test(size=(140, 30)) as pilot:
        await load_fixed(pilot, app)
        alpha, bravo, charlie, delta, echo = RUN_IDS
        app.open_compare([alpha])
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.run_ids == [alpha]

        await pilot.press("slash", *"rate >= 800", "enter")
        await pilot.pause()
        assert screen.run_ids == [alpha, bravo, echo] and screen.where == "rate >= 800"
        assert "Compare 3 runs where rate >= 800: alpha, bravo, echo" in str(screen.query_one("#title").render())
        assert app.link._watchers.get(bravo) == 1 and app.link._watchers.get(charlie) is None

        # wrong: one line naming the mistake and its column; the runs stay
        await pilot.press("slash")
        screen.query_one("#compare-where").value = ""
        await pilot.press(*"rat > 3", "enter")
        await pilot.pause()
        line = str(screen.query_one("#compare-where-error").render())
        assert line.startswith("where 'rat > 3': column 1: unknown key rat (did you mean rate"), line
        assert screen.run_ids == [alpha, bravo, echo]
        screen.query_one("#compare-where").value = ""
        await pilot.press(*"rate > 5000", "enter")
        await pilot.pause()
        assert str(screen.query_one("#compare-where-error").render()) == "where 'rate > 5000': no run matches"

        # esc leaves the box, then the screen
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and not screen.has_class("-where")
        screen.where = None
        await pilot.press("slash")
        screen.query_one("#compare-where").value = ""
        await pilot.press(*"state in (failed, paused)", "enter")
        await pilot.pause()
        assert screen.run_ids == [charlie, delta]
        assert app.link._watchers.get(bravo) is None and app.link._watchers.get(charlie) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)
