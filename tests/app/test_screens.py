"""Pilot tests of every screen and binding, on fixed data (no daemon unless said)."""
from __future__ import annotations

import csv
import json

import pytest

from tests.app.conftest import RUN_IDS, FakeDaemon, fixed_runs, load_fixed, make_app, screen_text, use_fake, wait_until

SIZE = (120, 40)

pytestmark = pytest.mark.anyio


def table_names(app) -> list[str]:
    from mosaic_tui.widgets.runs_table import RunsTable
    table = app.screen.query_one(RunsTable)
    return [app.link.runs[r]["name"] for r in table.visible_ids]


async def test_runs_table_shows_every_run_newest_first(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        assert table_names(app) == ["echo", "delta", "charlie", "bravo", "alpha"]
        from mosaic_tui.widgets.runs_table import RunsTable
        table = app.screen.query_one(RunsTable)
        row = [str(c) for c in table.get_row(RUN_IDS[1])]
        assert row[1:6] == ["bravo", "synthetic", "emit", "none", "running"]
        # the return is the mean of the last 20 episodes (bravo has 6: 5, 9, 3, 12, 20, 18)
        assert "42%" in row[6] and row[7] == "4200" and row[8] == "813" and row[9] == "11.17"
        assert row[13] and all(0x2800 <= ord(c) <= 0x28FF for c in row[13])  # braille sparkline
        assert "5 runs" in str(app.screen.query_one("#title").render())


async def test_vim_keys_sort_reverse_and_filter(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        from mosaic_tui.widgets.runs_table import RunsTable
        table = app.screen.query_one(RunsTable)
        await pilot.press("j", "j")
        assert table.current_run_id == RUN_IDS[2]
        await pilot.press("k")
        assert table.current_run_id == RUN_IDS[3]
        await pilot.press("G")
        assert table.current_run_id == RUN_IDS[0]
        await pilot.press("g")
        assert table.current_run_id == RUN_IDS[4]
        await pilot.press("s")  # created -> name
        assert table.sort_key == "name"
        assert table_names(app) == ["echo", "delta", "charlie", "bravo", "alpha"]  # descending
        await pilot.press("r")
        assert table_names(app) == ["alpha", "bravo", "charlie", "delta", "echo"]
        await pilot.press("slash")
        await pilot.press(*"run")
        assert table_names(app) == ["bravo"]
        await pilot.press("enter")
        assert app.focused is table and table_names(app) == ["bravo"]
        await pilot.press("escape")
        assert len(table_names(app)) == 5


async def test_space_selects_several_runs(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        from mosaic_tui.widgets.runs_table import RunsTable
        table = app.screen.query_one(RunsTable)
        await pilot.press("space", "j", "space")        # space marks the row under the cursor, which stays
        assert table.selected == {RUN_IDS[4], RUN_IDS[3]} and table.current_run_id == RUN_IDS[3]
        assert str(table.get_row(RUN_IDS[4])[0]) == "●"
        await pilot.press("space")                      # again: unmarked
        assert table.selected == {RUN_IDS[4]}
        await pilot.press("space")
        await pilot.press("escape")
        assert table.selected == set()


async def test_enter_opens_detail_tabs_and_escape_backs_out(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("G", "enter")
        await pilot.pause()
        from textual.widgets import TabbedContent

        from mosaic_tui.screens.run import RunScreen
        assert isinstance(app.screen, RunScreen) and app.screen.run_id == RUN_IDS[0]
        assert RUN_IDS[0] in app.link.watched
        assert "alpha" in str(app.screen.query_one("#title").render())
        tabs = app.screen.query_one(TabbedContent)
        assert tabs.active == "metrics"
        await pilot.press("2")
        assert tabs.active == "logs"
        await pilot.press("3")
        assert tabs.active == "config"
        await pilot.press("1")
        assert tabs.active == "metrics"
        await pilot.press("escape")
        assert not isinstance(app.screen, RunScreen)
        assert RUN_IDS[0] not in app.link.watched  # nobody looks at it any more


async def test_metrics_plots_one_per_tag_with_controls(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[0])
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        await wait_until(pilot, lambda: app.screen.query(MetricsPane) and len(app.screen.query_one(MetricsPane).plots) >= 4,
                         what="the run's plots")
        pane = app.screen.query_one(MetricsPane)
        assert set(pane.plots) == {"synthetic/value_0", "synthetic/value_1", "episode/return", "episode/length"}
        first = list(pane.query("MetricPlot"))[0]
        assert first.tag == "episode/return"  # the return comes first
        text = first.render()
        assert "┤" in text.plain  # a drawn plotext axis
        assert pane.options.smoothing == 0.6
        await pilot.press("plus")
        assert pane.options.smoothing == 0.8
        await pilot.press("minus", "minus")
        assert pane.options.smoothing == 0.3
        await pilot.press("0")
        assert pane.options.smoothing == 0.0
        await pilot.press("l")
        assert pane.options.logy
        await pilot.press("t")
        assert pane.options.xaxis == "time"
        bar = str(app.screen.query_one("#metrics-bar").render())
        assert "log-y on" in bar and "wall time" in bar
        await pilot.press("slash", *"value_1", "enter")
        shown = [t for t, p in pane.plots.items() if p.display]
        assert shown == ["synthetic/value_1"]
        await pilot.press("escape")  # clears the filter first
        assert all(p.display for p in pane.plots.values())
        from mosaic_tui.screens.run import RunScreen
        assert isinstance(app.screen, RunScreen)


async def test_metrics_follow_new_points(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[1])
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        await wait_until(pilot, lambda: app.screen.query(MetricsPane)
                         and "synthetic/value_0" in app.screen.query_one(MetricsPane).plots, what="the run's plots")
        pane = app.screen.query_one(MetricsPane)
        before = len(pane.plots["synthetic/value_0"].lines[0].series)
        app.link.feed_events(RUN_IDS[1], [{"v": 1, "type": "scalar", "t": 1.0, "tag": "synthetic/value_0",
                                           "value": 1.0, "step": 401},
                                          {"v": 1, "type": "scalar", "t": 1.0, "tag": "new/tag",
                                           "value": 2.0, "step": 401}])
        app.link.flush()
        # plots refresh at most once a second
        await wait_until(pilot, lambda: "new/tag" in pane.plots
                         and len(pane.plots["synthetic/value_0"].lines[0].series) == before + 1,
                         timeout=10, what="the new points plotted")


async def test_logs_tab_follow_and_search(home):
    run_dir = home.run_dir(RUN_IDS[0])
    run_dir.mkdir(parents=True)
    lines = [f"line {i} {'needle' if i in (500, 7000) else 'hay'}" for i in range(10000)]
    (run_dir / "stderr.log").write_text("\n".join(lines) + "\n")
    (run_dir / "stdout.log").write_text("stdout says hi\n")
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[0], tab="logs")
        from mosaic_tui.widgets.log_view import LogView
        from mosaic_tui.widgets.logs_pane import LogsPane
        await wait_until(pilot, lambda: app.screen.query(LogView) and app.screen.query_one(LogView).line_count == 10000,
                         what="the log read")
        view = app.screen.query_one(LogView)
        pane = app.screen.query_one(LogsPane)
        assert view.line_count == 10000 and view.follow
        assert view.scroll_offset.y == view.max_scroll_y  # at the end
        await pilot.press("slash", *"needle", "enter")
        assert view.match_line in (500, 7000)
        first = view.match_line
        await pilot.press("n")
        await pilot.press("N")
        assert view.match_line == first
        assert not view.follow
        await pilot.press("G", "f")
        assert view.follow
        # appended lines arrive while following
        with open(run_dir / "stderr.log", "a") as f:
            f.write("brand new line\n")
        await wait_until(pilot, lambda: view.line_count == 10001, timeout=10, what="the appended line")
        assert view.read_line(10000) == "brand new line"
        await pilot.press("s")
        assert pane.stream == "stdout" and view.read_line(0) == "stdout says hi"
        await pilot.press("escape")  # clears the search
        assert view.search_text == ""


async def test_config_tab_shows_the_config(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[2], tab="config")
        await wait_until(pilot, lambda: '"rate": 10.0' in screen_text(app), what="the config shown")
        body = screen_text(app)
        assert "charlie" in body and "worker exited with code 3" in body
        assert '"rate": 10.0' in body and '"tags": 3' in body


async def test_help_lists_the_current_screens_bindings(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("question_mark")
        from mosaic_tui.screens.help import HelpScreen
        assert isinstance(app.screen, HelpScreen)
        ids = {bid for _, _, bid in app.screen.rows}
        assert {"runs.new", "runs.filter", "runs.select", "app.quit", "table.down"} <= ids
        await pilot.press("escape")
        app.open_run(RUN_IDS[0])
        await pilot.pause(0.2)
        await pilot.press("question_mark")
        ids = {bid for _, _, bid in app.screen.rows}
        assert {"run.back", "metrics.smooth_more", "metrics.logy", "run.logs"} <= ids
        assert "runs.new" not in ids


async def test_keymap_file_rebinds_by_id(home):
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "keymap.json").write_text(json.dumps({"runs.new": "N", "table.down": "ctrl+j"}))
    fake = FakeDaemon()
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake)
        await load_fixed(pilot, app)
        from mosaic_tui.screens.new_run import NewRunScreen
        from mosaic_tui.widgets.runs_table import RunsTable
        await pilot.press("n")
        assert not isinstance(app.screen, NewRunScreen)
        table = app.screen.query_one(RunsTable)
        await pilot.press("ctrl+j")
        assert table.current_run_id == RUN_IDS[3]
        await pilot.press("N")
        await pilot.pause()
        assert isinstance(app.screen, NewRunScreen)


async def test_theme_cycles_and_is_remembered(home):
    app = make_app(home, remember=True)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        assert app.theme == "mosaic-dark"
        await pilot.press("T")
        assert app.theme == "mosaic-light"
        await pilot.press("T")
        assert app.theme == "mosaic-high-contrast"
        await pilot.press("q")
    state = json.loads((home.root / "ui-state.json").read_text())
    assert state["theme"] == "mosaic-high-contrast"
    app2 = make_app(home, restore=True)
    async with app2.run_test(size=SIZE) as pilot:
        assert app2.theme == "mosaic-high-contrast"


async def test_reattach_reopens_the_place_left(home):
    app = make_app(home, remember=True)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        app.open_run(RUN_IDS[1], tab="logs")
        await pilot.pause(0.2)
        await pilot.press("q")  # detach
    assert app.return_code == 0
    state = json.loads((home.root / "ui-state.json").read_text())
    assert state["screen"] == "run" and state["run"] == RUN_IDS[1] and state["tab"] == "logs"
    app2 = make_app(home, restore=True, remember=True)
    async with app2.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app2)
        await pilot.pause(0.2)
        from textual.widgets import TabbedContent

        from mosaic_tui.screens.run import RunScreen
        assert isinstance(app2.screen, RunScreen) and app2.screen.run_id == RUN_IDS[1]
        assert app2.screen.query_one(TabbedContent).active == "logs"


async def test_compare_overlays_and_exports_csv(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("G", "space", "k", "k", "space")  # alpha and charlie... then bravo
        from mosaic_tui.widgets.runs_table import RunsTable
        table = app.screen.query_one(RunsTable)
        assert table.selected == {RUN_IDS[0], RUN_IDS[2]}
        await pilot.press("c")
        from mosaic_tui.screens.compare import CompareScreen
        await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and app.screen.query("MetricPlot"),
                         what="the compare screen")
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.tag == "episode/return"
        plot = screen.query_one("MetricPlot")
        assert [line.label for line in plot.lines] == ["alpha"]  # charlie has no telemetry here
        from textual.widgets import DataTable
        cols = [str(c.label) for c in screen.query_one(DataTable).columns.values()]
        assert "rate" in cols and "tags" in cols and "last return" in cols  # the differing params
        assert "seed" not in cols
        await pilot.press("a")
        cols = [str(c.label) for c in screen.query_one(DataTable).columns.values()]
        assert "seed" in cols
        await pilot.press("right_square_bracket")
        assert screen.tag != "episode/return"
        await pilot.press("e")
        exported = list((home.root / "exports").glob("compare-*-runs.csv"))  # beside the curves
        assert len(exported) == 1
        rows = list(csv.DictReader(open(exported[0])))
        assert [r["name"] for r in rows] == ["charlie", "alpha"] or [r["name"] for r in rows] == ["alpha", "charlie"]
        alpha = next(r for r in rows if r["name"] == "alpha")
        assert alpha["rate"] == "1000.0" and alpha["last:synthetic/value_0"] != ""
        await pilot.press("escape")
        assert not isinstance(app.screen, CompareScreen)


async def test_command_palette_offers_run_actions(home):
    """What the palette offers each run (its actions run against the real daemon in
    tests/app/test_run_actions_live.py)."""
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        from mosaic_tui.commands import RunCommands
        provider = RunCommands(app.screen)
        texts = [t for t, *_ in provider._commands()]
        assert "Pause run bravo" in texts and "Resume run delta" in texts and "Delete run alpha" in texts
        assert "Clone and edit run alpha" in texts and "Delete run bravo" not in texts


async def test_new_run_form_validates_inline_and_submits(home, fake_daemon):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake_daemon)
        await load_fixed(pilot, app)
        await pilot.press("n")
        await pilot.pause(0.5)
        from textual.widgets import Button

        from mosaic_tui.screens.new_run import NewRunScreen
        from mosaic_tui.widgets.schema_form import SchemaField
        screen = app.screen
        assert isinstance(screen, NewRunScreen)
        names = [f.field_name for f in screen.query_one("#params").query(SchemaField)]
        assert names[:3] == ["rate", "tags", "episode_every"]
        steps = screen.field("steps")
        steps.editor.value = "-5"
        await pilot.pause()
        assert steps.error == "must be > 0"
        assert screen.query_one("#submit", Button).disabled
        tags = next(f for f in screen.query_one("#params").query(SchemaField) if f.field_name == "tags")
        tags.editor.value = "abc"
        await pilot.pause()
        assert tags.error == "must be an integer, not 'abc'"
        tags.editor.value = "5000"
        await pilot.pause()
        assert tags.error == "must be <= 1000"
        name = screen.field("name")
        name.editor.value = "alpha"
        await pilot.pause()
        assert "exists already" in name.error
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert fake_daemon.submitted == []  # nothing submitted while invalid
        steps.editor.value = "500"
        tags.editor.value = "3"
        name.editor.value = "my-run"
        await pilot.pause()
        assert not screen.query_one("#submit", Button).disabled
        await pilot.press("ctrl+s")
        await pilot.pause(0.5)
        assert len(fake_daemon.submitted) == 1
        cfg = fake_daemon.submitted[0]
        assert cfg["steps"] == 500 and cfg["name"] == "my-run" and cfg["params"]["tags"] == 3
        from mosaic_tui.screens.run import RunScreen
        assert isinstance(app.screen, RunScreen)  # the new run opens


