"""The runs table: one row a run, sortable, filterable, multi-select."""
from __future__ import annotations

from typing import Any, Callable

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from mosaic_tui import fmt

# key, header, sort key (None: not sortable)
COLUMNS: list[tuple[str, str]] = [
    ("sel", " "), ("name", "name"), ("worker", "worker"), ("algo", "algo"), ("env", "env"),
    ("state", "state"), ("progress", "progress"), ("steps", "steps"), ("sps", "steps/s"),
    ("return", "return"), ("elapsed", "elapsed"), ("returns", "returns"),
]
SORT_KEYS = ("created", "name", "worker", "algo", "env", "state", "progress", "steps", "sps",
             "return", "elapsed")
SPARK_WIDTH = 12
PROGRESS_WIDTH = 6


class Cell:
    """A one-line cell that renders as one segment.

    DataTable re-renders every cell when any cell changes; a Rich Text goes
    through wrapping and measuring each time, this goes straight to a segment
    (the runs table of ten busy runs repaints once a second for a few ms).
    """

    __slots__ = ("text", "style", "right")

    def __init__(self, text: str, style: str = "", right: bool = False) -> None:
        self.text = text
        self.style = style
        self.right = right

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and (self.text, self.style, self.right) == (other.text, other.style, other.right)

    def __rich_console__(self, console, options):
        from rich.cells import cell_len
        from rich.segment import Segment
        from rich.style import Style
        width = options.max_width
        text = self.text
        length = cell_len(text)
        if length > width:
            text = text[:max(0, width - 1)] + "…" if width > 1 else text[:width]
            length = cell_len(text)
        pad = " " * max(0, width - length)
        style = _STYLES.get(self.style)
        if style is None:
            style = _STYLES[self.style] = Style.parse(self.style) if self.style else Style()
        if self.right:
            yield Segment(pad + text, style)
        else:
            yield Segment(text + pad, style)

    def __rich_measure__(self, console, options):
        from rich.cells import cell_len
        from rich.measure import Measurement
        n = cell_len(self.text)
        return Measurement(n, n)


_STYLES: dict[str, Any] = {}


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("summary") or {}


