"""A sweep: its trials ranked by objective (mean ± std over seeds), each param against the objective,
and the sweep explained (mosaic_tui/sweep_explain.py): Optuna's param importances as bars (`i`: the
next evaluator), the best trials with their params, a slice plot per param, following the sweep as
trials finish; `e` exports one CSV row per run. Opened with `S` on a sweep's run. A PBT sweep shows
its lineage instead of the explanation (mosaic_tui/widgets/lineage_view.py): its members' values over
steps and who copied whom, following the exploits as they come."""
from __future__ import annotations

import csv
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Static

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui import sweep_explain as X
from mosaic_tui.widgets.banner import TitleBar
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.lineage_view import LineageView

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
    SweepScreen #sweep-explain {
        height: 40%;
        min-height: 10;
        max-height: 18;
    }
    SweepScreen #sweep-why {
        width: 45%;
        min-width: 36;
        max-width: 64;
        height: 1fr;
        padding: 0 1;
        overflow-y: auto;
    }
    SweepScreen #sweep-slices {
        width: 1fr;
        height: 1fr;
    }
    SweepScreen #sweep-lineage {
        display: none;
    }
    SweepScreen.-pbt #sweep-lineage {
        display: block;
    }
    SweepScreen.-pbt #sweep-explain {
        display: none;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="sweep.back"),
        Binding("e", "export", "Export CSV", id="sweep.export"),
        Binding("enter", "open", "Open run", id="sweep.open"),
        Binding("R", "report", "Report", id="sweep.report"),
        Binding("o", "order", "Sort", id="sweep.order"),
        Binding("i", "evaluator", "Importance by", id="sweep.evaluator"),
        Binding("v", "next_slices", "Next slices", id="sweep.next_slices"),
        Binding("p", "lineage_param", "Lineage param", id="sweep.lineage_param"),
    ]

    def __init__(self, sweep_id: str) -> None:
        super().__init__()
        self.sweep_id = sweep_id
        self.sweep: dict[str, Any] | None = None
        self.last_export: str | None = None
        self._rows: list[str] = []   # the first run of each row's trial
        self.order: str | None = None   # the swept param the rows are sorted by (o); None: by objective
        self.slice_start = 0            # the first slice plot shown: as many as fit, v the next ones
        self.evaluator = X.DEFAULT_EVALUATOR   # Optuna's importance evaluator (i: the next one)
        self.importances: dict[str, float] | None = None
        self.importance_note = ""          # why there are no importances (yet)
        self._explained: tuple | None = None   # (evaluator, finished trials) the importances are of

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield DataTable(id="sweep-trials", cursor_type="row")
        yield Static("", id="sweep-params", markup=False)
        with Horizontal(id="sweep-explain"):
            yield Static("", id="sweep-why", markup=False)
            yield Horizontal(id="sweep-slices")
        yield LineageView(id="sweep-lineage")
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
            f"  ·  {self._method(spec)}")
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
        pbt = "pbt" in spec
        if pbt != self.has_class("-pbt"):
            self.set_class(pbt, "-pbt")
            self.refresh_bindings()
        if pbt:   # no Optuna study to explain: the population's lineage instead
            self.query_one(LineageView).show(sweep)
        else:
            self.show_explanation(sweep)

    @staticmethod
    def _method(spec: dict[str, Any]) -> str:
        if "pbt" in spec:
            pbt = spec["pbt"]
            if pbt.get("replay") is not None or "interval" not in pbt:   # one member's schedule replayed
                return f"pbt replay of {fmt.plural(len(pbt.get('replay') or []), 'change')}"
            return f"pbt ×{pbt.get('population')} every {fmt.num(pbt['interval'])} steps"
        return spec["sampler"] + (f", {spec['pruner']['type']} pruner" if spec["pruner"]["type"] != "none" else "")

    # -- the sweep explained ------------------------------------------------------------------------
    def show_explanation(self, sweep: dict[str, Any]) -> None:
        """The slice plots and best trials now; the importances from a thread when the finished
        trials (or the evaluator) changed: Optuna's import and its forests take a second."""
        from mosaic_tui.widgets.slice_plot import SlicePlot  # plotext: only with the plots
        finished = X.finished_trials(sweep)
        best = X.best_trials(sweep, X.DEFAULT_TOP)
        best_trial = best[0]["trial"] if best else None
        box = self.query_one("#sweep-slices", Horizontal)
        plots = list(box.query(SlicePlot))
        sliced = X.slices(sweep)
        if [p.plot["param"] for p in plots] == [s["param"] for s in sliced]:
            for plot, data in zip(plots, sliced):
                plot.update_plot(data, best_trial)
        else:
            box.remove_children()
            box.mount_all([SlicePlot(data, best_trial) for data in sliced])
        self.call_after_refresh(self._fit_slices)
        key = (self.evaluator, tuple((t["trial"], t["value"]) for t in finished))
        if key != self._explained:
            self._explained = key
            self.importances = None
            try:
                X.check_explainable(sweep)
            except X.ExplainError as exc:
                self.importance_note = str(exc)
            else:
                self.importance_note = "computing..."
                self.run_worker(lambda: self._compute_importances(sweep, key), thread=True,
                                group="explain", exclusive=True)
        self._show_why(sweep)

    def slices_that_fit(self) -> int:
        """How many slice plots the box holds side by side, each at least its min-width."""
        from mosaic_tui.widgets.slice_plot import MIN_WIDTH
        return max(1, self.query_one("#sweep-slices", Horizontal).size.width // MIN_WIDTH)

    def _fit_slices(self) -> None:
        """Show the slice plots that fit from ``slice_start``; the others wait for `v` (drawn
        side by side past the box's edge they would be cut off unseen)."""
        if not self.is_attached:
            return
        plots = list(self.query("#sweep-slices > SlicePlot"))
        fit = self.slices_that_fit()
        if self.slice_start >= len(plots):
            self.slice_start = 0
        for i, plot in enumerate(plots):
            plot.display = self.slice_start <= i < self.slice_start + fit
        self.refresh_bindings()
        if self.sweep is not None:
            self._show_why(self.sweep)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_slices)

    def action_next_slices(self) -> None:
        plots = len(self.query("#sweep-slices > SlicePlot"))
        self.slice_start += self.slices_that_fit()
        if self.slice_start >= plots:
            self.slice_start = 0
        self._fit_slices()

    def _compute_importances(self, sweep: dict[str, Any], key: tuple) -> None:
        try:
            result, note = X.importances(sweep, key[0]), ""
        except X.ExplainError as exc:
            result, note = None, str(exc)
        try:
            self.app.call_from_thread(self._importances_done, key, result, note)
        except RuntimeError:   # the app ended while Optuna worked: nobody to tell
            pass

    def _importances_done(self, key: tuple, result: dict[str, float] | None, note: str) -> None:
        if key != self._explained or self.sweep is None or not self.is_attached:
            return   # the sweep moved on meanwhile (a newer computation is under way), or the screen closed
        self.importances = result
        self.importance_note = note
        self._show_why(self.sweep)

    def _show_why(self, sweep: dict[str, Any]) -> None:
        text = Text()
        plots = len(self.query("#sweep-slices > SlicePlot"))
        shown = min(self.slices_that_fit(), plots - self.slice_start)
        if 0 < shown < plots:   # first: the panel scrolls, the plots beside it do not say it
            text.append(f"slices {self.slice_start + 1}-{self.slice_start + shown} of {plots} (v: next)\n", style="bold")
        text.append(f"importance ({X.EVALUATOR_TITLES[self.evaluator]}, i: next)\n", style="bold")
        if self.importances:
            text.append("\n".join(X.importance_bars(self.importances, 20)) + "\n")
        else:
            text.append(self.importance_note + "\n", style="dim")
        best = X.best_trials(sweep, X.DEFAULT_TOP)
        text.append("best trials\n", style="bold")
        text.append("\n".join(X.best_lines(best)) + "\n" if best else "none finished yet\n")
        base = sweep["spec"]["base"]
        fixed = "  ".join(f"{k}={v}" for k, v in (base.get("params") or {}).items() if k not in sweep["spec"]["params"])
        text.append("config ", style="bold")
        text.append(f"{base.get('worker')} {base.get('algo')} on {base.get('env')}, {fmt.num(base.get('steps'))} steps"
                    + (f", {fixed}" if fixed else "") + ", with each trial's params")
        self.query_one("#sweep-why", Static).update(text)

    def action_evaluator(self) -> None:
        """Optuna's next importance evaluator: PED-ANOVA (its default), fANOVA, mean decrease in impurity."""
        self.evaluator = X.EVALUATORS[(X.EVALUATORS.index(self.evaluator) + 1) % len(X.EVALUATORS)]
        if self.sweep is not None:
            self.show_explanation(self.sweep)

    def action_lineage_param(self) -> None:
        """A PBT sweep's lineage banded by the next param."""
        self.query_one(LineageView).action_next_param()

    def check_action(self, action: str, parameters: tuple) -> bool | None:
        pbt = self.sweep is not None and "pbt" in self.sweep["spec"]
        if action == "lineage_param":
            return pbt
        if action == "evaluator":
            return not pbt
        if action == "next_slices":   # only while some slice plots wait for their turn
            return not pbt and self.is_attached and len(self.query("#sweep-slices > SlicePlot")) > self.slices_that_fit()
        return True

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
