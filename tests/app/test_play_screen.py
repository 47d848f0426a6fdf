"""The Play screen against the real daemon and a real human run (docs/play.md): the key map
beside the frames, the seat taken, the keys up, up, right, up, up walk MiniGrid-Empty-5x5 (seed 0)
to its goal; the app is told which other client holds the seat and watches; a key that plays nothing is
ignored; the user's `play` keys in keymap.json are laid over the worker's."""
from __future__ import annotations

import json
import re

import pytest

from daemon import protocol as P
from tests.app.conftest import make_app, screen_text, wait_until
from tests.helpers import wait_for

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
ENV = "MiniGrid-Empty-5x5-v0"
TO_THE_GOAL = ["up", "up", "right", "up", "up"]     # forward, forward, turn right, forward, forward


def live_app(home, **kwargs):
    from mosaic_tui.app import MosaicApp
    return MosaicApp(home, restore=False, remember=False, cursor_blink=False, **kwargs)


def submit_play(mosaic, *more: str, episodes: int = 1) -> str:
    return mosaic.submit("--worker", "human", "--algo", "play", "--env", ENV, "--seed", "0",
                         "--set", f"episodes={episodes}", *more)


def moves(home, run_id: str) -> list[dict]:
    path = home.run_dir(run_id) / "moves.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def episode_returns(mosaic, run_id: str) -> list[float]:
    rows = mosaic.run("metrics", run_id, "--csv", "--metric", "episode/return", check=True).stdout.splitlines()
    return [float(row.split(",")[2]) for row in rows[1:]]   # tag,step,value,wall_time


async def open_play(pilot, app, run_id: str):
    from mosaic_tui.screens.play import PlayScreen
    await wait_until(pilot, lambda: run_id in app.link.runs, what="the play listed")
    app.open_play(run_id)
    await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen), what="the Play screen")
    return app.screen


async def test_the_play_screen_takes_the_seat_shows_the_keys_and_walks_to_the_goal(daemon, mosaic):
    run_id = submit_play(mosaic, "--name", "walk")
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(pilot, app, run_id)
        await wait_until(pilot, lambda: screen.holding and screen.state.keymap is not None, timeout=60,
                         what="the seat taken and the key map come")
        await wait_until(pilot, lambda: "you hold the seat" in screen_text(app), what="the seat shown")
        text = screen_text(app)
        for action, key in (("forward", "↑"), ("left", "←"), ("right", "→"), ("pickup", "p"), ("toggle", "space")):
            assert re.search(rf"{re.escape(key)}[^\n]*\b{action}\b", text), (action, text)
        assert "turn: one step a key" in text
        await wait_until(pilot, lambda: "objective: get to the green goal square" in screen_text(app),
                         what="MiniGrid's mission in the log")
        # a key that plays nothing: ignored, the key map lit up; no act is sent
        await pilot.press("x")
        await wait_until(pilot, lambda: "x plays nothing here" in screen_text(app), what="the unknown key said")
        assert "keys: press one of these" in screen_text(app)
        assert screen.acts_sent == 0
        await wait_until(pilot, lambda: re.search(r"frame \d+", screen_text(app)), what="the first frame")
        for key in TO_THE_GOAL:
            await pilot.press(key)
        await wait_until(pilot, lambda: mosaic.show(run_id)["state"] == P.SUCCEEDED, timeout=60,
                         what="the play to succeed")
        await wait_until(pilot, lambda: "the play ended: succeeded" in screen_text(app), timeout=30,
                         what="the end shown")
        shown = screen_text(app)
        assert re.search(r"return 0\.\d+", shown), shown
        assert screen.acts_sent == 5
    assert [m["action"] for m in moves(daemon, run_id)] == [2, 2, 1, 2, 2]
    returns = episode_returns(mosaic, run_id)
    assert len(returns) == 1 and returns[0] > 0


