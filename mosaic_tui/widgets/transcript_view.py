"""The Transcript tab: an LLM run's calls, step by step and per agent, followed as they stream.

The run's ``llm_step`` events are read from its events.jsonl (the source of
truth, like the Logs tab reads its logs), from the byte offset reached last
(``mosaic_tui.transcript.Transcript``). One entry per (step, agent): a partial
event (a reply still streaming in) shows the reply so far, and the final event
replaces it with everything: observation, prompt, reply, the parsed action,
valid or not, tokens, latency, error. ``/`` searches all of it, ``n``/``N`` go
to the next/previous match, ``a`` shows one agent at a time, ``p`` shows whole
prompts instead of their last message, ``e`` exports the transcript (JSONL and
Markdown) to ``<home>/exports/``.

Entries are lines, not widgets: ``TranscriptLines`` is a Line API view that
knows each entry's text and how many rows it takes at the view's width, and
styles only the rows on screen, so a run of thousands of calls opens, scrolls
and searches like a short one. Long lines fold at the view's width.
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import OrderedDict
from typing import Any

from rich.cells import chop_cells
from rich.segment import Segment
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Static

from daemon.home import EVENTS_FILE
from mosaic_tui.transcript import Transcript, entry_text, export_transcript, transcript_enabled  # noqa: F401
from mosaic_tui.widgets import leaving

POLL_SECONDS = 0.5
MARGIN = 1           # a blank column left of the text
CACHE_ROWS = 512     # styled rows kept


def indent_of(line: str, width: int) -> int:
    """Continuation rows start under the line's own text (at most half the width in)."""
    return min(len(line) - len(line.lstrip(" ")), width // 2)


def fold(line: str, width: int) -> list[tuple[int, int]]:
    """A line cut into rows of ``width`` cells, as (start, end) character spans; the rows after the
    first are indented like the line, so they are ``indent`` cells narrower."""
    indent = indent_of(line, width)
    if line.isascii():
        if len(line) <= width:
            return [(0, len(line))]
        step = width - indent
        return [(0, width)] + [(i, min(i + step, len(line))) for i in range(width, len(line), step)]
    spans, start, room = [], 0, width
    while True:
        piece = chop_cells(line[start:], room)[0] if start < len(line) else ""
        spans.append((start, start + len(piece)))
        start += len(piece)
        room = width - indent
        if start >= len(line) or not piece:
            return spans


def rows_of(line: str, width: int) -> int:
    """How many rows ``fold`` makes of a line, without cutting it (most lines are ASCII)."""
    if line.isascii():
        if len(line) <= width:
            return 1
        return 1 + math.ceil((len(line) - width) / (width - indent_of(line, width)))
    return len(fold(line, width))


class TranscriptLines(ScrollView, can_focus=True):
    """The entries of ``keys`` one under the other, each its text's lines and a blank row."""

    COMPONENT_CLASSES = {"transcript-lines--header", "transcript-lines--valid", "transcript-lines--invalid",
                         "transcript-lines--found", "transcript-lines--match"}
    DEFAULT_CSS = """
    TranscriptLines {
        height: 1fr;
        background: $surface;
    }
    TranscriptLines > .transcript-lines--header { text-style: bold; }
    TranscriptLines > .transcript-lines--valid { color: $success; text-style: bold; }
    TranscriptLines > .transcript-lines--invalid { color: $error; text-style: bold; }
    TranscriptLines > .transcript-lines--found { text-style: reverse; }
    TranscriptLines > .transcript-lines--match { background: $boost; }
    """
    BINDINGS = [
        Binding("j,down", "scroll_down", "Down", show=False),
        Binding("k,up", "scroll_up", "Up", show=False),
        Binding("g,home", "scroll_home", "Top", show=False),
        Binding("G,end", "scroll_end", "End", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.keys: list[tuple[int, str]] = []          # the entries shown, in order
        self.lines: dict[tuple[int, str], list[str]] = {}
        self.events: dict[tuple[int, str], dict[str, Any]] = {}
        self.full_prompt = False
        self.search_text = ""
        self.match: tuple[int, str] | None = None
        self.stick_to_end = True                        # keep the last row in view (following)
        self._width = 0
        self._rows: dict[tuple[int, str], int] = {}    # rows of each entry at _width
        self._starts: list[int] = [0]                   # first row of each entry (+ the end)
        self._cache: OrderedDict[int, Strip] = OrderedDict()

    # -- content -------------------------------------------------------------------
    def set_entry(self, key: tuple[int, str], event: dict[str, Any], add: bool) -> None:
        """An entry's (new) event; ``add``: a new entry at the end. Call ``relayout`` after a batch."""
        self.events[key] = event
        self.lines[key] = entry_text(event, self.full_prompt).split("\n") + [""]
        self._rows.pop(key, None)
        if add:
            self.keys.append(key)

    def reset(self, keys: list[tuple[int, str]], events: dict[tuple[int, str], dict[str, Any]]) -> None:
        self.keys, self.lines, self.events, self._rows = [], {}, {}, {}
        for key in keys:
            self.set_entry(key, events[key], add=True)
        self.relayout()

    def set_full_prompt(self, full: bool) -> None:
        self.full_prompt = full
        self.reset(list(self.keys), self.events)

    def plain(self, key: tuple[int, str]) -> str:
        """The entry's text as shown (its search looks in this)."""
        return "\n".join(self.lines[key][:-1])

    @property
    def text_width(self) -> int:
        """Cells a row's text may take: the view less its scrollbar and the margin."""
        return max(1, self.scrollable_content_region.width - MARGIN)

    def relayout(self) -> None:
        """Rows of every entry at the current width, the virtual size; redraw."""
        width = self.text_width
        if width != self._width:
            self._width, self._rows = width, {}
        starts = [0]
        for key in self.keys:
            rows = self._rows.get(key)
            if rows is None:
                rows = self._rows[key] = sum(rows_of(line, width) for line in self.lines[key])
            starts.append(starts[-1] + rows)
        self._starts = starts
        self._cache.clear()
        self.virtual_size = Size(1, starts[-1])   # rows fold: nothing to scroll sideways
        self.refresh()
        if self.stick_to_end:
            self.scroll_end(animate=False, immediate=True)
            self.call_after_refresh(self._keep_end)
        # rows that no longer fit the view bring its scrollbar, which narrows the text's room
        # without a resize: fold again then (only narrower: a scrollbar that goes leaves 2 cells)
        self.call_after_refresh(self._fold_under_scrollbar)

    def _fold_under_scrollbar(self) -> None:
        if self.text_width < self._width:
            self.relayout()

    def _keep_end(self) -> None:
        if self.stick_to_end:
            self.scroll_end(animate=False, immediate=True)

    def on_resize(self) -> None:
        if self.text_width != self._width:
            self.relayout()

    class ScrolledUp(Message):
        """The user scrolled up while the view kept to the end: following stops."""

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        if new < old and self.stick_to_end and self.max_scroll_y > 0:
            self.stick_to_end = False
            self.post_message(self.ScrolledUp())

    def row_of(self, key: tuple[int, str]) -> int:
        return self._starts[self.keys.index(key)]

    def scroll_to_entry(self, key: tuple[int, str]) -> None:
        self.scroll_to(y=self.row_of(key), animate=False, immediate=True)

    def set_search(self, text: str, match: tuple[int, str] | None) -> None:
        self.search_text, self.match = text, match
        self._cache.clear()
        self.refresh()

    # -- rendering -----------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        row = int(self.scroll_offset.y) + y
        width = self._width + MARGIN
        strip = self._cache.get(row)
        if strip is None:
            strip = self._render_row(row)
            self._cache[row] = strip
            if len(self._cache) > CACHE_ROWS:
                self._cache.popitem(last=False)
        return strip.crop_extend(0, width, self.rich_style)

    def _render_row(self, row: int) -> Strip:
        base = self.rich_style
        if row >= self._starts[-1]:
            return Strip.blank(self._width + MARGIN, base)
        index = bisect_right(self._starts, row) - 1
        key = self.keys[index]
        offset = row - self._starts[index]
        for number, line in enumerate(self.lines[key]):
            rows = rows_of(line, self._width)
            if offset < rows:
                break
            offset -= rows
        text = self._styled(key, number, line)
        start, end = fold(line, self._width)[offset]
        piece = text[start:end]
        style = base + self.get_component_rich_style("transcript-lines--match") if key == self.match else base
        margin = MARGIN + (indent_of(line, self._width) if offset else 0)
        segments = [Segment(" " * margin, style)]
        segments += [Segment(s.text, style + s.style if s.style else style) for s in piece.render(self.app.console)]
        return Strip(segments).extend_cell_length(self._width + MARGIN, style)

    def _styled(self, key: tuple[int, str], number: int, line: str) -> Text:
        text = Text(line, no_wrap=True, end="")
        event = self.events[key]
        if number == 0:
            text.stylize(self.get_component_rich_style("transcript-lines--header"))
            if not event.get("partial"):
                at = line.find("valid:") if event.get("valid") else line.find("INVALID")
                if at >= 0:
                    name = "transcript-lines--valid" if event.get("valid") else "transcript-lines--invalid"
                    text.stylize(self.get_component_rich_style(name), at, len(line))
        if self.search_text:
            text.highlight_words([self.search_text], style=self.get_component_rich_style("transcript-lines--found"),
                                 case_sensitive=False)
        return text


class TranscriptView(Vertical):
    DEFAULT_CSS = """
    TranscriptView {
        height: 1fr;
    }
    TranscriptView #transcript-bar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    TranscriptView #transcript-search {
        display: none;
    }
    TranscriptView.-searching #transcript-search {
        display: block;
    }
    TranscriptView #transcript-entries {
        height: 1fr;
    }
    """

    BINDINGS = [
        Binding("slash", "search", "Search", id="transcript.search"),
        Binding("n", "next_match(1)", "Next match", show=False, id="transcript.next"),
        Binding("N", "next_match(-1)", "Previous match", show=False, id="transcript.previous"),
        Binding("a", "agent", "Agent", id="transcript.agent"),
        Binding("p", "prompts", "Whole prompts", show=False, id="transcript.prompts"),
        Binding("e", "export", "Export", id="transcript.export"),
        Binding("f", "follow", "Follow", show=False, id="transcript.follow"),
    ]

    def __init__(self, run_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.transcript: Transcript | None = None
        self.agent: str | None = None       # None: every agent
        self.full_prompt = False
        self.follow = True
        self.search_text = ""
        self.match: tuple[int, str] | None = None
        self.last_export: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="transcript-bar")
        yield Input(placeholder="search observations, prompts, replies (enter: find, n/N, esc: clear)",
                    id="transcript-search")
        yield TranscriptLines(id="transcript-entries")

    @property
    def entries_box(self) -> TranscriptLines:
        return self.query_one("#transcript-entries", TranscriptLines)

    @property
    def shown(self) -> list[tuple[int, str]]:
        """The entries on the list (every agent's, or the chosen agent's), in order."""
        return self.entries_box.keys

    def plain(self, key: tuple[int, str]) -> str:
        return self.entries_box.plain(key)

    def on_mount(self) -> None:
        if leaving(self):
            return      # its screen was removed while it was being built: its children may be missing
        self.query_one("#transcript-search", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        self.transcript = Transcript(self.app.home.run_dir(self.run_id) / EVENTS_FILE)
        self.poll(force=True)
        self.set_interval(POLL_SECONDS, self.poll, name="transcript-poll")

    def focus(self, scroll_visible: bool = True):
        self.entries_box.focus(scroll_visible)
        return self

    def poll(self, force: bool = False) -> None:
        if not force and (self.app.screen is not self.screen or not self.is_on_screen):
            return
        changed = self.transcript.poll()
        if not changed and not force:
            return
        box = self.entries_box
        added = False
        for key in dict.fromkeys(changed):
            if self.agent is not None and key[1] != self.agent:
                continue
            new = key not in box.events
            box.set_entry(key, self.transcript.entries[key], add=new)
            added = added or new
        box.relayout()   # following: it keeps the end in view
        self.update_bar()

    def on_transcript_lines_scrolled_up(self, event: TranscriptLines.ScrolledUp) -> None:
        self.set_follow(False)
        self.update_bar()

    def set_follow(self, follow: bool) -> None:
        self.follow = follow
        self.entries_box.stick_to_end = follow
        if follow:
            self.entries_box.scroll_end(animate=False)

    def rebuild(self) -> None:
        """Every entry again (the agent filter changed)."""
        keys = [key for key in self.transcript.order if self.agent is None or key[1] == self.agent]
        self.entries_box.reset(keys, self.transcript.entries)
        if self.match not in keys:
            self.match = None
            self.entries_box.set_search(self.search_text, None)
        self.update_bar()

    def update_bar(self) -> None:
        t = self.transcript
        finals = [e for e in t.entries.values() if not e.get("partial")]
        invalid = sum(1 for e in finals if not e.get("valid"))
        parts = [f"[b]{len(t.order)}[/b] calls", f"{invalid} invalid",
                 f"agent {self.agent if self.agent is not None else 'all'} (a)",
                 "following (f)" if self.follow else "paused (f: follow)"]
        if self.search_text:
            where = f"at step {self.match[0]} agent {self.match[1]}" if self.match else "no match"
            parts.append(f"search {self.search_text!r} {where} (n/N)")
        if self.last_export:
            parts.append(f"exported {self.last_export}")
        bar = self.query_one("#transcript-bar", Static)
        bar.update("   ".join(parts))

    # -- actions -------------------------------------------------------------------
    def action_search(self) -> None:
        self.add_class("-searching")
        box = self.query_one("#transcript-search", Input)
        box.value = self.search_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "transcript-search":
            return
        event.stop()
        self.remove_class("-searching")
        self.search_text = event.value.strip()
        self.match = None
        self.entries_box.set_search(self.search_text, None)
        if self.search_text:
            self.action_next_match(1)
            if self.match is None:
                self.notify(f"{self.search_text!r} not found", timeout=2)
        self.update_bar()
        self.focus()

    def matches(self) -> list[tuple[int, str]]:
        needle = self.search_text.lower()
        return [key for key in self.shown if needle in self.plain(key).lower()]

    def action_next_match(self, direction: int) -> None:
        order = self.matches() if self.search_text else []
        if not order:
            self.match = None
            self.entries_box.set_search(self.search_text, None)
            self.update_bar()
            return
        if self.match in order:
            index = (order.index(self.match) + direction) % len(order)
        else:
            index = 0 if direction > 0 else len(order) - 1
        self.match = order[index]
        self.set_follow(False)
        self.entries_box.set_search(self.search_text, self.match)
        self.entries_box.scroll_to_entry(self.match)
        self.update_bar()

    def clear_search(self) -> bool:
        if self.has_class("-searching") or self.search_text:
            self.remove_class("-searching")
            self.query_one("#transcript-search", Input).value = ""
            self.search_text = ""
            self.match = None
            self.entries_box.set_search("", None)
            self.update_bar()
            self.focus()
            return True
        return False

    def action_agent(self) -> None:
        agents = self.transcript.agents()
        cycle = [None] + agents
        self.agent = cycle[(cycle.index(self.agent) + 1) % len(cycle)] if self.agent in cycle else None
        self.rebuild()

    def action_prompts(self) -> None:
        self.full_prompt = not self.full_prompt
        self.entries_box.set_full_prompt(self.full_prompt)
        if self.match is not None:
            self.entries_box.scroll_to_entry(self.match)

    def action_follow(self) -> None:
        self.set_follow(not self.follow)
        self.update_bar()

    def action_export(self) -> None:
        self.last_export = export_transcript(self.app.home, self.run_id, self.app.link.runs.get(self.run_id),
                                             self.transcript)
        self.update_bar()
        self.notify(f"transcript exported to {self.last_export} (.jsonl and .md)", timeout=4)


