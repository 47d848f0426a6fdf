"""A real sweep in the app: its trials sorted by a swept param's column (`o`), and its report
(`R`): by trial, then by each swept param, with rliable's numbers for the seeds' scores."""
from __future__ import annotations

import pytest
import yaml

from tests.app.test_report_view import wait_until

pytestmark = pytest.mark.anyio


async def test_a_sweeps_columns_sort_and_its_report(daemon, mosaic, tmp_path):
    from textual.widgets import DataTable

    from mosaic_tui import report as R
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.report import ReportScreen
    from mosaic_tui.screens.sweep import SweepScreen
    # returns step % 500 + return_offset every 5 steps over 40 steps: the last 20 average 22.5 + offset
    spec = {"name": "sr", "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 1,
                                   "params": {"rate": 0, "episode_every": 5}},
            "params": {"return_offset": [50, 0, 20]}, "seeds": 2, "parallel": 3,
            "objective": {"tag": "episode/return", "last": 20}}
    path = tmp_path / "sr.yaml"
    path.write_text(yaml.safe_dump(spec))
    mosaic.run("sweep", str(path), "--wait", "--timeout", "180", check=True)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_until(pilot, lambda: len(app.link.runs) == 6, "the sweep's six runs")
        app.push_screen(SweepScreen("sr"))
        await wait_until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.sweep is not None,
                         "the sweep view")
        screen = app.screen
        table = screen.query_one(DataTable)

        def column(name):
            index = [str(c.label) for c in table.columns.values()].index(name)
            return [str(table.get_row_at(i)[index]) for i in range(table.row_count)]
        assert column("return_offset") == ["50", "20", "0"]          # by the objective, best first
        await pilot.press("o")                                       # by the swept param's column
        assert column("return_offset") == ["0", "20", "50"]
        assert column("#") == ["3", "2", "1"]                        # the objective's rank stays
        assert "rows sorted by return_offset" in str(screen.query_one("#sweep-params").render())
        await pilot.press("o")
        assert column("return_offset") == ["50", "20", "0"]

        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, ReportScreen) and app.screen.whole is not None,
                         "the sweep's report")
        rep = app.screen.whole
        assert [g["group"] for g in rep["groups"]] == ["return_offset=0", "return_offset=20", "return_offset=50"]
        assert [g["aggregates"]["iqm"]["value"] for g in rep["groups"]] == [22.5, 42.5, 72.5]
        assert [g["runs"] for g in rep["groups"]] == [2, 2, 2]
        sweep_runs = [r for r in app.link.runs.values() if r.get("sweep") == screen.sweep["id"]]
        assert rep["groups"] == R.build_report(sweep_runs, R.Options())["groups"]
        await pilot.press("b")                                        # the swept param alone
        await wait_until(pilot, lambda: app.screen.whole is not None and app.screen.whole["by"] == ["return_offset"],
                         "by the param")
        assert [g["group"] for g in app.screen.whole["groups"]] == ["0", "20", "50"]
