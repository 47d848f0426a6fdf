"""Compare runs: one tag's curves overlaid, and hyperparameters against final metrics (CSV export).

Like `guild compare`: a row a run, the hyperparameters that differ between
the runs (``a`` shows them all), then final metrics: the last episode return
and the chosen tag's last and best values. ``e`` exports two CSV files: the
full curves (every point of every tag of every run: tag, run, step, value,
wall time) and, beside it, the runs (every parameter, the last value of every tag).
``/`` chooses the runs by a query (mosaic_tui/query.py): every run it keeps is compared.
"""
from __future__ import annotations

import csv
import json
import math
import re
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from mosaic_tui import fmt
from mosaic_tui.messages import ConnectionChanged, RunsChanged, SeriesChanged
from mosaic_tui.series import BANDS, group_band
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.metric_plot import PALETTE, MetricPlot, PlotLine, PlotOptions
from mosaic_tui.widgets.metrics_pane import SMOOTH_STEPS, tag_order

COMMON_KEYS = ("worker", "algo", "env", "steps", "seed", "device")
# `g` cycles how a sweep trial's seeds are drawn: their mean in a band (mosaic_tui.series.BANDS), or each run
BAND_NAMES = {"minmax": "mean, min–max", "ci95": "mean, 95% CI", None: "each run"}
BAND_EDGES = {"minmax": ("min", "max"), "ci95": ("95% low", "95% high")}


def flat_params(run: dict[str, Any]) -> dict[str, Any]:
    cfg = run.get("config") or {}
    out = {k: cfg.get(k) for k in COMMON_KEYS}
    for k, v in (cfg.get("params") or {}).items():
        out[k] = v
    return out


def differing(runs: list[dict[str, Any]]) -> list[str]:
    keys: list[str] = []
    for run in runs:
        for k in flat_params(run):
            if k not in keys:
                keys.append(k)
    if len(runs) < 2:
        return keys
    return [k for k in keys if len({json.dumps(flat_params(r).get(k), sort_keys=True, default=str)
                                    for r in runs}) > 1]


