"""`#` and `o`: edit a run's tags or its note in a one-line prompt (enter: save, esc: keep)."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


def tag_changes(old: list[str], text: str) -> tuple[list[str], list[str]]:
    """(add, remove) that turn the tags ``old`` into the words of ``text``."""
    new = set(text.replace(",", " ").split())
    return sorted(new - set(old)), sorted(set(old) - new)


class AnnotateScreen(ModalScreen["str | None"]):
    DEFAULT_CSS = """
    AnnotateScreen {
        align: center middle;
    }
    AnnotateScreen > Vertical {
        width: 72;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    AnnotateScreen #annotate-title {
        margin-bottom: 1;
    }
    """

    BINDINGS = [Binding("escape", "keep", "Keep", id="annotate.keep")]

    def __init__(self, title: str, value: str, placeholder: str) -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="annotate-title", markup=False)
            yield Input(self.value, placeholder=self.placeholder, id="annotate-input")

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.cursor_blink = self.app.cursor_blink
        box.cursor_position = len(box.value)  # typing adds to what is there
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_keep(self) -> None:
        self.dismiss(None)
