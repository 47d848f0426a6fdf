"""The app must never look hung as it starts (issue 29, item 1).

The away summary is a ModalScreen the app puts up by itself once the first run list comes. Textual
stops a modal screen's binding chain at the modal (Screen._modal_binding_chain), so the app's q
(detach) and ctrl+c were not even looked up while it was up: q did nothing. Under load the summary
(and the run screen reopened under it) took seconds to mount, during which nothing was drawn, and a
q typed then was handed, once they were mounted, to the summary, which dropped it."""
from __future__ import annotations

import asyncio

import pytest
from textual import events

from tests.app.conftest import FIXED_NOW, RUN_IDS, fixed_runs, load_fixed, make_app, wait_until

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def _away_app(home, **place):
    """An app whose ui-state.json says it last closed before any of the fixed runs existed."""
    from mosaic_tui import uistate
    uistate.save_state(home, {"last_seen": {"t": FIXED_NOW - 3600, "runs": {}}, **place})
    return make_app(home, restore=True)


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_q_and_ctrl_c_detach_from_the_away_summary(home, key):
    from mosaic_tui.screens.away import AwayScreen
    app = _away_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await wait_until(pilot, lambda: isinstance(app.screen, AwayScreen), what="the away summary")
        await pilot.press(key)
        await pilot.pause(0.1)
    assert app.return_code == 0 and not app.is_running


async def test_ctrl_c_detaches_from_the_runs_screen(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
    assert app.return_code == 0 and not app.is_running


async def test_a_q_typed_while_the_first_screens_are_still_mounting_detaches(home, monkeypatch):
    """The order a loaded machine gives: the run list is in, the place left (a run's screen) and
    the away summary are pushed, the run's screen takes long to mount (here: until the gate
    opens) and meanwhile q is typed. The app's message pump awaits the pushed screens' mounts
    (Textual's push_screen: call_next(AwaitMount)), so q waits too, then reaches the summary."""
    from mosaic_tui.screens.away import AwayScreen
    from mosaic_tui.widgets.metrics_pane import MetricsPane
    gate = asyncio.Event()
    mount = MetricsPane.on_mount

    async def slow_mount(self) -> None:
        await gate.wait()
        mount(self)

    monkeypatch.setattr(MetricsPane, "on_mount", slow_mount)
    app = _away_app(home, screen="run", run=RUN_IDS[0], tab="metrics")   # reopens a run's screen
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        # no pilot.pause() from here until the gate opens: it waits for the screen to be idle
        app.link.load(fixed_runs(), rev=20)
        for _ in range(50):
            await asyncio.sleep(0.02)
            if any(isinstance(s, AwayScreen) for s in app.screen_stack):
                break
        assert not app.screen.is_mounted or not app.screen_stack[1].is_mounted   # still building
        app.post_message(events.Key("q", "q"))           # typed now
        await asyncio.sleep(0.3)
        assert app.is_running                            # nothing can take it yet
        gate.set()
        for _ in range(100):
            await asyncio.sleep(0.02)
            if not app.is_running:
                break
        assert not app.is_running, [type(s).__name__ for s in app.screen_stack]
    assert app.return_code == 0
