"""A sweep in the app, against a real daemon: seeds folded into one row per trial, the sweep view, its CSV."""
from __future__ import annotations

import csv

import pytest
import yaml

from tests.app.conftest import screen_text, wait_until

pytestmark = pytest.mark.anyio


def test_group_band_is_the_mean_min_and_max_of_the_seeds_within_their_steps():
    from mosaic_tui.series import Series, group_band
    a, b = Series(), Series()
    a.extend([1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0], [0, 1, 2, 3])
    b.extend([1, 2, 3], [3.0, 4.0, 5.0], [0, 1, 2])          # one step behind
    mean, low, high = group_band([a, b])
    assert mean.steps.tolist() == [1, 2, 3, 4]
    assert mean.values.tolist() == [2.0, 3.0, 4.0, 4.0]     # step 4: only a has it
    assert low.values.tolist() == [1.0, 2.0, 3.0, 4.0] and high.values.tolist() == [3.0, 4.0, 5.0, 4.0]
    assert group_band([a]) is None


def test_group_band_95_is_the_t_interval_of_the_seeds_mean():
    import numpy as np

    from mosaic_tui.series import T975, Series, group_band
    seeds = [Series() for _ in range(3)]
    for s, values in zip(seeds, ([1.0, 10.0], [2.0, 20.0], [6.0, 30.0])):
        s.extend([1, 2], values, [0, 1])
    late = Series()
    late.extend([1, 2, 3], [3.0, 40.0, 7.0], [0, 1, 2])     # step 3: one seed alone, no spread to know
    mean, low, high = group_band([*seeds, late], "ci95")
    assert mean.values.tolist() == [3.0, 25.0, 7.0]
    for i, column in enumerate(([1.0, 2.0, 6.0, 3.0], [10.0, 20.0, 30.0, 40.0])):
        half = 3.182 * np.std(column, ddof=1) / 2           # t(0.975, 3 dof) · s / √4
        assert abs(low.values[i] - (mean.values[i] - half)) < 1e-9 and abs(high.values[i] - mean.values[i] - half) < 1e-9
    assert low.values[2] == high.values[2] == 7.0
    stats = pytest.importorskip("scipy.stats")             # the table is Student's t (scipy is no app dependency)
    assert all(abs(t - stats.t.ppf(0.975, dof)) < 1e-3 for dof, t in enumerate(T975, 1))


