"""The runs screen: every run of the home in a table (the app's first screen)."""
from __future__ import annotations

from rich.markup import escape
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Input, Static

from mosaic_tui import fmt
from mosaic_tui.messages import ConnectionChanged, RunsChanged
from mosaic_tui.runs_model import SORT_KEYS
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.runs_table import RunsTable


def detail_text(run: dict | None, now: float, window: int) -> Text:
    """name, mode, state, the mean and best returns, ETA, elapsed and, for a failed run, its whole reason."""
    if run is None:
        return Text("")
    text = Text()
    text.append(str(run.get("name", "?")), style="bold")
    if fmt.mode_mark(run):
        text.append(f" {fmt.mode_mark(run)}", style="bold cyan")
    state = run.get("state", "?")
    text.append("  ")
    text.append(fmt.queue_label(run) or state, style=fmt.STATE_STYLES.get(state, ""))
    job = fmt.job_text(run, now)   # a cluster run: its job, node and wall time left
    if job:
        text.append(f"  {job}", style="cyan")
    s = run.get("summary") or {}
    text.append(f"  {fmt.num(s.get('steps'))}/{fmt.num(s.get('total_steps'))} steps {fmt.progress_text(run)}")
    text.append(f"  return {fmt.num(fmt.smoothed_return(run, window))} (avg{window})")
    best, step = fmt.best_return(run)
    if best is not None:
        text.append(f"  best {fmt.num(best)} at step {fmt.num(step)}")
    left = fmt.eta(run)
    if left is not None:
        text.append(f"  ETA {fmt.duration(left)}")
    text.append(f"  elapsed {fmt.duration(fmt.elapsed(run, now))}")
    if run.get("tags"):
        text.append("  " + " ".join(f"#{t}" for t in run["tags"]), style="cyan")
    if run.get("note"):
        text.append(f"\n{run['note']}", style="italic")
    reason = fmt.failure_reason(run)
    if reason:
        text.append(f"\nfailed: {reason}" if state == "failed" else f"\n{state}: {reason}", style="bold red")
    return text


