"""The runs table: one row a run, sortable, filterable, multi-select.

A virtual table (a ScrollView with the line API, like LogView): only the rows
on screen are formatted and rendered, so ten thousand runs cost what forty do.
Textual's DataTable measured every cell of every row on each rebuild (the
runs table rebuilds when a filter letter is typed or the sort changes); this
table keeps the run ids in order and formats a row's cells when it first
comes into view (then again when its run changes). Column widths are those
of the rows formatted so far (at least every row on screen), and only widen
between full layouts. It looks and reads like the DataTable it replaced: the
same component classes and colours, cursor, hover, click-to-select.
"""
from __future__ import annotations

from typing import Any, Callable

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from mosaic_tui import fmt
from mosaic_tui.query import QueryError, TableFilter, key_reader, tag_leaf, word_leaf
from mosaic_tui.runs_model import (
    CELL_PADDING,
    COLUMN_KEYS,
    COLUMNS,
    HIDDEN_WHEN_EMPTY,
    RANKED_BY_ENV,
    SORT_KEYS,
    Cell,
    column_header,
    config_cell,
    config_sort_value,
    fit_columns,
    group_cells,
    group_key,
    groups_by_env,
    haystack,
    query_words,
    row_cells,
    sort_value,
    swept_keys,
)


class RunsTable(ScrollView, can_focus=True):
    """Runs as rows (key: run id). ``set_runs`` keeps the cursor on the same run.

    The columns shown are those that fit the table's width, by PRIORITY
    (``fit_columns``); they are laid out again when the width changes or a
    newly formatted cell is wider than its column. The first line is the
    header; it stays put while the rows scroll under it.
    """

    # DataTable's component classes and CSS, so the table looks as it did
    COMPONENT_CLASSES = {"datatable--header", "datatable--cursor", "datatable--hover"}

    DEFAULT_CSS = """
    RunsTable {
        height: 1fr;
        max-height: 100%;
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .datatable--header {
                background-tint: $foreground 5%;
            }
        }
        & > .datatable--header {
            text-style: bold;
            background: $panel;
            color: $foreground;
        }
        &:ansi > .datatable--header {
            background: ansi_bright_blue;
            color: ansi_default;
        }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        & > .datatable--hover {
            background: $block-hover-background;
        }
    }
    """

    BINDINGS = [
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("up", "cursor_up", "Cursor up", show=False),
        Binding("down", "cursor_down", "Cursor down", show=False),
        Binding("left", "scroll_left", "Scroll left", show=False),
        Binding("right", "scroll_right", "Scroll right", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("ctrl+home", "scroll_top", "Top", show=False),
        Binding("ctrl+end", "scroll_bottom", "Bottom", show=False),
        Binding("home", "scroll_home", "Home", show=False),
        Binding("end", "scroll_end", "End", show=False),
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

    class _RowMessage(Message):
        def __init__(self, table: "RunsTable", cursor_row: int, run_id: str) -> None:
            super().__init__()
            self.table = table
            self.cursor_row = cursor_row
            self.run_id = run_id

    class RowHighlighted(_RowMessage):
        """The cursor is on another run (or the first run arrived)."""

    class RowSelected(_RowMessage):
        """Enter, or a click on the row the cursor is on: open the run."""

    cursor_row = var(0)    # the row the cursor is on (a var: benchmarks can watch it)

    def __init__(self, clock: Callable[[], float], window: int = fmt.DEFAULT_RETURN_WINDOW, **kwargs) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.window = window            # the return column: mean of the last ``window`` episodes
        self.sort_key = "created"
        self.sort_reverse = True
        self.query_text = ""
        self.filter = TableFilter()     # query_text compiled; its error, if any
        self._query_rows: tuple | None = None   # (query, the sorted runs, the runs it kept)
        self.selected: set[str] = set()
        self.fold = False               # a sweep trial's seeds in one row (mean ± std)
        self._groups: dict[str, list[dict[str, Any]]] = {}  # row id -> the runs it stands for
        self._rep_of: dict[str, str] = {}                   # run id -> the row that holds it
        self._runs: dict[str, dict[str, Any]] = {}
        self._order: list[str] = []                         # the rows, top to bottom
        self._sorted: list[dict[str, Any]] | None = None    # every run, sorted (before the filter and fold)
        self._hay: dict[str, tuple[dict, tuple[str, set[str]]]] = {}  # run id -> (record, haystack)
        self._index: dict[str, int] = {}                    # row id -> its place in _order
        self._cells: dict[str, tuple] = {}                  # the rows formatted so far (all columns)
        self._widths: dict[str, int] = {}   # the columns shown, with their widths
        self._natural: dict[str, int] = {}  # each column's widest cell formatted since the last full layout
        self._filled: set[str] = set()      # columns with a non-empty cell formatted since then
        self._grew = False                  # a cell came wider than its column: lay out again
        self._layout_pending = False
        self._table_width = 0
        self._highlighted: str | None = None  # the run of the last RowHighlighted
        self._kept: str | None = None         # the run the cursor was put on, kept across new rows
        self._hover_row: int | None = None
        self._show_hover = False
        self._frame: tuple | None = None      # what every cached line depends on
        self._line_cache: dict[tuple, tuple[tuple, Strip]] = {}
        self._styles: dict[tuple, Style] = {}
        self._metas: dict[tuple[int, int], Style] = {}
        self.columns: list[str] = []          # config-key columns the user chose (params.lr...)
        self._swept: list[str] = []           # the swept params while the rows are one sweep's
        self._swept_for: tuple | None = None   # (sweep, rows, sorted list) _swept_cache was read off
        self._swept_cache: list[str] = []
        self._extra: list[str] = []           # the config-key columns shown: the chosen, then the swept
        self._cell_keys: list[str] = list(COLUMN_KEYS)   # a row's cells: COLUMNS, then the extra
        self._cell_index = {key: i for i, key in enumerate(self._cell_keys)}
        self._readers: dict[str, Callable[[dict[str, Any]], Any]] = {}
        self._warm_ids: list[str] = []      # runs whose filter figures are worked out while idle
        self._warm_at = 0
        self._warming = False

    def on_mount(self) -> None:
        self._layout(force=True)

    def on_resize(self) -> None:
        # the widths measured so far stay: a row more or less in view (the detail line under the
        # table grows for a failed run) must not make the columns jump
        self._layout()
        self._scroll_cursor_into_view()

    # -- columns -----------------------------------------------------------------
    @property
    def shown_columns(self) -> list[str]:
        return list(self._widths)

    def _headers(self) -> dict[str, str]:
        headers = {key: label.format(window=self.window) for key, label in COLUMNS}
        headers.update((key, column_header(key)) for key in self._extra)
        return headers

    @property
    def config_columns(self) -> list[str]:
        """The config-key columns shown: those chosen (``columns``), then a sweep's swept params
        while every row is one sweep's."""
        return list(self._extra)

    def set_columns(self, keys: list[str]) -> None:
        """The config-key columns the user chose (``params.lr``...), in this order."""
        self.columns = list(dict.fromkeys(keys))
        if self._set_extra():
            self.resort()

    def _set_extra(self) -> bool:
        """The chosen and the swept columns shown; True when they changed (every row is
        formatted again, the columns laid out afresh)."""
        extra = self.columns + [key for key in self._swept if key not in self.columns]
        if extra == self._extra:
            return False
        self._extra = extra
        self._cell_keys = COLUMN_KEYS + [key for key in extra if key not in COLUMN_KEYS]
        self._cell_index = {key: i for i, key in enumerate(self._cell_keys)}
        self._cells.clear()
        self._line_cache.clear()
        self._natural = {}
        return True

    def _reader(self, key: str) -> Callable[[dict[str, Any]], Any]:
        """A config key's value in a run (None: the run has none)."""
        read = self._readers.get(key)
        if read is None:
            try:
                read = key_reader(key, self.filter.keys(self._runs), self.window)
            except QueryError:      # a column chosen once, no run has it now: its cells are empty
                read = key_reader(key, None, self.window)
            read = self._readers[key] = read
        return read

    def _swept_of(self, visible: list[dict[str, Any]]) -> list[str]:
        """The swept params of the rows' sweep, when every row is one sweep's (``sweep = grid``)."""
        if not visible:
            return []
        sweep = visible[0].get("sweep")
        if sweep is None or any(run.get("sweep") != sweep for run in visible):
            return []
        mark = (sweep, len(visible), id(self._sorted))
        if mark != self._swept_for:
            self._swept_for = mark
            self._swept_cache = swept_keys(visible)
        return self._swept_cache

    def _rows_in_view(self) -> range:
        top = int(self.scroll_y)
        height = max(0, self.scrollable_content_region.height - 1)   # less the header
        return range(top, min(len(self._order), top + height))

    def _measure(self, cells: tuple) -> None:
        """Widen the columns to a newly formatted row's cells."""
        for key, cell in zip(self._cell_keys, cells):
            n = cell_len(cell.text)
            if n > self._natural[key]:
                self._natural[key] = n
                self._grew = True
            if n and key not in self._filled:
                self._filled.add(key)
                self._grew = True

    def _fitted(self, fresh: bool) -> dict[str, int]:
        if fresh or not self._natural:
            # the headers and the rows in view; the columns then only widen
            # until the next full layout, so that a value flipping between 4
            # and 5 characters does not lay the table out each time
            self._natural = {key: cell_len(label) for key, label in self._headers().items()}
            self._filled = set()
            for row in self._rows_in_view():
                self._measure(self._cells_of(self._order[row]))
        self._grew = False
        empty = frozenset(key for key in HIDDEN_WHEN_EMPTY if key not in self._filled)
        available = self.scrollable_content_region.width
        if available <= 0:               # not laid out yet: everything, until the first resize
            return {key: width for key, width in self._natural.items() if key not in empty}
        return fit_columns(self._natural, available, CELL_PADDING, empty, self._extra)

    def _layout(self, force: bool = False) -> None:
        """Show the columns that fit; repaint when they change."""
        self._layout_pending = False
        widths = self._fitted(fresh=force)
        self._table_width = sum(width + 2 * CELL_PADDING for width in widths.values())
        self.virtual_size = Size(self._table_width, len(self._order) + 1)
        if widths == self._widths and not force:
            return
        if widths != self._widths:
            self._widths = widths
            self._line_cache.clear()
        self.refresh()

    def _shown(self, cells: tuple) -> list:
        return [cells[self._cell_index[key]] for key in self._widths]

    def set_window(self, window: int) -> None:
        self.window = window
        self.resort()                   # the header names the window; the return column changes
        self._warm_soon()

    # -- data ------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def current_run_id(self) -> str | None:
        if not self._order or self.cursor_row < 0 or self.cursor_row >= len(self._order):
            return None
        return self._order[self.cursor_row]

    @property
    def visible_ids(self) -> list[str]:
        return list(self._order)

    def has_row(self, rid: str) -> bool:
        """True when the run has a row of its own (shown, and not a folded group's other seed)."""
        return rid in self._index

    def get_row(self, rid: str) -> list[Cell]:
        """The cells of a row, in the columns shown."""
        return self._shown(self._cells_of(rid))

    def get_row_at(self, row: int) -> list[Cell]:
        return self.get_row(self._order[row])

    @property
    def grouped_by_env(self) -> bool:
        """True when the rows are grouped by env because the sort is by return."""
        if self.sort_key not in RANKED_BY_ENV:      # no list of ten thousand rows made at each key typed
            return False
        return groups_by_env(self.sort_key, [self._runs[r] for r in self._order if r in self._runs])

    def _hay_of(self, run: dict[str, Any]) -> tuple[str, set[str]]:
        cached = self._hay.get(run["id"])
        if cached is None or cached[0] is not run:
            cached = self._hay[run["id"]] = (run, haystack(run))
        return cached[1]

    def _filtered(self, runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The runs the query matches (``matches``, or a query: mosaic_tui/query.py), each run's
        haystack kept while its record is the same object, and what each word or term found
        kept while the sorted runs are the same list (the filter's MatchCache): a letter typed
        in the filter tests one word or term against ten thousand runs."""
        text = self.filter.resolve(self.query_text, self._runs, self.window, self._hay_of)
        # the same text over the same sorted runs (a prefix typed that does not compile leaves
        # the last text in force): the rows of last time
        last = self._query_rows
        if last is not None and last[1] is runs and (last[0] is text or (isinstance(text, str) and last[0] == text)):
            return list(last[2])
        if isinstance(text, str):
            words, tags_wanted = query_words(text)
            if not words and not tags_wanted:
                return list(runs)
            leaves = [word_leaf(w, self._hay_of) for w in words] + [tag_leaf(t, self._hay_of) for t in tags_wanted]
            kept = self.filter.matches.all_of(runs, leaves)
        else:
            kept = text.filter(runs, self.filter.matches)
        self._query_rows = (text, runs, kept)
        return list(kept)

    def ordered(self, runs: dict[str, dict[str, Any]], resort: bool = True) -> list[str]:
        """The row ids: the runs sorted, filtered, folded. ``resort`` False: the runs and the sort
        are as last time (the filter changed): the sorted runs of last time are filtered again."""
        if resort or self._sorted is None:
            now = self.clock()
            if self.sort_key in SORT_KEYS:
                self._sorted = sorted(runs.values(), key=lambda r: (sort_value(r, self.sort_key, now, self.window),
                                                                    r["id"]), reverse=self.sort_reverse)
            else:       # a config key: numbers as numbers, runs without it last
                read, down = self._reader(self.sort_key), self.sort_reverse
                self._sorted = sorted(runs.values(), key=lambda r: (config_sort_value(read(r), down), r["id"]),
                                      reverse=down)
            if len(self._hay) > 2 * len(runs) + 100:
                self._hay = {rid: hay for rid, hay in self._hay.items() if rid in runs}
        visible = self._filtered(self._sorted)
        swept = self._swept_of(visible)
        if swept != self._swept:
            self._swept = swept
            self._set_extra()
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
        if groups_by_env(self.sort_key, visible):
            visible.sort(key=lambda r: str(r.get("env")))   # stable: ranked within each env
        return [r["id"] for r in visible]

    # -- the filter's figures, ahead of the keys typed ------------------------------------
    WARM_CHUNK = 500          # runs a step: ~10 ms, keys typed meanwhile are answered between steps

    def _warm_soon(self, ids: list[str] | None = None) -> None:
        """Work out what a filter typed next reads of these runs (None: all): each run's
        haystack and mean return, the runs' keys. Done at the first key typed, they cost it
        ~0.3 s at 10,000 runs; done here, in steps between the app's other work, none."""
        if ids is None:
            self._warm_ids, self._warm_at = list(self._runs), 0
        else:
            self._warm_ids = self._warm_ids[self._warm_at:] + ids
            self._warm_at = 0
        if not self._warming and self._warm_ids:
            self._warming = True
            self.set_timer(0.05, self._warm_step, name="filter-warm")

    def _warm_step(self) -> None:
        ids = self._warm_ids[self._warm_at:self._warm_at + self.WARM_CHUNK]
        self._warm_at += len(ids)
        runs = [run for run in map(self._runs.get, ids) if run is not None]
        for run in runs:
            self._hay_of(run)
        self.filter.warm(self._runs, runs, self.window)
        if self._warm_at < len(self._warm_ids):
            self.set_timer(0.01, self._warm_step, name="filter-warm")
        else:
            self._warm_ids, self._warm_at, self._warming = [], 0, False

    def set_runs(self, runs: dict[str, dict[str, Any]], changed: set[str] | None = None) -> None:
        """Show runs; ``changed`` limits the rows formatted again to those ids (None: all)."""
        self._runs = runs
        self.selected &= runs.keys()
        if changed is None:
            self._readers.clear()       # a param's spellings are the runs' own
        self._warm_soon(None if changed is None else list(changed))
        order = self.ordered(runs)
        if changed is None:
            self._cells.clear()
        else:
            for rid in changed:         # a seed's change is its group's row
                self._cells.pop(self._rep_of.get(rid, rid), None)
                self._cells.pop(rid, None)
        if order != self._order:
            self._set_order(order)
            return
        self._layout()
        self.refresh()

    def set_query(self, text: str) -> None:
        """Filter the rows (the runs and their order are as they were)."""
        self.query_text = text
        order = self.ordered(self._runs, resort=False)
        if order != self._order:
            self._set_order(order)

    def _set_order(self, order: list[str]) -> None:
        """New rows: the cursor stays on its run, or goes to the top while its run is not shown
        (and back to it when it is shown again: a filter being typed, then cleared)."""
        if self._kept is None or self._kept not in self._runs:
            self._kept = self.current_run_id
        self._order = order
        self._index = {rid: i for i, rid in enumerate(order)}
        if self._kept in self._index:
            self.cursor_row = self._index[self._kept]
        else:
            self.cursor_row = 0
            self.scroll_to(y=0, animate=False, immediate=True)
        self._layout(force=True)
        self._scroll_cursor_into_view()
        self._note_highlight()

    def _row(self, rid: str, now: float) -> tuple:
        run = self._runs[rid]
        members = self._groups.get(rid)
        if members and len(members) > 1:
            members = [self._runs.get(m["id"], m) for m in members]
            cells = group_cells(members, rid in self.selected, now, self.window)
        else:
            cells = row_cells(run, rid in self.selected, now, self.window)
        if self._extra:     # a folded group's seeds share their params: the first run's
            cells += tuple(config_cell(self._reader(key)(run)) for key in self._cell_keys[len(COLUMN_KEYS):])
        return cells

    def _cells_of(self, rid: str) -> tuple:
        """A row's cells, formatted when first asked for (then kept until its run changes)."""
        cells = self._cells.get(rid)
        if cells is None:
            cells = self._cells[rid] = self._row(rid, self.clock())
            if self._natural:
                self._measure(cells)
        return cells

    def group_of(self, rid: str) -> list[str]:
        """The run ids a row stands for (a folded group's seeds, else the run)."""
        return [m["id"] for m in self._groups.get(rid, [])] or [rid]

    def tick(self) -> None:
        """Refresh the cells that move with the clock (elapsed of active runs)."""
        now = self.clock()
        in_view = {self._order[row] for row in self._rows_in_view()}
        repaint = False
        for rid in list(self._cells):
            run = self._runs.get(rid)
            if not (run and not run.get("ended_at") and run.get("started_at") and run.get("state") != "paused"):
                continue
            if rid not in in_view:
                del self._cells[rid]     # formatted again when it comes into view
                continue
            cells = self._row(rid, now)
            if cells != self._cells[rid]:
                self._cells[rid] = cells
                self._measure(cells)
                repaint = True
        if self._grew:
            self._layout()
        if repaint:
            self.refresh()

    def resort(self) -> None:
        """Order and format every row again (sort, fold or window changed)."""
        self._cells.clear()
        self._set_order(self.ordered(self._runs))

    def select_run(self, run_id: str) -> bool:
        if run_id in self._index:
            self.move_cursor(row=self._index[run_id])
            return True
        return False

    # -- cursor ------------------------------------------------------------------
    def move_cursor(self, *, row: int, animate: bool = False, scroll: bool = True) -> None:
        """Put the cursor on ``row`` (clamped to the rows) and keep it in view, as DataTable does."""
        row = max(0, min(row, len(self._order) - 1))
        if row != self.cursor_row:
            self.cursor_row = row
            self.refresh()
            scroll = True
        self._kept = self.current_run_id
        if scroll:
            self._scroll_cursor_into_view(animate)
        self._note_highlight()

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        region = Region(int(self.scroll_x), self.cursor_row + 1, max(1, self.size.width), 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(1, 0, 0, 0), force=True)

    def _note_highlight(self) -> None:
        rid = self.current_run_id
        if rid != self._highlighted:
            self._highlighted = rid
            if rid is not None:
                self.post_message(self.RowHighlighted(self, self.cursor_row, rid))

    def _set_hover(self, row: int | None, shown: bool) -> None:
        if (row, shown) != (self._hover_row, self._show_hover):
            self._hover_row, self._show_hover = row, shown
            self.refresh()

    # -- rendering ---------------------------------------------------------------
    def render_lines(self, crop: Region) -> list[Strip]:
        frame = (self.size.width, int(self.scroll_x), self.rich_style, self.get_pseudo_class_state())
        if frame != self._frame:          # focus, theme, width or sideways scroll: every line changes
            self._frame = frame
            self._line_cache.clear()
            self._styles.clear()
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        if y == 0:
            return self._header_line(width, base)
        row = y - 1 + int(self.scroll_y)
        if row >= len(self._order):
            return Strip.blank(width, base)
        rid = self._order[row]
        cells = self._cells_of(rid)
        if self._grew and not self._layout_pending:
            self._layout_pending = True
            self.call_later(self._layout)
        cursor = row == self.cursor_row
        hover = self._show_hover and row == self._hover_row
        key = (rid, cursor, hover)
        cached = self._line_cache.get(key)
        if cached is not None and cached[0] is cells:
            return cached[1]
        if len(self._line_cache) > 1000:
            self._line_cache.clear()
        strip = self._row_line(row, cells, base, cursor, hover, width)
        self._line_cache[key] = (cells, strip)
        return strip

    def _header_line(self, width: int, base: Style) -> Strip:
        style = self.get_component_styles("datatable--header").rich_style
        headers = self._headers()
        pad = " " * CELL_PADDING
        segments = [Segment(pad + Cell(headers[key]).fitted(w) + pad, style + self._meta(-1, column))
                    for column, (key, w) in enumerate(self._widths.items())]
        segments.append(Segment(" " * max(0, width - self._table_width), style + self._meta(-1, -1)))
        return self._crop(segments, width, base)

    def _style(self, base: Style, cursor: bool, hover: bool, cell_style: str | None) -> Style:
        """A cell's style as DataTable makes it: the cursor's (and hover's) colours over the cell's own;
        ``cell_style`` None: the padding and the room right of the table. Cached until the frame changes."""
        key = (cursor, hover, cell_style)
        style = self._styles.get(key)
        if style is None:
            component = Style()
            if hover:
                component += self.get_component_rich_style("datatable--hover")
            if cursor:
                component += self.get_component_rich_style("datatable--cursor")
            if cell_style is None:
                style = base + component
            else:
                style = base + component + Cell("", cell_style).rich_style + Style.from_color(color=component.color)
            self._styles[key] = style
        return style

    def _meta(self, row: int, column: int) -> Style:
        """Where a cell is, in its segments' style, as DataTable marks its cells (a terminal
        draws cells of different marks as different runs of text; snapshots compare them)."""
        meta = self._metas.get((row, column))
        if meta is None:
            if len(self._metas) > 10_000:
                self._metas.clear()
            meta = self._metas[(row, column)] = Style.from_meta(
                {"row": row, "column": column} if column >= 0 else {"row": row, "column": 0, "out_of_bounds": True})
        return meta

    def _row_line(self, row: int, cells: tuple, base: Style, cursor: bool, hover: bool, width: int) -> Strip:
        pad = " " * CELL_PADDING
        pad_style = self._style(base, cursor, hover, "")
        segments = []
        index = self._cell_index
        for column, (key, w) in enumerate(self._widths.items()):
            cell = cells[index[key]]
            meta = self._meta(row, column)
            segments += [Segment(pad, pad_style + meta),
                         Segment(cell.fitted(w), self._style(base, cursor, hover, cell.style) + meta),
                         Segment(pad, pad_style + meta)]
        segments.append(Segment(" " * max(0, width - self._table_width),
                                self._style(base, cursor, hover, None) + self._meta(row, -1)))
        return self._crop(segments, width, base)

    def _crop(self, segments: list[Segment], width: int, base: Style) -> Strip:
        scroll_x = int(self.scroll_x)
        return Strip(segments).crop(scroll_x, scroll_x + width).adjust_cell_length(width, base).simplify()

    # -- mouse -------------------------------------------------------------------
    def _row_under(self, event: events.MouseEvent) -> int | None:
        """The row under the mouse (-1: the header), None below the last row."""
        offset = event.get_content_offset(self)
        if offset is None:
            return None
        if offset.y == 0:
            return -1
        row = offset.y - 1 + int(self.scroll_y)
        return row if row < len(self._order) else None

    def _on_mouse_move(self, event: events.MouseMove) -> None:
        row = self._row_under(event)
        self._set_hover(row if row is not None and row >= 0 else None, True)

    def _on_leave(self, event: events.Leave) -> None:
        self._set_hover(self._hover_row, False)

    async def _on_click(self, event: events.Click) -> None:
        """A click puts the cursor on the row; a click on the cursor's row opens it."""
        row = self._row_under(event)
        if row is None or row < 0:
            return
        event.stop()
        if row == self.cursor_row:
            self.action_select_cursor()
        else:
            self.move_cursor(row=row)

    # -- actions -------------------------------------------------------------
    def action_cursor_down(self) -> None:
        self._set_hover(self._hover_row, False)
        self.move_cursor(row=self.cursor_row + 1)

    def action_cursor_up(self) -> None:
        self._set_hover(self._hover_row, False)
        self.move_cursor(row=self.cursor_row - 1)

    def action_scroll_top(self) -> None:
        self._set_hover(self._hover_row, False)
        self.move_cursor(row=0)

    def action_scroll_bottom(self) -> None:
        self._set_hover(self._hover_row, False)
        self.move_cursor(row=len(self._order) - 1)

    def action_scroll_home(self) -> None:
        self.scroll_x = 0

    def action_scroll_end(self) -> None:
        self.scroll_x = self.max_scroll_x

    def action_page_down(self) -> None:
        """A page down: the view and the cursor move by the rows on screen."""
        self._set_hover(self._hover_row, False)
        height = self.scrollable_content_region.height - 1
        self.scroll_relative(y=height, animate=False, force=True)
        self.move_cursor(row=self.cursor_row + height, scroll=False)

    def action_page_up(self) -> None:
        self._set_hover(self._hover_row, False)
        height = self.scrollable_content_region.height - 1
        self.scroll_relative(y=-height, animate=False)
        self.move_cursor(row=self.cursor_row - height, scroll=False)

    def action_select_cursor(self) -> None:
        rid = self.current_run_id
        if rid is not None:
            self.post_message(self.RowSelected(self, self.cursor_row, rid))

    def action_toggle_select(self) -> None:
        rid = self.current_run_id
        if rid is None:
            return
        if rid in self.selected:
            self.selected.discard(rid)
        else:
            self.selected.add(rid)
        self._cells.pop(rid, None)
        self.refresh()
        # the cursor stays: `space j space c` compares the two rows the user saw marked
        self.post_message(self.SelectionChanged(self, set(self.selected)))

    def select_shown(self) -> None:
        """Mark every row shown (the filter's runs: a query's, to compare or report on)."""
        for rid in self._order:
            self._cells.pop(rid, None)
        self.selected = set(self._order)
        self.refresh()
        self.post_message(self.SelectionChanged(self, set(self.selected)))

    def unselect_all(self) -> None:
        for rid in self.selected:
            self._cells.pop(rid, None)
        self.selected.clear()
        self.refresh()
        self.post_message(self.SelectionChanged(self, set()))
