"""The new-run form against a real daemon and the real workers' schemas.

The worst bug of an earlier round: changing the algorithm kept the previous
algorithm's values (XuanCe MAPPO got PPO's `Categorical_AC` policy and failed
7 s later; CleanRL DQN trained with PPO's `num-envs` and `exp-name`). Every
test here changes an input and checks that everything derived from it follows.
"""
from __future__ import annotations

import pytest

from tests.app.conftest import wait_until

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


def live_app(home):
    from mosaic_tui.app import MosaicApp
    return MosaicApp(home, restore=False, remember=False, cursor_blink=False)


def params(screen) -> dict:
    """What the form shows now: {name: raw text or value}."""
    from mosaic_tui.widgets.schema_form import SchemaField
    return {f.field_name: f.raw() for f in screen.query_one("#params").query(SchemaField)}


def param_field(screen, name: str):
    from mosaic_tui.widgets.schema_form import SchemaField
    return next(f for f in screen.query_one("#params").query(SchemaField) if f.field_name == name)


def schema_defaults(home, worker: str, algo: str, env: str | None) -> dict:
    from daemon import protocol as P
    from tests.helpers import connect
    with connect(home) as c:
        schema = c.call(P.SCHEMA, worker=worker, algo=algo, env=env)
    return {k: v.get("default") for k, v in schema["properties"].items()}


def shows_schema(screen, worker: str, algo: str) -> bool:
    title = str(screen.query_one("#params-title").render())
    return screen.schema is not None and f"of {worker} {algo} " in title and not screen.loading_schema


async def open_form(pilot, app):
    from mosaic_tui.screens.new_run import NewRunScreen
    await wait_until(pilot, lambda: app.link.connected, what="connected")
    await pilot.press("n")
    # the parameter fields are mounted a few at a time after the schema comes: the form is whole once
    # they all are
    await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen) and app.screen.schema is not None
                     and not app.screen.loading_schema, what="the form and its first schema's fields")
    return app.screen


async def choose(pilot, screen, field: str, value) -> None:
    screen.field(field).set_value(value)
    await pilot.pause()


async def pick(pilot, screen, worker: str, algo: str | None = None) -> None:
    """Choose a worker (and an algorithm) and wait until the form shows that schema."""
    if screen.common_value("worker") != worker:
        await choose(pilot, screen, "worker", worker)
    await wait_until(pilot, lambda: shows_schema(screen, worker, screen.common_value("algo")),
                     what=f"{worker}'s schema")
    if algo is not None:
        await choose(pilot, screen, "algo", algo)
        await wait_until(pilot, lambda: shows_schema(screen, worker, algo), what=f"{algo}'s schema")


async def test_xuance_ppo_to_mappo_takes_mappos_defaults(daemon):
    """The reported case: n → xuance → mappo → simple_spread_v3 kept PPO's policy and learner."""
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "xuance", "ppo")
        ppo = params(screen)
        assert ppo["policy"] == "Categorical_AC"
        await choose(pilot, screen, "algo", "mappo")
        # the environments follow the algorithm: MPE scenarios, not CartPole
        await wait_until(pilot, lambda: screen.common_value("env") != "CartPole-v1", what="an MPE env")
        assert "simple_spread_v3" in screen.field("env").suggestions
        assert "CartPole-v1" not in screen.field("env").suggestions
        await choose(pilot, screen, "env", "simple_spread_v3")
        await wait_until(pilot, lambda: shows_schema(screen, "xuance", "mappo")
                         and screen._schema_key == ("xuance", "mappo", "simple_spread_v3"), what="mappo's schema")
        mappo = params(screen)
        want = schema_defaults(daemon, "xuance", "mappo", "simple_spread_v3")
        from mosaic_tui.widgets.schema_form import value_text
        for name, default in want.items():
            shown = mappo[name]
            field = param_field(screen, name)
            expected = value_text(default) if field.kind == "text" else default
            assert shown == expected, f"{name}: shows {shown!r}, mappo's default is {default!r}"
        assert mappo["policy"] != "Categorical_AC"
        assert not screen.query(".-carried")   # nothing typed, nothing carried
        config, errors = screen.collect()
        assert errors == [] and config["algo"] == "mappo"
        assert config["params"]["policy"] == want["policy"]


