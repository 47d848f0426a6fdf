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


async def test_whole_updates_are_said_at_submit_and_in_the_form(daemon, mosaic):
    """CleanRL's PPO trains whole updates of num-envs × num-steps: 3000 steps asked ended at 2560
    (60000 at 59,904) and nothing said so (issue 41, item 15)."""
    from tests.app.test_new_run_form import param_field
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "3000",
                      "--name", "short")
    mosaic.run("cancel", "short")
    assert proc.returncode == 0 and proc.stdout.strip() == mosaic.show("short")["id"]
    assert proc.stderr.strip() == ("note: short (cleanrl ppo) trains whole updates of 512 steps (num-envs 4 × "
                                   "num-steps 128): it ends at step 2,560, not 3,000")
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "2048",
                      "--set", "num-steps=64", "--name", "whole")
    mosaic.run("cancel", "whole")
    assert proc.returncode == 0 and proc.stderr == ""      # 8 updates of 256: nothing to say

    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        screen.field("worker").set_value("cleanrl")
        await pilot.pause()
        screen.field("algo").set_value("ppo")
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "ppo"), what="cleanrl ppo's schema")
        steps = screen.field("steps")
        steps.editor.value = "3000"
        await wait_until(pilot, lambda: steps.hint is not None, what="the steps' hint")
        assert steps.hint.endswith("it ends at step 2,560, not 3,000")
        assert "ends at step 2,560" in str(steps.query_one(".field-note").render()) and steps.query_one(
            ".field-note").display
        param_field(screen, "num-envs").editor.value = "1"
        await wait_until(pilot, lambda: (steps.hint or "").endswith("it ends at step 2,944, not 3,000"),
                         what="the hint following num-envs")
        steps.editor.value = "2944"
        await wait_until(pilot, lambda: steps.hint is None, what="no hint for whole updates")
        screen.field("algo").set_value("dqn")      # steps one by one: nothing to say
        steps.editor.value = "3000"
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "dqn"), what="cleanrl dqn's schema")
        await pilot.pause()
        assert steps.hint is None
