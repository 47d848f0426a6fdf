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
        from mosaic_tui.screens.run import RunScreen
        from mosaic_tui.widgets.transcript_view import TranscriptView
        from textual.widgets import TabbedContent
        app.push_screen(RunScreen(run["id"]))
        await pilot.pause()
        await pilot.press("6")
        assert app.screen.query_one(TabbedContent).active == "transcript"
        view = app.screen.query_one(TranscriptView)
        await wait_until(pilot, lambda: len(view.widgets) == 3, what="three entries")
        text = screen_text(app)
        assert "3 calls" in text and "0 invalid" in text
        assert "step 1  agent 0  … streaming" in text and "tur" in text
        # the reply grows, then the final event replaces the partial one, in place
        append(events, llm_step(1, partial=True, reply="turn ri"))
        await wait_until(pilot, lambda: "turn ri" in view.widgets[(1, "0")].plain, what="the streamed reply")
        append(events, llm_step(1, reply="dance", action=None, valid=False, played="go forward"),
               llm_step(1, partial=True, reply="late"))  # a late partial never replaces the record
        await wait_until(pilot, lambda: "INVALID" in view.widgets[(1, "0")].plain, what="the final event")
        assert "late" not in view.widgets[(1, "0")].plain and "(played go forward)" in view.widgets[(1, "0")].plain
        assert len(view.widgets) == 3 and "1 invalid" in screen_text(app)
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
        assert view.agent == "0" and set(view.widgets) == {(0, "0"), (1, "0")}
        await pilot.press("a")
        assert view.agent == "1" and set(view.widgets) == {(0, "1")}
        await pilot.press("a")
        assert view.agent is None and len(view.widgets) == 3
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
        from mosaic_tui.screens.run import RunScreen
        from textual.widgets import TabbedContent
        app.push_screen(RunScreen(run["id"]))
        await pilot.pause()
        await pilot.press("6")
        assert app.screen.query_one(TabbedContent).active == "metrics"
        assert not app.screen.query_one(TabbedContent).query("#transcript")
