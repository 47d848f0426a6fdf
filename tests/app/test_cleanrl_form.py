"""CleanRL's schema in the new-run form: its text names the script as part of CleanRL, not where it is installed."""
from __future__ import annotations

import pytest

from tests.app.conftest import wait_until
from tests.app.test_new_run_form import SIZE, live_app, open_form, shows_schema
from workers.cleanrl_worker import catalog

pytestmark = pytest.mark.anyio


async def test_the_form_names_cleanrls_script_without_its_install_path(daemon):
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        screen.field("worker").set_value("cleanrl")
        await pilot.pause()
        screen.field("algo").set_value("ppo")
        await pilot.pause()
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "ppo"), what="cleanrl ppo's schema")
        text = str(screen.query_one("#schema-desc").render())
        assert "Options of cleanrl/ppo.py (its argparse parser)" in text
        assert catalog.cleanrl_dir() not in text
