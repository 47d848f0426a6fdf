"""A real-time play from the Play screen (real daemon, real app): Breakout at 15 steps a second,
keys pressed for ~4 s. The frames advance, the actions the env took (moves.jsonl) are the keys'
actions as mapped (NOOP between them: no key is the env's no-op), and the env stepped at the set
rate within 10%."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from daemon import protocol as P
from tests.app.conftest import screen_text, wait_until
from tests.app.test_play_screen import live_app, moves, open_play
from tests.helpers import wait_for

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

RATE = 15.0
KEYS = ["space", "right", "left"] * 4 + ["right", "left"]     # FIRE, RIGHT, LEFT on Breakout's default map
PRESS_EVERY = 0.3      # seconds: each press holds hold_ms (150 ms: ~2 steps), then NOOP until the next


def collapsed(actions: list[int], noop: int) -> list[int]:
    """The non-noop actions, each run of one action once."""
    out: list[int] = []
    for a in actions:
        if a != noop and (not out or out[-1] != a):
            out.append(a)
    return out


def is_subsequence(small: list[int], big: list[int]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


async def test_breakout_in_real_time_steps_at_the_rate_with_the_keys_actions(home, mosaic):
    # the worker at the daemon's priority: this measures the play's clock, not a busy machine's nice 10
    home.root.mkdir(parents=True, exist_ok=True)
    home.settings_file.write_text(json.dumps({"worker_nice": 0}))
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.submit("--worker", "human", "--algo", "play", "--env", "ALE/Breakout-v5", "--seed", "0",
                           "--set", "mode=realtime", "--set", f"rate={RATE}", "--set", "episodes=0",
                           "--name", "breakout")
    app = live_app(home)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_play(pilot, app, run_id)
            await wait_until(pilot, lambda: screen.holding and screen.state.keymap is not None, timeout=120,
                             what="the seat and the key map")
            keymap = screen.state.keymap
            assert keymap["mode"] == "realtime" and keymap["actions"] == ["NOOP", "FIRE", "RIGHT", "LEFT"]
            assert "realtime 15 steps/s" in screen_text(app) and "key release: hold timeout" in screen_text(app)
            frames = screen.query_one("PlayFrames")
            await wait_until(pilot, lambda: frames.current is not None, timeout=30, what="a frame")
            first_frame = frames.current[0]
            before = len(moves(home, run_id))
            started = time.monotonic()
            for i, key in enumerate(KEYS):
                await pilot.press(key)
                await asyncio.sleep(max(0.0, started + PRESS_EVERY * (i + 1) - time.monotonic()))
            await asyncio.sleep(PRESS_EVERY)
            await pilot.pause(0.3)
            last_frame = frames.current[0]
            assert screen.acts_sent == len(KEYS)
    finally:
        mosaic.run("cancel", run_id)
    taken = moves(home, run_id)[before:]
    mapped = [keymap["keys"][k] for k in KEYS]
    noop = keymap["noop"]
    assert noop == 0 and mapped[:3] == [1, 2, 3]
    played = collapsed([m["action"] for m in taken], noop)
    # every action taken is a key's, in the keys' order (one whose hold fell between two ticks may be missing)
    assert set(played) == {1, 2, 3}, played
    assert is_subsequence(played, collapsed(mapped, noop)), (played, mapped)
    assert len(played) >= len(mapped) - 2, (played, mapped)
    # the env's clock: steps over the time they took
    span = taken[-1]["t"] - taken[0]["t"]
    rate = (len(taken) - 1) / span
    assert span > 3.5 and abs(rate - RATE) <= 0.1 * RATE, (rate, len(taken), span)
    assert last_frame - first_frame >= 0.8 * RATE * span, (first_frame, last_frame)
    wait_for(lambda: mosaic.show(run_id)["state"] == P.CANCELLED, 30, 0.2, what="the play cancelled")
