"""The Transcript tab (Pilot): an LLM run's calls per step and agent, streamed, searchable, exported."""
from __future__ import annotations

import json

import pytest

from daemon import protocol as P
from daemon.home import EVENTS_FILE
from tests.app.conftest import _run, make_app, screen_text, wait_until
from workers.sdk import telemetry as tm

SIZE = (120, 40)
pytestmark = pytest.mark.anyio


def llm_step(step, agent="0", partial=False, **fields):
    base = {"step": step, "agent": agent, "reply": fields.pop("reply", "go forward")}
    if partial:
        return tm.make_event(tm.LLM_STEP, partial=True, **base)
    event = {"episode": 0, "observation": f"a wall {step + 2} steps forward", "prompt": f"User: rules\n\nUser: obs {step}",
             "action": "go forward", "valid": True, "tokens_in": 100 + step, "tokens_out": 2, "latency_s": 0.25,
             "error": None, **fields}
    return tm.make_event(tm.LLM_STEP, **base, **event)


def append(path, *events):
    with open(path, "ab") as f:
        for event in events:
            f.write(tm.encode(event))


async def test_transcript_streams_searches_filters_agents_and_exports(home):
    run = _run(1, "llm-run", P.RUNNING, 3, 1.0, worker="balrog", algo="naive")
    run_dir = home.run_dir(run["id"])
    run_dir.mkdir(parents=True, exist_ok=True)
    events = run_dir / EVENTS_FILE
    append(events, tm.make_event(tm.SCALAR, tag="x", value=1.0, step=0),
           llm_step(0), llm_step(0, agent="1", reply="turn left", action="turn left"),
           llm_step(1, partial=True, reply="tur"))
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load([run], rev=1)
        await pilot.pause()
        from textual.widgets import TabbedContent

        from mosaic_tui.screens.run import RunScreen
        from mosaic_tui.widgets.transcript_view import TranscriptView
        app.push_screen(RunScreen(run["id"]))
        await pilot.pause()
        await pilot.press("6")
        assert app.screen.query_one(TabbedContent).active == "transcript"
        view = app.screen.query_one(TranscriptView)
        await wait_until(pilot, lambda: len(view.shown) == 3, what="three entries")
        text = screen_text(app)
        assert "3 calls" in text and "0 invalid" in text
        assert "step 1  agent 0  … streaming" in text and "tur" in text
        # the reply grows, then the final event replaces the partial one, in place
        append(events, llm_step(1, partial=True, reply="turn ri"))
        await wait_until(pilot, lambda: "turn ri" in view.plain((1, "0")), what="the streamed reply")
        append(events, llm_step(1, reply="dance", action=None, valid=False, played="go forward"),
               llm_step(1, partial=True, reply="late"))  # a late partial never replaces the record
        await wait_until(pilot, lambda: "INVALID" in view.plain((1, "0")), what="the final event")
        assert "late" not in view.plain((1, "0")) and "(played go forward)" in view.plain((1, "0"))
        assert len(view.shown) == 3 and "1 invalid" in screen_text(app)
        # search: / finds the entry, n goes on, esc clears
        await pilot.press("slash")
        for ch in "wall 3":
            await pilot.press("space" if ch == " " else ch)
        await pilot.press("enter")
        assert view.match == (1, "0") and "search 'wall 3' at step 1 agent 0" in screen_text(app)
        await pilot.press("slash", "ctrl+u", *"go", "space", *"forward", "enter")
        assert view.match == (0, "0")                  # the action of agent 0's first step
        await pilot.press("n")
        assert view.match == (1, "0")                  # the action played in place of "dance"
        await pilot.press("n")
        assert view.match == (0, "0")                  # round again
        await pilot.press("N")
        assert view.match == (1, "0")
        await pilot.press("escape")
        assert view.search_text == "" and app.screen.query_one(TabbedContent).active == "transcript"
        # one agent at a time
        await pilot.press("a")
        assert view.agent == "0" and view.shown == [(0, "0"), (1, "0")]
        await pilot.press("a")
        assert view.agent == "1" and view.shown == [(0, "1")]
        await pilot.press("a")
        assert view.agent is None and len(view.shown) == 3
        # export: every final entry, JSONL and Markdown
        await pilot.press("e")
        await wait_until(pilot, lambda: view.last_export is not None, what="the export")
        lines = [json.loads(line) for line in open(view.last_export + ".jsonl")]
        assert [(e["step"], e["agent"], e.get("valid")) for e in lines] == [(0, "0", True), (0, "1", True),
                                                                           (1, "0", False)]
        markdown = open(view.last_export + ".md").read()
        assert "# Transcript of llm-run" in markdown and "User: obs 1" in markdown and "dance" in markdown


async def test_no_transcript_tab_for_a_run_without_llm_calls(home):
    run = _run(1, "rl-run", P.RUNNING, 3, 1.0)
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load([run], rev=1)
        await pilot.pause()
        from textual.widgets import TabbedContent

        from mosaic_tui.screens.run import RunScreen
        app.push_screen(RunScreen(run["id"]))
        await pilot.pause()
        await pilot.press("6")
        assert app.screen.query_one(TabbedContent).active == "metrics"
        assert not app.screen.query_one(TabbedContent).query("#transcript")