async def test_a_second_client_is_told_who_holds_the_seat_and_the_app_watches(daemon, mosaic):
    """Another client (the protocol's, as a second app would) holds the seat: the app says who and
    watches its moves; when it leaves, ctrl+t takes the seat and the app finishes the episode."""
    from tests.helpers import connect
    from tests.workers.human_worker.test_human_worker import take_seat
    run_id = submit_play(mosaic, "--name", "seats")
    player = connect(daemon, name="player")
    try:
        holder = take_seat(player, run_id)["held_by"]
        app = live_app(daemon)
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_play(pilot, app, run_id)
            await wait_until(pilot, lambda: f"{holder} holds the seat: you watch" in screen_text(app), timeout=60,
                             what="the app told who holds the seat")
            assert not screen.holding
            # the watcher's keys play nothing: it says so and sends no act
            await pilot.press("up")
            await wait_until(pilot, lambda: "you watch" in str(screen.foot_text()), what="the watcher told")
            assert screen.acts_sent == 0
            # the holder's move shows on the app's screen
            player.call(P.ACT, run=run_id, seat="0", action=2)
            await wait_until(pilot, lambda: "last: forward" in screen_text(app), timeout=30,
                             what="the holder's move watched")
            # the holder leaves: nobody holds the seat; ctrl+t takes it
            player.close()
            await wait_until(pilot, lambda: "paused: nobody holds the seat" in screen_text(app), timeout=30,
                             what="the seat left")
            await pilot.press("ctrl+t")
            await wait_until(pilot, lambda: screen.holding, timeout=30, what="the app's seat")
            for key in TO_THE_GOAL[1:]:
                await pilot.press(key)
            await wait_until(pilot, lambda: mosaic.show(run_id)["state"] == P.SUCCEEDED, timeout=60,
                             what="the play finished from the app")
    finally:
        player.close()
    assert [m["action"] for m in moves(daemon, run_id)] == [2, 2, 1, 2, 2]
    assert episode_returns(mosaic, run_id)[0] > 0


async def test_the_users_play_keys_are_laid_over_the_workers(daemon, mosaic):
    """keymap.json's play section: per family (minigrid) and per env name (MiniGrid); null unbinds;
    an unknown action name is reported and skipped."""
    (daemon.root / "keymap.json").write_text(json.dumps({
        "runs.new": "n",
        "play": {"minigrid": {"k": "forward", "l": "right", "up": None},
                 "MiniGrid": {"j": "no such action"}}}))
    run_id = submit_play(mosaic, "--name", "remapped")
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        assert app.keymap_problems == []         # the play section is not a binding id
        screen = await open_play(pilot, app, run_id)
        await wait_until(pilot, lambda: screen.holding and screen.state.keymap is not None, timeout=60,
                         what="the seat and the key map")
        assert screen.keys["k"] == 2 and screen.keys["l"] == 1 and "up" not in screen.keys
        assert any("no such action" in p for p in screen.key_problems)
        await wait_until(pilot, lambda: re.search(r"k\s+forward", screen_text(app)), what="k shown for forward")
        await pilot.press("up")                  # unbound now: plays nothing
        await wait_until(pilot, lambda: "↑ plays nothing here" in screen_text(app), what="up ignored")
        for key in ["k", "k", "l", "k", "k"]:
            await pilot.press(key)
        await wait_until(pilot, lambda: mosaic.show(run_id)["state"] == P.SUCCEEDED, timeout=60,
                         what="the play to succeed")
    assert [m["action"] for m in moves(daemon, run_id)] == [2, 2, 1, 2, 2]


async def test_leaving_the_screen_leaves_the_seat_and_the_episode_waits(daemon, mosaic):
    run_id = submit_play(mosaic, "--name", "leaver", episodes=2)
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_play(pilot, app, run_id)
        await wait_until(pilot, lambda: screen.holding and screen.state.keymap is not None, timeout=60,
                         what="the seat")
        await pilot.press("up")
        await wait_until(pilot, lambda: len(moves(daemon, run_id)) == 1, timeout=30, what="one move")
        await pilot.press("escape")
        from mosaic_tui.screens.runs import RunsScreen
        await wait_until(pilot, lambda: isinstance(app.screen, RunsScreen), what="back on the runs")

        def left() -> bool:
            plays = [json.loads(line) for line in (daemon.run_dir(run_id) / "events.jsonl").read_text().splitlines()
                     if '"play"' in line]
            return bool(plays) and plays[-1].get("held_by", "x") is None
        await wait_until(pilot, left, timeout=30, what="the run told the seat is empty")
        assert mosaic.show(run_id)["state"] == P.RUNNING
        # P on its row opens the Play screen again and takes the seat back
        await wait_until(pilot, lambda: app.screen.table.select_run(run_id), what="the row")
        await pilot.press("P")
        from mosaic_tui.screens.play import PlayScreen
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, timeout=30,
                         what="the seat taken again")
        assert app.screen.state.last.get("step") == 1
    mosaic.run("cancel", run_id)
    wait_for(lambda: mosaic.show(run_id)["state"] in P.FINAL_STATES, 30, 0.2, what="cancelled")


