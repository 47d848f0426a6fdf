"""Config-key columns in the runs table: chosen with `C` (every param and config key the runs
have), remembered, sortable (numbers as numbers, runs without the key last either way), and a
sweep's swept params shown by default while the table shows one sweep's runs."""
from __future__ import annotations

import copy

import pytest

from tests.app.conftest import RUN_IDS, fixed_runs, make_app

pytestmark = pytest.mark.anyio


def table(app):
    from mosaic_tui.widgets.runs_table import RunsTable
    return app.screen_stack[0].query_one(RunsTable)


def names(app) -> list[str]:
    return [app.link.runs[rid]["name"] for rid in table(app).visible_ids]


def header(app) -> str:
    return table(app).render_line(0).text


def with_one_without_rate() -> list[dict]:
    runs = fixed_runs()
    foxtrot = copy.deepcopy(runs[0])
    foxtrot.update(id="01M80000000000000000000009", name="foxtrot", rev=30)
    del foxtrot["config"]["params"]["rate"]
    return runs + [foxtrot]


async def load(pilot, app, runs) -> None:
    app.link.load(runs, rev=40)
    app.link.flush()
    await pilot.pause()
    await pilot.pause()


async def test_choose_a_config_column_sort_by_it_and_it_is_remembered(home):
    from mosaic_tui.screens.columns import ColumnsScreen
    app = make_app(home)
    async with app.run_test(size=(140, 30)) as pilot:
        await load(pilot, app, with_one_without_rate())
        t = table(app)
        assert t.config_columns == [] and " rate " not in header(app)
        await pilot.press("C")
        await pilot.pause()
        assert isinstance(app.screen, ColumnsScreen)
        assert app.screen.choices == ["params.rate", "params.tags", "config.seed", "config.steps", "config.device",
                                      "config.mode", "config.eval_episodes"]
        from textual.widgets import SelectionList
        chooser = app.screen.query_one(SelectionList)
        chooser.highlighted = app.screen.choices.index("params.rate")
        await pilot.press("space", "escape")
        await pilot.pause()
        assert t.config_columns == ["params.rate"] and app.ui_state["columns"] == ["params.rate"]
        assert " rate " in header(app)
        assert "params.rate" in t.shown_columns
        cells = {app.link.runs[rid]["name"]: str(t.get_row(rid)[t.shown_columns.index("params.rate")])
                 for rid in t.visible_ids}
        assert cells == {"alpha": "1000", "bravo": "800", "charlie": "10", "delta": "500", "echo": "1000",
                         "foxtrot": "-"}

        # s goes through the run's columns, then the config columns shown
        for _ in range(20):
            if t.sort_key == "params.rate":
                break
            await pilot.press("s")
        assert t.sort_key == "params.rate" and app.ui_state["sort"] == "params.rate"
        assert names(app) == ["echo", "alpha", "bravo", "delta", "charlie", "foxtrot"]   # 1000 ... 10, none last
        await pilot.press("r")
        await pilot.pause()
        assert names(app) == ["charlie", "delta", "bravo", "alpha", "echo", "foxtrot"]   # none last again
        state = dict(app.ui_state)

    # a new app on the same ui-state: the column and the sort come back
    again = make_app(home)
    again.ui_state.update(state)
    async with again.run_test(size=(140, 30)) as pilot:
        await load(pilot, again, with_one_without_rate())
        assert table(again).config_columns == ["params.rate"] and " rate " in header(again)
        assert names(again) == ["charlie", "delta", "bravo", "alpha", "echo", "foxtrot"]


def sweep_runs() -> list[dict]:
    runs = []
    for trial, (lr, width) in enumerate([(1e-3, 64), (3e-4, 64), (1e-4, 128)]):
        for seed in (1, 2):
            i = 10 + 2 * trial + seed
            run = copy.deepcopy(fixed_runs()[0])
            run.update(id=f"01M800000000000000000000{i}", name=f"grid-t{trial}-s{seed}", sweep="01SWEEPGRID",
                       trial=trial)
            run["config"]["seed"] = seed
            run["config"]["params"].update({"lr": lr, "net": {"width": width}, "rate": 1000.0})
            runs.append(run)
    return runs


async def test_a_sweeps_runs_show_their_swept_params(home):
    app = make_app(home)
    async with app.run_test(size=(140, 30)) as pilot:
        await load(pilot, app, fixed_runs() + sweep_runs())
        t = table(app)
        assert t.config_columns == []                  # runs of no sweep, and of one, together
        await pilot.press("slash", *"sweep = grid", "enter")
        await pilot.pause()
        assert len(t.visible_ids) == 6
        assert t.config_columns == ["params.lr", "params.net.width"]   # rate is the same in each trial
        head = header(app)
        assert " lr " in head and " net.width " in head
        by_name = {app.link.runs[rid]["name"]: t.get_row(rid) for rid in t.visible_ids}
        at = t.shown_columns.index("params.lr")
        assert str(by_name["grid-t1-s2"][at]) == "0.0003" and by_name["grid-t1-s2"][at].right
        # folded: one row a trial, its params beside its mean ± std
        await pilot.press("f")
        await pilot.pause()
        assert len(t.visible_ids) == 3 and t.config_columns == ["params.lr", "params.net.width"]
        await pilot.press("f", "escape")
        await pilot.pause()
        assert t.query_text == "" and t.config_columns == [] and " lr " not in header(app)
        assert set(RUN_IDS) <= set(t.visible_ids)
