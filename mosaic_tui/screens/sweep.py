"""A sweep: its trials ranked by objective (mean ± std over seeds), each param against the objective,
Optuna's param importances; `e` exports one CSV row per run. Opened with `S` on a sweep's run."""
from __future__ import annotations

import csv
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.widgets.banner import TitleBar
from mosaic_tui.widgets.key_bar import KeyBar

REFRESH_SECONDS = 2.0


def _value(v: Any) -> str:
    return fmt.num(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def param_lines(sweep: dict[str, Any]) -> Text:
    """Each param against the objective: the trials' means in the order of the param's values."""
    text = Text()
    imp = sweep.get("importances") or {}
    if imp:
        text.append("importance  ", style="bold")
        text.append("  ".join(f"{k} {v:.2f}" for k, v in imp.items()) + "\n")
    done = [t for t in sweep.get("trials", []) if t.get("mean") is not None]
    for name in sweep["spec"]["params"]:
        points = sorted(((t["params"].get(name), t["mean"]) for t in done if name in t["params"]),
                        key=lambda p: (isinstance(p[0], str), p[0] if not isinstance(p[0], str) else 0, str(p[0])))
        if not points:
            continue
        text.append(f"{name}  ", style="bold")
        text.append(fmt.sparkline([m for _, m in points], 16), style="green")
        text.append("  " + "  ".join(f"{_value(v)}→{fmt.num(m)}" for v, m in points[:8]))
        if len(points) > 8:
            text.append(f"  (+{len(points) - 8})")
        text.append("\n")
    for t in sweep.get("trials", []):
        if t.get("refused"):   # values fine one by one, refused together by the worker
            text.append(f"trial {t['trial']} refused  ", style="bold red")
            text.append(f"{t['refused']}\n")
    return text


def _param_rank(value: Any) -> tuple:
    """A param's value in a sort: numbers in order, then text, then trials without it."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, value, "")
    return (1, 0, str(value)) if value is not None else (2, 0, "")


class SweepScreen(Screen):
    DEFAULT_CSS = """
    SweepScreen #sweep-trials {
        height: 1fr;
    }
    SweepScreen #sweep-params {
        height: auto;
        max-height: 12;
        padding: 0 1;
        background: $panel;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="sweep.back"),
        Binding("e", "export", "Export CSV", id="sweep.export"),
        Binding("enter", "open", "Open run", id="sweep.open"),
        Binding("R", "report", "Report", id="sweep.report"),
        Binding("o", "order", "Sort", id="sweep.order"),
    ]

    def __init__(self, sweep_id: str) -> None:
        super().__init__()
        self.sweep_id = sweep_id
        self.sweep: dict[str, Any] | None = None
        self.last_export: str | None = None
        self._rows: list[str] = []   # the first run of each row's trial
        self.order: str | None = None   # the swept param the rows are sorted by (o); None: by objective

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield DataTable(id="sweep-trials", cursor_type="row")
        yield Static("", id="sweep-params", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(TitleBar).update(f"sweep {self.sweep_id}  loading...")
        self.refresh_sweep()
        self.set_interval(REFRESH_SECONDS, self.refresh_sweep, name="sweep")
        self.query_one(DataTable).focus()

    def refresh_sweep(self) -> None:
        if self.sweep is not None and self.sweep["state"] != "running":
            return  # a finished sweep does not change

        async def load() -> None:
            try:
                sweep = await self.app.link.call(P.SWEEP_GET, sweep=self.sweep_id)
            except (P.RPCError, ConnectionError) as exc:
                self.notify(getattr(exc, "message", str(exc)), title="sweep", severity="error")
                return
            self.show(sweep)
        self.run_worker(load(), group="sweep", exclusive=True)

    def show(self, sweep: dict[str, Any]) -> None:
        self.sweep = sweep
        spec = sweep["spec"]
        obj = spec["objective"]
        self.query_one(TitleBar).update(
            f"sweep {sweep['name']}  ·  {sweep['state']}  ·  {obj['direction']} {obj['agg']} of the last "
            f"{obj['last']} {obj['tag']}  ·  {fmt.plural(sweep['groups'], 'trial')}, {fmt.plural(sweep['runs'], 'run')}"
            f"  ·  {spec['sampler']}" + (f", {spec['pruner']['type']} pruner" if spec["pruner"]["type"] != "none" else ""))
        table = self.query_one(DataTable)
        names = list(spec["params"])
        table.clear(columns=True)
        table.add_columns("#", "trial", "state", "mean ± std", "min..max", "seeds", *names)
        self._rows = []
        trials = list(sweep["trials"])      # ranked by the objective: # stays that rank
        rank_of = {t["trial"]: i for i, t in enumerate(trials, 1)}
        if self.order in names:
            trials.sort(key=lambda t: _param_rank(t["params"].get(self.order)))
        for t in trials:
            rank = rank_of[t["trial"]]
            band = f"{fmt.num(t['mean'])} ± {fmt.num(t['std'])}" if t["mean"] is not None else "-"
            spread = f"{fmt.num(t['min'])}..{fmt.num(t['max'])}" if t["min"] is not None else "-"
            style = {"pruned": "magenta", "fail": "red", "refused": "red", "running": "yellow"}.get(t["state"], "")
            table.add_row(str(rank), str(t["trial"]), Text(t["state"], style=style), band, spread,
                          str(len(t["runs"])), *[_value(t["params"].get(n, "")) for n in names])
            self._rows.append(t["runs"][0]["id"] if t["runs"] else "")
        lines = param_lines(sweep)
        if self.order in names:
            lines = Text(f"rows sorted by {self.order} (o: the next param)\n", style="bold") + lines
        self.query_one("#sweep-params", Static).update(lines)

    def action_open(self) -> None:
        row = self.query_one(DataTable).cursor_row
        if 0 <= row < len(self._rows) and self._rows[row] in self.app.link.runs:
            self.app.open_run(self._rows[row])

    def action_export(self) -> None:
        if self.sweep is None:
            return
        out_dir = self.app.home.root / "exports"
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"sweep-{self.sweep['name']}-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        header, rows = fmt.sweep_csv_rows(self.sweep)
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
        self.last_export = str(path)
        self.notify(f"exported {fmt.plural(len(rows), 'run')} to {path}", timeout=6)

    def action_order(self) -> None:
        """Sort the trials by the next swept param (its column), then by the objective again."""
        if self.sweep is None:
            return
        cycle = [None, *self.sweep["spec"]["params"]]
        self.order = cycle[(cycle.index(self.order) + 1) % len(cycle)] if self.order in cycle else None
        self.show(self.sweep)

    def action_report(self) -> None:
        """The group view of the sweep's runs: by trial, by each swept param (screens/report.py)."""
        if self.sweep is None:
            return
        from mosaic_tui.screens.report import for_sweep
        self.app.push_screen(for_sweep(self.sweep))

    def action_back(self) -> None:
        self.app.pop_screen()

    def ui_place(self) -> dict:
        return {"screen": "runs"}
