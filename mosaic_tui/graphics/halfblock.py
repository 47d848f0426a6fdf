"""Half-block rendering: two pixels per cell, '▀' with fg = top pixel, bg = bottom pixel.

Works in every terminal with colour, over any SSH link, inside tmux. The frame
is area-averaged down to the cell box (keeping its aspect ratio: a cell is
about twice as tall as wide, so its two half-blocks are square), then turned
into rich Segments with numpy: only runs of identical cells reach Python, one
Segment per run.

    strips = render_strips(frame, cols=80, rows=24)               # Textual
    lines = render_lines(frame, 80, 24, colors="256")              # rich Segments

Styles are cached across frames (keyed by the packed colours), so a steady
scene creates no new objects and Textual's own per-style caches keep hitting.
"""
from __future__ import annotations

import numpy as np
from rich.color import Color, ColorType
from rich.color_triplet import ColorTriplet
from rich.segment import Segment
from rich.style import Style

UPPER_HALF = "\u2580"  # ▀
TRUECOLOR = "truecolor"
COLORS_256 = "256"

# xterm's 256-colour palette: 16 system colours (theme-dependent, never used
# here), a 6x6x6 cube (16..231) and 24 grays (232..255).
_CUBE_LEVELS = np.array([0, 95, 135, 175, 215, 255], dtype=np.int32)
# nearest cube level index for every 0..255 channel value
_CUBE_INDEX = np.abs(np.arange(256)[:, None] - _CUBE_LEVELS[None, :]).argmin(axis=1).astype(np.int32)

_STYLE_CACHE_LIMIT = 65536
_styles: dict[int, Style] = {}
_colors: dict[int, Color] = {}


def fit_cells(width: int, height: int, cols: int, rows: int) -> tuple[int, int]:
    """Pixel size (w, h) to draw a width x height frame into cols x rows cells.

    Keeps the aspect ratio with square half-block pixels; h is even (two
    pixels per cell row).
    """
    if cols <= 0 or rows <= 0:
        return 0, 0
    scale = min(cols / width, 2 * rows / height)
    w = max(1, min(cols, round(width * scale)))
    h = max(2, min(2 * rows, 2 * round(height * scale / 2)))
    return w, h