async def test_clone_and_edit_prefills_the_form(home, fake_daemon):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake_daemon)
        await load_fixed(pilot, app)
        await pilot.press("j", "j")  # charlie: rate 10, tags 3
        await pilot.press("e")
        await pilot.pause(0.5)
        screen = app.screen
        from mosaic_tui.widgets.schema_form import SchemaField
        values = {f.field_name: f.value() for f in screen.query_one("#params").query(SchemaField)}
        assert values["rate"] == 10.0 and values["tags"] == 3
        assert screen.field("steps").value() == 10000
        assert "clone of charlie" in str(screen.query_one("#title").render())
        await pilot.press("escape")
        from mosaic_tui.screens.runs import RunsScreen
        assert isinstance(app.screen, RunsScreen)


async def test_workers_screen_lists_capabilities(home, fake_daemon):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        use_fake(app, fake_daemon)
        await load_fixed(pilot, app)
        await pilot.press("w")
        await pilot.pause(0.3)
        from textual.widgets import DataTable

        from mosaic_tui.screens.workers import WorkersScreen
        assert isinstance(app.screen, WorkersScreen)
        table = app.screen.query_one(DataTable)
        assert str(table.get_row_at(0)[0]) == "synthetic"
        assert "pause" in screen_text(app)     # the capabilities table (tests/app/test_reading.py)
        await pilot.press("escape")
        assert not isinstance(app.screen, WorkersScreen)