async def test_a_typed_action_line_sends_the_text_and_shows_a_refusal_with_the_legal_moves(home, fake_daemon):
    """A text keymap (a chess move, a TextWorld command): no worker of ours types yet, so the
    screen is fed the events a text env writes; the typed line goes out as the act."""
    from mosaic_tui.screens.play import PlayScreen
    from tests.app.conftest import use_fake
    sent = []

    async def call(method, **params):
        if method == P.SEAT:
            return {"seat": "0", "held_by": "mosaic-app#1"}
        if method == P.ACT:
            sent.append(params["action"])
            return {"sent": True}
        if method == P.EVENTS:
            return {"run": params["run"], "from": 0, "next": 0, "end": 0, "events": []}
        return await fake_daemon.call(method, **params)
    app = make_app(home)
    use_fake(app, fake_daemon)
    app.link.call = call
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlayScreen("01M8TEXTPLAY00000000000000"))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding,
                         what="the seat")
        screen = app.screen
        screen.absorb([{"type": "keymap", "seat": "0", "actions": ["move"], "keys": {}, "mode": "turn",
                        "text": True},
                       {"type": "play", "step": 0, "episode": 0, "seat": "0", "waiting": True,
                        "held_by": "mosaic-app#1", "message": "White to move"}])
        await pilot.pause()
        assert screen.query_one("#play-text").has_focus
        await pilot.press(*"e2e5", "enter")
        await wait_until(pilot, lambda: sent == ["e2e5"], what="the typed move sent")
        screen.absorb([{"type": "play", "step": 0, "episode": 0, "seat": "0", "waiting": True, "refused": True,
                        "held_by": "mosaic-app#1", "message": "e2e5 is not a legal move",
                        "legal": ["e2e4", "d2d4", "g1f3"]}])
        await wait_until(pilot, lambda: "refused: e2e5 is not a legal move  legal: e2e4 d2d4 g1f3"
                         in screen_text(app), what="the refusal and the legal moves")


async def test_a_realtime_key_is_sent_with_its_hold_and_let_go_when_the_terminal_loses_focus(home, fake_daemon):
    """Textual reports no key releases: a real-time press carries hold_ms; the terminal losing focus
    and leaving the screen send null (the release), then the seat is left."""
    from mosaic_tui.screens.play import PlayScreen
    calls = []

    async def call(method, **params):
        if method == P.EVENTS:
            return {"run": params["run"], "from": 0, "next": 0, "end": 0, "events": []}
        calls.append((method, {k: v for k, v in params.items() if k not in ("run", "seat")}))
        if method == P.SEAT:
            return {"seat": "0", "held_by": "mosaic-app#1"}
        return {"sent": True}
    app = make_app(home)
    app.link.call = call
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(PlayScreen("01M8REALTIME00000000000000"))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, what="the seat")
        screen = app.screen
        screen.absorb([{"type": "keymap", "seat": "0", "actions": ["NOOP", "FIRE"], "keys": {"space": 1, "n": 0},
                        "mode": "realtime", "rate": 15.0, "hold_ms": 200, "noop": 0}])
        await pilot.press("space")
        await wait_until(pilot, lambda: (P.ACT, {"action": 1, "hold_ms": 200}) in calls, what="the press")
        assert "key release: hold timeout, a key holds 200 ms" in screen_text(app)
        app.app_focus = False
        await wait_until(pilot, lambda: (P.ACT, {"action": None}) in calls, what="the release on focus out")
        await pilot.press("escape")
        await wait_until(pilot, lambda: (P.SEAT, {"take": False}) in calls, what="the seat left")
    acts = [c for c in calls if c[0] == P.ACT]
    assert acts == [(P.ACT, {"action": 1, "hold_ms": 200}), (P.ACT, {"action": None}), (P.ACT, {"action": None})]


async def test_P_asks_which_env_starts_a_play_and_opens_its_screen(daemon, mosaic):
    from mosaic_tui.screens.play import PlayPrompt, PlayScreen
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.link.loaded, what="the run list")
        await pilot.press("P")
        await wait_until(pilot, lambda: isinstance(app.screen, PlayPrompt), what="the prompt")
        await pilot.press(*ENV, "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, timeout=60,
                         what="the new play's screen, its seat taken")
        run = mosaic.show(app.screen.run_id)
        assert run["worker"] == "human" and run["env"] == ENV and run["config"]["params"]["mode"] == "turn"
        await pilot.press("escape")
    mosaic.run("cancel", run["id"])


