"""The PBT lineage view on a fixed sweep reply: snapshots at 80x24 and 120x40, and a reply without
lineage (an older daemon) in one line.

Update after an intended change with: pytest tests/app/test_lineage_view.py --snapshot-update
"""
from __future__ import annotations

import copy

import pytest

from daemon import protocol as P
from tests.app.conftest import fixed_home, make_app, screen_text, wait_until
from tests.unit.mosaic_tui.test_pbt_lineage import record, sweep

SNAP_HOME = "/tmp/mosaic-lineage-snapshot-home"   # fixed: one home for the module's snapshots
pytestmark = pytest.mark.xdist_group("lineage-snapshots")


def pbt_reply() -> dict:
    """Four members at generation 3 of 2400 steps: three copies, one of them skipped."""
    reply = sweep([record(0, 1, 0, 610, -0.7, 0.6), record(1, 3, 2, 1220, 0.1, 0.96 * 1.2),
                   record(2, 1, 2, 1830, 0.6, 0.96 * 0.8, skipped="skipped: the donor's checkpoint was gone")],
                  steps=(2400, 2400, 2100, 1900), gains=(0.9, 0.6, 0.96, 1.0))
    reply.update(id="01SWEEP", runs=4, groups=4, created_at=0.0, ended_at=None, importances={})
    reply["spec"].update(sampler="random", trials=4, parallel=4, seeds=1, seed=5,
                         pruner={"type": "none", "startup_trials": 2, "warmup_steps": 0})
    reply["trials"] = [
        {"trial": m["member"], "state": "running", "params": m["params"], "value": v, "refused": None, "mean": v,
         "std": 0.0, "min": v, "max": v,
         "runs": [{"id": m["id"], "name": m["name"], "state": "running", "seed": 1 + m["member"], "tags": [],
                   "note": "", "objective": v}]}
        for m, v in zip(reply["members"], (41.0, 30.5, 43.2, 38.0))]
    return reply


def fake_call(reply: dict):
    async def call(method: str, **params):
        if method == P.SWEEP_GET:
            return copy.deepcopy(reply)
        raise P.RPCError(P.METHOD_NOT_FOUND, method)
    return call


@pytest.fixture
def home():
    yield from fixed_home(SNAP_HOME)


def _open(reply: dict):
    async def run_before(pilot):
        from mosaic_tui.screens.sweep import SweepScreen
        pilot.app.link.call = fake_call(reply)
        await pilot.app.push_screen(SweepScreen("pbt-gain"))
        await wait_until(pilot, lambda: pilot.app.screen.sweep is not None, 10, "the sweep reply")
        await pilot.pause(0.3)
    return run_before


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_lineage_snapshot(home, snap_compare, size):
    assert snap_compare(make_app(home), terminal_size=size, run_before=_open(pbt_reply()))


@pytest.mark.anyio
async def test_a_reply_without_lineage_says_so_in_one_line(home):
    from mosaic_tui.widgets.lineage_view import NO_LINEAGE
    old = pbt_reply()
    del old["members"], old["lineage"], old["generation"]
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(old)(pilot)
        text = screen_text(app)
        assert text.count(NO_LINEAGE) == 1   # whole, in one line at 80 columns
        assert app.screen.sweep["trials"] and "m0 " not in text
