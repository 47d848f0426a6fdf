"""Env picker: hundreds of env ids (Atari's ROMs, MultiGrid's games), filtered as you type.

Opened from the new-run form's env field (ctrl+f, or / when no text box has the
focus). Every word typed must appear in the id, its family or its alias
(``pong``, ``atari pong``, ``soccer 2vs2``); enter takes the highlighted id,
escape leaves the field as it was. An alias is offered beside its id and picks
the real id.
"""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option


def env_rows(envs: list[str]) -> list[tuple[str, str, str]]:
    """(env id, family, alias) for each id a worker offers, aliases of MultiGrid ids included."""
    from workers.sdk.envs import aliases_among, env_family  # data only: reads package files, imports none

    alias_of = {env: alias for alias, env in aliases_among(envs).items()}
    return [(env, env_family(env) or "", alias_of.get(env, "")) for env in envs]


def matches(row: tuple[str, str, str], words: list[str]) -> bool:
    text = " ".join(row).lower()
    return all(word in text for word in words)


class EnvPickerScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    EnvPickerScreen {
        align: center middle;
    }
    EnvPickerScreen > Vertical {
        width: 90;
        height: 80%;
        border: thick $accent;
        background: $surface;
        padding: 0 1;
    }
    EnvPickerScreen #env-filter {
        margin-bottom: 1;
    }
    EnvPickerScreen #env-count {
        color: $text-muted;
    }
    EnvPickerScreen OptionList {
        height: 1fr;
    }
    """

    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="envs.cancel"),
        Binding("down", "move(1)", "Next", show=False, id="envs.down"),
        Binding("up", "move(-1)", "Previous", show=False, id="envs.up"),
    ]

    def __init__(self, envs: list[str], current: str = "") -> None:
        super().__init__()
        self.rows = env_rows(envs)
        self.current = current
        self.shown: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Environments: type to filter, enter to choose, esc to cancel", id="env-title")
            yield Input(placeholder="filter: words of the id, family or alias", id="env-filter", compact=True)
            yield Static("", id="env-count")
            yield OptionList(id="env-list")

    def on_mount(self) -> None:
        self.refill("")
        self.query_one("#env-filter", Input).focus()

    def refill(self, text: str) -> None:
        words = text.lower().split()
        chosen = [row for row in self.rows if matches(row, words)]
        options = self.query_one("#env-list", OptionList)
        options.clear_options()
        options.add_options([Option(Text(self.label(row)), id=row[0]) for row in chosen])
        self.shown = [row[0] for row in chosen]
        if self.shown:
            options.highlighted = self.shown.index(self.current) if self.current in self.shown else 0
        self.query_one("#env-count", Static).update(f"{len(chosen)} of {len(self.rows)}")

    @staticmethod
    def label(row: tuple[str, str, str]) -> str:
        env, family, alias = row
        alias_text = f"  ({alias})" if alias else ""
        return f"{env}{alias_text}  [{family}]" if family else f"{env}{alias_text}"

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refill(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one("#env-list", OptionList)
        if options.highlighted is not None and self.shown:
            self.dismiss(self.shown[options.highlighted])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_move(self, delta: int) -> None:
        options = self.query_one("#env-list", OptionList)
        if self.shown:
            current = options.highlighted or 0
            options.highlighted = max(0, min(len(self.shown) - 1, current + delta))

    def action_cancel(self) -> None:
        self.dismiss(None)