# what the human worker writes for textworld-coin (seed 0): its keymap, the game's first text, `look`,
# a way it cannot go, `take coin` (the episode's end) and the next episode's first text
TEXTWORLD_INTRO = ("Your objective is to retrieve the coin from the floor of the cellar.\n\n-= Cellar =-\nYou find "
                   "yourself in a cellar. An usual one. The room seems oddly familiar, as though it were only "
                   "superficially different from the other rooms in the building.\n\nThere is a coin on the "
                   "floor.\n\n -= Cellar =-0/1")
TEXTWORLD_LEGAL = ["examine coin", "inventory", "look", "take coin"]
TEXTWORLD_OBJECTIVE = "Your objective is to retrieve the coin from the floor of the cellar."


def textworld_events(held_by: str) -> list[list[dict]]:
    start = {"type": "play", "step": 0, "episode": 0, "seat": "0", "waiting": True, "held_by": held_by,
             "message": TEXTWORLD_INTRO, "legal": TEXTWORLD_LEGAL, "objective": TEXTWORLD_OBJECTIVE, "return": 0.0}
    return [
        [{"type": "keymap", "seat": "0", "actions": [], "keys": {}, "mode": "turn", "rate": 15.0, "hold_ms": 150,
          "noop": None, "frames": False, "text": True}],
        [start],
        [{"type": "play", "step": 1, "episode": 0, "seat": "0", "action": "look", "action_name": "look",
          "reward": 0.0, "waiting": True, "held_by": held_by, "ended": False, "legal": TEXTWORLD_LEGAL,
          "message": TEXTWORLD_INTRO.split("\n\n", 1)[1].replace("0/1", "0/2"), "return": 0.0}],
        [{"type": "play", "step": 2, "episode": 0, "seat": "0", "action": "take coin", "action_name": "take coin",
          "reward": 1.0, "waiting": False, "held_by": held_by, "ended": True,
          "legal": ["drop coin", "examine coin", "inventory", "look"],
          "message": "You pick up the coin from the ground.\n\nYour score has just gone up by one point.\n\n *** The "
                     "End ***\n\nYou scored 1 out of a possible 1, in 3 turns.", "return": 1.0},
         {"type": "episode", "step": 2, "length": 2, "return": 1.0},
         {**start, "step": 2, "episode": 1}],
    ]


async def test_a_text_game_shows_its_whole_text_objective_and_commands_with_a_scrollback(home, fake_daemon):
    """A TextWorld play (no frames, typed commands): before the first text the screen says the game is
    being made, not "your move"; then the log in the frames' place holds every text whole (the intro, `look`'s
    room, the episode's end) and the objective, the side lists the admissible commands, the timing line
    speaks of typed commands, and with the line focused the footer still offers the help and detach."""
    from mosaic_tui.screens.play import PlayLog, PlayScreen
    from tests.app.conftest import use_fake
    sent, pages = [], textworld_events("mosaic-app#1")

    async def call(method, **params):
        if method == P.SEAT:
            return {"seat": "0", "held_by": "mosaic-app#1"}
        if method == P.ACT:
            sent.append(params["action"])
            return {"sent": True}
        if method == P.EVENTS:
            return {"run": params["run"], "from": 0, "next": 0, "end": 0, "events": []}
        return await fake_daemon.call(method, **params)
    app = make_app(home)
    use_fake(app, fake_daemon)
    app.link.call = call
    async with app.run_test(size=(100, 40)) as pilot:       # a log narrower than RichLog's 78 columns
        app.push_screen(PlayScreen("01M8TEXTWORLD0000000000000"))
        await wait_until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.holding, what="the seat")
        screen = app.screen
        screen.absorb(pages[0])
        await pilot.pause()
        text = screen_text(app)
        assert "your move" not in text and "the env is starting its episode" in text, text
        assert "no frame yet" not in text and not screen.query_one("PlayFrames").display
        screen.absorb(pages[1])
        await wait_until(pilot, lambda: "There is a coin on the floor." in screen_text(app), what="the intro whole")
        text = screen_text(app)
        assert "your move" in text and "Your objective is to retrieve the coin" in text
        assert re.search(r"commands.*\n.*examine coin\s*\n.*inventory\s*\n.*look\s*\n.*take coin", text), text
        assert "turn: one step a typed command" in text and "one step a key" not in text
        assert screen.query_one("#play-text").has_focus
        assert re.search(r"f1\s+Keys", text) and re.search(r"f10\s+Detach", text), text
        await pilot.press(*"look", "enter")
        await wait_until(pilot, lambda: sent == ["look"], what="the command sent")
        screen.absorb(pages[2])
        screen.absorb(pages[3])
        await wait_until(pilot, lambda: "You scored 1 out of a possible 1" in screen_text(app), what="the end")
        lines = [str(line.text).rstrip() for line in screen.query_one(PlayLog).lines]
        said = "\n".join(lines)
        # every text in order, whole: the intro, the command and the room it shows, the end, the next episode
        order = ["-- episode 1 --", "Your objective is to retrieve", "There is a coin on the floor.", "> look",
                 "You find yourself in a cellar", "> take coin", "You pick up the coin", "*** The End ***",
                 "episode 1 ended at step 2: return 1", "-- episode 2 --", "There is a coin on the floor."]
        at = 0
        for part in order:
            found = said.find(part, at)
            assert found >= 0, (part, said)
            at = found + len(part)
        log = screen.query_one(PlayLog)
        assert log.max_scroll_y > 0                             # more than fits: a scrollback
        assert max(line.cell_length for line in log.lines) <= log.scrollable_content_region.width   # wrapped


