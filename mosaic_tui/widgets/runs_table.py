"""The runs table: one row a run, sortable, filterable, multi-select."""
from __future__ import annotations

import re
import statistics
from typing import Any, Callable

from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from mosaic_tui import fmt

# (key, header); the return header names its window, set by the table
COLUMNS: list[tuple[str, str]] = [
    ("sel", " "), ("name", "name"), ("worker", "worker"), ("algo", "algo"), ("env", "env"),
    ("state", "state"), ("progress", "progress"), ("steps", "steps"), ("sps", "steps/s"),
    ("return", "avg{window}"), ("best", "best"), ("eta", "ETA"), ("elapsed", "elapsed"),
    ("returns", "returns"), ("tags", "tags"),
]
COLUMN_KEYS = [key for key, _ in COLUMNS]
# What a narrow terminal keeps, most wanted first: at 80 columns the state,
# progress, return and ETA stay, and worker and algo go first.
PRIORITY = ("sel", "name", "state", "progress", "return", "eta", "elapsed", "env", "best", "steps",
            "sps", "returns", "tags", "algo", "worker")
NAME_MIN = 10          # a long name is cut to this before a wanted column goes
SORT_KEYS = ("created", "name", "worker", "algo", "env", "state", "progress", "steps", "sps",
             "return", "best", "eta", "elapsed")
SPARK_WIDTH = 8           # 16 returns
PROGRESS_WIDTH = 5


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


def sort_value(run: dict[str, Any], key: str, now: float, window: int = fmt.DEFAULT_RETURN_WINDOW) -> Any:
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
        return _num_key(fmt.smoothed_return(run, window))
    if key == "best":
        return _num_key(fmt.best_return(run)[0])
    if key == "eta":
        left = fmt.eta(run)
        return -1.0 if left is None else left
    if key == "elapsed":
        e = fmt.elapsed(run, now)
        return -1.0 if e is None else e
    return 0


def groups_by_env(sort_key: str, runs: list[dict[str, Any]]) -> bool:
    """Sorting by return ranks runs of one env only: returns of different envs do not compare."""
    return sort_key in ("return", "best") and len({str(r.get("env")) for r in runs}) > 1


def matches(run: dict[str, Any], query: str) -> bool:
    """Every word of the query appears in the run's name, id, worker, algo, env, state, tags or note;
    ``tag:NAME`` asks for a run tagged NAME exactly."""
    if not query.strip():
        return True
    tags = {t.lower() for t in run.get("tags") or []}
    hay = " ".join([*(str(run.get(k) or "") for k in ("name", "id", "worker", "algo", "env", "state", "note")),
                    *tags]).lower()
    for word in query.lower().split():
        if word.startswith("tag:"):
            if word[4:] not in tags:
                return False
        elif word not in hay:
            return False
    return True


def row_cells(run: dict[str, Any], selected: bool, now: float, window: int = fmt.DEFAULT_RETURN_WINDOW) -> tuple:
    """The row's cells, in COLUMNS order."""
    s = _summary(run)
    state = run.get("state", "?")
    state_cell = Cell(state, fmt.STATE_STYLES.get(state, ""))
    if state == "running" and s.get("phase") == "compiling":
        # JIT compilation (Jumanji): minutes without a step, which is not a stall
        state_cell = Cell("compiling…", fmt.STATE_STYLES.get(state, ""))
    if run.get("cancel_requested") and state in ("running", "starting", "paused"):
        state_cell = Cell(f"{state}*", "magenta")
    left = fmt.eta(run)
    return (
        Cell("●", "bold") if selected else Cell(" "),
        Cell(fmt.run_label(run)),
        Cell(str(run.get("worker", ""))),
        Cell(str(run.get("algo", ""))),
        Cell(str(run.get("env", ""))),
        state_cell,
        Cell(fmt.progress_text(run, PROGRESS_WIDTH)),
        Cell(fmt.num(s.get("steps")), right=True),
        Cell(fmt.num(s.get("sps")), right=True),
        Cell(fmt.num(fmt.smoothed_return(run, window)), right=True),
        Cell(fmt.best_text(run), right=True),
        Cell(fmt.duration(left) if left is not None else "-", right=True),
        Cell(fmt.duration(fmt.elapsed(run, now)), right=True),
        Cell(fmt.sparkline(s.get("returns") or [], SPARK_WIDTH), "green"),
        Cell(" ".join(run.get("tags") or []), "cyan"),
    )


_SEED_SUFFIX = re.compile(r"-s\d+$")


def group_key(run: dict[str, Any]) -> tuple[str, int] | None:
    """The group of a sweep's run: its sweep and trial (the runs of one trial differ by their seed)."""
    if run.get("sweep") is None or run.get("trial") is None:
        return None
    return (run["sweep"], run["trial"])


