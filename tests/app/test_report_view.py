"""The group view (mosaic_tui/screens/report.py): reached from compare with `R`, the groups at once
and their intervals from the bootstrap, `b` and `n`, and a run that finishes taken in."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from mosaic_tui import report as R
from tests.app.conftest import make_app
from tests.app.report_setup import open_report, results_runs, wait_until

pytestmark = pytest.mark.anyio


async def test_the_report_view_from_compare(home):
    from mosaic_tui.screens.compare import CompareScreen
    runs = results_runs()
    app = make_app(home)
    async with app.run_test(size=(160, 40)) as pilot:
        screen = await open_report(pilot, app, runs)
        # the whole report: the same numbers as `mosaic report` over the finished runs
        finished = [r for r in runs if r["state"] == P.SUCCEEDED]
        expected = R.build_report(finished, R.Options(reps=R.REPORT_REPS))
        assert screen.whole["groups"] == expected["groups"]
        labels = [g["group"] for g in screen.whole["groups"]]
        assert labels == ["rate=10", "rate=20"]
        body = screen.body_text()
        assert "rate=10" in body and "  EnvA-v0" in body and "[" in body
        assert "P(rate=20 > rate=10) = 1.000" in body and "performance profiles" in body
        assert "2 groups, 12 runs" in str(screen.query_one("#title").render())

        # b: group by the next key (the param alone), n: min-max per env
        await pilot.press("b")
        await wait_until(pilot, lambda: screen.whole is not None and screen.whole["by"] == ["rate"], "by rate")
        assert [g["group"] for g in screen.whole["groups"]] == ["10", "20"]
        await pilot.press("n")
        await wait_until(pilot, lambda: screen.whole is not None and screen.whole["normalize"]["method"] == "minmax",
                         "min-max")
        assert screen.whole["normalize"]["bounds"]["EnvA-v0"] == [11.0, 23.0]
        assert "min-max per env" in screen.body_text()

        # the running seed finishes: the report takes it in
        live = dict(app.link.runs[runs[-1]["id"]], state=P.SUCCEEDED, rev=200, ended_at=runs[-1]["created_at"] + 60)
        app.link.load([live], rev=200)
        app.link.flush()
        await wait_until(pilot, lambda: screen.whole is not None
                         and sum(g["runs"] for g in screen.whole["groups"]) == 13, "the finished run")
        assert [g["runs"] for g in screen.whole["groups"]] == [7, 6]
        assert "2 groups, 13 runs" in str(screen.query_one("#title").render())

        # e: the CSV of the report
        await pilot.press("e")
        await pilot.pause()
        assert screen.last_export and open(screen.last_export).readline().startswith("group,env,runs,iqm")
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)


async def test_the_report_table_keeps_its_columns_at_80x24(home):
    """A narrow terminal scrolls the table sideways instead of wrapping its rows: each row is one
    line (a wrapped row would start a line with its intervals), the prose above it wraps."""
    from tests.app.conftest import screen_text
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_report(pilot, app, results_runs())
        await pilot.pause()
        body = screen.query_one("#report-body")
        lines = str(body.render()).splitlines()
        assert body.size.height == len(lines) and max(map(len, lines)) > 80
        shown = screen_text(app).splitlines()
        rows = [line for line in shown if line.startswith((" rate=", "   EnvA", "   EnvB")) and "[" in line]
        assert len(rows) == 6, shown                  # 2 groups and their 2 envs, each on its line
        assert not [line for line in shown if line.lstrip().startswith("[")], shown
        assert any(line.startswith(" score: ") for line in shown)           # the note, wrapped to the width
        scroll = screen.query_one("#report-scroll")
        assert scroll.max_scroll_x > 0
