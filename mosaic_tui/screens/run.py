"""A run's detail: Metrics, Logs, Config and Artifacts tabs, live; Frames for a run that publishes frames,
Transcript for an LLM agent's run."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import TabbedContent, TabPane

from mosaic_tui import fmt
from mosaic_tui.messages import ConnectionChanged, RunsChanged, SeriesChanged
from mosaic_tui.widgets import leaving
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar

TABS = ("metrics", "logs", "config", "frames", "artifacts", "transcript")
PLOT_REFRESH_SECONDS = 1.0


def header_text(run: dict | None, now: float, window: int = fmt.DEFAULT_RETURN_WINDOW) -> Text:
    """The run's title line, the numbers that matter first: at 80 columns the
    end is cut, and the name, state, return and elapsed time must stay."""
    if run is None:
        return Text("run deleted", style="bold red")
    s = run.get("summary") or {}
    state = run.get("state", "?")
    text = Text()
    text.append(run.get("name", "?"), style="bold")
    if fmt.mode_mark(run):
        text.append(f" {fmt.mode_mark(run)}", style="bold cyan")
    text.append("  ")
    text.append(fmt.state_label(run), style=fmt.STATE_STYLES.get(state, ""))
    text.append(f"  return {fmt.num(fmt.smoothed_return(run, window))} (avg{window})")
    text.append(f"  {fmt.duration(fmt.elapsed(run, now))}")
    job = fmt.job_text(run, now)   # a cluster run: its job, node and wall time left
    if job:
        text.append(f"  {job}", style="cyan")
    text.append(f"  best {fmt.best_text(run)}")
    left = fmt.eta(run)
    if left is not None:
        text.append(f"  ETA {fmt.duration(left)}")
    text.append(f"  {fmt.num(s.get('steps'))}/{fmt.num(s.get('total_steps'))} steps {fmt.progress_text(run)}")
    text.append(f"  {fmt.rate(s.get('sps'))} steps/s")
    text.append(f"  {run.get('worker')}/{run.get('algo')}  {run.get('env')}")
    system = fmt.system_text(run)
    if system and state in ("running", "paused"):
        text.append(f"  {system}")
    if run.get("tags"):
        text.append("  " + " ".join(f"#{t}" for t in run["tags"]), style="cyan")
    # a cluster run its scheduler holds: the scheduler's whole words (the state says them short)
    reason = fmt.failure_reason(run) or run.get("reason") or fmt.queue_message(run)
    if reason:
        text.append(f"  {reason}", style="italic")
    return text


class RunTabs(TabbedContent):
    """The run's tabs. Keys and clicks choose the tab, and the screen then
    focuses what is in it; Textual's TabbedContent would also switch to the
    pane of any widget focused from code. A focus asked for before a key
    (opening the screen focuses the first tab's widget) then lands after it,
    and takes the tab back: `2` pressed as a run opens showed Metrics.

    The tab the screen opens on (the one the user left) is chosen once Textual
    has activated the first one, not with ``initial=``: given ``initial``,
    Textual's ``Tabs._on_mount`` assigns that tab whether or not it exists, and
    a screen removed while it is still being built (the app exiting as a run
    opens under load) has no tabs under its Tabs: Textual mounts nothing more
    under a widget being removed but still runs its on_mount. That raised
    "ValueError: No Tab with id '--content-tab-metrics'" and ended the app.
    Without ``initial`` the same method finds no tab and returns."""

    def __init__(self, *titles, open_on: str = "", **kwargs) -> None:
        super().__init__(*titles, **kwargs)
        self.open_on = open_on      # the tab to show once the tabs are up; "": the first one

    def _on_tab_pane_focused(self, event: TabPane.Focused) -> None:
        event.stop()
        event.prevent_default()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The first activation (Textual's, of the first tab): now the tab to open on."""
        if not self.open_on or event.tabbed_content is not self:
            return
        tab, self.open_on = self.open_on, ""
        if tab == event.pane.id:
            return
        try:
            self.get_tab(tab)
        except NoMatches:           # a tab this run does not have (any more)
            return
        event.stop()                # the screen hears of the tab it opens on, not of the first
        self.active = tab


class RunScreen(Screen):
    DEFAULT_CSS = """
    RunScreen TabbedContent {
        height: 1fr;
    }
    RunScreen TabPane {
        padding: 0;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="run.back"),
        Binding("1", "tab('metrics')", "Metrics", id="run.metrics"),
        Binding("2", "tab('logs')", "Logs", id="run.logs"),
        Binding("3", "tab('config')", "Config", id="run.config"),
        Binding("4", "tab('frames')", "Frames", show=False, id="run.frames"),
        Binding("5", "tab('artifacts')", "Artifacts", show=False, id="run.artifacts"),
        Binding("6", "tab('transcript')", "Transcript", show=False, id="run.transcript"),
        Binding("p", "pause", "Pause/resume", show=False, id="run.pause"),
        Binding("x", "cancel", "Cancel", show=False, id="run.cancel"),
        Binding("z", "stop", "Stop/continue", show=False, id="run.stop"),
        Binding("D", "delete", "Delete", show=False, id="run.delete"),
        Binding("e", "clone", "Clone+edit", show=False, id="run.clone"),
        Binding("number_sign", "edit('tags')", "Tags", show=False, id="run.tags"),
        Binding("o", "edit('note')", "Note", show=False, id="run.note"),
    ]

    def __init__(self, run_id: str, tab: str | None = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.initial_tab = tab if tab in TABS else "metrics"
        self._series_dirty = False
        self._watching = False      # on_mount asked the link for the run's telemetry
        self._opened = False        # the first tab has been shown (and focused)

    @property
    def run(self) -> dict | None:
        return self.app.link.runs.get(self.run_id)

    @property
    def has_frames(self) -> bool:
        from mosaic_tui.widgets.frames_view import frames_enabled
        return frames_enabled(self.run)

    @property
    def has_transcript(self) -> bool:
        from mosaic_tui.widgets.transcript_view import transcript_enabled
        return transcript_enabled(self.run)

    def compose(self) -> ComposeResult:
        from mosaic_tui.widgets.artifacts_view import ArtifactsView
        from mosaic_tui.widgets.config_view import ConfigView
        from mosaic_tui.widgets.logs_pane import LogsPane
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        yield TitleBar(id="title")
        yield ConnectionBanner()
        if (self.initial_tab == "frames" and not self.has_frames) or \
                (self.initial_tab == "transcript" and not self.has_transcript):
            self.initial_tab = "metrics"
        with RunTabs(open_on=self.initial_tab if self.initial_tab != TABS[0] else ""):
            with TabPane("Metrics", id="metrics"):
                yield MetricsPane(self.run_id)
            with TabPane("Logs", id="logs"):
                yield LogsPane(self.run_id)
            with TabPane("Config", id="config"):
                yield ConfigView(self.run)
            with TabPane("Artifacts", id="artifacts"):
                yield ArtifactsView(self.run_id)
            if self.has_frames:
                from mosaic_tui.widgets.frames_view import FramesView
                with TabPane("Frames", id="frames"):
                    yield FramesView(self.run_id)
            if self.has_transcript:
                from mosaic_tui.widgets.transcript_view import TranscriptView
                with TabPane("Transcript", id="transcript"):
                    yield TranscriptView(self.run_id)
        yield KeyBar()

    def on_mount(self) -> None:
        if leaving(self):
            return      # removed while it was being built (the app exiting): parts of it are missing
        self._watching = True
        self.app.link.watch(self.run_id)
        self.update_header()
        self.set_interval(PLOT_REFRESH_SECONDS, self._refresh_plots, name="plots")
        self.set_interval(1.0, self.update_header, name="header")
        # the first tab's widget is focused when the tabs are up: on_tabbed_content_tab_activated

    def on_unmount(self) -> None:
        if self._watching:
            self.app.link.unwatch(self.run_id)

    def _focus_tab(self) -> None:
        tab = self.query_one(TabbedContent).active
        from mosaic_tui.widgets.artifacts_view import ArtifactsView
        from mosaic_tui.widgets.config_view import ConfigView
        from mosaic_tui.widgets.log_view import LogView
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        target = {"metrics": MetricsPane, "logs": LogView, "config": ConfigView, "artifacts": ArtifactsView}.get(tab)
        if tab == "frames":
            from mosaic_tui.widgets.frames_view import FramesView
            target = FramesView
        if tab == "transcript":
            from mosaic_tui.widgets.transcript_view import TranscriptView
            target = TranscriptView
        if target is not None:
            self.query_one(target).focus()

    def update_header(self) -> None:
        self.query_one(TitleBar).update(header_text(self.run, self.app.clock(), self.app.return_window))
        from mosaic_tui.widgets.failure_banner import FailureBanner
        # the Metrics tab's band: a failed run's reason. Once on_mount has run everything under the
        # screen is mounted unless the screen is being removed (see leaving()); query() all the same.
        for banner in self.query(FailureBanner):
            banner.show_run(self.run)

    # -- link messages ---------------------------------------------------------
    def on_runs_changed(self, message: RunsChanged) -> None:
        if leaving(self):
            return      # posted while the screen was being built, and it is going: maybe partly built
        if self.run_id in message.deleted:
            self.update_header()
            self.notify("this run was deleted", severity="warning")
            return
        if self.run_id in message.changed:
            self.update_header()
            from mosaic_tui.widgets.config_view import ConfigView
            if self.run is not None:
                self.query_one(ConfigView).show(self.run)
            self._add_frames_tab()
            self._add_transcript_tab()

    def _add_frames_tab(self) -> None:
        """The record came after the screen was built: add the Frames tab if the run has frames."""
        tabs = self.query_one(TabbedContent)
        if not self.has_frames or tabs.query("#frames"):
            return
        from mosaic_tui.widgets.frames_view import FramesView
        tabs.add_pane(TabPane("Frames", FramesView(self.run_id), id="frames"))

    def _add_transcript_tab(self) -> None:
        """A run that turned out to make LLM calls: add its Transcript tab."""
        tabs = self.query_one(TabbedContent)
        if not self.has_transcript or tabs.query("#transcript"):
            return
        from mosaic_tui.widgets.transcript_view import TranscriptView
        tabs.add_pane(TabPane("Transcript", TranscriptView(self.run_id), id="transcript"))

    def on_series_changed(self, message: SeriesChanged) -> None:
        if leaving(self):
            return
        if self.run_id in message.series:
            if not self._series_dirty and not self.query_one_optional_metrics_has_plots():
                # first points: show them at once
                self._series_dirty = True
                self._refresh_plots()
            else:
                self._series_dirty = True

    def query_one_optional_metrics_has_plots(self) -> bool:
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        return bool(self.query_one(MetricsPane).plots)

    def _refresh_plots(self) -> None:
        if not self._series_dirty or self.app.screen is not self:
            return
        if self.query_one(TabbedContent).active != "metrics":
            return
        self._series_dirty = False
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        self.query_one(MetricsPane).sync_plots()

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        if leaving(self):
            return
        self.query_one(ConnectionBanner).refresh_text()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if not self._opened:
            self._opened = True
            self.call_after_refresh(self._focus_tab)   # the tab it opens on is up: focus its widget
        self.app.remember_place()
        if event.pane.id == "metrics":
            self._series_dirty = True
            self._refresh_plots()

    # -- actions -------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "tab" and parameters in (("frames",), ("transcript",)):
            try:
                return bool(self.query_one(TabbedContent).query(f"#{parameters[0]}"))
            except Exception:
                return False
        return True

    def action_tab(self, tab: str) -> None:
        if tab == "frames" and not self.query_one(TabbedContent).query("#frames"):
            self.notify("this run publishes no frames (frames.enabled is off)", timeout=3)
            return
        if tab == "transcript" and not self.query_one(TabbedContent).query("#transcript"):
            self.notify("this run makes no LLM calls: no transcript", timeout=3)
            return
        tabs = self.query_one(RunTabs)
        tabs.open_on = ""           # a tab chosen as the screen opens wins over the one it was left on
        tabs.active = tab
        self.call_after_refresh(self._focus_tab)

    def action_back(self) -> None:
        from mosaic_tui.widgets.logs_pane import LogsPane
        from mosaic_tui.widgets.metrics_pane import MetricsPane
        tab = self.query_one(TabbedContent).active
        if tab == "metrics" and self.query_one(MetricsPane).clear_filter():
            return
        if tab == "logs" and self.query_one(LogsPane).clear_search():
            return
        if tab == "transcript":
            from mosaic_tui.widgets.transcript_view import TranscriptView
            if self.query_one(TranscriptView).clear_search():
                return
        self.app.pop_screen()
        self.app.remember_place()

    def action_pause(self) -> None:
        self.app.act_on_runs("toggle_pause", [self.run_id])

    def action_cancel(self) -> None:
        self.app.act_on_runs("cancel", [self.run_id])

    def action_stop(self) -> None:
        self.app.act_on_runs("toggle_stop", [self.run_id])

    def action_delete(self) -> None:
        self.app.act_on_runs("delete", [self.run_id])

    def action_clone(self) -> None:
        self.app.act_on_runs("clone", [self.run_id])

    def action_edit(self, what: str) -> None:
        self.app.edit_annotation(self.run_id, what)

    def ui_place(self) -> dict:
        tab = ""
        for tabs in self.query(RunTabs):
            tab = tabs.open_on or tabs.active   # "" until Textual has activated the first tab
        return {"screen": "run", "run": self.run_id, "tab": tab or self.initial_tab}
