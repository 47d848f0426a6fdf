"""The Logs tab: a run's stderr, stdout or supervisor log, followed and searchable."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from daemon.home import STDERR_FILE, STDOUT_FILE
from mosaic_tui import fmt
from mosaic_tui.widgets import leaving
from mosaic_tui.widgets.log_view import LogView

STREAMS = {"stderr": STDERR_FILE, "stdout": STDOUT_FILE, "supervisor": "supervisor.log"}
POLL_SECONDS = 0.5


class LogsPane(Vertical):
    DEFAULT_CSS = """
    LogsPane {
        height: 1fr;
    }
    LogsPane #logs-bar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    LogsPane #log-search {
        display: none;
    }
    LogsPane.-searching #log-search {
        display: block;
    }
    """

    BINDINGS = [
        Binding("s", "stream", "Stream", id="logs.stream"),
        Binding("slash", "search", "Search", id="logs.search"),
    ]

    def __init__(self, run_id: str, stream: str = "stderr", **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.stream = stream if stream in STREAMS else "stderr"

    def compose(self) -> ComposeResult:
        yield Static("", id="logs-bar")
        yield Input(placeholder="search the log (enter: find, n/N: next/previous, esc: clear)", id="log-search")
        yield LogView(id="log")

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        if leaving(self):
            return      # its screen was removed while it was being built: its children may be missing
        self.query_one("#log-search", Input).cursor_blink = getattr(self.app, "cursor_blink", True)
        self.open_stream()
        self.set_interval(POLL_SECONDS, self._poll, name="log-poll")

    def open_stream(self) -> None:
        path = self.app.home.run_dir(self.run_id) / STREAMS[self.stream]
        self.view.open(path)
        self.update_bar()

    def _poll(self) -> None:
        # only while this pane is on screen
        if self.app.screen is not self.screen or not self.is_on_screen:
            return
        self.view.poll()

    def on_log_view_status_changed(self, message: LogView.StatusChanged) -> None:
        self.update_bar()

    def update_bar(self) -> None:
        v = self.view
        parts = [f"[b]{self.stream}[/b] (s)", fmt.plural(v.line_count, "line"),
                 "following (f)" if v.follow else "paused (f: follow)",
                 "wrapped (w)" if v.wrap else "h/l scroll, w wraps"]
        if v.search_text:
            where = f" at line {v.match_line + 1}" if v.match_line is not None else " (no match)"
            parts.append(f"search {v.search_text!r}{where} (n/N)")
        self.query_one("#logs-bar", Static).update("   ".join(parts))

    def action_stream(self) -> None:
        names = list(STREAMS)
        self.stream = names[(names.index(self.stream) + 1) % len(names)]
        self.open_stream()
        self.view.focus()

    def action_search(self) -> None:
        self.add_class("-searching")
        box = self.query_one("#log-search", Input)
        box.value = self.view.search_text
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "log-search":
            return
        event.stop()
        self.remove_class("-searching")
        found = self.view.search(event.value, True, start_line=max(0, int(self.view.scroll_offset.y)))
        if event.value and found is None:
            found = self.view.search(event.value, True, start_line=0)
            if found is None:
                self.notify(f"{event.value!r} not found", timeout=2)
        self.view.focus()

    def clear_search(self) -> bool:
        if self.has_class("-searching") or self.view.search_text:
            self.remove_class("-searching")
            self.query_one("#log-search", Input).value = ""
            self.view.match_line = None
            self.view.search("")
            self.view.focus()
            return True
        return False
