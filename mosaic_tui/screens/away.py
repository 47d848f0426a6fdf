"""While you were away: the runs that finished, failed or started since the app last closed.

Shown once when the app opens and something changed (mosaic_tui/notify.py
decides what); ``esc`` or ``enter`` closes it, ``q`` (and ctrl+c) detaches as
everywhere else. Nothing is shown when nothing changed.
"""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from mosaic_tui import fmt


def summary_text(changes: list[tuple[str, dict[str, Any]]], since: float | None, now: float,
                 window: int = fmt.DEFAULT_RETURN_WINDOW) -> Text:
    text = Text()
    ago = f" ({fmt.duration(now - since)} ago)" if since else ""
    text.append(f"Since the app last closed{ago}:\n\n", style="bold")
    width = max(len(str(run.get("name", ""))) for _, run in changes)
    for what, run in changes:
        state = run.get("state", "?")
        text.append(f"{what:<14}", style=fmt.STATE_STYLES.get(state, ""))
        text.append(f" {str(run.get('name', '?')):<{width}}", style="bold")
        text.append(f"  {run.get('algo')} {run.get('env')}")
        if fmt.mode_mark(run):
            text.append(f" {fmt.mode_mark(run)}", style="cyan")
        mean = fmt.smoothed_return(run, window)
        if mean is not None:
            text.append(f"  return {fmt.num(mean)} (avg{window})")
        reason = fmt.failure_reason(run)
        if reason:
            text.append(f"\n{'':14}   {reason}", style="red")
        text.append("\n")
    return text


class AwayScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    AwayScreen {
        align: center middle;
    }
    AwayScreen > Vertical {
        width: 90%;
        max-width: 110;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    AwayScreen VerticalScroll {
        height: auto;
        max-height: 1fr;
    }
    AwayScreen #away-keys {
        color: $text-muted;
        height: 1;
    }
    """

    BINDINGS = [
        Binding("escape,enter", "close", "Close", id="away.close"),
        # Textual stops a modal screen's binding chain at the modal: the app's q (detach) and
        # ctrl+c are not looked up while this is up. The app opens this by itself as it starts,
        # often before anything else is drawn: q must still leave.
        Binding("q,ctrl+c", "app.detach", "Detach", id="away.quit"),
    ]

    def __init__(self, changes: list[tuple[str, dict[str, Any]]], since: float | None, now: float,
                 window: int = fmt.DEFAULT_RETURN_WINDOW) -> None:
        super().__init__()
        self.changes = changes
        self.since = since
        self.now = now
        self.window = window

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield Static(summary_text(self.changes, self.since, self.now, self.window), id="away-text")
            yield Static("esc: close   q: detach (runs keep training)", id="away-keys")

    def action_close(self) -> None:
        self.dismiss(None)