def group_cells(members: list[dict[str, Any]], selected: bool, now: float, window: int) -> tuple:
    """One row for a group: the first run's cells, with the group's name and seed count, how many
    ended, and the return as mean ± std over the seeds (each seed's mean of its last ``window`` returns)."""
    first = members[0]
    cells = list(row_cells(first, selected, now, window))
    index = {key: i for i, key in enumerate(COLUMN_KEYS)}
    base = _SEED_SUFFIX.sub("", str(first.get("name", "")))
    cells[index["name"]] = Cell(f"{base} ×{len(members)}", "bold")
    states = {m.get("state") for m in members}
    if len(states) == 1:
        state = states.pop()
        cells[index["state"]] = Cell(state, fmt.STATE_STYLES.get(state, ""))
    else:
        done = sum(1 for m in members if m.get("state") in ("succeeded", "failed", "cancelled", "lost"))
        cells[index["state"]] = Cell(f"{done}/{len(members)} done", "yellow")
    returns = [v for v in (fmt.smoothed_return(m, window) for m in members) if isinstance(v, (int, float))]
    if returns:
        mean = statistics.fmean(returns)
        std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
        cells[index["return"]] = Cell(f"{fmt.num(mean)}±{fmt.num(std)}", right=True)
    return tuple(cells)


# columns left out while no run has anything in them (no run is tagged yet)
HIDDEN_WHEN_EMPTY = ("tags",)


def fit_columns(natural: dict[str, int], available: int, padding: int,
                empty: frozenset[str] = frozenset()) -> dict[str, int]:
    """Column key -> width for the columns that fit in ``available`` cells, by PRIORITY.

    Columns go strictly by priority: once one does not fit, none after it is
    shown, so a narrow column never stays while a wanted one went. The name
    is first cut down to NAME_MIN; the room left over goes back to it. Columns
    in ``empty`` (of HIDDEN_WHEN_EMPTY, with no run's cell filled) take no room.
    """
    widths: dict[str, int] = {}
    name_natural = natural["name"]
    used = 0
    for key in PRIORITY:
        if key in empty:
            continue
        width = min(name_natural, NAME_MIN) if key == "name" else natural[key]
        if used + width + 2 * padding > available and key not in ("sel", "name"):
            break
        widths[key] = width
        used += width + 2 * padding
    if "name" in widths:
        widths["name"] += max(0, min(name_natural - widths["name"], available - used))
    return {key: widths[key] for key in COLUMN_KEYS if key in widths}