async def test_deleted_and_changed_runs_update_the_table(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        run = dict(fixed_runs()[1], state="succeeded", rev=99)
        app.link.feed("run", {"rev": 99, "run": run})
        app.link.feed("run", {"rev": 100, "deleted": RUN_IDS[0]})
        app.link.flush()
        await pilot.pause()
        assert table_names(app) == ["echo", "delta", "charlie", "bravo"]
        from mosaic_tui.widgets.runs_table import RunsTable
        assert str(app.screen.query_one(RunsTable).get_row(RUN_IDS[1])[5]) == "succeeded"


async def test_q_detaches(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running


async def test_key_bar_lists_the_screens_keys_and_a_click_presses_one(home):
    """The one-line key bar (instead of Textual's Footer, see widgets/key_bar.py):
    the shown bindings of the focused screen, the palette at the right edge,
    updated when the screen changes, and clickable."""
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load_fixed(pilot, app)
        bar = app.screen.query_one("KeyBar")
        text = bar.render().plain
        assert " n New " in text and text.rstrip().endswith("^p palette")
        assert len(text) == 120
        await pilot.click("KeyBar", offset=(text.index("New"), 0))
        await wait_until(pilot, lambda: type(app.screen).__name__ == "NewRunScreen", what="the new-run form")
        form_keys = app.screen.query_one("KeyBar").render().plain
        assert " New " not in form_keys and "Back" in form_keys


async def test_key_bar_renders_in_every_theme(home):
    """Theme colours are Textual syntax ("ansi_magenta" in the ANSI themes), not Rich's."""
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load_fixed(pilot, app)
        for theme in ["ansi-dark", "ansi-light", *app.theme_names]:
            app.theme = theme
            await pilot.pause()
            assert " n New " in app.screen.query_one("KeyBar").render().plain, theme


def test_a_run_screens_keys_are_not_taken_by_its_panes():
    """A pane that binds a key of its screen takes it while focused: the screen's action is then out
    of reach from the keyboard (z folded the metrics' timings instead of stopping the run). Only the
    transcript's own p (prompts) and e (export) are meant: an LLM run's transcript reads them."""
    from mosaic_tui.screens.run import RunScreen
    from mosaic_tui.screens.runs import RunsScreen
    from mosaic_tui.widgets.artifacts_view import ArtifactsView
    from mosaic_tui.widgets.config_view import ConfigView
    from mosaic_tui.widgets.frames_view import FramesView
    from mosaic_tui.widgets.logs_pane import LogsPane
    from mosaic_tui.widgets.metrics_pane import MetricsPane
    from mosaic_tui.widgets.runs_table import RunsTable
    from mosaic_tui.widgets.transcript_view import TranscriptView

    def keys(cls) -> set[str]:
        return {key for binding in cls.BINDINGS for key in binding.key.split(",")}

    taken = {pane.__name__: sorted(keys(RunScreen) & keys(pane))
             for pane in (MetricsPane, LogsPane, ConfigView, FramesView, ArtifactsView, TranscriptView)}
    assert taken == {"MetricsPane": [], "LogsPane": [], "ConfigView": [], "FramesView": [], "ArtifactsView": [],
                     "TranscriptView": ["e", "p"]}
    assert keys(RunsScreen) & keys(RunsTable) == {"enter"}   # the table's enter is the screen's open


@pytest.mark.parametrize("modal", ["help", "away", "confirm"])
async def test_a_modal_screen_keeps_the_screen_under_it_in_view(home, modal):
    """The away summary and `?` were drawn over a blank screen (issue 41, item 9): the app's
    `Screen {background}` rule made every ModalScreen opaque, so Textual drew nothing under it.
    The title bar and the runs table stay in view around the box."""
    import html

    from mosaic_tui.screens.away import AwayScreen
    from mosaic_tui.screens.confirm import ConfirmScreen
    from mosaic_tui.screens.help import HelpScreen
    from mosaic_tui.screens.runs import RunsScreen
    if modal == "away":
        from mosaic_tui import uistate
        from tests.app.conftest import FIXED_NOW
        uistate.save_state(home, {"last_seen": {"t": FIXED_NOW - 3600, "runs": {}}})
    app = make_app(home, restore=modal == "away")
    async with app.run_test(size=SIZE) as pilot:
        await load_fixed(pilot, app)
        if modal == "help":
            await pilot.press("question_mark")
        elif modal == "confirm":
            await pilot.press("x")
        kind = {"help": HelpScreen, "away": AwayScreen, "confirm": ConfirmScreen}[modal]
        await wait_until(pilot, lambda: isinstance(app.screen, kind) and app.screen.is_mounted, what=modal)
        await pilot.pause()
        assert [type(s) for s in app._background_screens] == [RunsScreen]
        shown = html.unescape(app.export_screenshot()).replace("\xa0", " ")
        assert "5 runs" in shown                          # the title bar, above the box
        assert "echo" in shown and "delta" in shown       # the newest runs' rows, above or beside it
