"""The Transcript tab: an LLM run's calls, step by step and per agent, followed as they stream.

The run's ``llm_step`` events are read from its events.jsonl (the source of
truth, like the Logs tab reads its logs), from the byte offset reached last.
One entry per (step, agent): a partial event (a reply still streaming in)
shows the reply so far, and the final event replaces it with everything:
observation, prompt, reply, the parsed action, valid or not, tokens, latency,
error. ``/`` searches all of it, ``n``/``N`` go to the next/previous match,
``a`` shows one agent at a time, ``p`` shows whole prompts instead of their
last message, ``e`` exports the transcript (JSONL and Markdown) to
``<home>/exports/``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from daemon.home import EVENTS_FILE
from mosaic_tui.transcript import Transcript, entry_text, export_transcript, transcript_enabled  # noqa: F401

POLL_SECONDS = 0.5


class TranscriptEntry(Static):
    DEFAULT_CSS = """
    TranscriptEntry {
        padding: 0 1;
        margin-bottom: 1;
    }
    TranscriptEntry.-match {
        background: $boost;
    }
    """

    def __init__(self, key: tuple[int, str], **kwargs) -> None:
        super().__init__("", **kwargs)
        self.key = key
        self.plain = ""

    def show(self, event: dict[str, Any], full_prompt: bool, search: str) -> None:
        self.plain = entry_text(event, full_prompt)
        text = Text(self.plain)
        text.stylize("bold", 0, len(self.plain.split("\n", 1)[0]))
        if not event.get("partial"):
            style = "green" if event.get("valid") else "bold red"
            first = self.plain.split("\n", 1)[0]
            at = first.find("valid:") if event.get("valid") else first.find("INVALID")
            if at >= 0:
                text.stylize(style, at, len(first))
        if search:
            text.highlight_words([search], style="reverse", case_sensitive=False)
        self.update(text)


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
        self.widgets: dict[tuple[int, str], TranscriptEntry] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="transcript-bar")
        yield Input(placeholder="search observations, prompts, replies (enter: find, n/N, esc: clear)",
                    id="transcript-search")
        yield VerticalScroll(id="transcript-entries", can_focus=True)

    @property
    def entries_box(self) -> VerticalScroll:
        return self.query_one("#transcript-entries", VerticalScroll)

    def on_mount(self) -> None:
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
        new = []
        for key in dict.fromkeys(changed):
            if self.agent is not None and key[1] != self.agent:
                continue
            widget = self.widgets.get(key)
            if widget is None:
                widget = self.widgets[key] = TranscriptEntry(key)
                new.append(widget)
            else:
                widget.show(self.transcript.entries[key], self.full_prompt, self.search_text)
        if new:
            box.mount_all(new)
            for widget in new:
                widget.show(self.transcript.entries[widget.key], self.full_prompt, self.search_text)
        if self.follow and (new or changed):
            box.scroll_end(animate=False)
        self.update_bar()

    def rebuild(self) -> None:
        """Every entry again (agent filter or prompt mode changed)."""
        box = self.entries_box
        box.remove_children()
        self.widgets = {}
        widgets = []
        for key in self.transcript.order:
            if self.agent is not None and key[1] != self.agent:
                continue
            widget = self.widgets[key] = TranscriptEntry(key)
            widgets.append(widget)
        box.mount_all(widgets)
        for widget in widgets:
            widget.show(self.transcript.entries[widget.key], self.full_prompt, self.search_text)
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
        for widget in self.widgets.values():
            widget.show(self.transcript.entries[widget.key], self.full_prompt, self.search_text)
        if self.search_text:
            self.action_next_match(1)
            if self.match is None:
                self.notify(f"{self.search_text!r} not found", timeout=2)
        self.update_bar()
        self.focus()

    def matches(self) -> list[tuple[int, str]]:
        needle = self.search_text.lower()
        return [key for key, widget in self.widgets.items() if needle in widget.plain.lower()]

    def action_next_match(self, direction: int) -> None:
        found = self.matches()
        if not found:
            self.match = None
            self.update_bar()
            return
        order = [key for key in self.transcript.order if key in found]
        if self.match in order:
            index = (order.index(self.match) + direction) % len(order)
        else:
            index = 0 if direction > 0 else len(order) - 1
        if self.match in self.widgets:
            self.widgets[self.match].remove_class("-match")
        self.match = order[index]
        self.follow = False
        widget = self.widgets[self.match]
        widget.add_class("-match")
        self.entries_box.scroll_to_widget(widget, animate=False, top=True)
        self.update_bar()

    def clear_search(self) -> bool:
        if self.has_class("-searching") or self.search_text:
            self.remove_class("-searching")
            self.query_one("#transcript-search", Input).value = ""
            self.search_text = ""
            if self.match in self.widgets:
                self.widgets[self.match].remove_class("-match")
            self.match = None
            for widget in self.widgets.values():
                widget.show(self.transcript.entries[widget.key], self.full_prompt, "")
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
        for widget in self.widgets.values():
            widget.show(self.transcript.entries[widget.key], self.full_prompt, self.search_text)

    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow:
            self.entries_box.scroll_end(animate=False)
        self.update_bar()

    def action_export(self) -> None:
        self.last_export = export_transcript(self.app.home, self.run_id, self.app.link.runs.get(self.run_id),
                                             self.transcript)
        self.update_bar()
        self.notify(f"transcript exported to {self.last_export} (.jsonl and .md)", timeout=4)