class RunsScreen(Screen):
    """name, worker, algo, env, state, progress, steps, steps/s, mean return, best, ETA, elapsed, sparkline;
    under the table, the highlighted run's detail line (a failed run's whole reason)."""

    DEFAULT_CSS = """
    RunsScreen #filter {
        display: none;
        height: 3;
    }
    RunsScreen.-filtering #filter {
        display: block;
    }
    RunsScreen #empty {
        display: none;
        padding: 1 2;
        color: $text-muted;
    }
    RunsScreen.-empty #empty {
        display: block;
    }
    RunsScreen #detail {
        height: auto;
        max-height: 6;
        padding: 0 1;
        background: $panel;
    }
    RunsScreen #status {
        height: 1;
        padding: 0 1;
        color: $text-muted;
    }
    """

    BINDINGS = [
        Binding("enter", "open", "Open", id="runs.open"),
        Binding("n", "new", "New", id="runs.new"),
        Binding("N", "new_sweep", "New sweep", show=False, id="runs.new_sweep"),
        Binding("e", "clone", "Clone+edit", id="runs.clone"),
        Binding("c", "compare", "Compare", id="runs.compare"),
        Binding("A", "select_shown", "Select shown", show=False, id="runs.select_shown"),
        Binding("slash", "filter", "Filter", id="runs.filter"),
        Binding("s", "sort", "Sort", id="runs.sort"),
        Binding("r", "reverse", "Reverse", show=False, id="runs.reverse"),
        Binding("a", "window", "Avg window", show=False, id="runs.window"),
        Binding("p", "pause", "Pause/resume", id="runs.pause"),
        Binding("x", "cancel", "Cancel", id="runs.cancel"),
        Binding("z", "stop", "Stop/continue", show=False, id="runs.stop"),
        Binding("D", "delete", "Delete", id="runs.delete"),
        Binding("w", "workers", "Workers", id="runs.workers"),
        Binding("P", "play", "Play", show=False, id="runs.play"),
        Binding("number_sign", "edit('tags')", "Tags", show=False, id="runs.tags"),
        Binding("o", "edit('note')", "Note", show=False, id="runs.note"),
        Binding("f", "fold", "Fold seeds", show=False, id="runs.fold"),
        Binding("S", "sweep", "Sweep", show=False, id="runs.sweep"),
        Binding("C", "columns", "Columns", show=False, id="runs.columns"),
        Binding("escape", "back", "Clear", show=False, id="runs.back"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._pending: set[str] = set()
        self._stale = False             # runs changed while another screen was on top
        self._detail_plain = ""
        self._counted: tuple[tuple | None, dict[str, int]] = (None, {})

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield ConnectionBanner()
        yield Input(placeholder="filter runs: words of name, worker, algo, env, state, note; tag:NAME; or a query: "
                                "lr < 3e-4 and state = succeeded (enter: keep, esc: clear)",
                    id="filter")
        yield RunsTable(self.app.clock, self.app.return_window, id="runs")
        yield Static("No runs yet. Press n to start one, or submit with `mosaic submit`.", id="empty")
        yield Static("", id="detail", markup=False)
        yield Static("", id="status")
        yield KeyBar()

    @property
    def table(self) -> RunsTable:
        return self.query_one(RunsTable)

    def on_mount(self) -> None:
        state = self.app.ui_state
        table = self.table
        columns = state.get("columns")
        if isinstance(columns, list):
            table.set_columns([key for key in columns if isinstance(key, str) and key])
        if state.get("sort") in SORT_KEYS or (state.get("sort") in table.columns):
            table.sort_key = state["sort"]
        table.sort_reverse = bool(state.get("reverse", True))
        table.fold = bool(state.get("fold", False))
        self.query_one("#filter", Input).cursor_blink = self.app.cursor_blink
        self.refresh_runs(None)
        self.set_interval(1.0, self._tick, name="elapsed")
        table.focus()

    def _tick(self) -> None:
        """Once a second: the run records that changed meanwhile and the clocks, in one repaint."""
        if self.app.screen is not self:
            return
        pending, self._pending = self._pending, set()
        if pending:
            self.refresh_runs(pending)
        self.table.tick()
        self._update_detail()

    # -- data ------------------------------------------------------------------
    def refresh_runs(self, changed: set[str] | None) -> None:
        link = self.app.link
        table = self.table
        table.set_runs(link.runs, changed)
        self.set_class(link.loaded and not link.runs, "-empty")
        self._update_title()
        self._update_detail()

    def _update_detail(self) -> None:
        """The highlighted run under the table: what its row cannot show (the best's step, a failure's reason)."""
        rid = self.table.current_run_id
        run = self.app.link.runs.get(rid) if rid else None
        text = detail_text(run, self.app.clock(), self.table.window)
        if text.plain != self._detail_plain:     # a Static's update lays the screen out again
            self._detail_plain = text.plain
            self.query_one("#detail", Static).update(text)

    def _state_counts(self) -> dict[str, int]:
        """Runs by state, counted again only when the run list changed (not for each filter letter)."""
        link = self.app.link
        key = (link.rev, len(link.runs))
        if key != self._counted[0]:
            counts: dict[str, int] = {}
            for run in link.runs.values():
                counts[run["state"]] = counts.get(run["state"], 0) + 1
            self._counted = (key, counts)
        return self._counted[1]

    def _update_title(self) -> None:
        link = self.app.link
        counts = self._state_counts()
        active = sum(counts.get(s, 0) for s in ("running", "starting", "paused"))
        shown = self.table.row_count
        parts = [f"mosaic  {self.app.home.root}", fmt.plural(len(link.runs), "run"), f"{active} active"]
        if shown != len(link.runs):
            parts.append(f"{shown} shown")
        if not link.connected and (link.attempts or link.error or not link.loaded):
            parts.append("connecting..." if not link.loaded else "offline")
        self.query_one(TitleBar).update("  ·  ".join(parts))
        sel = self.table.selected
        arrow = "↓" if self.table.sort_reverse else "↑"
        status = ""
        error = self.table.filter.error if self.table.query_text else None
        if error is not None:   # first, so that a narrow terminal clips the hints, not the error
            status = f"[red]query {escape(str(error))}[/red]   "
        status += f"sort: {self.table.sort_key} {arrow}"
        if self.table.grouped_by_env:
            status += " (grouped by env: returns of different envs are not ranked together)"
        status += f"   avg{self.table.window}: mean of the last {self.table.window} returns (a: change)"
        if self.table.fold:
            status += "   seeds folded (f)"
        if self.table.query_text:
            # typed half-way or wrong (the error leads the line): the rows are those of the last whole text
            status += f"   filter: {escape(repr(self.table.query_text))}"
        if sel:
            status += f"   {len(sel)} selected (c: compare, x: cancel, D: delete, esc: clear)"
        self.query_one("#status", Static).update(status)

    def on_runs_changed(self, message: RunsChanged) -> None:
        link = self.app.link
        table = self.table
        if self.app.screen is not self:
            # Not looked at: catch up in full when we are shown again. A
            # covered screen that repaints makes Textual repaint the screen on
            # top of it too (a run's Frames tab: its whole image, every time).
            self._stale = True
            return
        structural = bool(message.deleted) or not link.runs or any(not table.has_row(r) for r in message.changed)
        if structural:
            # rows come or go: now, in full
            self._pending.clear()
            self.refresh_runs(None if message.deleted else message.changed)
        else:
            # values only: folded into the once-a-second repaint (a busy run
            # sends its summary twice a second; ten of them must not cost a
            # full table render each)
            self._pending |= message.changed

    def on_screen_resume(self) -> None:
        if self._stale:
            self._stale = False
            self._pending.clear()
            self.refresh_runs(None)

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        self.query_one(ConnectionBanner).refresh_text()
        self._update_title()

    def on_runs_table_selection_changed(self, message: RunsTable.SelectionChanged) -> None:
        self._update_title()

    def on_runs_table_row_selected(self, event: RunsTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def on_runs_table_row_highlighted(self, event: RunsTable.RowHighlighted) -> None:
        rid = self.table.current_run_id
        if rid:
            self.app.ui_state["run"] = rid
        self._update_detail()

    # -- filter ------------------------------------------------------------------
    def action_filter(self) -> None:
        self.add_class("-filtering")
        box = self.query_one("#filter", Input)
        box.value = self.table.query_text
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            # the filter reads the records: the changes held for the once-a-second repaint first
            # (a run tagged a moment ago is found by the tag typed now)
            pending, self._pending = self._pending, set()
            if pending:
                self.refresh_runs(pending)
            self.table.set_query(event.value)
            self._update_title()
            self._update_detail()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self.remove_class("-filtering")
            self.table.focus()

    def action_back(self) -> None:
        if self.has_class("-filtering") or self.table.query_text:
            self.table.set_query("")
            self.query_one("#filter", Input).value = ""
            self.remove_class("-filtering")
            self._update_title()
            self._update_detail()
            self.table.focus()
        elif self.table.selected:
            self.table.unselect_all()

    # -- sorting -------------------------------------------------------------------
    def action_sort(self) -> None:
        """The next sort: the run's columns (SORT_KEYS), then the config-key columns shown."""
        table = self.table
        keys = list(SORT_KEYS) + table.config_columns
        i = keys.index(table.sort_key) if table.sort_key in keys else 0
        table.sort_key = keys[(i + 1) % len(keys)]
        table.resort()
        self.app.ui_state["sort"] = table.sort_key
        self._update_title()

    def action_window(self) -> None:
        """The next return window (5, 10, 20, 50, 100 episodes); remembered in ui-state.json."""
        windows = fmt.RETURN_WINDOWS
        current = self.table.window
        window = next((w for w in windows if w > current), windows[0])
        self.app.set_return_window(window)
        self.table.set_window(window)
        self._update_title()
        self._update_detail()

    def action_reverse(self) -> None:
        self.table.sort_reverse = not self.table.sort_reverse
        self.table.resort()
        self.app.ui_state["reverse"] = self.table.sort_reverse
        self._update_title()

    # -- navigation and run actions ---------------------------------------------
    def _targets(self) -> list[str]:
        """The selected rows' runs, or the highlighted row's; a folded group's row is all its seeds."""
        table = self.table
        if table.selected:
            rows = [r for r in table.visible_ids if r in table.selected]
        else:
            rows = [table.current_run_id] if table.current_run_id else []
        return [rid for row in rows for rid in table.group_of(row)]

    def action_fold(self) -> None:
        """Fold each sweep trial's seeds into one row (mean ± std of their returns), or unfold."""
        self.table.fold = not self.table.fold
        self.app.ui_state["fold"] = self.table.fold
        self.table.resort()
        self._update_title()

    def action_columns(self) -> None:
        """Choose the config-key columns (params.lr...); remembered in ui-state.json."""
        from mosaic_tui.runs_model import column_choices
        from mosaic_tui.screens.columns import ColumnsScreen
        table = self.table
        choices = column_choices(table.filter.keys(self.app.link.runs), table.columns)

        def chosen(keys: list[str] | None) -> None:
            if keys is None:
                return
            table.set_columns(keys)
            self.app.ui_state["columns"] = table.columns
            self._update_title()
        self.app.push_screen(ColumnsScreen(choices, table.columns), chosen)

    def action_sweep(self) -> None:
        rid = self.table.current_run_id
        run = self.app.link.runs.get(rid) if rid else None
        if not run or not run.get("sweep"):
            self.notify("not a sweep's run", severity="warning")
            return
        from mosaic_tui.screens.sweep import SweepScreen
        self.app.push_screen(SweepScreen(run["sweep"]))

    def action_open(self) -> None:
        rid = self.table.current_run_id
        if rid:
            self.app.open_run(rid)

    def action_new(self) -> None:
        self.app.open_new_run()

    def action_new_sweep(self) -> None:
        """A sweep based on the highlighted run's config."""
        from mosaic_tui.screens.new_sweep import NewSweepScreen
        rid = self.table.current_run_id
        self.app.push_screen(NewSweepScreen(self.app.link.runs.get(rid) if rid else None))

    def action_clone(self) -> None:
        rid = self.table.current_run_id
        if rid:
            self.app.act_on_runs("clone", [rid])

    def action_select_shown(self) -> None:
        """Mark every run the filter shows (then `c` compares them, and `R` there reports on them)."""
        self.table.select_shown()

    def action_compare(self) -> None:
        targets = self._targets()
        if not targets:
            self.notify("select runs with space first", severity="warning")
            return
        self.app.open_compare(targets)

    def action_edit(self, what: str) -> None:
        self.app.edit_annotation(self.table.current_run_id, what)

    def action_play(self) -> None:
        """The highlighted run's Play screen if it is a human play still going, else a new play
        (asking which env, the highlighted run's offered)."""
        from daemon import protocol as P
        from mosaic_tui.screens.play import is_play
        rid = self.table.current_run_id
        run = self.app.link.runs.get(rid) if rid else None
        if is_play(run) and run["state"] not in P.FINAL_STATES:
            self.app.open_play(run["id"])
        else:
            self.app.new_play(run["env"] if run and run.get("env") not in (None, "none") else "")

    def action_workers(self) -> None:
        self.app.open_workers()

    def action_pause(self) -> None:
        self.app.act_on_runs("toggle_pause", self._targets())

    def action_cancel(self) -> None:
        self.app.act_on_runs("cancel", self._targets())

    def action_stop(self) -> None:
        self.app.act_on_runs("toggle_stop", self._targets())

    def action_delete(self) -> None:
        self.app.act_on_runs("delete", self._targets())

    def ui_place(self) -> dict:
        return {"screen": "runs", "run": self.table.current_run_id}
