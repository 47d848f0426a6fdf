"""The new-run form's Placement section (issue 32): built from workers/sdk/config.py's PlacementConfig,
a backend shows only its own fields, a bad value is one line naming the field and nothing is
submitted, the values stay while the worker and algorithm change, and the config submitted carries
the placement only for a cluster (a local run's config is what it was before the section)."""
from __future__ import annotations

import json

import pytest

from tests.app.conftest import FakeDaemon, load_fixed, make_app, use_fake, wait_until

pytestmark = pytest.mark.anyio
SIZE = (120, 40)
SLURM = {"partition", "account", "cpus", "mem", "gpus", "time", "extra_args"}
RAY = {"address", "cpus", "mem", "gpus", "runtime_env"}


def shown_placement(screen) -> set[str]:
    """The placement fields on show, but the backend."""
    from mosaic_tui.screens.new_run import placement_names
    return {n for n in placement_names()[1:] if screen.placement_field(n).display}


def slurms(shown: set[str]) -> bool:
    """Slurm's fields: sbatch's requests (and any other the model takes for slurm only, e.g. requeue),
    none of Ray's."""
    return SLURM <= shown and not shown & {"address", "runtime_env"}


def rays(shown: set[str]) -> bool:
    """Ray's fields (and any other the model takes for ray, e.g. its custom resources), none of sbatch's."""
    return RAY <= shown and not shown & {"partition", "account", "time", "extra_args"}


async def fake_form(pilot, fake):
    from mosaic_tui.screens.new_run import NewRunScreen
    app = pilot.app
    use_fake(app, fake)
    await load_fixed(pilot, app)
    await pilot.press("n")
    await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen) and app.screen.schema is not None
                     and not app.screen.loading_schema, what="the form and its schema")
    return app.screen


async def set_text(pilot, screen, name: str, text: str) -> None:
    screen.placement_field(name).editor.value = text
    await pilot.pause()


async def test_each_backend_shows_its_own_fields(home):
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        assert screen.placement_field("backend").raw() == "local"
        assert shown_placement(screen) == set()
        assert "Placement" in str(screen.query_one("#section-placement").render())
        await pilot.pause()
        screen.placement_field("backend").set_value("slurm")
        await pilot.pause()
        assert slurms(shown_placement(screen))
        screen.placement_field("backend").set_value("ray")
        await pilot.pause()
        assert rays(shown_placement(screen))
        screen.placement_field("backend").set_value("local")
        await pilot.pause()
        assert shown_placement(screen) == set()
        # the fields carry the model's own help: sbatch's flags
        from mosaic_tui.screens.new_run import placement_specs
        assert placement_specs()["mem"]["description"].startswith("sbatch --mem")


@pytest.mark.parametrize("name,text,says", [
    ("mem", "8X", "placement.mem: '8X' is not an amount of memory"),
    ("time", "abc", "placement.time: 'abc' is not a wall time"),
    ("cpus", "0", "placement.cpus: must be >= 1"),
    ("partition", "a b", "placement.partition: must match"),
    ("extra_args", "--comment='unclosed", "placement.extra_args: no closing quotation"),
])
async def test_a_bad_value_is_one_line_naming_the_field_and_nothing_is_submitted(home, name, text, says):
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        screen.placement_field("backend").set_value("slurm")
        await pilot.pause()
        await set_text(pilot, screen, name, text)
        field = screen.placement_field(name)
        assert field.error is not None and f"placement.{name}: {field.error}".startswith(says), field.error
        status = str(screen.query_one("#form-status").render())
        assert status.startswith("1 field to fix: " + says), status
        assert "\n" not in status
        shown = str(field.query_one(".field-error").render())
        assert shown.startswith("✗ " + says) and "\n" not in shown
        await pilot.press("ctrl+s")
        await pilot.pause(0.2)
        assert not [c for c in fake.calls if c[0] == "submit"]       # not submitted
        # fixed: ready again
        good = {"mem": "8g", "time": "2:00:00", "cpus": "2", "partition": "debug", "extra_args": "--qos=high"}[name]
        await set_text(pilot, screen, name, good)
        assert field.error is None
        assert str(screen.query_one("#form-status").render()).startswith("ready")


async def test_a_hidden_backends_bad_value_does_not_block_a_local_run(home):
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        screen.placement_field("backend").set_value("slurm")
        await pilot.pause()
        await set_text(pilot, screen, "mem", "lots")
        assert screen.placement_field("mem").error
        screen.placement_field("backend").set_value("local")
        await pilot.pause()
        config, errors = screen.collect()
        assert errors == [] and "placement" not in config
        screen.placement_field("backend").set_value("slurm")     # back: the value and its error are there
        await pilot.pause()
        assert screen.placement_field("mem").raw() == "lots" and screen.placement_field("mem").error


