"""The group view: runs grouped and aggregated with confidence, the `mosaic report` of the runs
compared (`R` on the compare screen) or of a sweep (`R` on the sweep screen). The groups and
their point estimates come at once, the bootstrap intervals from a thread when they are done;
a run of the set that finishes meanwhile is taken in (docs/results.md)."""
from __future__ import annotations

import csv
import time
from typing import Any, Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from mosaic_tui import report as R
from mosaic_tui.messages import RunsChanged
from mosaic_tui.widgets.banner import TitleBar
from mosaic_tui.widgets.key_bar import KeyBar

NORMALIZE = ("none", "minmax")
RECOMPUTE_SECONDS = 1.0


class ReportScreen(Screen):
    DEFAULT_CSS = """
    ReportScreen #report-scroll {
        height: 1fr;
        padding: 0 1;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="report.back"),
        Binding("b", "by", "Group by", id="report.by"),
        Binding("n", "normalize", "Normalise", id="report.normalize"),
        Binding("e", "export", "Export CSV", id="report.export"),
        Binding("j", "down", "Down", show=False, id="report.down"),
        Binding("k", "up", "Up", show=False, id="report.up"),
    ]

    def __init__(self, title: str, member: Callable[[dict[str, Any]], bool], groupings: list[list[str] | None],
                 reps: int = R.REPORT_REPS) -> None:
        super().__init__()
        self.title_text = title
        self.member = member                 # which runs of the app's list are in the report
        self.groupings = groupings or [None]  # `b` goes through them; None: one config's seeds
        self.grouping = 0
        self.normalize = "none"
        self.reps = reps
        self.report: dict[str, Any] | None = None     # the last one shown (point estimates or whole)
        self.whole: dict[str, Any] | None = None      # the last one with its intervals
        self.last_export: str | None = None
        self._signature: tuple | None = None
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        with VerticalScroll(id="report-scroll"):
            yield Static("", id="report-body", markup=False)
        yield KeyBar()

    def on_mount(self) -> None:
        self.recompute()
        self.set_interval(RECOMPUTE_SECONDS, self._follow, name="report")

    # -- which runs, and when to compute again ---------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        return [r for r in self.app.link.runs.values() if self.member(r) and r.get("state") in R.DEFAULT_STATES]

    def _signature_of(self, runs: list[dict[str, Any]]) -> tuple:
        return tuple(sorted((r["id"], r.get("state"), r.get("rev")) for r in runs))

    def on_runs_changed(self, message: RunsChanged) -> None:
        self._follow()

    def _follow(self) -> None:
        """A run of the set finished (or was deleted): the report again."""
        if self._signature != self._signature_of(self.runs()):
            self.recompute()

    def options(self, reps: int) -> R.Options:
        return R.Options(by=self.groupings[self.grouping], normalize=self.normalize, reps=reps)

    def recompute(self) -> None:
        runs = self.runs()
        self._signature = self._signature_of(runs)
        self._generation += 1
        try:
            quick = R.build_report(runs, self.options(0))
        except R.ReportError as exc:
            self.report = None
            self._show_error(str(exc))
            return
        self.report = quick
        self.show(quick)
        if quick["groups"]:
            self._bootstrap(runs, self.options(self.reps), self._generation)

    @work(thread=True, exclusive=True, group="report")
    def _bootstrap(self, runs: list[dict[str, Any]], opts: R.Options, generation: int) -> None:
        try:
            whole = R.build_report(runs, opts)
        except R.ReportError as exc:
            self.app.call_from_thread(self._show_error, str(exc))
            return
        self.app.call_from_thread(self._whole, whole, generation)

    def _whole(self, whole: dict[str, Any], generation: int) -> None:
        if generation != self._generation:
            return      # the runs or the options changed meanwhile: a newer one is on its way
        self.report = self.whole = whole
        self.show(whole)

    # -- drawing ---------------------------------------------------------------------------------
    def show(self, report: dict[str, Any]) -> None:
        by = self.groupings[self.grouping]
        groups = len(report["groups"])
        runs = sum(g["runs"] for g in report["groups"])
        self.query_one(TitleBar).update(
            f"report  ·  {self.title_text}  ·  {groups} group{'s' if groups != 1 else ''}, {runs} run"
            f"{'s' if runs != 1 else ''}  ·  by {', '.join(by) if by else 'config (seeds together)'} (b)  ·  "
            f"normalised: {self.normalize} (n)")
        lines = R.text_lines(report)
        profile = R.profile_lines(report)
        if profile:
            lines += ["", "performance profiles", *profile]
        self.query_one("#report-body", Static).update("\n".join(lines))

    def _show_error(self, text: str) -> None:
        self.query_one("#report-body", Static).update(text)

    def body_text(self) -> str:
        return str(self.query_one("#report-body", Static).render())

    # -- keys --------------------------------------------------------------------------------------
    def action_by(self) -> None:
        self.grouping = (self.grouping + 1) % len(self.groupings)
        self.recompute()

    def action_normalize(self) -> None:
        self.normalize = NORMALIZE[(NORMALIZE.index(self.normalize) + 1) % len(NORMALIZE)]
        self.recompute()

    def action_export(self) -> None:
        report = self.whole
        if report is None:
            self.notify("the intervals are still being computed", timeout=4)
            return
        out_dir = self.app.home.root / "exports"
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / f"report-{time.strftime('%Y%m%d-%H%M%S')}.csv"
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(R.CSV_HEADER)
            writer.writerows(R.csv_rows(report))
        self.last_export = str(path)
        self.notify(f"exported {len(report['groups'])} groups to {path}", timeout=6)

    def action_down(self) -> None:
        self.query_one("#report-scroll", VerticalScroll).scroll_down(animate=False)

    def action_up(self) -> None:
        self.query_one("#report-scroll", VerticalScroll).scroll_up(animate=False)

    def action_back(self) -> None:
        self.app.pop_screen()

    def ui_place(self) -> dict:
        return {"screen": "runs"}


def for_runs(run_ids: list[str], runs: dict[str, dict[str, Any]]) -> ReportScreen:
    """The group view of the runs compared: one config's seeds together, then by algo, env's
    worker... by each param that differs between them, by tags."""
    ids = set(run_ids)
    chosen = [runs[r] for r in run_ids if r in runs]
    return ReportScreen(f"{len(ids)} runs compared", lambda r: r["id"] in ids, groupings_for(chosen))


def for_sweep(sweep: dict[str, Any]) -> ReportScreen:
    """The group view of a sweep: its trials (one config's seeds), then each swept param alone."""
    name, sweep_id = sweep["name"], sweep["id"]
    params = list((sweep.get("spec") or {}).get("params") or {})
    return ReportScreen(f"sweep {name}", lambda r: r.get("sweep") == sweep_id,
                        [None, *([p] for p in params), ["tags"]])


def groupings_for(runs: list[dict[str, Any]]) -> list[list[str] | None]:
    out: list[list[str] | None] = [None]
    for field in ("algo", "worker"):
        if len({r.get(field) for r in runs}) > 1:
            out.append([field])
    params: dict[str, set[str]] = {}
    for run in runs:
        for k, v in ((run.get("config") or {}).get("params") or {}).items():
            params.setdefault(k, set()).add(repr(v))
    out += [[k] for k, values in sorted(params.items()) if len(values) > 1]
    out.append(["tags"])
    return out
