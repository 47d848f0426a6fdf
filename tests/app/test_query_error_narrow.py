"""A wrong `/` query at 80x24: the status line's error is what the terminal shows, whole, however
long the hints and the query beside it."""
from __future__ import annotations

import pytest

from tests.app.conftest import load_fixed, make_app, screen_text

pytestmark = pytest.mark.anyio


async def test_the_query_error_is_not_clipped_at_80_columns(home):
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("slash", *"rate >> 30")
        await pilot.pause()
        shown = screen_text(app)
        assert "query column 7: rate > needs a value, found '>'" in shown, shown
        await pilot.press(*"0")                  # still wrong: the error follows the text
        await pilot.pause()
        assert "found '>'" in screen_text(app)
        await pilot.press(*["backspace"] * 5, *" 30")
        await pilot.pause()                      # whole again: no error, the hints back
        shown = screen_text(app)
        assert "query column" not in shown and "sort: created" in shown, shown
