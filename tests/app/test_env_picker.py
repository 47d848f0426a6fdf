"""The new-run form's env picker (issue 19): hundreds of env ids, filtered as you type, against a real
daemon and the real workers' env lists."""
from __future__ import annotations

import pytest

from tests.app.conftest import wait_until
from tests.app.test_new_run_form import SIZE, live_app, open_form, pick, shows_schema

pytestmark = pytest.mark.anyio


async def test_the_env_picker_filters_hundreds_of_ids_and_the_form_follows(daemon):
    from mosaic_tui.screens.env_picker import EnvPickerScreen
    from mosaic_tui.screens.new_run import NewRunScreen

    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "xuance", "ppo")
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvPickerScreen), what="the env picker")
        picker = app.screen
        assert len(picker.rows) > 100 and len(picker.shown) == len(picker.rows)  # Atari's games, MuJoCo...
        await pilot.press(*"atari pong")
        await wait_until(pilot, lambda: picker.shown == ["ALE/Pong-v5"], what="one id left")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen), what="back to the form")
        assert screen.common_value("env") == "ALE/Pong-v5"
        # the derived fields follow: XuanCe's Atari configuration (its CNN and vectoriser)
        await wait_until(pilot, lambda: shows_schema(screen, "xuance", "ppo")
                         and screen.shown_key == ("xuance", "ppo", "ALE/Pong-v5"), what="the Atari schema")
        values = {f.field_name: f.raw() for f in screen.param_fields()}
        assert values["vectorize"] == "Dummy_Atari" and values["representation"] == "AC_CNN_Atari"
        # MultiGrid ids by their aliases, for a multi-agent algorithm; esc leaves the env as it was
        await pick(pilot, screen, "xuance", "mappo")
        before = screen.common_value("env")
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: isinstance(app.screen, EnvPickerScreen), what="the env picker")
        await pilot.press(*"soccer_2vs2")
        await wait_until(pilot, lambda: app.screen.shown == ["MosaicMultiGrid-S-2v2-IndAgObs-v1"],
                         what="the alias found")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen), what="back to the form")
        assert screen.common_value("env") == before
        # free typing still works, with the per-algorithm suggestions
        assert "MosaicMultiGrid-S-2v2-IndAgObs-v1" in screen.field("env").suggestions