async def test_cleanrl_ppo_to_dqn_carries_only_typed_values_and_marks_them(daemon):
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "cleanrl", "ppo")
        assert params(screen)["num-envs"] == "4" and params(screen)["exp-name"] == "ppo"
        # the user types a learning rate and a discount (both exist in DQN too) ...
        param_field(screen, "learning-rate").editor.value = "0.001"
        param_field(screen, "gamma").editor.value = "0.95"
        await pilot.pause()
        await choose(pilot, screen, "algo", "dqn")
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "dqn"), what="dqn's schema")
        dqn = params(screen)
        want = schema_defaults(daemon, "cleanrl", "dqn", screen.common_value("env"))
        # ... which carry over, marked; everything else is DQN's own default
        assert dqn["learning-rate"] == "0.001" and dqn["gamma"] == "0.95"
        carried = {f.field_name for f in screen.query(".-carried")}
        assert carried == {"learning-rate", "gamma"}
        assert "kept from ppo" in str(param_field(screen, "gamma").query_one(".field-note").render())
        assert dqn["num-envs"] == str(want["num-envs"]) == "1"
        assert dqn["exp-name"] == want["exp-name"] == "dqn"
        assert "2 values kept from ppo" in str(screen.query_one("#form-status").render())
        config, errors = screen.collect()
        assert errors == []
        assert config["params"]["num-envs"] == 1 and config["params"]["exp-name"] == "dqn"
        assert config["params"]["learning-rate"] == 0.001
        # back to PPO: the typed values still carry, PPO's own defaults come back
        await choose(pilot, screen, "algo", "ppo")
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "ppo"), what="ppo again")
        again = params(screen)
        assert again["num-envs"] == "4" and again["exp-name"] == "ppo" and again["learning-rate"] == "0.001"


async def test_changing_the_worker_rebuilds_everything(daemon):
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "cleanrl")
        algo = screen.common_value("algo")
        await pick(pilot, screen, "xuance")
        xalgo = screen.common_value("algo")
        want = schema_defaults(daemon, "xuance", xalgo, screen.common_value("env"))
        assert set(params(screen)) == set(want)
        assert "exp-name" not in params(screen) and algo != "" and xalgo != ""
        # the algorithm list and the env suggestions are xuance's
        from daemon import protocol as P
        from tests.helpers import connect
        with connect(daemon) as c:
            caps = next(w for w in c.call(P.WORKERS) if w["name"] == "xuance")["capabilities"]
        assert screen.field("algo").choices() == caps["algorithms"]


async def test_no_submit_while_the_new_schema_loads(daemon):
    """Between an algorithm change and its schema's arrival the old fields must not be submitted."""
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "cleanrl", "ppo")
        screen.field("algo").set_value("dqn")
        # the same tick: the fields on screen are still PPO's
        config, errors = screen.collect()
        assert config is None and any("loading" in e for e in errors)


async def test_clone_copies_the_whole_config_and_submits_it(daemon, mosaic):
    """`e` on a run with frames, limits and parameters: the clone form shows all of it and the new
    run gets all of it, after the user changes one parameter."""
    from daemon import protocol as P
    from tests.helpers import connect, wait_state
    with connect(daemon) as c:
        src = c.call(P.SUBMIT, config={
            "worker": "synthetic", "algo": "emit", "env": "none", "steps": 300, "seed": 7, "name": "source",
            "frames": {"enabled": True, "fps": 12.0}, "limits": {"wall_seconds": 600.0, "memory_mb": 2048},
            "params": {"rate": 3000.0, "tags": 3, "frame_pattern": "cartpole"}})
    wait_state(daemon, src["id"], P.SUCCEEDED)
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        from mosaic_tui.screens.new_run import NewRunScreen
        await wait_until(pilot, lambda: src["id"] in app.link.runs, what="the run listed")
        app.screen.query_one("RunsTable").select_run(src["id"])
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen) and shows_schema(
            app.screen, "synthetic", "emit"), what="the clone form")
        screen = app.screen
        assert screen.common_value("worker") == "synthetic" and screen.common_value("seed") == 7
        assert screen.common_value("steps") == 300 and screen.common_value("frames") is True
        assert screen.common_value("fps") == 12.0 and screen.common_value("wall_seconds") == 600.0
        assert screen.common_value("memory_mb") == 2048 and screen.common_value("max_steps") is None
        shown = params(screen)
        assert shown["rate"] == "3000.0" and shown["tags"] == "3" and shown["frame_pattern"] == "cartpole"
        assert not screen.query(".-carried")   # a clone's own values are not "kept from" anything
        param_field(screen, "tags").editor.value = "5"
        screen.field("name").editor.value = "copy"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: any(r["name"] == "copy" for r in app.link.runs.values()), what="submitted")
    copy = mosaic.show("copy")
    cfg = copy["config"]
    assert cfg["frames"]["enabled"] is True and cfg["frames"]["fps"] == 12.0
    assert cfg["limits"]["wall_seconds"] == 600.0 and cfg["limits"]["memory_mb"] == 2048
    assert cfg["seed"] == 7 and cfg["steps"] == 300 and cfg["mode"] == "train"
    assert cfg["params"]["rate"] == 3000.0 and cfg["params"]["tags"] == 5
    assert cfg["params"]["frame_pattern"] == "cartpole"


