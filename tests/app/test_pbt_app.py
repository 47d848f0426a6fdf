"""PBT in the app, against a real daemon: a sweep started from the new-sweep form's PBT fields (the
synthetic worker's ``gain``, as tests/daemon/test_pbt.py), its lineage drawn as it grows, and the
form's and the daemon's refusals in one line each."""
from __future__ import annotations

import pytest
import yaml

from daemon import protocol as P
from tests.app.conftest import screen_text, wait_until
from tests.helpers import connect

pytestmark = pytest.mark.anyio

# 300 steps a second over 2400 steps, a boundary every 600: three copies over ~10 s, several of the
# sweep screen's refreshes (every 2 s) apart
BASE = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 2400, "seed": 1,
        "params": {"rate": 300, "episode_every": 20}}


def spec_text(params: dict) -> str:
    """The spec in the editor: trials and seeds as a plain sweep's, which the PBT sampler replaces."""
    return yaml.safe_dump({"name": "pbt-app", "base": BASE, "params": params, "seed": 5, "trials": None, "seeds": 3,
                           "objective": {"tag": "episode/return", "last": 3}})


SPEC_TEXT = spec_text({"gain": {"uniform": [-1.0, 1.0]}})


async def _open_form(app, pilot):
    from textual.widgets import Select, TextArea

    from mosaic_tui.screens.new_sweep import MutationRow, NewSweepScreen
    await app.push_screen(NewSweepScreen({"config": BASE}))
    screen = app.screen
    screen.query_one(TextArea).load_text(SPEC_TEXT)
    screen.query_one("#sweep-sampler", Select).value = "pbt"
    await wait_until(pilot, lambda: [r.param for r in screen.query(MutationRow)] == ["gain"], 10,
                     "a mutation row for gain")
    return screen


def _set(screen, selector: str, value: str) -> None:
    from textual.widgets import Input
    screen.query_one(selector, Input).value = value


async def test_a_pbt_sweep_from_the_form_and_its_lineage_drawn_as_it_grows(daemon):
    from textual.widgets import Static

    from mosaic_tui import pbt_lineage as L
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.new_sweep import NewSweepScreen
    from mosaic_tui.screens.sweep import SweepScreen
    from mosaic_tui.widgets.lineage_view import LineageView
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await _open_form(app, pilot)
        _set(form, "#pbt-population", "4")
        _set(form, "#pbt-interval", "600")
        _set(form, ".mutation-values", "0.8 1.2")
        error = form.query_one("#sweep-error", Static)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, NewSweepScreen) or str(error.render()), 30,
                         "the sweep started")
        assert not str(error.render())
        # the spec sent is the one the CLI takes: the pbt block instead of trials, seeds, sampler
        assert form.sent["pbt"] == {"population": 4, "interval": 600, "quantile": 0.25,
                                    "mutations": {"gain": {"factors": [0.8, 1.2]}}}
        assert not {"trials", "seeds", "sampler", "pruner", "parallel"} & set(form.sent)
        with connect(daemon) as client:
            sweep = client.call(P.SWEEP_GET, sweep="pbt-app")
        assert sweep["spec"]["pbt"] == {"population": 4, "interval": 600, "quantile": 0.25,
                                        "mutations": {"gain": {"factors": [0.8, 1.2], "resample_probability": 0.0}}}
        await app.push_screen(SweepScreen("pbt-app"))
        screen = app.screen
        view = screen.query_one(LineageView)
        seen: list[int] = []   # the copies the view drew at each of the screen's refreshes

        def drawn() -> bool:
            if view.sweep is not None:
                n = len(L.copies(view.sweep))
                if not seen or seen[-1] != n:
                    seen.append(n)
            return screen.sweep is not None and screen.sweep["state"] == "finished"
        await wait_until(pilot, drawn, 240, "the PBT sweep to finish in the sweep screen")
        await pilot.pause(0.3)
        final = screen.sweep
        assert len(final["lineage"]) == 3 and seen[-1] == 3
        assert len([n for n in seen if 0 < n < 3]) >= 1, seen   # drawn while exploits came, not only at the end
        assert view.region.height >= 4 + 2 and view.region.y + view.region.height <= 23   # whole at 80x24
        text = screen_text(app)
        assert "lineage gain" in text and "·  finished  ·" in text
        # each copy: the donor's number in the recipient's lane at the donor's step, and a line
        rows = view.lines(view.content_size.width)
        lanes = {int(str(r).split()[0][1:]): str(r) for r in rows[1:5]}
        width = view.content_size.width - view.LABEL_WIDTH - view.VALUE_WIDTH
        for record in final["lineage"]:
            members = {m["id"]: m["member"] for m in final["members"]}
            donor, recipient = members[record["donor"]], members[record["recipient"]]
            x = L.column(record["donor_step"], L.total_steps(final), width)
            assert lanes[recipient][view.LABEL_WIDTH + x] == str(donor), (lanes, record)
            assert f"m{recipient} copied m{donor}" in text
        # the last values in force at the lanes' right, as the members' configs carry them
        for m in final["members"]:
            assert lanes[m["member"]].rstrip().endswith(L.short(m["params"]["gain"]))
        await pilot.press("p")   # one mutated param: p keeps it
        assert view.param == "gain"


async def test_the_forms_mistakes_one_line_each_and_the_daemons_refusal_in_one_line(daemon):
    from textual.widgets import Static, TextArea

    from mosaic_tui.app import MosaicApp
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(80, 24)) as pilot:
        form = await _open_form(app, pilot)
        error = form.query_one("#sweep-error", Static)
        _set(form, "#pbt-population", "four")
        _set(form, ".mutation-resample", "often")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "population" in str(error.render()), 10, "the form's mistakes")
        assert str(error.render()).splitlines() == [
            "sweep.pbt.population: an integer, not 'four'",
            "sweep.pbt.mutations.gain.resample_probability: a number, not 'often'"]
        _set(form, "#pbt-population", "4")
        _set(form, ".mutation-resample", "")
        # mutating what a checkpoint cannot take: the daemon's one line, as for the CLI
        form.query_one(TextArea).load_text(spec_text({"tags": {"int": [1, 4]}}))
        from mosaic_tui.screens.new_sweep import MutationRow
        await wait_until(pilot, lambda: [r.param for r in form.query(MutationRow)] == ["tags"], 10, "the row for tags")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: "sweep.pbt.mutations.tags" in str(error.render()), 30, "the daemon's refusal")
        assert "only number parameters mutate" in str(error.render()) and "\n" not in str(error.render())
        with connect(daemon) as client:
            assert client.call(P.SWEEPS) == []