async def test_the_config_submitted_carries_the_placement_the_model_gives(home):
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        screen.field("steps").editor.value = "100"    # the synthetic worker wants its steps
        await pilot.pause()
        local, errors = screen.collect()
        assert errors == [] and "placement" not in local          # a local run's config, as before
        screen.placement_field("backend").set_value("slurm")
        await pilot.pause()
        for name, text in (("partition", "debug"), ("cpus", "2"), ("mem", "8g"), ("time", "2:00:00"),
                           ("extra_args", "--qos=high --comment='a b'")):
            await set_text(pilot, screen, name, text)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: fake.submitted, what="the submit")
        sent = next(p["config"] for m, p in fake.calls if m == "submit")
        assert sent["placement"] == {"backend": "slurm", "partition": "debug", "cpus": 2, "mem": "8G",
                                     "time": "2:00:00", "extra_args": ["--qos=high", "--comment=a b"]}
        assert {k: v for k, v in sent.items() if k != "placement"} == local


async def test_ray_takes_its_runtime_env_as_json(home):
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        screen.placement_field("backend").set_value("ray")
        await pilot.pause()
        await set_text(pilot, screen, "runtime_env", "not json")
        assert "must be an object" in screen.placement_field("runtime_env").error
        await set_text(pilot, screen, "address", "http://head:8265")
        await set_text(pilot, screen, "runtime_env", '{"pip": ["gymnasium"]}')
        await set_text(pilot, screen, "gpus", "1")
        config, errors = screen.collect()
        assert errors == []
        assert config["placement"] == {"backend": "ray", "address": "http://head:8265", "gpus": 1,
                                       "runtime_env": {"pip": ["gymnasium"]}}


async def test_the_form_starts_from_the_homes_default_placement(home):
    """settings.json's placement (what the daemon fills a run's left-out placement from) is where
    the form starts; choosing local then says so in the config, or the daemon would place it."""
    home.root.mkdir(parents=True, exist_ok=True)
    home.settings_file.write_text(json.dumps({"placement": {"backend": "slurm", "partition": "gpu", "cpus": 4}}))
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        screen = await fake_form(pilot, fake)
        assert screen.placement_field("backend").raw() == "slurm"
        assert screen.placement_field("partition").raw() == "gpu" and screen.placement_field("cpus").raw() == "4"
        assert slurms(shown_placement(screen))
        config, _ = screen.collect()
        assert config["placement"] == {"backend": "slurm", "partition": "gpu", "cpus": 4}
        screen.placement_field("backend").set_value("local")
        await pilot.pause()
        config, _ = screen.collect()
        assert config["placement"] == {"backend": "local"}


async def test_a_clone_starts_from_its_runs_placement(home):
    from mosaic_tui.screens.new_run import NewRunScreen
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake)
        await load_fixed(pilot, app)
        run = dict(app.link.runs[next(iter(app.link.runs))])
        run["config"] = {**run["config"], "placement": {
            "backend": "slurm", "partition": None, "account": None, "cpus": 2, "mem": "4G", "gpus": None,
            "time": "30", "extra_args": ["--qos=low"], "address": None, "runtime_env": None}}
        app.push_screen(NewRunScreen(clone=run))
        await wait_until(pilot, lambda: isinstance(app.screen, NewRunScreen) and app.screen.schema is not None
                         and not app.screen.loading_schema, what="the clone's form")
        screen = app.screen
        assert slurms(shown_placement(screen))
        config, errors = screen.collect()
        assert errors == [] and config["placement"] == {"backend": "slurm", "cpus": 2, "mem": "4G", "time": "30",
                                                        "extra_args": ["--qos=low"]}


async def test_placement_values_stay_while_worker_and_algorithm_change(daemon):
    """Against the real daemon and workers' schemas: the parameters are rebuilt for each choice,
    the Placement section keeps what was typed in it."""
    from tests.app.test_new_run_form import choose, live_app, open_form, pick, shows_schema
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_form(pilot, app)
        await pick(pilot, screen, "cleanrl", "ppo")
        screen.placement_field("backend").set_value("slurm")
        await pilot.pause()
        typed = {"partition": "debug", "cpus": "3", "mem": "2G", "time": "1:00:00", "extra_args": "--qos=x"}
        for name, text in typed.items():
            await set_text(pilot, screen, name, text)

        def kept() -> bool:
            return (screen.placement_field("backend").raw() == "slurm"
                    and all(screen.placement_field(n).raw() == t for n, t in typed.items())
                    and slurms(shown_placement(screen)))

        assert kept()
        await choose(pilot, screen, "algo", "dqn")
        await wait_until(pilot, lambda: shows_schema(screen, "cleanrl", "dqn"), what="dqn's schema")
        assert kept()
        await choose(pilot, screen, "env", "Acrobot-v1")
        await wait_until(pilot, lambda: screen._schema_key == ("cleanrl", "dqn", "Acrobot-v1")
                         and not screen.loading_schema, what="the env's schema")
        assert kept()
        other = next(w["name"] for w in screen.worker_list if w["name"] != "cleanrl")
        await pick(pilot, screen, other)
        assert kept()
        config, errors = screen.collect()
        assert errors == [], errors
        assert config["worker"] == other and config["placement"] == {
            "backend": "slurm", "partition": "debug", "cpus": 3, "mem": "2G", "time": "1:00:00",
            "extra_args": ["--qos=x"]}
