"""Text of a fixed box that repaints only itself, and only the rows that changed.

A Static's ``update()`` asks for a new layout of the whole screen, because a
Static's size may follow its text. A bar of fixed height does not need one,
and on a run's Frames tab a layout means a full repaint that sends the image
again: the run title updates every second and on every change of the run, so
that was ~10% of the app's CPU while it showed a live run (bench_fastlane).

A box of many rows (the Play screen's side panel: seat, step, return, the key
map) changes a row or two at a time; Textual would style and filter every row
of it again for each change (~0.3 ms a row on a busy 2-core machine: the 36
rows of the panel cost 10 ms at each key, and the frame the key brought
waited behind them, bench/bench_play_terminal.py). The text is laid out
here, compared row by row with what is shown, and only the rows that differ
are marked dirty.
"""
from __future__ import annotations

from itertools import zip_longest

from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, visualize
from textual.widget import Widget


class TextLine(Widget):
    DEFAULT_CSS = """
    TextLine {
        height: 1;
        width: 1fr;
    }
    """

    def __init__(self, content: str | Text = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = Text(content) if isinstance(content, str) else content
        self._rows: list[Strip] = []
        self._rows_for: tuple | None = None       # (text, size, style) the rows were laid out for

    def update(self, content: str | Text) -> None:
        """Show ``content`` (a str is plain text, never markup: titles hold paths)."""
        text = Text(content) if isinstance(content, str) else content
        if text.plain == self.text.plain and text.spans == self.text.spans and text.style == self.text.style:
            return
        shown, shown_for = self._rows, self._rows_for
        self.text = text
        if shown_for is None or shown_for[1:] != self._layout_key()[1:] or not self.is_mounted:
            self.refresh()
            return
        width = self.size.width
        for y, (before, after) in enumerate(zip_longest(shown, self.rows())):
            if before != after:
                self.refresh(Region(0, y, width, 1))

    def render(self) -> Text:
        return self.text

    def _layout_key(self) -> tuple:
        return (self.text, self.size, self.visual_style)

    def rows(self) -> list[Strip]:
        """The text laid out in the box, as Textual would draw it (cached per text, size and style)."""
        key = self._layout_key()
        if self._rows_for is None or self._rows_for[0] is not key[0] or self._rows_for[1:] != key[1:]:
            width, height = self.size
            self._rows = Visual.to_strips(self, visualize(self, self.text, markup=False), width, height,
                                          self.visual_style)
            self._rows_for = key
        return self._rows

    def render_line(self, y: int) -> Strip:
        self._dirty_regions.clear()        # what Widget.render_line's full re-render would have cleared
        rows = self.rows()
        return rows[y] if y < len(rows) else Strip.blank(self.size.width, self.visual_style.rich_style)
