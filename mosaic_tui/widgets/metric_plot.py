"""One plot of one scalar tag (or of one tag across runs), drawn with textual-plotext.

The series is decimated to the plot's width (each braille column gets the
minimum and maximum of its points) before plotext sees it, plotext's hot loops
run in numpy (``mosaic_tui.plotfast``), and the drawn text is cached until the
data, the size, the theme or an option changes: a million points redraw in a
few tens of milliseconds, and a redraw without news costs nothing.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.color import Color
from textual.strip import Strip
from textual_plotext import PlotextPlot

from mosaic_tui import plotfast
from mosaic_tui.series import Series

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
        x_lo, x_hi = float("inf"), float("-inf")
        for i, line in enumerate(self.lines):
            s = line.series
            if not len(s):
                continue
            origin = None
            if opts.xaxis == "time":
                origin = line.t0 if line.t0 is not None else float(s.walls[0])
            smoothing = opts.smoothing if opts.smoothing > 0 else 0.0
            color = line.color or (PALETTE[i % len(PALETTE)] if multi else primary)
            if isinstance(color, str):
                color = Color.parse(color).rgb
            # (smoothing, colour, label, columns): the raw series under a smoothed one is a faded
            # envelope at one min/max pair a cell; the main line gets one a braille dot column
            pairs = []
            if smoothing and not multi:
                pairs.append((0.0, faded, None, max(8, width)))
                pairs.append((smoothing, color, line.label, columns))
            else:
                pairs.append((smoothing, color, line.label, columns))
            for weight, col, label, ncols in pairs:
                # x: per-iteration values at their iteration's middle (series.spread_steps), or wall time
                xs, ys = s.decimated(ncols, weight, opts.logy, origin)
                if not len(xs):
                    continue
                plt.plot(xs.tolist(), ys.tolist(), marker="braille", color=col, label=label)
                lo, hi = min(lo, float(ys.min())), max(hi, float(ys.max()))
                x_lo, x_hi = min(x_lo, float(xs[0])), max(x_hi, float(xs[-1]))
                drawn += 1
        if not drawn:
            return Text("no points yet" if not opts.logy else "no positive values for log-y",
                        style="dim", justify="center")
        if hi - lo <= 1e-9 * max(1e-300, abs(hi)):
            # a constant: give plotext a range around it, of its own size (a
            # timer of 6e-4 s in a range of -1..1 would read as zero)
            if opts.logy:
                lo, hi = lo / 2, hi * 2
            else:
                pad = abs(hi) * 0.1 if hi else 1.0
                lo, hi = lo - pad, hi + pad
        plt.ylim(lo, hi)
        if opts.logy:
            plt.yscale("log")
            y_ticks = log_ticks(lo, hi, max(2, (height - 3) // 2))
        else:
            y_ticks = nice_ticks(lo, hi, max(2, (height - 3) // 2))
        y_ticks = apart(y_ticks, lo, hi, max(2, height - 4))
        plt.yticks(y_ticks, tick_labels(y_ticks))
        if x_hi > x_lo:
            plt.xlim(x_lo, x_hi)
            x_ticks = nice_ticks(x_lo, x_hi, max(2, (width - 10) // 10))
            plt.xticks(x_ticks, tick_labels(x_ticks))
        return plt.build()


def apart(ticks: list[float], lo: float, hi: float, rows: int) -> list[float]:
    """The ticks that get a canvas row of their own, top down. Two ticks on one row
    are both handed to plotext, which keeps one of them by set order, so the
    label changed with PYTHONHASHSEED from one run of the app to the next."""
    if hi <= lo or len(ticks) < 2:
        return ticks
    kept: list[float] = []
    for tick in sorted(ticks, reverse=True):
        row = (tick - lo) / (hi - lo) * (rows - 1)
        if not kept or (kept[-1] - lo) / (hi - lo) * (rows - 1) - row >= 1:
            kept.append(tick)
    return sorted(kept)


def nice_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Round ticks inside [lo, hi], about ``count`` of them: steps of 1, 2 or 5 times a power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / max(1, count)
    power = 10.0 ** math.floor(math.log10(raw))
    step = min((m * power for m in (1, 2, 5, 10)), key=lambda candidate: abs(math.log(candidate / raw)))
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + 1e-9 * step and len(ticks) <= 2 * count + 2:
        ticks.append(0.0 if abs(k * step) < 1e-12 * step else k * step)
        k += 1
    return ticks


def log_ticks(lo: float, hi: float, count: int) -> list[float]:
    """Ticks for a log axis: powers of ten, with 2 and 5 times them when the range is short."""
    if lo <= 0 or hi <= lo:
        return []
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas in ((1,), (1, 2, 5), (1, 2, 3, 4, 5, 6, 7, 8, 9)):
        ticks = [m * 10.0 ** e for e in range(first, last + 1) for m in mantissas if lo <= m * 10.0 ** e <= hi]
        if len(ticks) >= 2:
            break
    step = max(1, math.ceil(len(ticks) / max(1, count)))
    return ticks[::step] if len(ticks) >= 2 else nice_ticks(lo, hi, count)


def tick_labels(ticks: list[float]) -> list[str]:
    """fmt.eng labels with the fewest digits that still say each tick exactly and tell them apart."""
    from mosaic_tui import fmt
    for digits in (1, 2, 3, 4):
        labels = [fmt.eng(t, digits) for t in ticks]
        exact = all(abs(fmt.eng_value(text) - t) <= 1e-9 * max(abs(t), 1e-300) for text, t in zip(labels, ticks))
        if exact and len(set(labels)) == len(labels) and all(len(text) <= 8 for text in labels):
            return labels
    return [fmt.eng(t, 3) for t in ticks]


def summary_of(series: Series) -> str:
    if not len(series):
        return "-"
    span = series.value_range()
    if span is None:
        return "no finite values"
    from mosaic_tui import fmt
    return f"last {fmt.num(series.last())}  min {fmt.num(span[0])}  max {fmt.num(span[1])}  n {series.total}"
