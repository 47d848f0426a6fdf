"""The runs table with thousands of runs: it formats only the rows in view, and still does
everything the small table does (keys, mouse, filter, fold, select, cursor kept on its run)."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from tests.app.conftest import _run, make_app, screen_text

SIZE = (120, 40)
N = 3000
SWEEP_FROM = N - 30          # the 30 newest runs: a sweep of 10 trials x 3 seeds
LONG_NAME = "scale-0000-oldest"     # wider than the rows first in view

pytestmark = pytest.mark.anyio


def run_id(i: int) -> str:
    return f"01SCALE{i:019d}"


def many_runs() -> list[dict]:
    runs = []
    for i in range(N):
        state = (P.SUCCEEDED, P.FAILED, P.CANCELLED)[i % 3]
        name = LONG_NAME if i == 0 else f"scale-{i:04d}"
        if i >= SWEEP_FROM:
            trial, seed = divmod(i - SWEEP_FROM, 3)
            name = f"trial{trial}-s{seed}"
        run = _run(i, name, state, 10000, 100.0, returns=[float(i % 50), float(i % 7), float(i % 11)])
        run["id"] = run_id(i)
        run["tags"] = ["ten"] if i % 10 == 0 else []
        if i >= SWEEP_FROM:
            run["sweep"], run["trial"] = "sw1", trial
        runs.append(run)
    return runs


def table(app):
    from mosaic_tui.widgets.runs_table import RunsTable
    return app.screen_stack[0].query_one(RunsTable)


def drawn_rows(app) -> list[str]:
    """The table's lines on screen, the header first."""
    t = table(app)
    lines = screen_text(app).splitlines()
    top = t.region.y
    return lines[top:top + t.region.height]


async def test_thousands_of_runs_scroll_filter_fold_and_select(home):
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load(many_runs(), rev=N + 100)
        app.link.flush()
        await pilot.pause()
        await pilot.pause()
        t = table(app)
        assert t.row_count == N and t.visible_ids[0] == run_id(N - 1)      # newest first
        in_view = t.region.height - 1
        # only the rows on screen were formatted, not three thousand
        assert 0 < len(t._cells) <= in_view + 1

        # keys: j/k, G/g, page down
        await pilot.press("j", "j", "k")
        assert t.current_run_id == run_id(N - 2)
        await pilot.press("G")
        assert t.current_run_id == run_id(0)
        rows = drawn_rows(app)
        # the last row is drawn, its long name in full: the name column widened to it
        assert LONG_NAME in rows[-1] and "succeeded" in rows[-1]
        assert LONG_NAME in str(app.screen.query_one("#detail").render())
        await pilot.press("g")
        assert t.current_run_id == run_id(N - 1) and "trial9-s2" in drawn_rows(app)[1]
        await pilot.press("pagedown")
        assert t.cursor_row == in_view
        cursor_name = app.link.runs[t.current_run_id]["name"]
        assert any(cursor_name in row for row in drawn_rows(app)[1:])
        assert "trial9-s2" not in "".join(drawn_rows(app))                   # scrolled by a page

        # the mouse: a click puts the cursor on a row, a second click opens it
        await pilot.press("g")
        await pilot.click(type(t), offset=(5, 3))                            # the header, then rows 0, 1, 2
        assert t.cursor_row == 2 and t.current_run_id == run_id(N - 3)
        await pilot.click(type(t), offset=(5, 3))
        await pilot.pause()
        assert getattr(app.screen, "run_id", None) == run_id(N - 3)
        app.pop_screen()
        await pilot.pause()

        # the filter keeps the cursor on its run when that run is still shown
        assert t.select_run(run_id(1500))
        await pilot.press("slash", *"tag:ten", "enter")
        assert t.row_count == N // 10
        assert t.current_run_id == run_id(1500)
        assert any("scale-1500" in row for row in drawn_rows(app)[1:])
        assert "300 shown" in str(app.screen.query_one("#title").render())
        await pilot.press("escape")                                          # clears the filter
        assert t.row_count == N and t.current_run_id == run_id(1500)
        # a run tagged meanwhile (a new record of it) is found by the next filter, also before
        # the once-a-second repaint that values-only changes wait for (its timer held here)
        repaint = next(timer for timer in app.screen._timers if timer.name == "elapsed")
        repaint.pause()
        tagged = dict(app.link.runs[run_id(1501)], tags=["ten"], rev=N + 150)
        app.link.load([tagged], rev=N + 150)
        app.link.flush()
        await pilot.pause()
        await pilot.press("slash", *"tag:ten", "enter")
        assert t.row_count == N // 10 + 1 and run_id(1501) in t.visible_ids
        repaint.resume()
        await pilot.press("escape")

        # a new run arrives at the top: the cursor stays on its run
        newest = _run(N, "fresh", P.SUCCEEDED, 10000, 100.0)
        newest["id"] = run_id(N)
        app.link.load([newest], rev=N + 200)
        app.link.flush()
        await pilot.pause()
        await pilot.pause()
        assert t.visible_ids[0] == run_id(N) and t.current_run_id == run_id(1500)

        # select with space: the mark is drawn on the row
        await pilot.press("space")
        assert t.selected == {run_id(1500)}
        assert any(row.split()[:2] == ["●", "scale-1500"] for row in drawn_rows(app))

        # fold the sweep's seeds: one row a trial, mean ± std of their returns
        await pilot.press("g", "f")
        assert t.row_count == N + 1 - 30 + 10
        assert t.group_of(run_id(SWEEP_FROM)) == [run_id(SWEEP_FROM + k) for k in range(3)]
        assert any("trial0 ×3" in row and "±" in row for row in drawn_rows(app)), drawn_rows(app)[:14]
        await pilot.press("f")
        assert t.row_count == N + 1


async def test_the_run_list_is_kept_out_of_full_collections_while_the_app_runs(home):
    """Ten thousand run records are ~10^5 objects: the cyclic collector's full passes over them
    stalled the table for ~100 ms every few hundred keys. The app freezes the heap at the first run
    list (gc.freeze) and unfreezes it when it ends."""
    import gc
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        assert gc.get_freeze_count() == 0
        app.link.load(many_runs()[:100], rev=200)
        app.link.flush()
        await pilot.pause()
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
