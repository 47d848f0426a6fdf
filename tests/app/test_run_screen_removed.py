"""A run screen removed while it is still being built (issue 29, item 2).

Under load a run screen can take seconds to mount, and the app can be told to go meanwhile: the
pilot's teardown in the tests, ctrl+q, or q once its key has waited KEY_WAIT_AT_MOST. Textual's
exit prunes every screen (App._shutdown: _running = False, then _close_all), a pop prunes the
popped one; Widget.mount then does nothing under a widget being pruned, but Textual still runs the
on_mount of every widget already in the tree. Anything that looked for its composed children there
raised: Textual's Tabs._on_mount for a TabbedContent given initial= ("ValueError: No Tab with id
'--content-tab-metrics'", the clean-clone CI's failure), RunScreen.on_mount (NoMatches, the one
before), MetricsPane and LogsPane. The removal is made to land while the named widget composes,
through the same private steps Textual takes."""
from __future__ import annotations

import pytest

from tests.app.conftest import RUN_IDS, load_fixed, make_app

pytestmark = pytest.mark.anyio


def _classes():
    from textual.widgets import TabPane
    from textual.widgets._tabbed_content import ContentTabs

    from mosaic_tui.screens.run import RunScreen
    from mosaic_tui.widgets.logs_pane import LogsPane
    from mosaic_tui.widgets.metrics_pane import MetricsPane
    return {"RunScreen": RunScreen, "ContentTabs": ContentTabs, "TabPane": TabPane,
            "MetricsPane": MetricsPane, "LogsPane": LogsPane}


@pytest.mark.parametrize("how", ["exit", "pop"])
@pytest.mark.parametrize("where", ["RunScreen", "ContentTabs", "TabPane", "MetricsPane", "LogsPane"])
async def test_a_run_screen_removed_while_it_is_built_does_not_end_the_app(home, monkeypatch, where, how):
    from mosaic_tui.screens.run import RunScreen
    cls = _classes()[where]
    original = cls.compose
    removed = []

    def compose(self):
        screen = self if isinstance(self, RunScreen) else self.screen
        if not removed and isinstance(screen, RunScreen):
            removed.append(where)
            if how == "exit":
                self.app._running = False            # App._shutdown, then _close_all:
            else:
                self.app._screen_stack.remove(screen)    # App.pop_screen, then _replace_screen:
            self.app._prune(screen)
        yield from original(self)

    monkeypatch.setattr(cls, "compose", compose)
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[2], tab="logs")
        for _ in range(6):
            await pilot.pause(0.05)
    assert removed == [where]          # and run_test raised nothing: the app did not crash


@pytest.mark.parametrize("tab", ["metrics", "logs", "config", "artifacts"])
async def test_a_run_opens_on_the_tab_it_was_left_on_with_its_widget_focused(home, tab):
    from textual.widgets import TabbedContent
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[0], tab=tab)
        for _ in range(6):
            await pilot.pause(0.05)
        assert app.screen.query_one(TabbedContent).active == tab
        assert app.screen.ui_place()["tab"] == tab
        assert app.focused is not None and any(n.id == tab for n in app.focused.ancestors_with_self)
        await pilot.press("2")
        await pilot.pause(0.1)
        assert app.screen.query_one(TabbedContent).active == "logs"