async def test_a_play_that_fails_says_why_on_its_screen(daemon, mosaic):
    """A play whose worker fails before its env is made (a real failure: an address-space limit too
    small for its imports) shows the end and the reason, not "the key map comes when the env is made"."""
    run_id = submit_play(mosaic, "--memory-mb", "200", "--name", "starved")
    wait_for(lambda: mosaic.show(run_id)["state"] in P.FINAL_STATES, 60, 0.2, what="the play to fail")
    run = mosaic.show(run_id)
    assert run["state"] == P.FAILED, run
    why = run["reason"].splitlines()[0]
    app = live_app(daemon)
    async with app.run_test(size=SIZE) as pilot:
        await open_play(pilot, app, run_id)
        await wait_until(pilot, lambda: "the play ended: failed" in screen_text(app), what="the end shown")
        text = re.sub(r"\s+", " ", screen_text(app))
        assert why[:30] in text, (why, text)
        assert "the key map comes when the env is made" not in text
        assert "the play ended before its env was made" in text


@pytest.mark.long   # TextWorld compiles its game with Inform 7 first (tens of seconds on a busy machine)
async def test_a_textworld_play_in_the_app_shows_the_game_from_its_first_text(tmp_path, monkeypatch, home, mosaic):
    """The real TextWorld play (in a HOME of the test's own: what its tools write under ~ lands there)
    through the real daemon:
    the intro and the commands before any command is typed, then `look`'s room whole, then the end."""
    import importlib.util
    if importlib.util.find_spec("textworld") is None:
        pytest.skip("textworld is not installed")
    from mosaic_tui.screens.play import PlayLog
    monkeypatch.setenv("HOME", str(tmp_path))       # before the daemon starts: its runs inherit it
    run_id = mosaic.submit("--worker", "human", "--algo", "play", "--env", "textworld-coin", "--seed", "0",
                           "--set", "episodes=2", "--name", "tw")
    app = live_app(home)
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = await open_play(pilot, app, run_id)

            def logged() -> str:
                return "\n".join(str(line.text).rstrip() for log in screen.query(PlayLog) for line in log.lines)
            await wait_until(pilot, lambda: "There is a coin on the floor." in logged(), timeout=240,
                             what="the game's first text, before any command")
            text = screen_text(app)
            assert "take coin" in text and "no frame yet" not in text and "your move" in text, text
            await pilot.press(*"look", "enter")
            await wait_until(pilot, lambda: "> look" in logged() and logged().count("You find yourself") == 2,
                             timeout=60, what="look's room, whole")
            await pilot.press(*"take coin", "enter")
            await wait_until(pilot, lambda: "You pick up the coin" in logged() and "-- episode 2 --" in logged(),
                             timeout=60, what="the end and the next episode")
    finally:
        mosaic.run("cancel", run_id)