class RunsTable(DataTable):
    """Runs as rows (key: run id). ``set_runs`` updates in place when it can.

    The columns shown are those that fit the table's width, by PRIORITY
    (``fit_columns``); they are laid out again when the width or a column's
    widest cell changes.
    """

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

    def __init__(self, clock: Callable[[], float], window: int = fmt.DEFAULT_RETURN_WINDOW, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.clock = clock
        self.window = window            # the return column: mean of the last ``window`` episodes
        self.sort_key = "created"
        self.sort_reverse = True
        self.query_text = ""
        self.selected: set[str] = set()
        self.fold = False               # a sweep trial's seeds in one row (mean ± std)
        self._groups: dict[str, list[dict[str, Any]]] = {}  # row id -> the runs it stands for
        self._rep_of: dict[str, str] = {}                   # run id -> the row that holds it
        self._order: list[str] = []
        self._cells: dict[str, tuple] = {}
        self._runs: dict[str, dict[str, Any]] = {}
        self._widths: dict[str, int] = {}  # the columns shown, with their widths
        self._natural: dict[str, int] = {}  # each column's widest cell since the last full layout

    def on_mount(self) -> None:
        self._layout(force=True)

    def on_resize(self) -> None:
        self._layout(force=True)

    # -- columns -----------------------------------------------------------------
    @property
    def shown_columns(self) -> list[str]:
        return list(self._widths)

    def _headers(self) -> dict[str, str]:
        return {key: label.format(window=self.window) for key, label in COLUMNS}

    def _fitted(self, fresh: bool) -> dict[str, int]:
        from rich.cells import cell_len
        headers = self._headers()
        natural = {key: cell_len(headers[key]) for key in COLUMN_KEYS}
        if not fresh:
            # columns only widen between full layouts: a value that flips
            # between 4 and 5 characters must not rebuild the table each time
            for key, width in self._natural.items():
                natural[key] = max(natural[key], width)
        filled: set[str] = set()
        for cells in self._cells.values():
            for key, cell in zip(COLUMN_KEYS, cells):
                n = cell_len(cell.text)
                if n:
                    filled.add(key)
                if n > natural[key]:
                    natural[key] = n
        self._natural = natural
        empty = frozenset(key for key in HIDDEN_WHEN_EMPTY if key not in filled)
        available = self.scrollable_content_region.width
        if available <= 0:               # not laid out yet: everything, until the first resize
            return {key: width for key, width in natural.items() if key not in empty}
        return fit_columns(natural, available, self.cell_padding, empty)

    def _layout(self, force: bool = False) -> None:
        """Show the columns that fit; rebuild the table only when that changes."""
        widths = self._fitted(fresh=force)
        if widths == self._widths and not force:
            return
        self._widths = widths
        current = self.current_run_id
        headers = self._headers()
        self.clear(columns=True)
        for key, width in widths.items():
            self.add_column(headers[key], key=key, width=width)
        for rid in self._order:
            self.add_row(*self._shown(self._cells[rid]), key=rid)
        if current in self._order:
            self.move_cursor(row=self._order.index(current), animate=False)

    def _shown(self, cells: tuple) -> list:
        return [cell for key, cell in zip(COLUMN_KEYS, cells) if key in self._widths]

    def set_window(self, window: int) -> None:
        self.window = window
        self._order = []
        self.set_runs(self._runs)
        self._layout(force=True)        # the header names the window

    # -- data ------------------------------------------------------------------
    @property
    def current_run_id(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def visible_ids(self) -> list[str]:
        return list(self._order)

    @property
    def grouped_by_env(self) -> bool:
        """True when the rows are grouped by env because the sort is by return."""
        return groups_by_env(self.sort_key, [self._runs[r] for r in self._order if r in self._runs])

    def ordered(self, runs: dict[str, dict[str, Any]]) -> list[str]:
        now = self.clock()
        visible = [r for r in runs.values() if matches(r, self.query_text)]
        self._groups, self._rep_of = {}, {}
        if self.fold:
            # a sweep trial's seeds in one row, held by its first run
            by_key: dict[tuple[str, int], list[dict[str, Any]]] = {}
            for run in visible:
                key = group_key(run)
                if key is not None:
                    by_key.setdefault(key, []).append(run)
            hidden = set()
            for members in by_key.values():
                members.sort(key=lambda r: r["id"])
                rep = members[0]["id"]
                self._groups[rep] = members
                for m in members:
                    self._rep_of[m["id"]] = rep
                hidden.update(m["id"] for m in members[1:])
            visible = [r for r in visible if r["id"] not in hidden]
        visible.sort(key=lambda r: (sort_value(r, self.sort_key, now, self.window), r["id"]),
                     reverse=self.sort_reverse)
        if groups_by_env(self.sort_key, visible):
            visible.sort(key=lambda r: str(r.get("env")))   # stable: ranked within each env
        return [r["id"] for r in visible]

    def set_runs(self, runs: dict[str, dict[str, Any]], changed: set[str] | None = None) -> None:
        """Show runs; ``changed`` limits the cell refresh to those ids (None: all)."""
        self._runs = runs
        self.selected &= set(runs)
        now = self.clock()
        order = self.ordered(runs)
        if order != self._order:
            self._cells = {rid: self._row(rid, now) for rid in order}
            self._order = order
            self._layout(force=True)
            return
        if changed is not None:
            changed = {self._rep_of.get(r, r) for r in changed}   # a seed's change is its group's row
        ids = order if changed is None else [r for r in changed if r in runs and r in self._cells]
        for rid in ids:
            self._update_row(rid, now)
        self._layout()

    def _row(self, rid: str, now: float) -> tuple:
        members = self._groups.get(rid)
        if members and len(members) > 1:
            members = [self._runs.get(m["id"], m) for m in members]
            return group_cells(members, rid in self.selected, now, self.window)
        return row_cells(self._runs[rid], rid in self.selected, now, self.window)

    def group_of(self, rid: str) -> list[str]:
        """The run ids a row stands for (a folded group's seeds, else the run)."""
        return [m["id"] for m in self._groups.get(rid, [])] or [rid]

    def _update_row(self, rid: str, now: float) -> None:
        cells = self._row(rid, now)
        old = self._cells.get(rid)
        if old is None:
            return
        for key, new, prev in zip(COLUMN_KEYS, cells, old):
            if new != prev and key in self._widths:
                self.update_cell(rid, key, new)
        self._cells[rid] = cells

    def tick(self) -> None:
        """Refresh the cells that move with the clock (elapsed of active runs)."""
        now = self.clock()
        for rid in self._order:
            run = self._runs.get(rid)
            if run and not run.get("ended_at") and run.get("started_at") and run.get("state") != "paused":
                self._update_row(rid, now)
        self._layout()

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
