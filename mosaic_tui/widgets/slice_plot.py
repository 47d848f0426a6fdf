"""One slice of a sweep: the objective of each finished trial against one swept param, a point
each (the best trial in the accent colour), drawn with textual-plotext like the metric plots.

The x axis runs 0..1 as ``sweep_explain.x_position`` places the param's values (log for
loguniform and log ints, each value of a list its own share), with ticks labelled in the
param's own values.
"""
from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual.color import Color
from textual_plotext import PlotextPlot

from mosaic_tui.sweep_explain import value_range, x_position
from mosaic_tui.widgets.metric_plot import apart, log_ticks, nice_ticks, tick_labels

MIN_WIDTH = 24      # columns: below this a slice's ticks and points crowd


class SlicePlot(PlotextPlot):
    """The objective against one param; ``plot`` is a slice of ``sweep_explain.slices``."""

    DEFAULT_CSS = """
    SlicePlot {
        height: 1fr;
        width: 1fr;
        min-width: 24;  /* MIN_WIDTH */
        border: round $panel-lighten-1;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0;
    }
    """

    def __init__(self, plot: dict[str, Any], best_trial: int | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.plot = plot
        self.best_trial = best_trial
        self._set_title()

    def _set_title(self) -> None:
        scale = " (log)" if self.plot["scale"] == "log" else ""
        self.border_title = f"{self.plot['param']}{scale}"
        self.border_subtitle = f"{len(self.plot['points'])} trials"

    def update_plot(self, plot: dict[str, Any], best_trial: int | None) -> None:
        self.plot = plot
        self.best_trial = best_trial
        self._set_title()
        self.refresh()

    def render(self):
        width, height = self.size
        drawn = self.draw(width, height)
        return drawn if isinstance(drawn, Text) else Text.from_ansi(drawn, no_wrap=True)

    def x_ticks(self, columns: int) -> tuple[list[float], list[str]]:
        """Tick places (0..1) and their labels in the param's own values."""
        plot = self.plot
        if plot["scale"] == "categorical":
            values = plot["values"]
            step = max(1, math.ceil(len(values) * 8 / max(8, columns)))   # labels of ~8 characters apart
            shown = values[::step]
            return [x_position(plot, v) for v in shown], [str(v) for v in shown]
        lo, hi = float(plot["low"]), float(plot["high"])
        count = max(2, columns // 12)
        ticks = log_ticks(lo, hi, count) if plot["scale"] == "log" else nice_ticks(lo, hi, count)
        return [x_position(plot, t) for t in ticks], tick_labels(ticks)

    def draw(self, width: int, height: int) -> "str | Text":
        plt = self._plot
        plt.clear_figure()
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        points = self.plot["points"]
        if not points:
            return Text("no finished trials yet", style="dim", justify="center")
        if width < 10 or height < 4:
            return Text("")
        variables = self.app.theme_variables
        primary = Color.parse(variables.get("primary", "#4fa3e0")).rgb
        accent = Color.parse(variables.get("accent", "#f0a35e")).rgb
        rest = [p for p in points if p["trial"] != self.best_trial]
        best = [p for p in points if p["trial"] == self.best_trial]
        for group, color in ((rest, primary), (best, accent)):
            if group:
                plt.scatter([x_position(self.plot, p["x"]) for p in group], [p["value"] for p in group],
                            marker="●", color=color)
        lo, hi = value_range(points)
        plt.ylim(lo, hi)
        y_ticks = apart(nice_ticks(lo, hi, max(2, (height - 3) // 2)), lo, hi, max(2, height - 4))
        plt.yticks(y_ticks, tick_labels(y_ticks))
        plt.xlim(0.0, 1.0)
        places, labels = self.x_ticks(width)
        plt.xticks(places, labels)
        return plt.build()