async def test_fold_a_sweeps_seeds_and_rank_its_trials(daemon, mosaic, tmp_path):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.sweep import SweepScreen
    spec = {"name": "sw", "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 1,
                                   "params": {"rate": 0, "episode_every": 5}},
            "params": {"return_offset": [0, 50]}, "seeds": 2, "parallel": 2,
            "objective": {"tag": "episode/return", "last": 3}}
    path = tmp_path / "sw.yaml"
    path.write_text(yaml.safe_dump(spec))
    mosaic.run("sweep", str(path), "--wait", "--timeout", "120", check=True)
    mosaic.synthetic(5, "rate=0", name="lonely")
    import json
    tagged = next(r["name"] for r in json.loads(mosaic.run("ls", "--json", check=True).stdout)
                  if r.get("sweep") and r["config"]["params"]["return_offset"] == 50 and r["config"]["seed"] == 1)
    mosaic.run("tag", tagged, "+best", check=True)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(160, 30)) as pilot:
        table = app.screen.table
        await wait_until(pilot, lambda: len(table.visible_ids) == 5, what="4 sweep runs and one other")
        await pilot.press("f")
        await wait_until(pilot, lambda: len(table.visible_ids) == 3, what="two trials folded, the other run alone")
        await pilot.pause(0.3)
        text = screen_text(app)
        # the table's avg20 as mean ± std over the seeds: returns 5, 10, ..., 40 (+ offset); the seeds agree
        rows = {line.split()[0]: line for line in text.splitlines() if "×2" in line}
        assert set(rows) == {"sw-t0", "sw-t1"} and "lonely" in text
        offset = {t: app.link.runs[table.group_of(r)[0]]["config"]["params"]["return_offset"]
                  for r in table.visible_ids for t in rows if app.link.runs[r]["name"].startswith(t + "-")}
        for t, line in rows.items():
            assert f"{22.5 + offset[t]:g}±0" in line, line
            assert "succeeded" in line
        assert "seeds folded (f)" in text
        best = next(t for t in rows if offset[t] == 50)
        assert table.select_run(next(r for r in table.visible_ids if app.link.runs[r]["name"].startswith(best)))
        # compare a folded row: its seeds drawn as their mean and min–max band
        from mosaic_tui.screens.compare import CompareScreen
        from mosaic_tui.widgets.metric_plot import MetricPlot
        await pilot.press("c")
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen), what="compare")
        app.screen.tag = "episode/return"
        await wait_until(pilot, lambda: (app.screen.rebuild() or
                                         [ln.label for ln in app.screen.query_one(MetricPlot).lines]
                                         == [f"{best} ×2 mean", f"{best} ×2 min", f"{best} ×2 max"]),
                         what="the group's band")
        assert "seeds: mean, min–max (g)" in screen_text(app)
        await pilot.press("g")                                         # the 95% interval of the mean
        assert [ln.label for ln in app.screen.query_one(MetricPlot).lines] == \
            [f"{best} ×2 mean", f"{best} ×2 95% low", f"{best} ×2 95% high"]
        assert "seeds: mean, 95% CI (g)" in screen_text(app)
        await pilot.press("g")
        assert len(app.screen.query_one(MetricPlot).lines) == 2       # each seed again
        assert "seeds: each run (g)" in screen_text(app)
        await pilot.press("e")                                         # the runs' CSV has their tags
        exported = list((daemon.root / "exports").glob("compare-*-runs.csv"))
        with open(exported[0]) as f:
            assert {r["name"]: r["run_tags"] for r in csv.DictReader(f)}[tagged] == "best"
        await pilot.press("escape")
        await pilot.press("S")
        await wait_until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.sweep is not None,
                         what="the sweep view")
        await pilot.pause(0.2)
        text = screen_text(app)
        lines = [line for line in text.splitlines() if "complete" in line]
        assert len(lines) == 2 and lines[0].split()[:2] == ["1", best[-1]]   # offset 50 ranks first
        assert "85 ± 0" in lines[0] and "35 ± 0" in lines[1]
        assert "return_offset" in text and "0→35  50→85" in text     # the param against the objective
        assert "importance  return_offset 1.00" in text                # Optuna's evaluator: the one param
        await pilot.press("e")
        await wait_until(pilot, lambda: app.screen.last_export, what="the CSV")
        with open(app.screen.last_export) as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == 4 and {r["return_offset"] for r in rows} == {"0", "50"}
        assert sorted(float(r["objective:episode/return"]) for r in rows) == [35.0, 35.0, 85.0, 85.0]


async def test_new_sweep_screen_starts_from_the_highlighted_run_and_shows_a_refusal(daemon, mosaic):
    import json

    from textual.widgets import Static, TextArea

    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.new_sweep import NewSweepScreen
    base = mosaic.synthetic(5, "rate=0", "episode_every=2", name="seedling")
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: base in app.screen.table.visible_ids, what="the run listed")
        app.screen.table.select_run(base)
        await pilot.press("N")
        await wait_until(pilot, lambda: isinstance(app.screen, NewSweepScreen), what="the new-sweep screen")
        area = app.screen.query_one(TextArea)
        spec = yaml.safe_load(area.text)
        assert spec["base"]["worker"] == "synthetic" and spec["base"]["params"]["episode_every"] == 2
        assert spec["params"] == {"rate": [0, 1]}   # a grid over its first numeric param (rate 0)
        spec["params"] = {"nope": [1, 2]}
        area.load_text(yaml.safe_dump(spec))
        await pilot.press("ctrl+s")
        error = app.screen.query_one("#sweep-error", Static)
        await wait_until(pilot, lambda: "sweep.params.nope: not a parameter" in str(error.render()),
                         what="the daemon's refusal under the editor")
        spec["params"] = {"return_offset": [0, 1]}
        spec["seeds"] = 1
        spec["base"]["steps"] = 4
        area.load_text(yaml.safe_dump(spec))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, NewSweepScreen), what="the sweep started")
    sweeps = json.loads(mosaic.run("sweeps", "--json", check=True).stdout)
    assert len(sweeps) == 1 and sweeps[0]["spec"]["params"] == {"return_offset": {"kind": "grid", "values": [0, 1]}}
    assert sweeps[0]["spec"]["base"]["params"]["episode_every"] == 2
