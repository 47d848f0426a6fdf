"""The Config tab: a run's config (what was submitted, as the daemon validated it) and its record."""
from __future__ import annotations

import json
from typing import Any

from rich.console import Group
from rich.json import JSON
from rich.table import Table
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from mosaic_tui import fmt

RECORD_FIELDS = ("id", "name", "state", "reason", "exit_code", "exit_signal", "created_at", "started_at",
                 "ended_at")


def record_table(run: dict[str, Any]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", justify="right")
    table.add_column()
    s = run.get("summary") or {}
    for key in RECORD_FIELDS:
        value = run.get(key)
        if value is None or value == "":
            continue
        if key.endswith("_at") and isinstance(value, (int, float)):
            import time
            value = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))
        table.add_row(key, Text(str(value), style=fmt.STATE_STYLES.get(str(value), "") if key == "state" else ""))
    for key in ("steps", "total_steps", "episodes", "last_return", "sps", "invalid", "phase"):
        if s.get(key) is not None:
            table.add_row(key, fmt.num(s.get(key)))
    if s.get("checkpoints"):
        table.add_row("checkpoints", "\n".join(s["checkpoints"][-5:]))
    if s.get("dataset"):
        table.add_row("dataset", fmt.dataset_text(s["dataset"]))
    if s.get("warnings"):   # beside the run, not its failure: a W&B/MLflow mirror that cannot write
        table.add_row("warnings", Text("\n".join(s["warnings"]), style="yellow"))
    return table


class ConfigView(VerticalScroll, can_focus=True):
    DEFAULT_CSS = """
    ConfigView {
        height: 1fr;
        padding: 0 1;
    }
    ConfigView #config-record {
        margin-bottom: 1;
    }
    """

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False, id="config.down"),
        Binding("k", "scroll_up", "Up", show=False, id="config.up"),
    ]

    def __init__(self, run: dict[str, Any] | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run = run or {}
        self._stale = True      # self.run not drawn yet

    def compose(self):
        yield Static(id="config-record")
        yield Static(id="config-json")
        yield Static(id="config-stderr")

    def on_show(self) -> None:
        if self._stale:
            self._draw()

    def show(self, run: dict[str, Any]) -> None:
        """Show this run record; while the Config tab is hidden, only keep it.

        A running run's record changes twice a second, and re-laying out
        hidden Statics costs a full repaint of the screen (the image on the
        Frames tab included); ``on_show`` draws the latest record instead.
        """
        self.run = run
        if not self.region:
            self._stale = True
            return
        self._draw()

    def _draw(self) -> None:
        run = self.run
        self._stale = False
        self.query_one("#config-record", Static).update(record_table(run))
        config = run.get("config") or {}
        self.query_one("#config-json", Static).update(
            Group(Text("config.json", style="bold underline"), JSON(json.dumps(config, indent=2, default=str))))
        tail = run.get("stderr_tail")
        self.query_one("#config-stderr", Static).update(
            Group(Text("\nlast stderr lines", style="bold underline"), Text(tail)) if tail else "")
