"""How soon a key's frame is painted (docs/play.md, bench/bench_play_terminal.py), and what the
Play screen's panel says: the text boxes repaint only the rows that changed, the key bar only
when its keys change, a played key's frame is looked for at once (not at the next poll), a
relayed frame is drawn when it arrives, the header's frame number comes with its frame; after
an episode the panel shows that episode's return, and the real-time timing line is whole at 120
columns. The frames come from a real FastLane ring; the daemon's answers from a fake link."""
from __future__ import annotations

import re
import time

import numpy as np
import pytest
from rich.text import Text
from textual.app import App

from daemon import protocol as P
from tests.app.conftest import make_app, screen_text, wait_until

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def picture(n: int) -> np.ndarray:
    frame = np.zeros((40, 60, 3), dtype=np.uint8)
    frame[:, : 6 * (n % 10 + 1)] = (200, 40 * (n % 6), 10)
    return frame


def shown_frame(app) -> int | None:
    """The frame number the screen shows (the painted header, not the view's state)."""
    found = re.search(r"frame (\d+)", screen_text(app))
    return int(found.group(1)) if found else None


async def test_a_text_box_repaints_only_the_rows_that_changed():
    from mosaic_tui.widgets.text_line import TextLine

    class Counted(TextLine):
        def __init__(self, **kwargs) -> None:
            super().__init__(**kwargs)
            self.drawn: list[int] = []

        def render_line(self, y: int):
            self.drawn.append(y)
            return super().render_line(y)

    class Box(App):
        CSS = "Counted { height: 10; }"

        def compose(self):
            yield Counted(id="box")

    app = Box()
    async with app.run_test(size=(40, 12)) as pilot:
        box = app.query_one(Counted)
        box.update(Text("\n".join(f"row {i}" for i in range(10))))
        await pilot.pause()
        assert "row 9" in screen_text(app)
        box.drawn.clear()
        box.update(Text("\n".join("ROW 4" if i == 4 else f"row {i}" for i in range(10))))
        await pilot.pause()
        assert "ROW 4" in screen_text(app) and "row 4" not in screen_text(app)
        assert box.drawn == [4]
        # a longer text: the rows from the first difference on
        box.drawn.clear()
        box.update(Text("\n".join(["row 0", "row 1", "two", "lines"])))
        await pilot.pause()
        assert sorted(set(box.drawn)) == list(range(2, 10))
        assert screen_text(app).splitlines()[:5] == ["row 0" + " " * 35, "row 1" + " " * 35, "two" + " " * 37,
                                                     "lines" + " " * 35, " " * 40]


async def test_the_key_bar_repaints_only_when_its_keys_change():
    from textual.binding import Binding

    from mosaic_tui.widgets.key_bar import KeyBar

    class Counted(KeyBar):
        renders = 0

        def render(self):
            Counted.renders += 1
            return super().render()

    class Bar(App):
        BINDINGS = [Binding("x", "bell", "Ring")]

        def compose(self):
            yield Counted()

    app = Bar()
    async with app.run_test(size=(60, 5)) as pilot:
        await pilot.pause()
        assert "Ring" in screen_text(app)
        before = Counted.renders
        for _ in range(5):
            app.screen.refresh_bindings()      # what Textual does after many a key
            await pilot.pause()
        assert Counted.renders == before


async def test_the_header_shows_a_new_frames_number_with_the_frame(home, writer):
    from mosaic_tui.widgets.frames_view import FramesView
    from tests.app.conftest import fixed_runs
    from tests.app.test_frames import frames_run
    writer.publish(picture(1))
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
        app.link.flush()
        await pilot.pause()
        app.open_run(writer.run_id, tab="frames")
        await wait_until(pilot, lambda: shown_frame(app) == 1, what="frame 1 in the header")
        view = app.screen.query_one(FramesView)
        view._header_at = time.monotonic() + 3600     # no fps-only header update from here on
        n = writer.publish(picture(2))
        await wait_until(pilot, lambda: view.current is not None and view.current[0] == n, what="frame 2 polled")
        await pilot.pause()
        assert shown_frame(app) == n


