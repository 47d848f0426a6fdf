"""Issue 14 in the app, against a real daemon: episode returns (per agent too) as
plots, compare's CSV with every point, the test worker kept out of the new-run form."""
from __future__ import annotations

import csv
import io
import json

import pytest

from daemon import protocol as P
from tests.app.conftest import load_fixed, make_app, screen_text, use_fake, wait_until
from tests.helpers import wait_state

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


def live_app(home, **options):
    from mosaic_tui.app import MosaicApp
    return MosaicApp(home, restore=False, remember=False, cursor_blink=False, **options)


def cli_points(mosaic, run_id: str) -> dict[tuple[str, float], tuple[float, float]]:
    """(tag, step) -> (value, wall time) as `mosaic metrics RUN --csv` prints them."""
    rows = csv.DictReader(io.StringIO(mosaic.run("metrics", run_id, "--csv", check=True).stdout))
    return {(r["tag"], float(r["step"])): (float(r["value"]), float(r["wall_time"])) for r in rows}


async def test_compare_exports_every_point_of_every_run(daemon, mosaic):
    runs = [mosaic.synthetic(300, "rate=0", "tags=2", "episode_every=40", name=name) for name in ("left", "right")]
    for run_id in runs:
        wait_state(daemon, run_id, P.SUCCEEDED)
    expected = {run_id: cli_points(mosaic, run_id) for run_id in runs}
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: all(r in app.link.runs for r in runs), what="runs listed")
        app.open_compare(runs)

        def loaded():
            return all(sum(len(s) for s in getattr(app.link.series.get(r), "tags", {}).values()) == len(expected[r])
                       for r in runs)
        await wait_until(pilot, loaded, what="every point of both runs")
        await pilot.press("e")
        await pilot.pause(0.2)
    exported = [p for p in (daemon.root / "exports").glob("compare-*.csv") if not p.name.endswith("-runs.csv")]
    assert len(exported) == 1
    rows = list(csv.DictReader(open(exported[0])))
    assert list(rows[0]) == ["tag", "run", "run_id", "step", "value", "wall_time"]
    got: dict[str, dict] = {r: {} for r in runs}
    for row in rows:
        got[row["run_id"]][(row["tag"], float(row["step"]))] = (float(row["value"]), float(row["wall_time"]))
    for run_id in runs:
        assert got[run_id] == expected[run_id]  # every point, scalars and episodes, nothing else
    assert len(rows) == sum(len(e) for e in expected.values()) == 2 * (300 + 2 * 7)
    assert {r["run"] for r in rows} == {"left", "right"}
    # and the runs' parameters beside it
    assert (exported[0].parent / (exported[0].stem + "-runs.csv")).exists()


async def test_per_agent_episode_returns_are_tags(daemon, mosaic):
    """XuanCe's multi-agent episodes carry each agent's return: `mosaic metrics`
    and the app's Metrics tab both show them as episode/return/<agent>."""
    run_id = mosaic.submit("--worker", "xuance", "--algo", "mappo", "--env", "simple_spread_v3", "--steps", "300",
                           "--set", "parallels=2", "--name", "spread")
    proc = mosaic.run("wait", "spread", "--timeout", "600")
    run = mosaic.show(run_id)
    assert proc.returncode == 0, f"{run['state']}: {run.get('reason')}\n{run.get('stderr_tail')}"
    with open(daemon.run_dir(run_id) / "events.jsonl") as f:
        episodes = [e for e in map(json.loads, f) if e["type"] == "episode"]
    agents = sorted(episodes[0]["agents"])
    assert len(agents) >= 2
    agent_tags = {f"episode/return/{a}" for a in agents}
    data = json.loads(mosaic.run("metrics", "spread", "--json", check=True).stdout)
    assert agent_tags | {"episode/return", "episode/length"} <= set(data)
    for agent in agents:
        assert [p["value"] for p in data[f"episode/return/{agent}"]] == [e["agents"][agent] for e in episodes]
    assert agent_tags <= set(run["summary"]["tags"])

    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: run_id in app.link.runs, what="run listed")
        app.open_run(run_id)
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        await wait_until(pilot, lambda: any(agent_tags <= set(p.plots) for p in app.screen.query(MetricsPane)),
                         what="a plot for each agent's return")
        series = app.link.series[run_id].tags
        for agent in agents:
            assert series[f"episode/return/{agent}"].values.tolist() == [e["agents"][agent] for e in episodes]


async def test_new_run_form_leaves_out_the_test_worker(daemon, mosaic):
    mosaic.synthetic(5, "rate=0", name="only")
    for all_workers, offered in ((False, False), (True, True)):
        app = live_app(daemon, all_workers=all_workers)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "1 run  ·" in screen_text(app), what="the runs screen's count")
            assert "1 runs" not in screen_text(app)
            app.open_new_run()
            await wait_until(pilot, lambda: getattr(app.screen, "worker_list", None), what="workers listed")
            # the form loads the first worker's schema: let it finish before the app ends
            await wait_until(pilot, lambda: app.screen.schema is not None, what="a schema loaded")
            names = {w["name"] for w in app.screen.worker_list}
            assert "cleanrl" in names and ("synthetic" in names) is offered
            # the form mounts its fields (and each Select its own parts) before the app may end:
            # the fields are shown, then the app is let go idle (pause() waits for every message)
            from mosaic_tui.widgets.schema_form import SchemaField
            await wait_until(pilot, lambda: not app.screen.loading_schema and app.screen.query(SchemaField)
                             and "ready: ctrl+s submits" in screen_text(app), what="the form's fields, ready")
            await pilot.pause()
            await pilot.pause()


async def test_the_form_reads_whole_floats_as_integers(home, fake_daemon):
    """The form's fields go through coerce_text, as `--set` does: 1e3 is 1000, 1.5 is refused alike."""
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake_daemon)
        await load_fixed(pilot, app)
        app.open_new_run()
        await wait_until(pilot, lambda: getattr(app.screen, "schema", None) is not None, what="the form")
        steps = app.screen.field("steps")
        steps.editor.value = "1e3"
        await pilot.pause()
        assert steps.error in (None, "") and steps.value() == 1000
        steps.editor.value = "1.5"
        await pilot.pause()
        assert steps.error == "must be an integer, not '1.5'"
