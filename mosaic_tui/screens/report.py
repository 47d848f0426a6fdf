"""The group view: runs grouped and aggregated with confidence, the `mosaic report` of the runs
compared (`R` on the compare screen) or of a sweep (`R` on the sweep screen). The groups and
their point estimates come at once, the bootstrap intervals from a thread when they are done;
a run of the set that finishes meanwhile is taken in. `f` shows the report's figure in the
terminal (sixel or kitty where it draws images, else a half-block preview and a line saying so),
drawn again when the grouping or the runs change; `s` saves it as PDF, SVG and PNG
(docs/results.md)."""
from __future__ import annotations

import csv
import time
from typing import Any, Callable

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer, Vertical
from textual.screen import Screen
from textual.widgets import Static

from daemon import protocol as P
from mosaic_tui import report as R
from mosaic_tui.messages import RunsChanged
from mosaic_tui.widgets.banner import TitleBar
from mosaic_tui.widgets.frames_view import FrameCanvas
from mosaic_tui.widgets.key_bar import KeyBar

NORMALIZE = ("none", "minmax")
RECOMPUTE_SECONDS = 1.0
FIGURES = ("intervals", "profiles", "poi", "curves")   # `F` goes through them
FIGURE_COLUMN = "double"      # a terminal is wider than tall: the paper's full width has its shape


