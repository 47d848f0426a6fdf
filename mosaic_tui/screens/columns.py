"""The runs table's column chooser (`C`): the config keys the runs have (params.lr, config.seed),
each shown as a column of the table or not; remembered in ui-state.json."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection


class ColumnsScreen(ModalScreen[list[str]]):
    """Dismissed with the keys chosen, in the order they were chosen (the table's left to right)."""

    DEFAULT_CSS = """
    ColumnsScreen {
        align: center middle;
    }
    ColumnsScreen > Vertical {
        width: 64;
        max-width: 100%;
        height: auto;
        max-height: 90%;
        border: thick $primary;
        background: $surface;
        padding: 0 1;
    }
    ColumnsScreen SelectionList {
        height: auto;
        max-height: 100%;
    }
    ColumnsScreen #columns-help {
        dock: bottom;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape", "done", "Done", id="columns.done"),
    ]

    def __init__(self, choices: list[str], chosen: list[str]) -> None:
        super().__init__()
        self.choices = choices
        self.chosen = chosen

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Columns from the runs' config", classes="title")
            if self.choices:
                yield SelectionList[str](*(Selection(key, key, key in self.chosen) for key in self.choices),
                                         id="columns")
                yield Static("space: show or hide  ·  esc: done  ·  s sorts by them", id="columns-help")
            else:
                yield Static("No run has a config key yet.  esc: back", id="columns-help")

    def on_mount(self) -> None:
        if self.choices:
            self.query_one(SelectionList).focus()

    def action_done(self) -> None:
        if not self.choices:
            self.dismiss(list(self.chosen))
            return
        self.dismiss(list(self.query_one(SelectionList).selected))
