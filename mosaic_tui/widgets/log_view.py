"""A run's log (stderr, stdout or the supervisor's), rendered lazily like toolong.

The file is never loaded whole: an index of line offsets (numpy, built in
chunks as the file grows) tells where each line starts, and only the lines in
view are read (``os.pread``) and styled, so a log of millions of lines scrolls
as fast as a short one. The daemon home is on this machine (the socket is a
Unix socket), so the run directory's files are read directly.

Follow mode keeps the view at the end as lines arrive; search (``/``, ``n``,
``N``) scans the file from the current line, case-insensitively unless the
query has a capital letter.

Long lines scroll sideways (``h``/``l``, arrows), or wrap (``w``). Wrapped,
the view still scrolls by file line: the screen is laid out from its top line
down (from the last line up at the end of the file, so the end shows whole),
wrapping only the lines on screen, so wrapping costs nothing per line of the
file.
"""
from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

INDEX_CHUNK = 4 * 1024 * 1024      # bytes indexed per step
INDEX_BUDGET = 32 * 1024 * 1024    # bytes indexed per poll (the rest on the next polls)
MAX_LINE_BYTES = 16 * 1024         # longer lines are shown cut
CACHE_LINES = 512


def clean_line(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace").rstrip("\n")
    if "\r" in text:  # progress bars: what the terminal would show last
        parts = [p for p in text.split("\r") if p]
        text = parts[-1] if parts else ""
    return text.expandtabs(4)


class LogView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    LogView {
        height: 1fr;
        background: $surface;
    }
    """

    BINDINGS = [
        Binding("f", "follow", "Follow", id="logs.follow"),
        Binding("n", "next_match", "Next", id="logs.next"),
        Binding("N", "prev_match", "Prev", id="logs.prev"),
        Binding("j,down", "scroll_down", "Down", show=False, id="logs.down"),
        Binding("k,up", "scroll_up", "Up", show=False, id="logs.up"),
        Binding("g,home", "scroll_home", "Top", show=False, id="logs.top"),
        Binding("G,end", "scroll_end", "End", show=False, id="logs.end"),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("left,h", "scroll_left", "Left", show=False, id="logs.left"),
        Binding("right,l", "scroll_right", "Right", show=False, id="logs.right"),
        Binding("w", "wrap", "Wrap", id="logs.wrap"),
    ]

    class StatusChanged(Message):
        def __init__(self, view: "LogView") -> None:
            super().__init__()
            self.view = view

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.path: Path | None = None
        self._fd: int | None = None
        self._starts = np.zeros(1, dtype=np.int64)   # start offset of each line (+ the next one)
        self._lines = 0            # complete lines
        self._indexed = 0          # bytes indexed
        self._file_size = 0
        self._max_width = 0
        self.follow = True
        self.search_text = ""
        self.match_line: int | None = None
        self._cache: OrderedDict[int, Text] = OrderedDict()
        self.wrap = False
        self._layout_key: tuple | None = None
        self._layout: list[Text] = []

    # -- file --------------------------------------------------------------------
    def open(self, path: Path) -> None:
        self.close()
        self.path = Path(path)
        self._starts = np.zeros(1, dtype=np.int64)
        self._lines = 0
        self._indexed = 0
        self._file_size = 0
        self._max_width = 0
        self._cache.clear()
        self.match_line = None
        self.poll()
        self.refresh()

    def on_resize(self) -> None:
        self._follow_end()

    def _follow_end(self) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def on_unmount(self) -> None:
        self.close()

    @property
    def line_count(self) -> int:
        # a last line without its newline yet is shown too
        return self._lines + (1 if self._indexed > int(self._starts[self._lines]) else 0)

    def poll(self) -> bool:
        """Index what was appended since the last poll; True if the file grew."""
        if self.path is None:
            return False
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                return False
        try:
            size = os.fstat(self._fd).st_size
        except OSError:
            return False
        if size < self._indexed:  # truncated or replaced: start over
            path = self.path
            self.open(path)
            return True
        if size == self._indexed:
            return False
        budget = INDEX_BUDGET
        new_starts = []
        last_start = int(self._starts[self._lines])
        while self._indexed < size and budget > 0:
            chunk = os.pread(self._fd, min(INDEX_CHUNK, size - self._indexed), self._indexed)
            if not chunk:
                break
            nl = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            if len(nl):
                starts = nl.astype(np.int64) + self._indexed + 1
                new_starts.append(starts)
                widths = np.diff(np.concatenate([[last_start], starts])) - 1
                self._max_width = max(self._max_width, int(min(widths.max(), MAX_LINE_BYTES)))
                last_start = int(starts[-1])
            self._indexed += len(chunk)
            budget -= len(chunk)
        if new_starts:
            added = np.concatenate(new_starts)
            self._starts = np.concatenate([self._starts[:self._lines + 1], added])
            self._lines += len(added)
        self._file_size = size
        # the unfinished last line may have changed
        self._cache.pop(self._lines, None)
        self._cache.pop(self._lines - 1, None)
        self._update_virtual_size()
        self._follow_end()
        self.call_after_refresh(self._follow_end)
        self.refresh()
        self.post_message(self.StatusChanged(self))
        return True

    def _update_virtual_size(self) -> None:
        # wrapped: nothing to scroll sideways
        width = 1 if self.wrap else max(self._max_width + 1, 1)
        self.virtual_size = Size(width, self.line_count)

    def read_line(self, index: int) -> str:
        if self._fd is None or index < 0 or index >= self.line_count:
            return ""
        start = int(self._starts[index])
        end = int(self._starts[index + 1]) if index < self._lines else self._indexed
        data = os.pread(self._fd, min(end - start, MAX_LINE_BYTES), start)
        return clean_line(data)

    # -- rendering -----------------------------------------------------------------
    def _line_text(self, index: int) -> Text:
        text = self._cache.get(index)
        if text is None:
            raw = self.read_line(index)
            text = Text.from_ansi(raw, no_wrap=True) if "\x1b" in raw else Text(raw, no_wrap=True)
            self._cache[index] = text
            if len(self._cache) > CACHE_LINES:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(index)
        return text

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if self.wrap:
            rows = self._wrapped_rows()
            if y >= len(rows):
                return Strip.blank(width, base)
            text, scroll_x = rows[y], 0
        else:
            index = scroll_y + y
            if index >= self.line_count:
                return Strip.blank(width, base)
            text = self._styled_line(index)
        segments = [Segment(s.text, base + s.style if s.style else base) for s in text.render(self.app.console)]
        strip = Strip(segments)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _styled_line(self, index: int) -> Text:
        text = self._line_text(index).copy()
        if self.search_text:
            self._highlight(text, index)
        return text

    def _wrapped(self, index: int, width: int) -> list[Text]:
        text = self._styled_line(index)
        text.no_wrap = False
        return list(text.wrap(self.app.console, width, overflow="fold")) or [Text("")]

    def _wrapped_rows(self) -> list[Text]:
        """The screen's rows when wrapping: from the top line down, or at the end from the last line up."""
        top = int(self.scroll_offset.y)
        width, height = self.size
        total = self.line_count
        at_end = total > 0 and top >= self.max_scroll_y
        key = (top, width, height, total, self._indexed, at_end, self.search_text, self.match_line)
        if key == self._layout_key:
            return self._layout
        rows: list[Text] = []
        width = max(1, width)
        if at_end:
            index = total - 1
            while index >= 0 and len(rows) < height:
                rows[:0] = self._wrapped(index, width)
                index -= 1
            rows = rows[-height:] if height else []
        else:
            index = top
            while index < total and len(rows) < height:
                rows.extend(self._wrapped(index, width))
                index += 1
            rows = rows[:height]
        self._layout_key, self._layout = key, rows
        return rows

    def action_wrap(self) -> None:
        self.wrap = not self.wrap
        self._layout_key = None
        self.scroll_to(x=0, animate=False, immediate=True)
        self._update_virtual_size()
        self._follow_end()
        self.refresh()
        self.post_message(self.StatusChanged(self))

    def _highlight(self, text: Text, index: int) -> None:
        q = self.search_text
        plain = text.plain
        hay = plain if any(c.isupper() for c in q) else plain.lower()
        needle = q if any(c.isupper() for c in q) else q.lower()
        style = Style(reverse=True, bold=True) if index == self.match_line else Style(bgcolor="yellow", color="black")
        start = hay.find(needle)
        while start >= 0 and needle:
            text.stylize(style, start, start + len(needle))
            start = hay.find(needle, start + len(needle))

    # -- follow and search -----------------------------------------------------------
    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.scroll_end(animate=False, immediate=True)
        self.post_message(self.StatusChanged(self))

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old and self.follow and self.max_scroll_y > 0:
            self.follow = False  # the user scrolled up: stop following
            self.post_message(self.StatusChanged(self))

    def search(self, query: str, forward: bool = True, start_line: int | None = None) -> int | None:
        """Move to the next (or previous) line containing query; its index or None."""
        self.search_text = query
        self._cache.clear()
        if not query or self._fd is None:
            self.refresh()
            return None
        if start_line is None:
            cur = self.match_line if self.match_line is not None else int(self.scroll_offset.y) - 1
            start_line = cur + 1 if forward else cur - 1
        found = self._find(query, start_line, forward)
        if found is not None:
            self.match_line = found
            self.follow = False
            self.scroll_to(y=max(0, found - self.size.height // 2), animate=False, immediate=True)
        self.refresh()
        self.post_message(self.StatusChanged(self))
        return found

    def _find(self, query: str, start_line: int, forward: bool) -> int | None:
        smart = not any(c.isupper() for c in query)
        needle = (query.lower() if smart else query).encode()
        total = self.line_count
        if total == 0:
            return None
        start_line = max(0, min(start_line, total - 1))
        chunk = INDEX_CHUNK
        overlap = len(needle) - 1
        if forward:
            pos = int(self._starts[start_line])
            while pos < self._indexed:
                data = os.pread(self._fd, min(chunk, self._indexed - pos), pos)
                hay = data.lower() if smart else data
                hit = hay.find(needle)
                if hit >= 0:
                    return int(np.searchsorted(self._starts[:self._lines + 1], pos + hit, side="right") - 1)
                if len(data) < chunk:
                    break
                pos += len(data) - overlap
        else:
            end = int(self._starts[start_line + 1]) if start_line < self._lines else self._indexed
            while end > 0:
                pos = max(0, end - chunk)
                data = os.pread(self._fd, end - pos, pos)
                hay = data.lower() if smart else data
                hit = hay.rfind(needle)
                if hit >= 0:
                    return int(np.searchsorted(self._starts[:self._lines + 1], pos + hit, side="right") - 1)
                if pos == 0:
                    break
                end = pos + overlap
        return None

    def action_next_match(self) -> None:
        if self.search_text:
            if self.search(self.search_text, True) is None:
                self.notify(f"no more {self.search_text!r} below", timeout=2)

    def action_prev_match(self) -> None:
        if self.search_text:
            if self.search(self.search_text, False) is None:
                self.notify(f"no {self.search_text!r} above", timeout=2)