def _num_key(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("-inf")


def sort_value(run: dict[str, Any], key: str, now: float) -> Any:
    s = _summary(run)
    if key == "created":
        return (run.get("created_at") or 0, run["id"])
    if key in ("name", "worker", "algo", "env", "state"):
        return str(run.get(key) or "")
    if key == "progress":
        p = fmt.progress(run)
        return -1.0 if p is None else p
    if key == "steps":
        return _num_key(s.get("steps"))
    if key == "sps":
        return _num_key(s.get("sps"))
    if key == "return":
        return _num_key(s.get("last_return"))
    if key == "elapsed":
        e = fmt.elapsed(run, now)
        return -1.0 if e is None else e
    return 0


def matches(run: dict[str, Any], query: str) -> bool:
    """Every word of the query appears in the run's name, id, worker, algo, env or state."""
    if not query.strip():
        return True
    hay = " ".join(str(run.get(k) or "") for k in ("name", "id", "worker", "algo", "env", "state")).lower()
    return all(word in hay for word in query.lower().split())


def row_cells(run: dict[str, Any], selected: bool, now: float) -> tuple:
    s = _summary(run)
    state = run.get("state", "?")
    state_cell = Cell(state, fmt.STATE_STYLES.get(state, ""))
    if run.get("cancel_requested") and state in ("running", "starting", "paused"):
        state_cell = Cell(f"{state}*", "magenta")
    return (
        Cell("●", "bold") if selected else Cell(" "),
        Cell(str(run.get("name", ""))),
        Cell(str(run.get("worker", ""))),
        Cell(str(run.get("algo", ""))),
        Cell(str(run.get("env", ""))),
        state_cell,
        Cell(fmt.progress_text(run, PROGRESS_WIDTH)),
        Cell(fmt.num(s.get("steps")), right=True),
        Cell(fmt.num(s.get("sps")), right=True),
        Cell(fmt.num(s.get("last_return")), right=True),
        Cell(fmt.duration(fmt.elapsed(run, now)), right=True),
        Cell(fmt.sparkline(s.get("returns") or [], SPARK_WIDTH), "green"),
    )


class RunsTable(DataTable):
    """Runs as rows (key: run id). ``set_runs`` updates in place when it can."""

    DEFAULT_CSS = """
    RunsTable {
        height: 1fr;
    }
    """

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("g", "scroll_top", "Top", show=False, id="table.top"),
        Binding("G", "scroll_bottom", "Bottom", show=False, id="table.bottom"),
        Binding("space", "toggle_select", "Select", id="runs.select"),
    ]

    class SelectionChanged(Message):
        def __init__(self, table: "RunsTable", selected: set[str]) -> None:
            super().__init__()
            self.table = table
            self.selected = selected

    def __init__(self, clock: Callable[[], float], **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.clock = clock
        self.sort_key = "created"
        self.sort_reverse = True
        self.query_text = ""
        self.selected: set[str] = set()
        self._order: list[str] = []
        self._cells: dict[str, tuple] = {}
        self._runs: dict[str, dict[str, Any]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    # -- data ------------------------------------------------------------------
    @property
    def current_run_id(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def visible_ids(self) -> list[str]:
        return list(self._order)

    def ordered(self, runs: dict[str, dict[str, Any]]) -> list[str]:
        now = self.clock()
        visible = [r for r in runs.values() if matches(r, self.query_text)]
        visible.sort(key=lambda r: (sort_value(r, self.sort_key, now), r["id"]), reverse=self.sort_reverse)
        return [r["id"] for r in visible]

    def set_runs(self, runs: dict[str, dict[str, Any]], changed: set[str] | None = None) -> None:
        """Show runs; ``changed`` limits the cell refresh to those ids (None: all)."""
        self._runs = runs
        self.selected &= set(runs)
        now = self.clock()
        order = self.ordered(runs)
        if order != self._order:
            current = self.current_run_id
            self.clear()
            self._cells = {}
            for rid in order:
                cells = row_cells(runs[rid], rid in self.selected, now)
                self._cells[rid] = cells
                self.add_row(*cells, key=rid)
            self._order = order
            if current in order:
                self.move_cursor(row=order.index(current), animate=False)
            return
        ids = order if changed is None else [r for r in changed if r in runs and r in self._cells]
        for rid in ids:
            self._update_row(rid, now)

    def _update_row(self, rid: str, now: float) -> None:
        cells = row_cells(self._runs[rid], rid in self.selected, now)
        old = self._cells.get(rid)
        if old is None:
            return
        for (key, _), new, prev in zip(COLUMNS, cells, old):
            if new != prev:
                self.update_cell(rid, key, new)
        self._cells[rid] = cells

    def tick(self) -> None:
        """Refresh the cells that move with the clock (elapsed of active runs)."""
        now = self.clock()
        for rid in self._order:
            run = self._runs.get(rid)
            if run and not run.get("ended_at") and run.get("started_at") and run.get("state") != "paused":
                self._update_row(rid, now)

    def resort(self) -> None:
        self._order = []
        self.set_runs(self._runs)

    def select_run(self, run_id: str) -> bool:
        if run_id in self._order:
            self.move_cursor(row=self._order.index(run_id), animate=False)
            return True
        return False

    # -- actions -------------------------------------------------------------
    def action_toggle_select(self) -> None:
        rid = self.current_run_id
        if rid is None:
            return
        if rid in self.selected:
            self.selected.discard(rid)
        else:
            self.selected.add(rid)
        self._update_row(rid, self.clock())
        if self.cursor_row < len(self._order) - 1:
            self.move_cursor(row=self.cursor_row + 1, animate=False)
        self.post_message(self.SelectionChanged(self, set(self.selected)))

    def unselect_all(self) -> None:
        changed = set(self.selected)
        self.selected.clear()
        now = self.clock()
        for rid in changed:
            if rid in self._cells:
                self._update_row(rid, now)
        self.post_message(self.SelectionChanged(self, set()))
