"""The app's run actions against the real daemon and real runs: `x` cancels (after a confirmation),
`p` pauses and resumes, `D` deletes, and the palette's "Cancel run NAME" does what `x` does. Each is
checked where it lands: the run's state, its processes, its directory."""
from __future__ import annotations

import json

import psutil
import pytest

from daemon import proctree
from daemon import protocol as P
from tests.app.conftest import wait_until
from tests.helpers import wait_state

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def live_app(home):
    from mosaic_tui.app import MosaicApp
    return MosaicApp(home, restore=False, remember=False, cursor_blink=False)


def tree_of(home, run_id: str) -> list[int]:
    """The run's supervisor and everything under it."""
    sup = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())["supervisor_pid"]
    return [sup, *proctree.descendants(sup)]


def stopped(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.NoSuchProcess:
        return False


async def highlight(pilot, app, run_id: str) -> None:
    await wait_until(pilot, lambda: app.screen.table.select_run(run_id), what=f"{run_id} listed")
    await pilot.pause()


async def confirmed_cancel(pilot, app, run_id: str, tree: list[int]) -> None:
    """The confirmation a cancel asks for, answered y: the run is cancelled, its tree gone."""
    from mosaic_tui.screens.confirm import ConfirmScreen
    await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
    await pilot.press("y")
    await wait_until(pilot, lambda: app.link.runs[run_id]["state"] == P.CANCELLED, timeout=60,
                     what="the run cancelled")
    await wait_until(pilot, lambda: not any(proctree.is_alive(p) for p in tree), timeout=30,
                     what="its processes gone")


async def test_cancel_pause_resume_and_delete_from_the_keys(daemon, mosaic):
    from mosaic_tui.screens.confirm import ConfirmScreen
    old = mosaic.synthetic(5, "rate=0", name="old")       # first: the two long runs take the daemon's slots
    wait_state(daemon, old, P.SUCCEEDED)
    victim = mosaic.synthetic(1_000_000, "rate=50", "children=2", name="victim")
    sleeper = mosaic.synthetic(1_000_000, "rate=50", "children=2", name="sleeper")
    for run_id in (victim, sleeper):
        wait_state(daemon, run_id, P.RUNNING)
    # the worker and its two children are up (the tree the actions must reach)
    trees = {r: await_tree(daemon, r) for r in (victim, sleeper)}
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.link.loaded, what="runs listed")
        # x asks first; n leaves the run alone
        await highlight(pilot, app, victim)
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("n")
        await pilot.pause(0.5)
        assert mosaic.show(victim)["state"] == P.RUNNING
        # x, y: cancelled, and nothing of its tree is left
        await pilot.press("x")
        await confirmed_cancel(pilot, app, victim, trees[victim])
        # p: paused, every process of its tree stopped; p again: running on
        await highlight(pilot, app, sleeper)
        await pilot.press("p")
        await wait_until(pilot, lambda: app.link.runs[sleeper]["state"] == P.PAUSED, timeout=30, what="paused")
        await wait_until(pilot, lambda: all(stopped(p) for p in trees[sleeper][1:]), timeout=30,
                         what="its whole tree stopped")
        await pilot.pause(1.0)                                          # what was written is ingested
        steps = mosaic.show(sleeper)["summary"]["steps"]
        await pilot.pause(1.5)
        assert mosaic.show(sleeper)["summary"]["steps"] == steps        # no step while paused
        await pilot.press("p")
        await wait_until(pilot, lambda: app.link.runs[sleeper]["state"] == P.RUNNING, timeout=30, what="resumed")
        await wait_until(pilot, lambda: not any(stopped(p) for p in trees[sleeper][1:]), timeout=30,
                         what="its tree running again")
        await wait_until(pilot, lambda: mosaic.show(sleeper)["summary"]["steps"] > steps, timeout=30,
                         what="steps again")
        # the palette's "Cancel run sleeper" asks as x does, then cancels
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"cancel run sleeper")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await confirmed_cancel(pilot, app, sleeper, trees[sleeper])
        # D, y: the finished run and its directory are gone
        await highlight(pilot, app, old)
        await pilot.press("D")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="the confirmation")
        await pilot.press("y")
        await wait_until(pilot, lambda: old not in app.link.runs, timeout=30, what="the run gone from the app")
        assert not daemon.run_dir(old).exists()
        assert old not in mosaic.run("ls", check=True).stdout


def await_tree(home, run_id: str) -> list[int]:
    from tests.helpers import wait_for
    return wait_for(lambda: (lambda t: t if len(t) >= 4 else None)(tree_of(home, run_id)), 30, 0.1,
                    f"the process tree of {run_id}")


async def test_z_stops_a_run_with_a_checkpoint_and_z_again_continues_it(daemon, mosaic):
    """The runs table's z: a running run is stopped (checkpoint, state "stopped" in its row), and
    continued as the same run; its plot's steps go on from the stop (the history across the seam)."""
    from tests.app.conftest import screen_text
    run_id = mosaic.synthetic(400_000, "rate=4000", name="stoppable")
    wait_state(daemon, run_id, P.RUNNING)
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.link.loaded, what="runs listed")
        await highlight(pilot, app, run_id)
        await wait_until(pilot, lambda: (app.link.runs[run_id].get("summary") or {}).get("steps", 0) > 1000,
                         timeout=60, what="steps")
        await pilot.press("z")
        await wait_until(pilot, lambda: app.link.runs[run_id]["state"] == P.STOPPED, timeout=60,
                         what="the run stopped")
        await wait_until(pilot, lambda: "stopped" in next(
            (line for line in screen_text(app).splitlines() if "stoppable" in line), ""), what="its row says so")
        at = app.link.runs[run_id]["summary"]["stopped"]["step"]
        await pilot.press("z")
        await wait_until(pilot, lambda: app.link.runs[run_id]["state"] in (P.STARTING, P.RUNNING, P.SUCCEEDED),
                         timeout=60, what="the run continued")
        await wait_until(pilot, lambda: (app.link.runs[run_id].get("summary") or {}).get("steps", 0) > at + 1000,
                         timeout=60, what="steps after the stop's")
        run = mosaic.show(run_id)
        assert run["restarts"] == 1 and run["name"] == "stoppable"
    mosaic.run("cancel", run_id)