async def test_typing_an_env_fast_rebuilds_the_form_once_it_settles(daemon):
    """Every key of an env id asks for a schema (most fail: "s", "si"...); the form must
    neither wedge nor lose keys, and end with the schema of the whole id."""
    from textual import events
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "xuance", "mappo")
        screen.set_focus(screen.field("env").editor)
        screen.field("env").editor.value = ""
        await pilot.pause()
        for ch in "simple_spread_v3":
            app.post_message(events.Key(ch, ch))
        await wait_until(pilot, lambda: screen.common_value("env") == "simple_spread_v3"
                         and shows_schema(screen, "xuance", "mappo"), what="the whole id and its schema")
        assert screen.shown_key == ("xuance", "mappo", "simple_spread_v3")
        config, errors = screen.collect()
        assert errors == [] and config["env"] == "simple_spread_v3"


async def test_a_mistyped_env_is_refused_as_it_is_typed_with_the_closest_ids(daemon):
    """CleanRL DQN on 'CartPol-v1': the form said "ready" and the run failed 3 s in. The worker's
    verdict on the env comes with the schema, and the env field says it as submit would."""
    from textual.widgets import Button
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await choose(pilot, screen, "worker", "cleanrl")
        await choose(pilot, screen, "algo", "dqn")
        await choose(pilot, screen, "env", "CartPol-v1")
        env = screen.field("env")
        await wait_until(pilot, lambda: "did you mean 'CartPole-v1'" in (env.error or ""), what="the env refused")
        assert env.error.startswith("unknown environment 'CartPol-v1' for worker 'cleanrl'")
        assert screen.query_one("#submit", Button).disabled
        await choose(pilot, screen, "env", "Pendulum-v1")        # known, but not for a discrete algorithm
        await wait_until(pilot, lambda: "discrete actions" in (env.error or ""), what="the action space named")
        await choose(pilot, screen, "env", "CartPole-v1")
        await wait_until(pilot, lambda: not env.error and shows_schema(screen, "cleanrl", "dqn"),
                         what="the env taken")
        await wait_until(pilot, lambda: not screen.query_one("#submit", Button).disabled, what="ready to submit")


async def test_the_seed_field_takes_a_number_random_or_nothing(daemon):
    """An empty seed, or the word random, asks the daemon for a drawn seed (recorded in the run)."""
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        seed = screen.field("seed")
        assert seed.raw() == "1" and seed.editor.placeholder == "random"
        for typed, want in (("7", 7), ("random", None), ("", None), (" Random", None)):
            seed.editor.value = typed
            await pilot.pause()
            config, errors = screen.collect()
            assert errors == [] and config["seed"] == want, (typed, config, errors)
        seed.editor.value = "lucky"
        await pilot.pause()
        config, errors = screen.collect()
        assert config is None and any(e.startswith("seed: ") for e in errors), errors


async def test_the_mirror_field_asks_for_w_and_b_mlflow_or_the_homes_setting(daemon):
    """Mirror: the home's settings by default (no mirror key sent), or the run's own targets."""
    from mosaic_tui.screens.new_run import NewRunScreen
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "cleanrl", "ppo")
        config, errors = screen.collect()
        assert errors == [] and "mirror" not in config
        for choice, want in (("none", []), ("wandb", ["wandb"]), ("wandb+mlflow", ["wandb", "mlflow"])):
            await choose(pilot, screen, "mirror", choice)
            config, errors = screen.collect()
            assert errors == [] and config["mirror"] == want, (choice, config)
        # a clone shows its run's mirror
        clone = NewRunScreen(clone={"config": {**config, "mirror": ["mlflow"]}})
        assert clone.initial["mirror"] == "mlflow"


