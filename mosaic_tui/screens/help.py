"""`?`: the bindings of the screen it was opened from, grouped by purpose, with their ids for keymap.json."""
from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

GROUPS = ("Navigation", "Runs", "View", "App")
# the last part of a binding id that says what a key is for
_NAVIGATION = {"down", "up", "top", "bottom", "end", "left", "right", "back", "forward", "open", "workers",
               "metrics", "logs", "config", "frames", "artifacts", "transcript"}
_RUNS = {"new", "clone", "cancel", "pause", "resume", "stop", "delete", "select", "compare", "eval", "submit"}


def purpose(binding_id: str) -> str:
    """Navigation (moving around), Runs (acting on runs), View (how things are shown) or App."""
    prefix, _, name = binding_id.rpartition(".")
    if not binding_id or prefix == "app":
        return "App"
    if prefix in ("frames", "watch", "compare", "logs", "metrics", "artifacts", "transcript") \
            and name not in _NAVIGATION:
        # keys of a view: the frames' pause is not a run's; evaluating a checkpoint starts one
        return "Runs" if (prefix, name) == ("artifacts", "eval") else "View"
    if name in _NAVIGATION or prefix == "table":
        return "Navigation"
    if name in _RUNS:
        return "Runs"
    return "View"


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
    # by purpose; within one, the screen's own keys first, then the generic ones (no id)
    rows.sort(key=lambda r: (GROUPS.index(purpose(r[2])), not r[2], r[2], r[1]))
    return rows


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > Vertical {
        width: 84;
        max-width: 100%;
        height: 80%;
        border: thick $primary;
        background: $surface;
    }
    HelpScreen #help-title {
        padding: 0 1;
        text-style: bold;
    }
    HelpScreen #help-keys {
        height: 1fr;
        padding: 0 1;
    }
    HelpScreen #help-keys:focus {
        background-tint: $foreground 0%;
    }
    HelpScreen .help-group {
        margin-bottom: 1;
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
        Binding("g", "scroll_home", "Top", show=False, id="help.top"),
        Binding("G", "scroll_end", "End", show=False, id="help.end"),
    ]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.rows = binding_rows(under)
        self.under_name = type(under).__name__.replace("Screen", "") or "app"

    def groups(self) -> dict[str, list[tuple[str, str, str]]]:
        grouped: dict[str, list[tuple[str, str, str]]] = {}
        for row in self.rows:
            grouped.setdefault(purpose(row[2]), []).append(row)
        return grouped

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"Keys of the {self.under_name} screen", id="help-title")
            with VerticalScroll(id="help-keys"):
                for name, rows in self.groups().items():
                    table = Table(title=name, title_justify="left", title_style="bold underline",
                                  show_header=False, box=None, padding=(0, 2), expand=True)
                    # fixed widths: the groups' columns line up
                    table.add_column("key", style="bold", no_wrap=True, width=14)
                    table.add_column("action", ratio=1)
                    table.add_column("binding id", style="dim", no_wrap=True, width=26)
                    for keys, desc, bid in rows:
                        table.add_row(keys, desc, bid)
                    yield Static(table, classes="help-group")
            yield Static("j/k ↓/↑ scroll, g/G top/end. Rebind in <home>/keymap.json: "
                         "{\"binding id\": \"key\"}. esc closes.", id="help-foot")

    def on_mount(self) -> None:
        self.query_one("#help-keys").focus()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_scroll_down(self) -> None:
        self.query_one("#help-keys", VerticalScroll).scroll_down(animate=False)

    def action_scroll_up(self) -> None:
        self.query_one("#help-keys", VerticalScroll).scroll_up(animate=False)

    def action_scroll_home(self) -> None:
        self.query_one("#help-keys", VerticalScroll).scroll_home(animate=False)

    def action_scroll_end(self) -> None:
        self.query_one("#help-keys", VerticalScroll).scroll_end(animate=False)