def fake_play(writer, acts: list) -> object:
    """The daemon's answers to the Play screen: the seat, no events, and each act steps a
    pretend env that publishes its next frame into the real ring."""
    async def call(method, **params):
        if method == P.EVENTS:
            return {"run": params["run"], "from": 0, "next": 0, "end": 0, "events": []}
        if method == P.SEAT:
            return {"seat": "0", "held_by": "mosaic-app#1"}
        if method == P.ACT:
            acts.append(params["action"])
            writer.publish(picture(len(acts) + 1))
            return {"sent": True}
        raise P.RPCError(P.METHOD_NOT_FOUND, method)
    return call


async def test_a_played_keys_frame_is_looked_for_at_once_not_at_the_next_poll(home, writer):
    from mosaic_tui.screens.play import PlayFrames, PlayScreen
    writer.publish(picture(1))
    acts: list = []
    app = make_app(home)
    app.link.call = fake_play(writer, acts)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlayScreen(writer.run_id))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, what="the seat")
        screen = app.screen
        screen.absorb([{"type": "keymap", "seat": "0", "actions": ["left", "right"],
                        "keys": {"left": 0, "right": 1}, "mode": "turn"}])
        frames = screen.query_one(PlayFrames)
        await wait_until(pilot, lambda: shown_frame(app) == 1, what="frame 1")
        frames._timer.pause()          # the regular poll stopped: only the key can bring the frame in
        for n, key in enumerate(["left", "right", "left"], start=2):
            await pilot.press(key)
            await wait_until(pilot, lambda: shown_frame(app) == n, timeout=10, what=f"frame {n}, the key's")
        assert acts == [0, 1, 0]


async def test_a_relayed_frame_is_drawn_when_it_arrives(home):
    from mosaic_tui.screens.play import PlayFrames
    from mosaic_tui.widgets.frames_view import SOURCE_RELAY, FramesView

    assert PlayFrames.relay_fps == 30 and FramesView.relay_fps < PlayFrames.relay_fps

    class One(App):
        def compose(self):
            yield FramesView("01M8RELAYPAINT0000000000000", relay=True, poll_fps=0.01)

    app = One()
    async with app.run_test(size=(80, 30)) as pilot:
        view = app.query_one(FramesView)
        view.source = SOURCE_RELAY
        for n in (7, 8):
            view._on_relayed(P.encode_frame(view.run_id, 0, n, picture(n)))
            await wait_until(pilot, lambda: shown_frame(app) == n, timeout=10, what=f"relayed frame {n} drawn")


async def test_the_panel_shows_the_ended_episodes_return_and_the_whole_timing_line(home):
    from mosaic_tui.screens.play import PlayScreen

    async def call(method, **params):
        if method == P.EVENTS:
            return {"run": params["run"], "from": 0, "next": 0, "end": 0, "events": []}
        if method == P.SEAT:
            return {"seat": "0", "held_by": "mosaic-app#1"}
        return {"sent": True}
    app = make_app(home)
    app.link.call = call
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlayScreen("01M8PANELTEST0000000000000"))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, what="the seat")
        screen = app.screen
        screen.absorb([
            {"type": "keymap", "seat": "0", "actions": ["NOOP", "FIRE", "RIGHT", "LEFT"],
             "keys": {"n": 0, "space": 1, "right": 2, "left": 3}, "mode": "realtime", "rate": 15.0,
             "hold_ms": 150, "noop": None},
            {"type": "play", "step": 0, "episode": 0, "seat": "0", "waiting": True, "held_by": "mosaic-app#1",
             "return": 0.0},
            {"type": "play", "step": 1, "episode": 0, "seat": "0", "action": 2, "action_name": "RIGHT",
             "reward": 0.5, "waiting": True, "held_by": "mosaic-app#1", "return": 0.5},
        ])
        await wait_until(pilot, lambda: "reward 0.5  return 0.5" in screen_text(app), what="the first step")
        # the step that ends the episode, the episode, then the next episode's start (return 0)
        screen.absorb([
            {"type": "play", "step": 2, "episode": 0, "seat": "0", "action": 2, "action_name": "RIGHT",
             "reward": 0.455, "waiting": False, "ended": True, "held_by": "mosaic-app#1", "return": 0.955},
            {"type": "episode", "step": 2, "return": 0.955, "length": 2},
            {"type": "play", "step": 2, "episode": 1, "seat": "0", "waiting": True, "held_by": "mosaic-app#1",
             "return": 0.0},
        ])
        await wait_until(pilot, lambda: "episode 1" in screen_text(app), what="the next episode")
        text = screen_text(app)
        assert "reward 0.455  return 0.955" in text, text
        # its first step: the new episode's return
        screen.absorb([{"type": "play", "step": 3, "episode": 1, "seat": "0", "action": 3, "action_name": "LEFT",
                        "reward": 0.0, "waiting": True, "held_by": "mosaic-app#1", "return": 0.0}])
        await wait_until(pilot, lambda: "reward 0  return 0" in screen_text(app), what="the new episode's step")
        # the timing line, whole: nothing cut at 120 columns
        line = screen.state.timing_line()
        assert line.startswith("realtime 15 steps/s; no key: the env waits") and "a key holds 150 ms" in line
        flat = re.sub(r"\s+", " ", screen_text(app))
        assert line in flat, (line, screen_text(app))
        assert "…" not in "\n".join(row for row in screen_text(app).splitlines() if "realtime" in row)