async def test_a_long_transcript_is_drawn_as_lines_and_searched(home):
    """3000 calls of 4 agents: the tab holds no widget per entry (only the rows on screen are drawn), shows
    the end (following), finds a step anywhere, steps through matches, filters an agent, folds long lines."""
    run = _run(1, "long-llm", P.SUCCEEDED, 750, 1.0, worker="mosaic_llm", algo="play")
    run_dir = home.run_dir(run["id"])
    run_dir.mkdir(parents=True, exist_ok=True)
    long_line = "a long line " + "x" * 300 + " ends here"
    steps = []
    for i in range(3000):
        fields = {"observation": f"obs {i}\nview line {i}", "prompt": "System: the rules\n" * 10 + f"User: obs {i}"}
        if i % 1000 == 7:  # three invalid replies, far apart
            fields.update(reply="dance", action=None, valid=False, played="noop")
        if i == 2999:
            fields["observation"] = long_line
        steps.append(llm_step(i // 4, agent=str(i % 4), **fields))
    append(run_dir / EVENTS_FILE, *steps)
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load([run], rev=1)
        await pilot.pause()
        from mosaic_tui.screens.run import RunScreen
        from mosaic_tui.widgets.transcript_view import TranscriptView
        app.push_screen(RunScreen(run["id"]))
        await pilot.pause()
        await pilot.press("6")
        view = app.screen.query_one(TranscriptView)
        await wait_until(pilot, lambda: "3000 calls" in screen_text(app), what="the whole transcript read")
        assert len(view.shown) == 3000 and "3 invalid" in screen_text(app)
        # lines, not widgets: the bar, the search box, the list (and the list's scrollbars)
        assert len(list(view.walk_children())) < 10
        # following: the last entry is on screen, its 300-character line folded at the view's width
        await wait_until(pilot, lambda: "step 749  agent 3" in screen_text(app), what="the end of the transcript")
        text = screen_text(app)
        assert "a long line xxx" in text and "xxx ends here" in text
        assert max(len(line.rstrip()) for line in text.splitlines()) <= SIZE[0]
        # every character of it is on screen: none folded under the scrollbar ("output an acti")
        lines = text.splitlines()
        first = next(i for i, line in enumerate(lines) if "a long line" in line)
        last = next(i for i, line in enumerate(lines) if "ends here" in line)
        assert sum(line.count("x") for line in lines[first:last + 1]) == 300, "\n".join(lines[first:last + 1])
        # search anywhere: the match's entry is drawn at the top
        await pilot.press("slash", *"obs", "space", *"1234", "enter")
        assert view.match == (308, "2") and "at step 308 agent 2" in screen_text(app)
        rows = [line.strip() for line in screen_text(app).splitlines()]
        at = rows.index(next(r for r in rows if r.startswith("step 308  agent 2")))
        assert rows[at + 1:at + 3] == ["observation:", "obs 1234"]
        # matches in order, round and back
        await pilot.press("slash", "ctrl+u", *"dance", "enter")
        assert view.match == (1, "3") and "INVALID: - (played noop)" in screen_text(app)
        await pilot.press("n")
        assert view.match == (251, "3") and "step 251  agent 3" in screen_text(app)
        await pilot.press("n", "n")
        assert view.match == (1, "3")
        await pilot.press("N")
        assert view.match == (501, "3")
        # one agent: a quarter of the entries, the search still finds within them
        await pilot.press("a")
        assert view.agent == "0" and len(view.shown) == 750 and all(agent == "0" for _, agent in view.shown)
        await pilot.press("slash", "ctrl+u", *"obs", "space", *"2996", "enter")
        assert view.match == (749, "0") and "step 749  agent 0" in screen_text(app)
        # whole prompts: the entry's text grows, the match stays found
        await pilot.press("p")
        assert view.plain((749, "0")).count("System: the rules") == 10


def test_rows_fold_at_the_width_under_their_indent():
    """The row count the layout uses is the rows drawn: every character once, in order, for ASCII and wide
    characters; continuation rows indented like their line."""
    from rich.cells import cell_len

    from mosaic_tui.widgets.transcript_view import fold, indent_of, rows_of
    for width in (5, 11, 80):
        for line in ("", "    " + "x" * 200, "  " + "é漢字" * 40, "x" * width, "  " + "y" * (width - 2)):
            spans = fold(line, width)
            assert len(spans) == rows_of(line, width)
            assert "".join(line[a:b] for a, b in spans) == line
            indent = indent_of(line, width)
            assert all(cell_len(line[a:b]) <= (width if i == 0 else width - indent) for i, (a, b) in enumerate(spans))
    assert fold("    " + "x" * 20, 10) == [(0, 10), (10, 16), (16, 22), (22, 24)]


async def test_no_text_under_the_scrollbar_when_it_appears_as_the_transcript_grows():
    """A transcript that fits, then grows past the view: the scrollbar that appears narrows the text's
    room, and the rows fold again (the last two characters of each row went under it)."""
    from textual.app import App

    from mosaic_tui.widgets.transcript_view import TranscriptLines

    class One(App):
        def compose(self):
            yield TranscriptLines()

    long_line = "a long line " + "x" * 300 + " ends here"
    app = One()
    async with app.run_test(size=(80, 20)) as pilot:
        view = app.query_one(TranscriptLines)
        first = {"observation": long_line, "prompt": "p", "reply": "r", "step": 0, "agent": "0"}
        view.reset([(0, "0")], {(0, "0"): first})
        await pilot.pause()
        assert view._width == view.text_width and not view.show_vertical_scrollbar
        for step in range(1, 40):        # live calls arrive: past the view's height
            view.set_entry((step, "0"), {**first, "observation": f"obs {step}"}, add=True)
        view.relayout()
        await pilot.pause()
        await pilot.pause()
        assert view.show_vertical_scrollbar
        assert view._width == view.text_width, "the rows still fold at the width without the scrollbar"
        view.stick_to_end = False
        view.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        rows = [view.render_line(y).text for y in range(view.size.height)]
        shown = "".join(r[:view.scrollable_content_region.width] for r in rows)
        assert shown.count("x") == 300
