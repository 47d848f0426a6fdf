"""The Metrics tab: a grid of plots, one per scalar tag, with TensorBoard's controls.

Tags are ordered by what a researcher looks at first: pinned tags (``m`` on a
focused plot; remembered in ui-state.json), then returns, losses, the rest;
timings and throughput (RLlib reports dozens: ``timers/``, ``*_time*``,
``*throughput*``) go to a group at the bottom that starts folded (``z``).
"""
from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import Collapsible, Input, Static

from mosaic_tui.widgets import leaving
from mosaic_tui.widgets.failure_banner import FailureBanner
from mosaic_tui.widgets.metric_plot import MetricPlot, PlotLine, PlotOptions, summary_of

SMOOTH_STEPS = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.99, 0.999)
PINS_KEY = "pinned_tags"         # in the app's ui state

# timings, timers and throughput: how fast, not how well
TIMING = re.compile(r"(^|[/_])(time|timers?|perf|sps)([/_]|$)|timer|throughput|duration", re.I)


def tag_group(tag: str) -> int:
    """0 returns (and the episode tags), 1 losses (entropy, KL, explained variance), 2 the rest, 3 timings."""
    low = tag.lower()
    if TIMING.search(low):
        return 3
    if "return" in low or "reward" in low or low.startswith("episode/"):
        return 0
    if "loss" in low or "entropy" in low or "kl" in low.replace("/", "_").split("_") or "explained_var" in low:
        return 1        # losses, and what says how the update went
    return 2


def tag_order(tag: str, pins: list[str] | tuple = ()) -> tuple:
    """Pinned tags in pin order, then the episode return, returns, losses, the rest, timings."""
    if tag in pins:
        return (0, pins.index(tag), 0, "")
    return (1, 0, tag_group(tag), not tag.startswith("episode/return"), tag.startswith("episode/"), tag)


