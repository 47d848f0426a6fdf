"""One plot of one scalar tag (or of one tag across runs), drawn with textual-plotext.

The series is decimated to the plot's width (each braille column gets the
minimum and maximum of its points) before plotext sees it, plotext's hot loops
run in numpy (``mosaic_tui.plotfast``), and the drawn text is cached until the
data, the size, the theme or an option changes: a million points redraw in a
few tens of milliseconds, and a redraw without news costs nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.text import Text
from textual.color import Color
from textual.strip import Strip
from textual_plotext import PlotextPlot

from mosaic_tui import plotfast
from mosaic_tui.series import Series, decimate

# New points redraw a plot at most once per this many times its last drawing
# took: plotting stays under ~1/4 of the app's time however big the series.
REDRAW_BUDGET_FACTOR = 4.0

plotfast.install()

# colours of overlaid runs (compare), after the theme's primary
PALETTE = ["#4fa3e0", "#f0a35e", "#7fc27f", "#e06c75", "#c678dd", "#e5c07b", "#56b6c2", "#d19a66",
           "#98c379", "#61afef"]


@dataclass
class PlotOptions:
    smoothing: float = 0.6       # TensorBoard's default
    logy: bool = False
    xaxis: str = "step"          # "step" or "time" (seconds since the run's first event)

    def key(self) -> tuple:
        return (round(self.smoothing, 4), self.logy, self.xaxis)


@dataclass
class PlotLine:
    label: str | None
    series: Series
    t0: float | None = None       # wall time origin (x by time)
    color: Any = None


class MetricPlot(PlotextPlot):
    """A plot of one or more series of the same tag."""

    DEFAULT_CSS = """
    MetricPlot {
        height: 14;
        width: 1fr;
        border: round $panel-lighten-1;
        border-title-color: $text;
        border-title-style: bold;
        padding: 0;
    }
    MetricPlot:focus {
        border: round $primary;
    }
    """

    def __init__(self, tag: str, lines: list[PlotLine], options: PlotOptions, **kwargs) -> None:
        super().__init__(**kwargs)
        self.tag = tag
        self.lines = lines
        self.options = options
        self.border_title = tag
        self._cache_key: tuple | None = None
        self._cache_text: "str | Text | None" = None
        self._strips: list | None = None
        self._strips_key: tuple | None = None
        self.last_render_ms = 0.0
        self._next_draw_at = 0.0           # no redraw for new points before this (monotonic)
        self._redraw_timer = None

    def _redraw_due(self) -> None:
        self._redraw_timer = None
        self.refresh()

    def data_key(self) -> tuple:
        return tuple((id(line.series), line.series.version, line.label) for line in self.lines)

    def _colors(self) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
        variables = self.app.theme_variables
        primary = Color.parse(variables.get("primary", "#4fa3e0"))
        surface = Color.parse(variables.get("surface", "#1c2028"))
        faded = surface.blend(primary, 0.45)
        return primary.rgb, faded.rgb

    def render(self):
        """The plot as Text (tests, snapshots of the text); the screen uses render_line."""
        result = self._drawn()
        if isinstance(result, Text):
            return result
        return Text.from_ansi(result, no_wrap=True)

    def _drawn(self) -> "str | Text":
        """plotext's ANSI output (or a Text message), cached until something changes."""
        import time
        width, height = self.size
        key = (width, height, self.app.theme, self.options.key(), self.data_key())
        if key == self._cache_key and self._cache_text is not None:
            return self._cache_text
        now = time.monotonic()
        if (self._cache_text is not None and self._cache_key is not None
                and key[:4] == self._cache_key[:4] and now < self._next_draw_at):
            # Only new points, and the last drawing is recent: keep showing it
            # and draw once the budget allows. A plot of a million points takes
            # plotext tens of ms; at every update that would crowd out keys.
            if self._redraw_timer is None:
                self._redraw_timer = self.set_timer(self._next_draw_at - now, self._redraw_due)
            return self._cache_text
        t0 = time.perf_counter()
        drawn = self.draw(width, height)
        elapsed = time.perf_counter() - t0
        self.last_render_ms = 1000 * elapsed
        self._next_draw_at = time.monotonic() + REDRAW_BUDGET_FACTOR * elapsed
        self._cache_key = key
        self._cache_text = drawn
        self._strips = None
        return drawn

    def render_line(self, y: int) -> Strip:
        """Strips straight from plotext's output, skipping Rich Text (see plotfast)."""
        drawn = self._drawn()
        width = self.size.width
        base = self.rich_style
        if isinstance(drawn, Text):
            return super().render_line(y)
        if self._strips is None or self._strips_key != (width, base):
            self._strips = plotfast.ansi_to_strips(drawn, base, width)
            self._strips_key = (width, base)
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(width, base)

    def draw(self, width: int, height: int) -> "str | Text":
        plt = self._plot
        plt.clear_figure()
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        if width < 10 or height < 4:
            return Text("")
        columns = max(8, 2 * width)
        opts = self.options
        primary, faded = self._colors()
        multi = len(self.lines) > 1
        drawn = 0
        lo, hi = float("inf"), float("-inf")
        for i, line in enumerate(self.lines):
            s = line.series
            if not len(s):
                continue
            if opts.xaxis == "time":
                origin = line.t0 if line.t0 is not None else float(s.walls[0])
                x = s.walls - origin
                x_sorted = None
            else:
                x = s.steps
                x_sorted = s.steps_sorted
            y_raw = s.values
            y_smooth = s.smoothed(opts.smoothing) if opts.smoothing > 0 else None
            color = line.color or (PALETTE[i % len(PALETTE)] if multi else primary)
            if isinstance(color, str):
                color = Color.parse(color).rgb
            # (values, colour, label, columns): the raw series under a smoothed one is a faded
            # envelope at one min/max pair a cell; the main line gets one a braille dot column
            pairs = []
            if y_smooth is not None and not multi:
                pairs.append((y_raw, faded, None, max(8, width)))
                pairs.append((y_smooth, color, line.label, columns))
            else:
                pairs.append((y_smooth if y_smooth is not None else y_raw, color, line.label, columns))
            for y, col, label, ncols in pairs:
                xx, yy = x, y
                if opts.logy:
                    keep = y > 0
                    xx, yy = x[keep], y[keep]
                xs, ys = decimate(xx, yy, ncols, x_sorted)
                if not len(xs):
                    continue
                plt.plot(xs.tolist(), ys.tolist(), marker="braille", color=col, label=label)
                lo, hi = min(lo, float(ys.min())), max(hi, float(ys.max()))
                drawn += 1
        if drawn and hi - lo <= 1e-9 * max(1.0, abs(hi)):
            # a constant: give plotext a range, or its tick labels go haywire
            if opts.logy:
                plt.ylim(lo / 2, hi * 2)
            else:
                pad = max(abs(hi) * 0.1, 1.0)
                plt.ylim(lo - pad, hi + pad)
        if opts.logy and drawn:
            plt.yscale("log")
        if not drawn:
            return Text("no points yet" if not opts.logy else "no positive values for log-y",
                        style="dim", justify="center")
        return plt.build()


def summary_of(series: Series) -> str:
    if not len(series):
        return "-"
    v = series.values
    finite = v[np.isfinite(v)]
    if not len(finite):
        return "no finite values"
    from mosaic_tui import fmt
    return f"last {fmt.num(float(v[-1]))}  min {fmt.num(float(finite.min()))}  max {fmt.num(float(finite.max()))}  n {len(v)}"
