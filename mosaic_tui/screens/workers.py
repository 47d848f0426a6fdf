"""The installed workers and what each can do."""
from __future__ import annotations

import json

from rich.json import JSON
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from daemon import protocol as P
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar


class WorkersScreen(Screen):
    DEFAULT_CSS = """
    WorkersScreen #workers {
        height: auto;
        max-height: 12;
    }
    WorkersScreen #caps {
        height: 1fr;
        padding: 0 1;
        border-top: solid $panel;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="workers.back"),
        Binding("j", "down", "Down", show=False, id="workers.down"),
        Binding("k", "up", "Up", show=False, id="workers.up"),
        Binding("n", "new", "New run", id="workers.new"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.worker_list: list[dict] = []

    def compose(self) -> ComposeResult:
        yield TitleBar("Workers: the training backends the daemon found (entry points mosaic.workers)", id="title")
        yield ConnectionBanner()
        table = DataTable(cursor_type="row", id="workers")
        table.add_columns("worker", "upstream", "version", "available", "algorithms", "description")
        yield table
        with VerticalScroll(id="caps"):
            yield Static("loading...", id="caps-text")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(DataTable).focus()
        self.load()

    @work(exclusive=True)
    async def load(self) -> None:
        try:
            self.worker_list = await self.app.link.call(P.WORKERS)
        except (ConnectionError, P.RPCError) as exc:
            self.query_one("#caps-text", Static).update(f"cannot list workers: {exc}")
            return
        table = self.query_one(DataTable)
        table.clear()
        for w in self.worker_list:
            caps = w.get("capabilities") or {}
            table.add_row(w["name"], w.get("upstream") or "-", w.get("upstream_version") or "-",
                          "yes" if w.get("available") else "no",
                          ", ".join(caps.get("algorithms") or []) or w.get("error", ""),
                          w.get("description") or "", key=w["name"])
        self.show_caps(0)

    def show_caps(self, row: int) -> None:
        if not self.worker_list or row < 0 or row >= len(self.worker_list):
            return
        w = self.worker_list[row]
        caps = dict(w.get("capabilities") or {})
        if w.get("error"):
            caps["error"] = w["error"]
        self.query_one("#caps-text", Static).update(JSON(json.dumps(caps, indent=2)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_caps(event.cursor_row)

    def action_back(self) -> None:
        self.app.pop_screen()
        self.app.remember_place()

    def action_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()

    def action_new(self) -> None:
        self.app.open_new_run()

    def ui_place(self) -> dict:
        return {"screen": "workers"}