class MetricsPane(Vertical):
    DEFAULT_CSS = """
    MetricsPane {
        height: 1fr;
    }
    MetricsPane #metrics-bar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    MetricsPane #tag-filter {
        display: none;
    }
    MetricsPane.-filtering #tag-filter {
        display: block;
    }
    MetricsPane #plots {
        height: 1fr;
    }
    MetricsPane .plot-grid {
        layout: grid;
        grid-size: 2;
        grid-rows: 14;
        grid-gutter: 0 1;
        height: auto;
    }
    MetricsPane.-one .plot-grid {
        grid-size: 1;
    }
    MetricsPane #timings {
        display: none;
        padding: 0;
        border-top: none;
    }
    MetricsPane #timings.-some {
        display: block;
    }
    MetricsPane #timings Contents {
        padding: 0;
    }
    MetricsPane #no-metrics {
        padding: 1 2;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("plus,equals_sign", "smooth(1)", "Smooth+", id="metrics.smooth_more"),
        Binding("minus", "smooth(-1)", "Smooth-", id="metrics.smooth_less"),
        Binding("0", "smooth_off", "No smoothing", show=False, id="metrics.smooth_off"),
        Binding("l", "logy", "Log-y", id="metrics.logy"),
        Binding("t", "xaxis", "Step/time", id="metrics.xaxis"),
        Binding("slash", "filter", "Tag filter", id="metrics.filter"),
        Binding("m", "pin", "Pin tag", id="metrics.pin"),
        Binding("f", "fold", "Timings", show=False, id="metrics.fold"),
        Binding("j", "scroll(1)", "Down", show=False, id="metrics.down"),
        Binding("k", "scroll(-1)", "Up", show=False, id="metrics.up"),
    ]

    def __init__(self, run_id: str, options: PlotOptions | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.options = options or PlotOptions()
        self.pattern = ""
        self.plots: dict[str, MetricPlot] = {}
        self.can_focus = True

    def compose(self) -> ComposeResult:
        yield FailureBanner(id="failure")
        yield Static("", id="metrics-bar")
        yield Input(placeholder="regex on tag names (enter: keep, esc: clear)", id="tag-filter")
        with VerticalScroll(id="plots"):
            yield Static("waiting for scalars...", id="no-metrics")
            yield Grid(id="main-plots", classes="plot-grid")
            with Collapsible(title="timings and throughput", collapsed=True, id="timings"):
                yield Grid(id="timing-plots", classes="plot-grid")

    def on_mount(self) -> None:
        if leaving(self):
            return      # its screen was removed while it was being built: its children may be missing
        self.query_one("#tag-filter", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        self.update_bar()
        self.query_one(FailureBanner).show_run(self.app.link.runs.get(self.run_id))
        self.sync_plots()

    def on_resize(self) -> None:
        self.set_class(self.size.width < 100, "-one")

    # -- pins and groups --------------------------------------------------------
    @property
    def pins(self) -> list[str]:
        pins = getattr(self.app, "ui_state", {}).get(PINS_KEY)
        return [p for p in pins if isinstance(p, str)] if isinstance(pins, list) else []

    def _grid_of(self, tag: str) -> Grid:
        folded = tag_group(tag) == 3 and tag not in self.pins
        return self.query_one("#timing-plots" if folded else "#main-plots", Grid)

    def _place(self, tag: str, plot: MetricPlot) -> None:
        """Mount a tag's plot in its grid, before the next tag in order there."""
        grid = self._grid_of(tag)
        pins = self.pins
        ordered = sorted((t for t, p in self.plots.items() if t == tag or p.parent is grid),
                         key=lambda t: tag_order(t, pins))
        after = ordered[ordered.index(tag) + 1:]
        if after:
            grid.mount(plot, before=self.plots[after[0]])
        else:
            grid.mount(plot)

    def _new_plot(self, tag: str, series) -> MetricPlot:
        plot = MetricPlot(tag, [PlotLine(None, series.tags[tag], series.t0)], self.options)
        plot.can_focus = True       # tab to a plot, `m` pins its tag
        return plot

    # -- data ------------------------------------------------------------------
    def sync_plots(self) -> None:
        """Add plots for new tags, show the ones the filter lets through, redraw."""
        series = self.app.link.series.get(self.run_id)
        if series is None:
            return
        pins = self.pins
        new_tags = sorted((t for t in series.tags if t not in self.plots), key=lambda t: tag_order(t, pins))
        if new_tags:
            self.query_one("#no-metrics").display = False
            for tag in new_tags:
                plot = self.plots[tag] = self._new_plot(tag, series)
                self._place(tag, plot)
            self.apply_filter()
        for tag, plot in self.plots.items():
            plot.border_subtitle = summary_of(plot.lines[0].series)
            plot.lines[0].t0 = series.t0
            plot.refresh()

    def apply_filter(self) -> None:
        try:
            rx = re.compile(self.pattern, re.I) if self.pattern else None
        except re.error:
            rx = None
        for tag, plot in self.plots.items():
            plot.display = rx is None or bool(rx.search(tag))
        timings = [p for p in self.plots.values() if p.parent is self.query_one("#timing-plots")]
        folder = self.query_one("#timings", Collapsible)
        shown = sum(1 for p in timings if p.display)
        folder.set_class(shown > 0, "-some")
        folder.title = f"timings and throughput: {shown} tags (z)"
        self.update_bar()

    def update_bar(self) -> None:
        o = self.options
        shown = sum(1 for p in self.plots.values() if p.display)
        parts = [f"smoothing {o.smoothing:g} (+/-)", f"log-y {'on' if o.logy else 'off'} (l)",
                 f"x: {'wall time (s)' if o.xaxis == 'time' else 'step'} (t)",
                 f"tags {shown}/{len(self.plots)}"]
        if self.pattern:
            parts.append(f"filter /{self.pattern}/")
        self.query_one("#metrics-bar", Static).update("   ".join(parts))

    def redraw(self) -> None:
        for plot in self.plots.values():
            plot.refresh()
        self.update_bar()

    # -- actions -------------------------------------------------------------------
    def action_smooth(self, direction: int) -> None:
        cur = self.options.smoothing
        steps = SMOOTH_STEPS
        if direction > 0:
            nxt = next((s for s in steps if s > cur + 1e-9), steps[-1])
        else:
            nxt = next((s for s in reversed(steps) if s < cur - 1e-9), steps[0])
        self.options.smoothing = nxt
        self.redraw()

    def action_smooth_off(self) -> None:
        self.options.smoothing = 0.0
        self.redraw()

    def action_logy(self) -> None:
        self.options.logy = not self.options.logy
        self.redraw()

    def action_xaxis(self) -> None:
        self.options.xaxis = "time" if self.options.xaxis == "step" else "step"
        self.redraw()

    def action_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one("#tag-filter", Input)
        box.value = self.pattern
        box.focus()

    def action_pin(self) -> None:
        """Pin the focused plot's tag to the top, or unpin it."""
        plot = self.app.focused
        if not isinstance(plot, MetricPlot) or plot.tag not in self.plots:
            self.notify("focus a plot first (tab, or click it), then m pins its tag", timeout=3)
            return
        tag = plot.tag
        pins = self.pins
        if tag in pins:
            pins.remove(tag)
        else:
            pins.append(tag)
        self.app.ui_state[PINS_KEY] = pins
        self.app.remember_place()
        # re-place every plot: a pin moves one tag, an unpin sends it back to its group
        series = self.app.link.series.get(self.run_id)
        for old in list(self.plots.values()):
            old.remove()
        self.plots = {}
        if series is not None:
            for t in sorted(series.tags, key=lambda t: tag_order(t, pins)):
                self.plots[t] = self._new_plot(t, series)
                self._place(t, self.plots[t])
        self.apply_filter()
        self.call_after_refresh(self._focus_tag, tag)
        self.notify(f"{'pinned' if tag in pins else 'unpinned'} {tag}", timeout=2)

    def _focus_tag(self, tag: str) -> None:
        plot = self.plots.get(tag)
        if plot is not None and plot.is_mounted:
            plot.focus()

    def action_fold(self) -> None:
        folder = self.query_one("#timings", Collapsible)
        folder.collapsed = not folder.collapsed

    def action_scroll(self, lines: int) -> None:
        self.query_one("#plots", VerticalScroll).scroll_relative(y=lines * 7, animate=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "tag-filter":
            event.stop()
            self.pattern = event.value
            self.apply_filter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "tag-filter":
            event.stop()
            self.remove_class("-filtering")
            self.focus()

    def clear_filter(self) -> bool:
        """esc: clear the tag filter if one is set (True if something was cleared)."""
        if self.has_class("-filtering") or self.pattern:
            self.pattern = ""
            self.query_one("#tag-filter", Input).value = ""
            self.remove_class("-filtering")
            self.apply_filter()
            self.focus()
            return True
        return False