async def test_a_xuance_config_field_takes_a_yaml_files_path(daemon, tmp_path):
    """The form reads the file a path names (on the app's machine, as --xuance-config does); one
    line of YAML is sent as it is; a .yaml path that is not there is one line naming it."""
    app = live_app(daemon)
    own = tmp_path / "mine.yaml"
    own.write_text("learning_rate: 0.00123\ngamma: 0.95\n")
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "xuance", "ppo")
        field = param_field(screen, "xuance_config")
        for typed, want in ((str(own), own.read_text()), ("{learning_rate: 0.001}", "{learning_rate: 0.001}")):
            field.editor.value = typed
            await pilot.pause()
            config, errors = screen.collect()
            assert errors == [] and config["params"]["xuance_config"] == want, (typed, errors)
        field.editor.value = str(tmp_path / "missing.yaml")
        await pilot.pause()
        config, errors = screen.collect()
        assert config is None and errors == [f"xuance_config: cannot read {tmp_path / 'missing.yaml'}: "
                                             "No such file or directory"], errors
        binary = tmp_path / "binary.yaml"
        binary.write_bytes(b"\xff\xfe\x00learning_rate")
        field.editor.value = str(binary)
        await pilot.pause()
        config, errors = screen.collect()
        assert config is None and errors == [f"xuance_config: {binary} is not a text file (UTF-8)"], errors


# -- typing never waits on the parameters (issue 41, item 13) -------------------------------------
async def _form_on_fake(pilot, app, fake) -> object:
    """`n` on the runs screen, polled without pilot.pause(), which waits for every widget to be idle
    (a parameter field held by the test's gate never is)."""
    import asyncio

    from textual import events

    from mosaic_tui.screens.new_run import NewRunScreen
    from tests.app.conftest import load_fixed, use_fake
    use_fake(app, fake)
    await load_fixed(pilot, app)
    app.post_message(events.Key("n", "n"))
    for _ in range(1500):
        if isinstance(app.screen, NewRunScreen) and app.screen.is_mounted:
            return app.screen
        await asyncio.sleep(0.02)
    raise AssertionError("the form did not open")


async def test_typing_never_waits_on_the_parameters(home, fake_daemon, monkeypatch):
    """At load 6-9, 12 characters typed in the name took 20 s to land while the status line said
    "loading the parameters of cleanrl ppo". The parameter fields were rebuilt by a handler of the
    screen's queue, and every key waits for the screen's queue (app.on_event), so each waited out
    the whole remove and mount; and each key laid the whole form out again (~260 widgets: Textual's
    Input asks for a layout as its text grows, the status line was set to the same text) and
    queried its ~1000 widgets: 0.4 s of CPU a key.

    Here the mount of the parameter fields is held until the test lets it go: the keys must land
    meanwhile. Then, the parameters shown, a key typed repaints its box and lays out nothing."""
    import asyncio

    from textual import events
    from textual.widget import Widget

    from mosaic_tui.widgets.schema_form import SchemaField
    from tests.app.conftest import make_app
    gate, mounting = asyncio.Event(), asyncio.Event()
    mount = SchemaField.on_mount

    async def slow_mount(self) -> None:
        mount(self)
        if self.id and self.id.startswith("p-") and not gate.is_set():   # the slow part of the load
            mounting.set()
            await gate.wait()
    monkeypatch.setattr(SchemaField, "on_mount", slow_mount)
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await _form_on_fake(pilot, app, fake_daemon)
        name = screen.field("name")
        screen.set_focus(name.editor)
        # no pilot.pause() while the gate holds a field: it waits for every widget to be idle
        await asyncio.wait_for(mounting.wait(), 30)
        typed = "my-first-run"
        for ch in typed:
            app.post_message(events.Key("minus" if ch == "-" else ch, ch))
        try:
            for _ in range(500):       # 10 s at most; each key waited 5 s (KEY_WAIT_AT_MOST) behind the rebuild
                if name.editor.value == typed:
                    break
                await asyncio.sleep(0.02)
            assert name.editor.value == typed, "typed while the parameters load"
            assert screen.loading_schema
            assert "loading the parameters of synthetic emit" in str(screen.query_one("#form-status").render())
        finally:
            gate.set()
        await wait_until(pilot, lambda: not screen.loading_schema, what="the parameters shown")
        assert screen.collect()[0]["name"] == typed

        layouts: list[str] = []
        refresh = Widget.refresh

        def counted(self, *args, layout: bool = False, **kwargs):
            if layout:
                layouts.append(f"{type(self).__name__}#{self.id}")
            return refresh(self, *args, layout=layout, **kwargs)
        monkeypatch.setattr(Widget, "refresh", counted)
        await pilot.press(*"-two")
        await wait_until(pilot, lambda: name.editor.value == typed + "-two", what="more of the name typed")
        await pilot.pause()
        monkeypatch.setattr(Widget, "refresh", refresh)
        assert layouts == []
        assert screen.collect()[0]["name"] == typed + "-two"
