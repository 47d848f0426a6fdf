"""A lost run whose processes run on (its supervisor died, its worker did not: daemon/runs.py
_set_lost) in the app: its state says it still runs, and `x` offers to cancel it."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from tests.app.conftest import RUN_IDS, fixed_runs, make_app

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


async def test_a_lost_run_still_running_is_labelled_so_and_offered_a_cancel_not_a_delete(home):
    from mosaic_tui.screens.confirm import ConfirmScreen
    from mosaic_tui.widgets.runs_table import RunsTable
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        runs = fixed_runs()
        runs[2] = {**runs[2], "state": P.LOST, "reason": "supervisor ended without an exit record",
                   "resources": {"orphans": [[4242, 99]]}}
        app.link.load(runs, rev=20)
        app.link.flush()
        await pilot.pause()
        table = app.screen.query_one(RunsTable)
        assert "lost, still running" in [str(cell) for cell in table.get_row(RUN_IDS[2])]
        await pilot.press("j", "j")
        assert table.current_run_id == RUN_IDS[2]
        await pilot.press("D")   # its processes would write into a removed directory
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen), "x on a lost run still running offers no cancel"
        # the command palette offers the same
        from mosaic_tui.commands import ACTIONS
        offered = [name for name, _, can in ACTIONS if can(app.link.runs[RUN_IDS[2]])]
        assert "cancel" in offered and "delete" not in offered
