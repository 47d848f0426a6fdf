"""`mosaic watch [RUN]`: a compact pane for a tmux split, down to 80x12 and smaller.

A state line, one or two plots (the episode return and another scalar, a
loss first), and the last lines of the run's stderr. Without RUN it follows the
newest run, switching when a newer one is submitted. ``q`` leaves; the run
goes on.
"""
from __future__ import annotations

import os
import time
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from daemon.home import STDERR_FILE, Home
from mosaic_tui import fmt
from mosaic_tui import themes as theme_files
from mosaic_tui.link import Link, Update

TAIL_BYTES = 8192


def resolve(runs: dict[str, dict[str, Any]], ref: str) -> dict[str, Any] | None:
    for run in runs.values():
        if run.get("name") == ref:
            return run
    matches = [r for r in runs.values() if r["id"].upper().startswith(ref.upper())]
    return matches[0] if len(matches) == 1 else None


def tail_lines(path, count: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    lines = []
    for line in data.split("\n"):
        if "\r" in line:
            parts = [p for p in line.split("\r") if p]
            line = parts[-1] if parts else ""
        if line.strip():
            lines.append(line.expandtabs(4))
    return lines[-count:] if count > 0 else []


def state_line(run: dict[str, Any] | None, now: float, following: bool) -> Text:
    if run is None:
        return Text("no run yet: submit one (mosaic submit ...); waiting", style="dim")
    s = run.get("summary") or {}
    state = run.get("state", "?")
    text = Text()
    text.append(run.get("name", "?"), style="bold")
    text.append(" ")
    text.append(state, style=fmt.STATE_STYLES.get(state, ""))
    text.append(f" {fmt.progress_text(run)} {fmt.num(s.get('steps'))}st {fmt.rate(s.get('sps'))}/s"
                f" ret {fmt.num(s.get('last_return'))} {fmt.duration(fmt.elapsed(run, now))}")
    if following:
        text.append(" (newest)", style="dim")
    return text


class WatchApp(App):
    CSS = """
    Screen {
        layout: vertical;
        overflow: hidden;
    }
    #state {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    #plots {
        height: 1fr;
        min-height: 4;
    }
    #plots MetricPlot {
        height: 1fr;
        width: 1fr;
        border: round $panel-lighten-1;
    }
    #tail {
        height: 3;
        padding: 0 1;
        color: $text-muted;
    }
    Screen.-short #tail {
        display: none;
    }
    Screen.-narrow #plot-1 {
        display: none;
    }
    #frames-pane {
        width: 1fr;
        height: 1fr;
        display: none;
    }
    Screen.-frames #frames-pane {
        display: block;
    }
    Screen.-frames #plot-1 {
        display: none;
    }
    """

    BINDINGS = [
        Binding("q", "quit", "Quit", id="watch.quit"),
        Binding("T", "cycle_theme", "Theme", show=False, id="watch.theme"),
        Binding("f", "toggle_frames", "Frames", show=False, id="watch.frames"),
    ]

    def __init__(self, home: Home, run_ref: str | None = None, *, connect: bool = True,
                 clock=time.time, interval: float = 0.5, graphics=None) -> None:
        super().__init__()
        self.graphics = graphics    # graphics.detect.Capabilities, or None: half-blocks
        self.frames_wanted = True   # `f` hides/shows the frames pane of a run with frames
        self.frames_run: str | None = None
        self.home = home
        self.run_ref = run_ref
        self.connect = connect
        self.clock = clock
        self.link = Link(home, self._on_update, interval=interval)
        self.run_id: str | None = None
        mosaic_themes, css = theme_files.load()
        for theme in mosaic_themes:
            self.register_theme(theme)
        self.theme_names = [t.name for t in mosaic_themes]
        from mosaic_tui import uistate
        saved = uistate.load_state(home).get("theme")
        self.theme = saved if saved in self.available_themes else theme_files.DEFAULT_THEME

    def compose(self) -> ComposeResult:
        from mosaic_tui.widgets.metric_plot import MetricPlot, PlotOptions
        self.options = PlotOptions(smoothing=0.6)
        yield Static("connecting...", id="state")
        with Horizontal(id="plots"):
            yield MetricPlot("episode/return", [], self.options, id="plot-0")
            yield MetricPlot("", [], self.options, id="plot-1")
            from textual.containers import Container
            yield Container(id="frames-pane")
        yield Static("", id="tail")

    def on_mount(self) -> None:
        if self.connect:
            self.link.start()
        self.set_interval(1.0, self.refresh_view, name="watch")
        self.on_resize()

    async def on_unmount(self) -> None:
        await self.link.stop()

    def on_resize(self, event=None) -> None:
        size = self.size
        self.screen.set_class(size.height < 10, "-short")
        self.screen.set_class(size.width < 70, "-narrow")

    def _on_update(self, update: Update) -> None:
        self.pick_run()
        self.refresh_view(update)

    def pick_run(self) -> None:
        link = self.link
        if self.run_ref:
            run = resolve(link.runs, self.run_ref)
        else:
            run = link.newest_run()
        rid = run["id"] if run else None
        if rid != self.run_id:
            if self.run_id:
                link.unwatch(self.run_id)
            self.run_id = rid
            if rid:
                link.watch(rid)
            for plot in self.query("MetricPlot"):
                plot.lines = []
        self.sync_frames()

    def sync_frames(self) -> None:
        """Show a frames pane while the followed run publishes frames (and `f` did not hide it).

        A finished run's ring is gone with it: its second plot comes back."""
        from daemon import protocol as P
        from mosaic_tui.widgets.frames_view import FramesView, frames_enabled
        run = self.link.runs.get(self.run_id) if self.run_id else None
        has = frames_enabled(run) and run.get("state") in (P.QUEUED, *P.ACTIVE_STATES)
        pane = self.query_one("#frames-pane")
        if has and self.frames_run != self.run_id:
            pane.remove_children()
            pane.mount(FramesView(self.run_id))
            self.frames_run = self.run_id
        elif not has and self.frames_run is not None:
            pane.remove_children()
            self.frames_run = None
        self.screen.set_class(has and self.frames_wanted, "-frames")

    def action_toggle_frames(self) -> None:
        if self.frames_run is None:
            self.notify("this run publishes no frames", timeout=2)
            return
        self.frames_wanted = not self.frames_wanted
        self.sync_frames()

    def refresh_view(self, update: Update | None = None) -> None:
        from mosaic_tui.widgets.metric_plot import PlotLine, summary_of
        link = self.link
        run = link.runs.get(self.run_id) if self.run_id else None
        if self.run_ref and run is None and link.loaded:
            self.query_one("#state", Static).update(Text(f"no run named {self.run_ref!r}", style="bold red"))
        elif not link.connected and not link.loaded:
            self.query_one("#state", Static).update(Text("connecting to the daemon...", style="dim"))
        else:
            line = state_line(run, self.clock(), not self.run_ref)
            if not link.connected and (link.attempts or link.error):
                line.append("  daemon unreachable, reconnecting", style="bold red")
            self.query_one("#state", Static).update(line)
        series = link.series.get(self.run_id) if self.run_id else None
        if series is not None and series.tags:
            tags = sorted(series.tags)
            first = "episode/return" if "episode/return" in series.tags else tags[0]
            others = [t for t in tags if t != first and not t.startswith("episode/")] or \
                [t for t in tags if t != first]
            # the second plot: a loss before other scalars, more returns, and timings last
            from mosaic_tui.widgets.metrics_pane import tag_group
            others.sort(key=lambda t: ((1, 2, 0, 3).index(tag_group(t)), "loss" not in t.rsplit("/", 1)[-1].lower(), t))
            for plot, tag in zip(self.query("MetricPlot"), [first] + others[:1]):
                ser = series.tags[tag]
                if not plot.lines or plot.lines[0].series is not ser:
                    plot.lines = [PlotLine(None, ser, series.t0)]
                    plot.tag = tag
                    plot.border_title = tag
                plot.border_subtitle = summary_of(ser) if self.size.width >= 70 else ""
                plot.refresh()
        tail = self.query_one("#tail", Static)
        if run is not None and tail.display:
            lines = tail_lines(self.home.run_dir(run["id"]) / STDERR_FILE, 3)
            if not lines and run.get("reason"):
                lines = [run["reason"]]
            tail.update(Text("\n".join(line[: max(10, self.size.width - 2)] for line in lines), no_wrap=True))

    def action_cycle_theme(self) -> None:
        names = self.theme_names or ["textual-dark"]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