async def test_after_a_key_the_panel_is_painted_after_the_keys_frame(home, writer):
    """The panel (the key lit) painted first held the frame's paint back to Textual's next update."""
    from mosaic_tui.screens.play import PlayScreen
    from mosaic_tui.widgets.text_line import TextLine

    def lit(screen) -> bool:
        return any("reverse" in str(span.style) for span in screen.query_one("#play-side", TextLine).text.spans)

    writer.publish(picture(1))
    acts: list = []
    app = make_app(home)
    app.link.call = fake_play(writer, acts)
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlayScreen(writer.run_id))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, what="the seat")
        screen = app.screen
        screen.absorb([{"type": "keymap", "seat": "0", "actions": ["left", "right"],
                        "keys": {"left": 0, "right": 1}, "mode": "turn"}])
        await wait_until(pilot, lambda: shown_frame(app) == 1, what="frame 1")
        screen.press("left", 0)
        assert not lit(screen)              # not before the frame
        await wait_until(pilot, lambda: shown_frame(app) == 2 and lit(screen), timeout=10,
                         what="the frame, then the key lit")
        assert acts == [0]


async def test_a_new_frames_header_is_asked_to_repaint_before_its_canvas(home, writer, monkeypatch):
    """Both repaints then reach the screen together and are painted at once (asked after the
    canvas', the number came a screen update later)."""
    from mosaic_tui.widgets.frames_view import FrameCanvas, FramesHeader, FramesView
    from tests.app.conftest import fixed_runs
    from tests.app.test_frames import frames_run
    asked: list[str] = []
    for cls, name in ((FrameCanvas, "canvas"), (FramesHeader, "header")):
        original = cls.refresh

        def refresh(self, *args, _original=original, _name=name, **kwargs):
            asked.append(_name)
            return _original(self, *args, **kwargs)
        monkeypatch.setattr(cls, "refresh", refresh)
    writer.publish(picture(1))
    app = make_app(home)
    async with app.run_test(size=SIZE) as pilot:
        app.link.load(fixed_runs() + [frames_run(writer.run_id)], rev=100)
        app.link.flush()
        await pilot.pause()
        app.open_run(writer.run_id, tab="frames")
        await wait_until(pilot, lambda: shown_frame(app) == 1, what="frame 1")
        view = app.screen.query_one(FramesView)
        view._timer.pause()
        await pilot.pause()
        asked.clear()
        n = writer.publish(picture(2))
        view.poll()
        assert view.current[0] == n
        assert "header" in asked and "canvas" in asked and asked.index("header") < asked.index("canvas"), asked
        await wait_until(pilot, lambda: shown_frame(app) == n, what="the new frame's number")
