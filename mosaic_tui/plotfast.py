"""Faster drawing for plotext (and so for textual-plotext) without changing a pixel.

plotext rasterises in pure Python: the lines between data points
(``_utility.get_lines``), the removal of repeated dots (``_utility.brush``)
and the grouping of braille dots into characters
(``_utility.hd_group``) loop over every dot, and Rich's generic ANSI decoder
then parses the result. For a plot the size of a terminal that costs more than
the 50 ms a redraw may take. ``install()`` swaps the two loops for numpy
versions that give the same output (a test compares them on random plots; the
originals stay as a fallback for data they do not cover), and
``ansi_to_strips`` turns plotext's output straight into Textual strips with a
cached style per escape sequence.

Only the app imports this module; it is imported lazily with the plots.
"""
from __future__ import annotations

import re

import numpy as np
from rich.style import Style
from rich.text import Text

_installed = False
_orig_get_lines = None
_orig_hd_group = None


def _all_ints(values) -> bool:
    return set(map(type, values)) == {int}


def get_lines(x, y, *other):
    """plotext._utility.get_lines, vectorised (integer coordinates)."""
    if len(x) < 2 or len(x) != len(y) or not (_all_ints(x) and _all_ints(y)):
        return _orig_get_lines(x, y, *other)
    X = np.asarray(x, dtype=np.int64)
    Y = np.asarray(y, dtype=np.int64)
    dx = X[1:] - X[:-1]
    dy = Y[1:] - Y[:-1]
    a = np.maximum(np.abs(dx), np.abs(dy)) + 1          # points of each segment
    counts = a - 1                                       # the last one is dropped
    total = int(counts.sum())
    seg = np.repeat(np.arange(len(counts)), counts)
    starts = np.cumsum(counts) - counts
    i = (np.arange(total) - np.repeat(starts, counts)).astype(np.float64)
    denom = np.where(a > 1, a - 1, 1).astype(np.float64)
    sx = dx / denom
    sy = dy / denom
    xl = np.trunc(X[:-1][seg] + i * sx[seg]).astype(np.int64).tolist()
    yl = np.trunc(Y[:-1][seg] + i * sy[seg]).astype(np.int64).tolist()
    xl.append(x[-1])
    yl.append(y[-1])
    out = [xl, yl]
    seg_list = seg.tolist()
    for lst in other:
        if len(lst) < len(x):  # plotext's transpose truncates to the shortest list
            return _orig_get_lines(x, y, *other)
        if lst.count(lst[0]) == len(lst):   # one marker/colour for the whole line: no lookups
            col = [lst[0]] * (total + 1)
        else:
            col = [lst[n] for n in seg_list]
            col.append(lst[len(x) - 1])
        out.append(col)
    return out


_BIT_TUPLES: dict[int, list[tuple[int, ...]]] = {}


def _bit_tuples(nbits: int) -> list[tuple[int, ...]]:
    table = _BIT_TUPLES.get(nbits)
    if table is None:
        table = [tuple((mask >> k) & 1 for k in range(nbits)) for mask in range(1 << nbits)]
        _BIT_TUPLES[nbits] = table
    return table


def hd_group(x, y, xf, yf):
    """plotext._utility.hd_group, vectorised (integer coordinates, one marker size)."""
    if not x or len(x) != len(y) or not (_all_ints(x) and _all_ints(y)) \
            or len(set(xf)) != 1 or len(set(yf)) != 1:
        return _orig_hd_group(x, y, xf, yf)
    xfi, yfi = xf[-1], yf[-1]
    X = np.asarray(x, dtype=np.int64)
    Y = np.asarray(y, dtype=np.int64)
    kx = X // xfi
    ky = Y // yfi
    bit = (yfi - 1 - Y % yfi) * xfi + X % xfi
    key = (kx - kx.min()) * (int(ky.max() - ky.min()) + 1) + (ky - ky.min())
    uniq, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    masks = np.zeros(len(uniq), dtype=np.int64)
    np.bitwise_or.at(masks, inverse, np.left_shift(1, bit))
    order = np.argsort(first, kind="stable")
    table = _bit_tuples(xfi * yfi)
    xs = kx[first[order]].tolist()
    ys = ky[first[order]].tolist()
    ms = [table[m] for m in masks[order].tolist()]
    return xs, ys, ms


_orig_brush = None


