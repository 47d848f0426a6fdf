"""The runs table's `/` filter takes a query (mosaic_tui/query.py) beside the plain words: config
keys, summary figures, and a one-line error in the status line while the text is not whole."""
from __future__ import annotations

import pytest

from tests.app.conftest import RUN_IDS, load_fixed, make_app

pytestmark = pytest.mark.anyio


def table(app):
    from mosaic_tui.widgets.runs_table import RunsTable
    return app.screen_stack[0].query_one(RunsTable)


def status(app) -> str:
    return str(app.screen_stack[0].query_one("#status").render())


async def type_filter(pilot, text: str) -> None:
    await pilot.press("slash")
    box = pilot.app.screen.query_one("#filter")
    box.value = ""
    await pilot.press(*text) if text else None
    await pilot.pause()


async def test_queries_in_the_runs_filter(home):
    app = make_app(home)
    async with app.run_test(size=(140, 30)) as pilot:
        await load_fixed(pilot, app)
        t = table(app)
        alpha, bravo, charlie, delta, echo = RUN_IDS
        # a config key (the synthetic worker's rate param) and a summary figure
        await type_filter(pilot, "rate >= 800")
        assert set(t.visible_ids) == {alpha, bravo, echo}
        await type_filter(pilot, "rate >= 800 and steps > 5000")
        assert set(t.visible_ids) == {alpha}
        await type_filter(pilot, "params.tags = 3 or state in (paused, queued)")
        assert set(t.visible_ids) == {charlie, delta, echo}
        await type_filter(pilot, "not rate = 1000 and mean_return > 10")
        assert set(t.visible_ids) == {bravo, delta}          # bravo's last 20: 11.2, delta's 30
        assert "filter: 'not rate = 1000 and mean_return > 10'" in status(app)

        # half-way: the error shows, the rows stay those of the last whole text
        await pilot.press(*" and")
        await pilot.pause()
        assert set(t.visible_ids) == {bravo, delta}
        assert "column 38: the query ends after 'and': a term is missing" in status(app), status(app)
        await pilot.press(*" steps < 5000")
        await pilot.pause()
        assert set(t.visible_ids) == {bravo}
        assert "column" not in status(app)

        # an unknown key, named with the one the runs have
        await type_filter(pilot, "rat > 3")
        assert "column 1: unknown key rat (did you mean rate" in status(app), status(app)

        # A marks the runs the query shows; c compares them; R there reports on them
        await type_filter(pilot, "rate >= 800")
        await pilot.press("enter", "A")
        assert t.selected == {alpha, bravo, echo}
        await pilot.press("c")
        await pilot.pause()
        from mosaic_tui.screens.compare import CompareScreen
        from mosaic_tui.screens.report import ReportScreen
        assert isinstance(app.screen, CompareScreen) and set(app.screen.run_ids) == {alpha, bravo, echo}
        await pilot.press("R")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen)
        for _ in range(200):
            if app.screen.whole is not None:
                break
            await pilot.pause(0.05)
        assert sum(g["runs"] for g in app.screen.whole["groups"]) == 1     # alpha: the one that succeeded
        await pilot.press("escape", "escape")
        await pilot.pause()
        await pilot.press("escape")    # the selection
        await pilot.pause()

        # plain words are the plain filter still
        await type_filter(pilot, "alp")
        assert t.visible_ids == [alpha] and "column" not in status(app)
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert len(t.visible_ids) == 5
