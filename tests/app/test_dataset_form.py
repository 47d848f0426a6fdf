"""The new-run form's Data section: record a dataset, and an offline algorithm's dataset
chosen among the runs that recorded one on the env (the daemon's `datasets`)."""
from __future__ import annotations

import pytest

from tests.app.conftest import wait_until
from tests.app.test_new_run_form import SIZE, choose, live_app, open_form, pick

pytestmark = pytest.mark.anyio
pytest.importorskip("tianshou")


@pytest.mark.slow  # trains a real (tiny) DQN to record from
async def test_record_then_offline_from_the_form(daemon):
    from daemon import protocol as P
    from tests.helpers import connect
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "tianshou", "dqn")
        assert screen.field("record").display and not screen.field("dataset").display
        # an online run that records 3 episodes, submitted from the form
        screen.field("name").set_value("rec")
        screen.field("steps").set_value(200)
        screen.field("record").set_value(3)
        for name, value in (("epoch_num_steps", "200"), ("test_envs", "0"), ("hidden_sizes", "[16]")):
            next(f for f in screen.param_fields() if f.field_name == name).editor.value = value
        await pilot.pause()
        config, errors = screen.collect()
        assert errors == [] and config["record"] == {"episodes": 3}, errors
        with connect(daemon) as c:
            run = c.call(P.SUBMIT, config=config)
        # while no run has recorded on CartPole, an offline algorithm cannot be submitted
        await choose(pilot, screen, "algo", "discrete_cql")
        await wait_until(pilot, lambda: screen.field("dataset").display, what="the dataset field")
        assert not screen.field("record").display   # it steps no env: nothing to record
        screen.field("name").set_value("")
        await wait_until(pilot, lambda: screen.field("dataset").error, what="the dataset field's error")
        assert "no run recorded a dataset on CartPole-v1" in screen.field("dataset").error
        await wait_until(pilot, lambda: (app.link.runs.get(run["id"]) or {}).get("state") in P.FINAL_STATES,
                         timeout=600, what="the recording run to end")
        assert app.link.runs[run["id"]]["state"] == P.SUCCEEDED
        # the form offers it once the env is chosen again
        await choose(pilot, screen, "env", "Acrobot-v1")
        await choose(pilot, screen, "env", "CartPole-v1")
        await wait_until(pilot, lambda: screen.field("dataset").spec["enum"] == ["rec"], what="rec offered")
        await pilot.pause()
        config, errors = screen.collect()
        assert errors == [] and config["dataset"] == "rec" and "record" not in config, errors
