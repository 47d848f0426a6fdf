"""The installed workers and what each can do, as a table a person reads."""
from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from daemon import protocol as P
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar

# capability key -> the label it is shown under, in this order; other keys follow as they come
CAPABILITY_LABELS = {
    "algorithms": "algorithms",
    "env_families": "env families",
    "envs": "known envs",
    "action_spaces": "action spaces",
    "paradigms": "multi-agent",
    "max_agents": "max agents",
    "frames": "frames",
    "checkpoints": "checkpoints",
    "eval": "evaluation",
    "resume": "resume from a checkpoint",
    "pause": "pause",
    "stop": "stop and continue",
    "gpu": "GPU",
    "self_play": "self-play",
    "parameter_sharing": "parameter sharing",
    "centralised_critic": "centralised critic",
    "competitive": "competitive",
    "policy_configs": "policy configs",
    "turn_based_algorithms": "turn-based algorithms",
    "distributed": "distributed",
    "curriculum": "curriculum",
    "user_scripts": "user scripts",
    "schema_version": "schema version",
}


def yes_no(value: Any) -> Text:
    return Text("yes", style="green") if value else Text("no", style="dim")


def listing(values: Any) -> str:
    return ", ".join(str(v) for v in values) if values else "-"


def capability_rows(caps: dict[str, Any]) -> list[tuple[str, Text | str]]:
    """(label, readable value) for each capability, the known ones in CAPABILITY_LABELS' order."""
    rows: list[tuple[str, Text | str]] = []
    for key in [*CAPABILITY_LABELS, *(k for k in caps if k not in CAPABILITY_LABELS)]:
        label = CAPABILITY_LABELS.get(key, key.replace("_", " "))
        if key == "eval":
            # every worker that saves checkpoints plays them back (mode "eval")
            rows.append((label, Text.assemble(yes_no(caps.get("checkpoints")),
                                              (" (mode: eval plays a checkpoint)", "dim"))))
            continue
        if key not in caps:
            continue
        value = caps[key]
        if key == "paradigms":
            multi = "multi_agent" in (value or [])
            rows.append((label, Text.assemble(yes_no(multi), (f" ({listing(value)})", "dim"))))
        elif key == "envs" and isinstance(value, dict):
            ids = sorted({e for envs in value.values() for e in (envs or [])})
            shown = listing(ids[:12]) + (f", ... ({len(ids)} in all)" if len(ids) > 12 else "")
            rows.append((label, shown))
        elif key == "envs" and isinstance(value, list):
            rows.append((label, listing(value[:12]) + (f", ... ({len(value)} in all)" if len(value) > 12 else "")))
        elif key == "action_spaces" and isinstance(value, dict):
            by_space: dict[str, list[str]] = {}
            for algo, spaces in value.items():
                by_space.setdefault(listing(spaces), []).append(algo)
            rows.append((label, "\n".join(f"{space}: {listing(algos)}" for space, algos in by_space.items())))
        elif isinstance(value, bool):
            rows.append((label, yes_no(value)))
        elif isinstance(value, list):
            rows.append((label, listing(value)))
        elif isinstance(value, dict):
            rows.append((label, "\n".join(f"{k}: {listing(v) if isinstance(v, list) else v}"
                                          for k, v in value.items()) or "-"))
        else:
            rows.append((label, str(value)))
    return rows


def capability_table(worker: dict[str, Any]) -> Table:
    table = Table(box=None, show_header=False, padding=(0, 2), expand=True)
    table.add_column(style="bold", justify="right", no_wrap=True)
    table.add_column(ratio=1)
    upstream = f"{worker.get('upstream') or ''} {worker.get('upstream_version') or ''}".strip()
    table.add_row("worker", Text.assemble((worker["name"], "bold"), (f"  {upstream}" if upstream else "", "dim")))
    if worker.get("error"):
        table.add_row("error", Text(str(worker["error"]), style="bold red"))
    for label, value in capability_rows(worker.get("capabilities") or {}):
        table.add_row(label, value)
    return table


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
        self.query_one("#caps-text", Static).update(capability_table(self.worker_list[row]))

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
