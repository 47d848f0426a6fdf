"""`?`: the bindings of the screen it was opened from, with their ids for keymap.json."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Static


def binding_rows(screen: Screen) -> list[tuple[str, str, str]]:
    """(keys, description, id) of the active bindings of a screen, grouped by action."""
    app = screen.app
    grouped: dict[tuple[str, str], list[str]] = {}
    ids: dict[tuple[str, str], str] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if binding.system or not (binding.description or binding.id):
            continue
        group = (binding.action, binding.description or binding.action)
        grouped.setdefault(group, [])
        display = app.get_key_display(binding)
        if display not in grouped[group]:
            grouped[group].append(display)
        if binding.id:
            ids[group] = binding.id
    rows = []
    for group, keys in grouped.items():
        rows.append((" ".join(keys), group[1], ids.get(group, "")))
    # the screen's own keys first, then the app's, then the generic ones (no id)
    rows.sort(key=lambda r: (not r[2], r[2].split(".")[0] == "app", r[2], r[1]))
    return rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > Vertical {
        width: 80;
        max-width: 100%;
        height: 80%;
        border: thick $primary;
        background: $surface;
    }
    HelpScreen #help-title {
        padding: 0 1;
        text-style: bold;
    }
    HelpScreen DataTable {
        height: 1fr;
    }
    HelpScreen #help-foot {
        padding: 0 1;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close"),
        Binding("j", "scroll_down", "Down", show=False, id="help.down"),
        Binding("k", "scroll_up", "Up", show=False, id="help.up"),
    ]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.rows = binding_rows(under)
        self.under_name = type(under).__name__.replace("Screen", "") or "app"

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Keys of the {self.under_name} screen", id="help-title")
            table = DataTable(cursor_type="row", id="help-table")
            table.add_columns("key", "action", "binding id")
            for keys, desc, bid in self.rows:
                table.add_row(Text(keys, style="bold"), desc, Text(bid, style="dim"))
            yield table
            yield Static("Rebind in <home>/keymap.json: {\"binding id\": \"key\"}. esc closes.", id="help-foot")

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_scroll_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()