def _cell(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return fmt.num(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


class CompareScreen(Screen):
    DEFAULT_CSS = """
    CompareScreen #compare-bar {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    CompareScreen MetricPlot {
        height: 1fr;
        min-height: 10;
    }
    CompareScreen #compare-table {
        height: 40%;
    }
    CompareScreen #compare-where {
        display: none;
        height: 3;
    }
    CompareScreen.-where #compare-where {
        display: block;
    }
    CompareScreen #compare-where-error {
        display: none;
        height: auto;
        padding: 0 1;
        color: $error;
    }
    CompareScreen.-where-error #compare-where-error {
        display: block;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="compare.back"),
        Binding("right_square_bracket,n", "tag(1)", "Next tag", id="compare.next_tag"),
        Binding("left_square_bracket,N", "tag(-1)", "Prev tag", id="compare.prev_tag"),
        Binding("plus,equals_sign", "smooth(1)", "Smooth+", id="compare.smooth_more"),
        Binding("minus", "smooth(-1)", "Smooth-", id="compare.smooth_less"),
        Binding("l", "logy", "Log-y", id="compare.logy"),
        Binding("t", "xaxis", "Step/time", id="compare.xaxis"),
        Binding("a", "all_params", "All params", id="compare.all_params"),
        Binding("g", "groups", "Seed bands", id="compare.groups"),
        Binding("e", "export", "Export CSV", id="compare.export"),
        Binding("R", "report", "Report", id="compare.report"),
        Binding("slash", "where", "Where", show=False, id="compare.where"),
        Binding("j", "down", "Down", show=False, id="compare.down"),
        Binding("k", "up", "Up", show=False, id="compare.up"),
    ]

    def __init__(self, run_ids: list[str], where: str | None = None) -> None:
        super().__init__()
        self.run_ids = list(run_ids)
        self.where = where              # the query that chose the runs (/), if one did
        self.options = PlotOptions()
        self.tag: str | None = None
        self.show_all = False
        self.band: str | None = "minmax"   # a sweep trial's seeds drawn as their mean and this band (g)
        self.last_export: str | None = None
        self._dirty = False

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield ConnectionBanner()
        yield Static("", id="compare-bar")
        yield Input(placeholder="compare the runs a query keeps: lr < 3e-4 and env = CartPole-v1 (enter: compare, "
                                "esc: back)", id="compare-where")
        yield Static("", id="compare-where-error", markup=False)
        yield MetricPlot("(no tag yet)", [], self.options, id="compare-plot")
        yield DataTable(cursor_type="row", id="compare-table")
        yield KeyBar()

    @property
    def runs(self) -> list[dict[str, Any]]:
        return [self.app.link.runs[r] for r in self.run_ids if r in self.app.link.runs]

    def on_mount(self) -> None:
        if self.where:
            self.run_ids = self.chosen_by(self.where) or self.run_ids
        for rid in self.run_ids:
            self.app.link.watch(rid)
        self.rebuild()
        self.set_interval(1.0, self._tick, name="compare-refresh")
        self.query_one(DataTable).focus()

    def on_unmount(self) -> None:
        for rid in self.run_ids:
            self.app.link.unwatch(rid)

    def tags(self) -> list[str]:
        found: set[str] = set()
        for rid in self.run_ids:
            series = self.app.link.series.get(rid)
            if series is not None:
                found.update(series.tags)
        return sorted(found, key=tag_order)

    def rebuild(self) -> None:
        tags = self.tags()
        if self.tag not in tags:
            self.tag = tags[0] if tags else None
        plot = self.query_one(MetricPlot)
        lines = []
        drawn: set[str] = set()
        if self.band is not None and self.tag is not None:
            for i, (label, members) in enumerate(self.groups()):
                got = [self.app.link.series.get(r["id"]) for r in members]
                band = group_band([g.tags[self.tag] for g in got if g is not None and self.tag in g.tags], self.band)
                if band is None:
                    continue
                color = PALETTE[i % len(PALETTE)]
                t0 = next(g.t0 for g in got if g is not None)
                lines.append(PlotLine(f"{label} mean", band[0], t0, color))
                low, high = BAND_EDGES[self.band]
                lines.append(PlotLine(f"{label} {low}", band[1], t0, color))
                lines.append(PlotLine(f"{label} {high}", band[2], t0, color))
                drawn.update(r["id"] for r in members)
        for i, run in enumerate(self.runs):
            series = self.app.link.series.get(run["id"])
            if run["id"] in drawn or series is None or self.tag is None or self.tag not in series.tags:
                continue
            lines.append(PlotLine(run["name"], series.tags[self.tag], series.t0, PALETTE[i % len(PALETTE)]))
        plot.lines = lines
        plot.tag = self.tag or "(no scalars yet)"
        plot.border_title = plot.tag
        plot.refresh()
        self.fill_table()
        self.update_bar(tags)

    def groups(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """The compared runs that are seeds of one sweep trial, two or more: (label, runs)."""
        from mosaic_tui.runs_model import group_key
        found: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for run in self.runs:
            key = group_key(run)
            if key is not None:
                found.setdefault(key, []).append(run)
        return [(re.sub(r"-s\d+$", "", members[0]["name"]) + f" ×{len(members)}", members)
                for members in found.values() if len(members) > 1]

    def action_groups(self) -> None:
        cycle = [*BANDS, None]
        self.band = cycle[(cycle.index(self.band) + 1) % len(cycle)]
        self.rebuild()

    def update_bar(self, tags: list[str] | None = None) -> None:
        tags = tags if tags is not None else self.tags()
        o = self.options
        pos = f"{tags.index(self.tag) + 1}/{len(tags)}" if self.tag in tags else "0/0"
        self.query_one("#compare-bar", Static).update(
            f"tag {self.tag or '-'} ({pos}, [ ])   smoothing {o.smoothing:g} (+/-)   "
            f"log-y {'on' if o.logy else 'off'} (l)   x: {o.xaxis} (t)   e: export CSV"
            + (f"   seeds: {BAND_NAMES[self.band]} (g)" if self.groups() else "")
            + (f"   exported {self.last_export}" if self.last_export else ""))
        self.query_one(TitleBar).update(f"Compare {fmt.plural(len(self.runs), 'run')}"
                                        + (f" where {self.where}" if self.where else "") + ": "
                                        + ", ".join(r["name"] for r in self.runs))

    def final_metrics(self, run: dict[str, Any]) -> dict[str, Any]:
        s = run.get("summary") or {}
        out: dict[str, Any] = {"last return": s.get("last_return")}
        series = self.app.link.series.get(run["id"])
        if series is not None and self.tag in series.tags:
            ser = series.tags[self.tag]
            span = ser.value_range()
            out[f"{self.tag} last"] = ser.last()
            out[f"{self.tag} max"] = span[1] if span else None
        else:
            out[f"{self.tag} last"] = None
            out[f"{self.tag} max"] = None
        return out

    def fill_table(self) -> None:
        table = self.query_one(DataTable)
        runs = self.runs
        params = differing(runs) if not self.show_all else differing(runs[:1]) if len(runs) == 1 else \
            [k for r in runs for k in flat_params(r)]
        params = list(dict.fromkeys(params))
        metrics = list(self.final_metrics(runs[0]).keys()) if runs else []
        cursor = table.cursor_row
        table.clear(columns=True)
        table.add_column("", key="color")
        table.add_column("run", key="run")
        table.add_column("state", key="state")
        for p in params:
            table.add_column(p, key=f"p:{p}")
        for m in metrics:
            table.add_column(m, key=f"m:{m}")
        for i, run in enumerate(runs):
            fp = flat_params(run)
            fm = self.final_metrics(run)
            row = [Text("━━", style=PALETTE[i % len(PALETTE)]), run["name"],
                   Text(run["state"], style=fmt.STATE_STYLES.get(run["state"], ""))]
            row += [_cell(fp.get(p)) for p in params]
            row += [Text(fmt.num(fm.get(m)), justify="right") for m in metrics]
            table.add_row(*row, key=run["id"])
        if 0 <= cursor < len(runs):
            table.move_cursor(row=cursor, animate=False)

    # -- live ------------------------------------------------------------------
    def on_series_changed(self, message: SeriesChanged) -> None:
        if any(r in message.series for r in self.run_ids):
            if not self.query_one(MetricPlot).lines:
                self.rebuild()
            else:
                self._dirty = True

    def on_runs_changed(self, message: RunsChanged) -> None:
        if any(r in message.changed or r in message.deleted for r in self.run_ids):
            self._dirty = True

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.query_one(ConnectionBanner).refresh_text()

    def _tick(self) -> None:
        if self._dirty and self.app.screen is self:
            self._dirty = False
            self.rebuild()

    # -- actions -------------------------------------------------------------------
    def action_report(self) -> None:
        """The group view of these runs: aggregates with confidence (mosaic_tui/screens/report.py)."""
        from mosaic_tui.screens.report import for_runs
        self.app.push_screen(for_runs(self.run_ids, self.app.link.runs))

    def action_back(self) -> None:
        if self.has_class("-where"):
            self.remove_class("-where", "-where-error")
            self.query_one(DataTable).focus()
            return
        self.app.pop_screen()
        self.app.remember_place()

    # -- the runs chosen by a query ------------------------------------------------------------
    def chosen_by(self, text: str) -> list[str]:
        """The ids of the runs ``text`` keeps, oldest first; QueryError for a query that is wrong."""
        from mosaic_tui import query
        runs = sorted(self.app.link.runs.values(), key=lambda r: (r.get("created_at") or 0, r["id"]))
        return [r["id"] for r in query.compile_query(text, query.Keys(runs), window=self.app.return_window)
                .filter(runs)]

    def action_where(self) -> None:
        self.add_class("-where")
        box = self.query_one("#compare-where", Input)
        box.value = self.where or ""
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "compare-where":
            return
        from mosaic_tui.query import QueryError
        text = event.value.strip()
        error = self.query_one("#compare-where-error", Static)
        try:
            ids = self.chosen_by(text) if text else []
        except QueryError as exc:
            error.update(exc.line("where"))
            self.add_class("-where-error")
            return
        if not ids:
            error.update(f"where {text!r}: no run matches" if text else "type a query: the runs it keeps are compared")
            self.add_class("-where-error")
            return
        self.remove_class("-where", "-where-error")
        self.where = text
        self.set_run_ids(ids)
        self.query_one(DataTable).focus()

    def set_run_ids(self, run_ids: list[str]) -> None:
        """Compare these runs instead: their events followed, the others' let go."""
        old = self.run_ids
        for rid in run_ids:
            self.app.link.watch(rid)
        for rid in old:
            self.app.link.unwatch(rid)
        self.run_ids = list(run_ids)
        self.rebuild()
        self.app.remember_place()

    def action_tag(self, step: int) -> None:
        tags = self.tags()
        if not tags:
            return
        i = tags.index(self.tag) if self.tag in tags else 0
        self.tag = tags[(i + step) % len(tags)]
        self.rebuild()

    def action_smooth(self, direction: int) -> None:
        cur = self.options.smoothing
        if direction > 0:
            self.options.smoothing = next((s for s in SMOOTH_STEPS if s > cur + 1e-9), SMOOTH_STEPS[-1])
        else:
            self.options.smoothing = next((s for s in reversed(SMOOTH_STEPS) if s < cur - 1e-9), 0.0)
        self.query_one(MetricPlot).refresh()
        self.update_bar()

    def action_logy(self) -> None:
        self.options.logy = not self.options.logy
        self.query_one(MetricPlot).refresh()
        self.update_bar()

    def action_xaxis(self) -> None:
        self.options.xaxis = "time" if self.options.xaxis == "step" else "step"
        self.query_one(MetricPlot).refresh()
        self.update_bar()

    def action_all_params(self) -> None:
        self.show_all = not self.show_all
        self.fill_table()

    def action_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()

    def export_rows(self) -> tuple[list[str], list[list[Any]]]:
        runs = self.runs
        params: list[str] = []
        for r in runs:
            for k in flat_params(r):
                if k not in params:
                    params.append(k)
        tags = self.tags()
        header = ["id", "name", "state", "run_tags", "run_note"] + params + ["last_return", "episodes", "steps_done"] + \
            [f"last:{t}" for t in tags]
        rows = []
        for run in runs:
            fp = flat_params(run)
            s = run.get("summary") or {}
            series = self.app.link.series.get(run["id"])
            lasts = []
            for t in tags:
                v = series.tags[t].last() if series is not None and t in series.tags else None
                lasts.append("" if v is None or (isinstance(v, float) and math.isnan(v)) else v)
            rows.append([run["id"], run["name"], run["state"], " ".join(run.get("tags") or []), run.get("note") or ""]
                        + [json.dumps(fp.get(p)) if isinstance(fp.get(p), (dict, list)) else
                           ("" if fp.get(p) is None else fp.get(p)) for p in params]
                        + [s.get("last_return", ""), s.get("episodes", ""), s.get("steps", "")] + lasts)
        return header, rows

    CURVE_HEADER = ["tag", "run", "run_id", "step", "value", "wall_time"]

    @staticmethod
    def _point_rows(tag: str, run: dict[str, Any], points):
        from mosaic_tui.series import to_float
        for step, value, wall in points:
            value = to_float(value)
            yield [tag, run["name"], run["id"], int(step) if float(step).is_integer() else step,
                   "" if math.isnan(value) else value, wall]

    def _held(self, tag: str, run: dict[str, Any]):
        series = self.app.link.series.get(run["id"])
        return series.tags[tag] if series is not None and tag in series.tags else None

    def curve_rows(self):
        """Every point of every tag of the compared runs as the app holds them (the whole history:
        the same points as `mosaic metrics RUN --csv`, while no tag is held as buckets)."""
        for tag in self.tags():
            for run in self.runs:
                ser = self._held(tag, run)
                if ser is not None:
                    yield from self._point_rows(tag, run, zip(ser.steps.tolist(), ser.values.tolist(),
                                                              ser.walls.tolist()))

    def action_export(self) -> None:
        bucketed = [(tag, run) for tag in self.tags() for run in self.runs
                    if (ser := self._held(tag, run)) is not None and ser.reduced]
        if not bucketed:
            path, runs_path = self._export_paths()
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(self.CURVE_HEADER)
                points = 0
                for row in self.curve_rows():
                    writer.writerow(row)
                    points += 1
            self._exported(path, runs_path, points)
            return
        total = sum(self._held(tag, run).total for tag, run in bucketed)
        self.notify(f"exporting: {fmt.plural(total, 'point')} of long runs come from the daemon", timeout=4)
        self.run_worker(self._export_from_daemon(), exclusive=True, group="export")

    async def _export_from_daemon(self) -> None:
        """The export when a long run's tag is held as buckets (daemon/history.py): its points up
        to where its history ends are paged from the daemon and written as they come (ten million
        points never sit in memory), then the points that came live after it."""
        from daemon import protocol as P
        path, runs_path = self._export_paths()
        points = 0
        try:
            with open(path, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(self.CURVE_HEADER)
                for tag in self.tags():
                    for run in self.runs:
                        ser = self._held(tag, run)
                        if ser is None:
                            continue
                        if ser.reduced:
                            start, end = 0, self.app.link.history_offsets.get(run["id"], 0)
                            while start < end:
                                page = await self.app.link.call(P.METRICS, run=run["id"], tags=[tag], to=end,
                                                                max_bytes=16 << 20, **{"from": start})
                                rows = list(self._point_rows(tag, run, page["points"].get(tag, [])))
                                writer.writerows(rows)
                                points += len(rows)
                                if page["next"] <= start:
                                    break
                                start = page["next"]
                            live = slice(ser.reduced, ser.n)
                        else:
                            live = slice(0, ser.n)
                        rows = list(self._point_rows(tag, run, zip(ser._step[live].tolist(), ser._value[live].tolist(),
                                                                   ser._wall[live].tolist())))
                        writer.writerows(rows)
                        points += len(rows)
        except (ConnectionError, P.RPCError) as exc:
            path.unlink(missing_ok=True)
            self.notify(f"export failed: the daemon did not send the points ({exc})", severity="error", timeout=8)
            return
        self._exported(path, runs_path, points)

    def _export_paths(self):
        out_dir = self.app.home.root / "exports"
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = out_dir / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
        return stem.with_suffix(".csv"), stem.with_name(stem.name + "-runs.csv")

    def _exported(self, path, runs_path, points: int) -> None:
        header, rows = self.export_rows()
        with open(runs_path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(rows)
        self.last_export = str(path)
        self.update_bar()
        self.notify(f"exported {fmt.plural(points, 'point')} of {fmt.plural(len(rows), 'run')} to {path} "
                    f"(parameters: {runs_path.name})", timeout=6)

    def ui_place(self) -> dict:
        return {"screen": "compare", "compare": self.run_ids}