class ReportScreen(Screen):
    DEFAULT_CSS = """
    ReportScreen #report-scroll {
        height: 1fr;
        padding: 0 1;
    }
    ReportScreen #report-body {
        width: auto;   /* the table's columns never wrap: a narrow terminal scrolls it sideways */
    }
    ReportScreen #report-figure {
        height: 1fr;
        display: none;
    }
    ReportScreen.-figure #report-figure {
        display: block;
    }
    ReportScreen.-figure #report-scroll {
        display: none;
    }
    ReportScreen #figure-header {
        height: auto;
        padding: 0 1;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="report.back"),
        Binding("b", "by", "Group by", id="report.by"),
        Binding("n", "normalize", "Normalise", id="report.normalize"),
        Binding("e", "export", "Export CSV", id="report.export"),
        Binding("f", "figure", "Figure", id="report.figure"),
        Binding("F", "next_figure", "Next figure", id="report.next_figure"),
        Binding("s", "save_figure", "Save figure", id="report.save_figure"),
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
        self.figure_kind = FIGURES[0]
        self.figure_shown = False
        self.figure_for: tuple | None = None     # (kind, report's groups, size) of the figure drawn
        self.figure_note = ""                    # why there is no figure, when there is none
        self.curve: dict[str, Any] | None = None  # the learning curves' numbers last drawn
        self.last_figure: list[str] = []          # the files `s` wrote last
        self._figure_generation = 0
        self._signature: tuple | None = None
        self._generation = 0

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        with ScrollableContainer(id="report-scroll"):
            yield Static("", id="report-note", markup=False)     # the score and the intervals: wrapped
            yield Static("", id="report-body", markup=False)
        with Vertical(id="report-figure"):
            yield Static("", id="figure-header", markup=False)
            yield FrameCanvas(id="figure-canvas")
        yield KeyBar()

    def on_mount(self) -> None:
        self.query_one(FrameCanvas).configure(getattr(self.app, "graphics", None))
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
        note, *lines = R.text_lines(report)
        profile = R.profile_lines(report)
        if profile:
            lines += ["", "performance profiles", *profile]
        self.query_one("#report-note", Static).update(note)
        self.query_one("#report-body", Static).update("\n".join(lines))
        if self.figure_shown:
            self.draw_figure()

    def _show_error(self, text: str) -> None:
        self.query_one("#report-note", Static).update(text)
        self.query_one("#report-body", Static).update("")

    def body_text(self) -> str:
        return "\n".join(str(self.query_one(f"#report-{part}", Static).render()) for part in ("note", "body"))

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

    # -- the figure ------------------------------------------------------------------------------
    def action_figure(self) -> None:
        self.figure_shown = not self.figure_shown
        self.set_class(self.figure_shown, "-figure")
        if self.figure_shown:
            self.call_after_refresh(self.draw_figure)
        else:
            self.query_one(FrameCanvas).kitty_delete()

    def on_resize(self) -> None:
        if self.figure_shown:
            self.call_after_refresh(self.draw_figure)      # at the canvas' new size

    def action_next_figure(self) -> None:
        self.figure_kind = FIGURES[(FIGURES.index(self.figure_kind) + 1) % len(FIGURES)]
        if not self.figure_shown:
            self.action_figure()
        else:
            self.draw_figure()

    def graphics_line(self) -> str:
        """What the terminal draws the figure with; where it draws no images, says so."""
        mode = self.query_one(FrameCanvas).image_mode
        if mode in ("sixel", "kitty"):
            return f"graphics: {mode}"
        caps = getattr(self.app, "graphics", None)
        why = f" ({caps.reason})" if caps is not None and caps.reason else ""
        return (f"this terminal draws no images{why}: a half-block preview; s saves the figure as PDF, SVG "
                f"and PNG to copy")

    def draw_figure(self) -> None:
        """The figure of the report shown, drawn in a thread (matplotlib takes a moment); a newer
        report or kind meanwhile wins."""
        report = self.report
        if report is None or not report["groups"]:
            self._figure_note("no groups to draw")
            return
        canvas = self.query_one(FrameCanvas)
        cols, rows = canvas.size
        if not cols or not rows:
            self.call_after_refresh(self.draw_figure)
            return
        cell_w, cell_h = canvas.cell_px
        if canvas.image_mode == "halfblock":
            cell_w, cell_h = 1, 2                  # a half-block cell is one pixel wide, two high
        key = (self.figure_kind, id(report), cols, rows)
        if key == self.figure_for:
            return
        self._figure_generation += 1
        self.query_one("#figure-header", Static).update(
            f"{self.figure_kind} (F: next)  ·  drawing...  ·  {self.graphics_line()}")
        self._render_figure(report, self.figure_kind, (cols * cell_w, rows * cell_h), key, self._figure_generation)

    @work(thread=True, exclusive=True, group="figure")
    def _render_figure(self, report: dict[str, Any], kind: str, box: tuple[int, int], key: tuple,
                       generation: int) -> None:
        from mosaic_tui import figures as F
        try:
            curve = self._curve(report) if kind == "curves" else None
            width_in, height_in = F.figure_size(kind, FIGURE_COLUMN, report)
            dpi = max(30.0, min(box[0] / width_in, box[1] / height_in))
            frame = F.pixels(F.draw(kind, report, FIGURE_COLUMN, curve, dpi=dpi))
        except (F.FigureError, ConnectionError, P.RPCError) as exc:
            self.app.call_from_thread(self._figure_note, f"{kind}: {exc}", generation)
            return
        self.app.call_from_thread(self._figure_drawn, kind, frame, key, generation, curve)

    def _curve(self, report: dict[str, Any]) -> dict[str, Any]:
        """Learning curves: the runs' episode returns, the pages `mosaic metrics --tag` reads."""
        import numpy as np

        from mosaic_tui import figures as F

        async def fetch(rid: str):
            offset, points = 0, []
            while True:
                try:
                    page = await self.app.link.call(P.METRICS, run=rid, tags=[R.EPISODE_RETURN], max_bytes=16 << 20,
                                                    **{"from": offset})
                except P.RPCError as exc:
                    if exc.code == P.NOT_FOUND:
                        return points
                    raise
                points += page["points"].get(R.EPISODE_RETURN, [])
                if page["next"] >= page["end"] or page["next"] == offset:
                    return points
                offset = page["next"]

        if not getattr(self.app.link, "connected", False):
            raise F.FigureError("learning curves need the daemon (not connected)")
        series = {}
        for g in report["groups"]:
            for rid in g["run_ids"]:
                points = self.app.call_from_thread(fetch, rid)
                if points:
                    series[rid] = tuple(np.asarray(col, dtype=float) for col in zip(*points))
        return F.curves(report, series, self.app.link.runs)

    def _figure_drawn(self, kind: str, frame, key: tuple, generation: int, curve: dict[str, Any] | None) -> None:
        if generation != self._figure_generation:
            return
        self.figure_for = key
        self.curve = curve if curve is not None else self.curve
        self.figure_note = ""
        self.query_one(FrameCanvas).show(key, frame)
        groups = len(self.report["groups"]) if self.report else 0
        self.query_one("#figure-header", Static).update(
            f"{kind} (F: next)  ·  {groups} group{'s' if groups != 1 else ''}  ·  {self.graphics_line()}")

    def _figure_note(self, text: str, generation: int | None = None) -> None:
        if generation is not None and generation != self._figure_generation:
            return
        self.figure_note = text
        self.figure_for = None
        canvas = self.query_one(FrameCanvas)
        canvas.kitty_delete()
        canvas.show(None, None)
        self.query_one("#figure-header", Static).update(f"{text}  (F: next figure)")

    def action_save_figure(self) -> None:
        """The figure shown (or the first) as PDF, SVG and PNG at a paper column's width."""
        report = self.whole
        if report is None:
            self.notify("the intervals are still being computed", timeout=4)
            return
        self._save_figure(report, self.figure_kind)

    @work(thread=True, exclusive=True, group="save-figure")
    def _save_figure(self, report: dict[str, Any], kind: str) -> None:
        from mosaic_tui import figures as F
        out_dir = self.app.home.root / "exports"
        out_dir.mkdir(parents=True, exist_ok=True)
        stem = out_dir / f"report-{kind}-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            curve = self._curve(report) if kind == "curves" else None
            fig = F.draw(kind, report, "single", curve)
            paths = [F.save(fig, f"{stem}.{ext}") for ext in F.FORMATS]
        except (F.FigureError, ConnectionError, P.RPCError, OSError) as exc:
            self.app.call_from_thread(self.notify, f"figure not saved: {exc}", severity="error", timeout=8)
            return
        self.last_figure = paths
        self.app.call_from_thread(self.notify, f"saved the {kind} figure: {stem}.pdf, .svg, .png", timeout=8)

    def action_down(self) -> None:
        self.query_one("#report-scroll", ScrollableContainer).scroll_down(animate=False)

    def action_up(self) -> None:
        self.query_one("#report-scroll", ScrollableContainer).scroll_up(animate=False)

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
