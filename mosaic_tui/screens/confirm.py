"""A yes/no modal for destructive actions (cancel, delete)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmScreen(ModalScreen[bool]):
    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: 64;
        height: auto;
        border: thick $error;
        background: $surface;
        padding: 1 2;
    }
    ConfirmScreen #question {
        margin-bottom: 1;
    }
    ConfirmScreen Horizontal {
        height: auto;
        align-horizontal: right;
    }
    ConfirmScreen Button {
        margin-left: 2;
    }
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str, verb: str = "yes") -> None:
        super().__init__()
        self.question = question
        self.verb = verb

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.question, id="question")
            with Horizontal():
                yield Button(f"{self.verb.capitalize()} (y)", variant="error", id="yes")
                yield Button("Keep (n)", variant="default", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
