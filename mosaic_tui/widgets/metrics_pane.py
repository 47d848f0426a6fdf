"""The Metrics tab: a grid of plots, one per scalar tag, with TensorBoard's controls."""
from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from mosaic_tui.widgets.failure_banner import FailureBanner
from mosaic_tui.widgets.metric_plot import MetricPlot, PlotLine, PlotOptions, summary_of

SMOOTH_STEPS = (0.0, 0.3, 0.6, 0.8, 0.9, 0.95, 0.99, 0.999)


def tag_order(tag: str) -> tuple:
    # the return first, then TensorBoard-like grouping by prefix
    return (not tag.startswith("episode/return"), tag.startswith("episode/"), tag)


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
        layout: grid;
        grid-size: 2;
        grid-rows: 14;
        grid-gutter: 0 1;
        height: 1fr;
    }
    MetricsPane #plots.-one {
        grid-size: 1;
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

    def on_mount(self) -> None:
        self.query_one("#tag-filter", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        self.update_bar()
        self.query_one(FailureBanner).show_run(self.app.link.runs.get(self.run_id))
        self.sync_plots()

    def on_resize(self) -> None:
        self.query_one("#plots").set_class(self.size.width < 100, "-one")

    # -- data ------------------------------------------------------------------
    def sync_plots(self) -> None:
        """Add plots for new tags, show the ones the filter lets through, redraw."""
        series = self.app.link.series.get(self.run_id)
        if series is None:
            return
        container = self.query_one("#plots", VerticalScroll)
        new_tags = sorted((t for t in series.tags if t not in self.plots), key=tag_order)
        if new_tags:
            self.query_one("#no-metrics").display = False
            for tag in new_tags:
                plot = MetricPlot(tag, [PlotLine(None, series.tags[tag], series.t0)], self.options)
                self.plots[tag] = plot
                ordered = sorted(self.plots, key=tag_order)
                idx = ordered.index(tag)
                if idx + 1 < len(ordered) and ordered[idx + 1] in self.plots and self.plots[ordered[idx + 1]].is_mounted:
                    container.mount(plot, before=self.plots[ordered[idx + 1]])
                else:
                    container.mount(plot)
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