def resize(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """Area-average (BOX) resize with Pillow's C code; a no-op if the size matches."""
    if frame.shape[1] == width and frame.shape[0] == height:
        return frame
    from PIL import Image
    return np.asarray(Image.fromarray(np.ascontiguousarray(frame)).resize((width, height), Image.BOX))


def to_xterm256(pixels: np.ndarray) -> np.ndarray:
    """Nearest xterm-256 index (16..255) of each RGB pixel, vectorised."""
    rgb = pixels.astype(np.int32)
    idx = _CUBE_INDEX[rgb]                                  # (..., 3) cube coordinates
    cube = _CUBE_LEVELS[idx]
    cube_dist = ((rgb - cube) ** 2).sum(axis=-1)
    gray_i = np.clip((rgb.sum(axis=-1) // 3 - 3) // 10, 0, 23)   # gray levels 8 + 10 i
    gray_dist = ((rgb - (8 + 10 * gray_i)[..., None]) ** 2).sum(axis=-1)
    cube_code = 16 + 36 * idx[..., 0] + 6 * idx[..., 1] + idx[..., 2]
    return np.where(gray_dist < cube_dist, 232 + gray_i, cube_code)


def _color(key: int, colors: str) -> Color:
    color = _colors.get(key)
    if color is None:
        if colors == TRUECOLOR:
            rgb = key & 0xFFFFFF
            color = Color(f"#{rgb:06x}", ColorType.TRUECOLOR,
                          triplet=ColorTriplet(rgb >> 16, (rgb >> 8) & 0xFF, rgb & 0xFF))
        else:
            color = Color.from_ansi(key & 0xFF)
        _colors[key] = color
    return color


def _style(key: int, fg: int, bg: int, colors: str) -> Style:
    if len(_styles) >= _STYLE_CACHE_LIMIT:
        _styles.clear()
    # 256-colour keys are tagged with bit 24 so they never collide with an RGB value
    tag = 0 if colors == TRUECOLOR else 1 << 24
    style = Style.from_color(_color(fg | tag, colors), _color(bg | tag, colors))
    _styles[key] = style
    return style


def render_lines(frame: np.ndarray, cols: int, rows: int,
                 colors: str = TRUECOLOR, margin_style: Style | None = None) -> list[list[Segment]]:
    """``rows`` lines of Segments, each exactly ``cols`` cells wide, image centred.

    ``colors`` is "truecolor" or "256". Blank margins are spaces in
    ``margin_style`` (None: unstyled, so a widget's background shows through).
    """
    if colors not in (TRUECOLOR, COLORS_256):
        raise ValueError(f"colors must be {TRUECOLOR!r} or {COLORS_256!r}, not {colors!r}")
    height, width = frame.shape[:2]
    w, h = fit_cells(width, height, cols, rows)
    if w == 0:
        return [[] for _ in range(max(rows, 0))]
    small = resize(frame[:, :, :3], w, h)
    if colors == TRUECOLOR:
        packed = (small[:, :, 0].astype(np.uint64) << 16) | (small[:, :, 1].astype(np.uint64) << 8) | small[:, :, 2]
        bits = 24
    else:
        packed = to_xterm256(small).astype(np.uint64)
        bits = 8
    top, bottom = packed[0::2], packed[1::2]
    keys = (top << np.uint64(bits)) | bottom                     # (h/2, w): one key per cell
    if colors != TRUECOLOR:
        keys |= np.uint64(1 << 62)                              # keep 256-colour keys apart

    # Runs of equal cells along each row: a run starts at column 0 or where
    # the key changes. Everything below is per run, not per pixel.
    cell_rows = keys.shape[0]
    starts_mask = np.ones(keys.shape, dtype=bool)
    starts_mask[:, 1:] = keys[:, 1:] != keys[:, :-1]
    starts = np.flatnonzero(starts_mask)
    lengths = np.diff(np.append(starts, keys.size))
    run_rows = starts // w
    # a run must not cross a row end: the next row's column 0 is always a start
    run_keys = keys.ravel()[starts]
    fg = (run_keys >> np.uint64(bits)) & np.uint64((1 << bits) - 1)
    bg = run_keys & np.uint64((1 << bits) - 1)

    left = (cols - w) // 2
    right = cols - w - left
    margin_l = [Segment(" " * left, margin_style)] if left else []
    margin_r = [Segment(" " * right, margin_style)] if right else []
    lines: list[list[Segment]] = [list(margin_l) for _ in range(cell_rows)]
    styles = _styles
    for row, key, length, f, b in zip(run_rows.tolist(), run_keys.tolist(), lengths.tolist(),
                                      fg.tolist(), bg.tolist()):
        style = styles.get(key)
        if style is None:
            style = _style(key, f, b, colors)
        lines[row].append(Segment(UPPER_HALF * length, style))
    for line in lines:
        line.extend(margin_r)

    top_pad = (rows - cell_rows) // 2
    blank = [Segment(" " * cols, margin_style)]
    return ([list(blank) for _ in range(top_pad)] + lines
            + [list(blank) for _ in range(rows - cell_rows - top_pad)])


def render_strips(frame: np.ndarray, cols: int, rows: int, colors: str = TRUECOLOR,
                  margin_style: Style | None = None):
    """``render_lines`` as Textual Strips, for a widget's ``render_line(y)``."""
    from textual.strip import Strip
    return [Strip(line, cols) for line in render_lines(frame, cols, rows, colors, margin_style)]


class HalfBlockImage:
    """A Rich renderable drawing a frame into the space Rich offers it."""

    def __init__(self, frame: np.ndarray, cols: int | None = None, rows: int | None = None,
                 colors: str = TRUECOLOR):
        self.frame, self.cols, self.rows, self.colors = frame, cols, rows, colors

    def __rich_console__(self, console, options):
        cols = self.cols or options.max_width
        rows = self.rows or options.height or console.height
        for line in render_lines(self.frame, cols, rows, self.colors):
            yield from line
            yield Segment.line()