def brush(x, y, *other):
    """plotext._utility.brush (drop repeated points) in numpy, for integer points whose other
    lists (marker, colour, style) hold one value each: the lines of a plot, before their dots
    are grouped into characters. plotext goes through a set of tuples, so it keeps no order
    either; what reaches the canvas is the same set of dots."""
    n = min(len(x), len(y), *map(len, other)) if other else min(len(x), len(y))
    if n < 64 or len(x) != n or len(y) != n or not (_all_ints(x) and _all_ints(y)) \
            or any(len(lst) != n or lst.count(lst[0]) != n for lst in other):
        return _orig_brush(x, y, *other)
    X = np.asarray(x, dtype=np.int64)
    Y = np.asarray(y, dtype=np.int64)
    key = (X - X.min()) * (int(Y.max() - Y.min()) + 1) + (Y - Y.min())
    keep = np.unique(key, return_index=True)[1]
    k = len(keep)
    return [X[keep].tolist(), Y[keep].tolist()] + [[lst[0]] * k for lst in other]


_orig_set_canvas = None


def set_canvas(self):
    """plotext's matrix_class.set_canvas: the same string, one colour lookup per run of cells."""
    from plotext import _utility as ut
    out: list[str] = []
    cache: dict = {}
    end = ut.ansi_end
    cols = list(self.Cols)
    for row in self.Rows[::-1]:
        markers, fg, st, bg = self.marker[row], self.fullground[row], self.style[row], self.background[row]
        prev = None
        for col in cols:
            colors = (fg[col], st[col], bg[col])
            if colors != prev:
                if prev is not None:
                    out.append(end)
                try:
                    ansi = cache.get(colors)
                except TypeError:  # an unhashable colour: no cache
                    ansi = None
                if ansi is None:
                    ansi = ut.colors_to_ansi(*colors)
                    try:
                        cache[colors] = ansi
                    except TypeError:
                        pass
                out.append(ansi)
                prev = colors
            out.append(markers[col])
        if prev is not None:
            out.append(end)
        out.append("\n")
    self.canvas = "".join(out)
    return self.canvas


def install() -> None:
    """Patch plotext's hot loops (idempotent)."""
    global _installed, _orig_get_lines, _orig_hd_group, _orig_set_canvas, _orig_brush
    if _installed:
        return
    from plotext import _matrix, _utility
    _orig_get_lines = _utility.get_lines
    _orig_hd_group = _utility.hd_group
    _orig_brush = _utility.brush
    _orig_set_canvas = _matrix.matrix_class.set_canvas
    _utility.get_lines = get_lines
    _utility.hd_group = hd_group
    _utility.brush = brush
    _matrix.matrix_class.set_canvas = set_canvas
    _installed = True


def uninstall() -> None:
    global _installed
    if not _installed:
        return
    from plotext import _matrix, _utility
    _utility.get_lines = _orig_get_lines
    _utility.hd_group = _orig_hd_group
    _utility.brush = _orig_brush
    _matrix.matrix_class.set_canvas = _orig_set_canvas
    _installed = False


_SGR = re.compile(r"\x1b\[([0-9;]*)m")
_style_cache: dict[str, Style | None] = {}


def _style_for(codes: str) -> Style | None:
    style = _style_cache.get(codes)
    if style is None and codes not in _style_cache:
        decoded = Text.from_ansi(f"\x1b[{codes}mX")
        style = decoded.spans[0].style if decoded.spans else None
        if isinstance(style, str):
            style = Style.parse(style)
        _style_cache[codes] = style
    return style


def ansi_to_strips(ansi: str, base: Style, width: int) -> list:
    """plotext's output straight to Textual strips, one a line, on a base style.

    Skips Rich's Text and Textual's visual pipeline (which re-derives a style
    for every span): a plot of a terminal's size becomes strips in a few ms.
    """
    from rich.segment import Segment
    from textual.strip import Strip
    combined: dict[str, Style] = {}
    strips = []
    lines = ansi.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        segments = []
        current: list[str] = []
        last = 0
        length = 0
        for match in _SGR.finditer(line):
            chunk = line[last:match.start()]
            if chunk:
                key = ";".join(current)
                style = combined.get(key)
                if style is None:
                    own = _style_for(key) if key else None
                    style = combined[key] = base + own if own is not None else base
                segments.append(Segment(chunk, style))
                length += len(chunk)
            codes = match.group(1)
            if codes in ("", "0"):
                current = []
            else:
                current.append(codes)
            last = match.end()
        tail = line[last:]
        if tail:
            key = ";".join(current)
            style = combined.get(key)
            if style is None:
                own = _style_for(key) if key else None
                style = combined[key] = base + own if own is not None else base
            segments.append(Segment(tail, style))
            length += len(tail)
        strips.append(Strip(segments, length).crop_extend(0, width, base))
    return strips
