"""Observations as text (workers/sdk/llm): what the LLM is told, checked against the real envs."""
from __future__ import annotations

import pytest

from workers.sdk.llm import families
from workers.sdk.llm.textenv import as_text, make_text_env


def test_babyai_egocentric_description_follows_the_agent():
    env = make_text_env("MiniGrid-Empty-5x5-v0")  # agent at (1, 1) facing east, goal at (3, 3)
    first = env.reset(seed=0)["long_term_context"].splitlines()
    assert first == ["a wall 3 steps forward", "a wall 1 step left", "a wall 3 steps right",
                     "a goal 2 steps right and 2 steps forward"]
    env.step("go forward")
    env.step("go forward")
    turned = env.step("turn right")[0]["long_term_context"].splitlines()
    # facing south now: the goal stands between the agent and the wall ahead, so no wall is told
    assert turned == ["a wall 1 step left", "a wall 3 steps right", "a goal 2 steps forward"]
    env.step("go forward")
    _, reward, terminated, _ = env.step("go forward")
    assert reward > 0 and terminated and env.progression() == 1.0 and env.success()
    assert env.render().shape[2] == 3
    doorkey = make_text_env("MiniGrid-DoorKey-5x5-v0")
    assert doorkey.reset(seed=1)["long_term_context"].splitlines() == [
        "a wall 1 step right", "a locked yellow door 1 step left", "a yellow key 1 step forward"]
    doorkey.step("pick up")
    assert doorkey.step("turn left")[0]["long_term_context"].startswith("You carry a yellow key")
    assert "Your goal is to use the key to open the door" in doorkey.instruction_prompt()
    assert doorkey.actions == ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


def test_crafter_and_nethack_text_sections():
    crafter = make_text_env("crafter")
    text = crafter.reset(seed=1)
    assert text["long_term_context"].startswith("You see:\n- ") and "at your front." in text["long_term_context"]
    assert text["short_term_context"].startswith("Your status:\n- health: 9/9")
    assert crafter.default_action == "Noop" and len(crafter.actions) == 17
    minihack = make_text_env("MiniHack-Room-5x5-v0")
    text = minihack.reset(seed=1)
    for section in ("message:", "language observation:", "cursor:", "map:"):
        assert section in text["long_term_context"]
    assert "stairs down" in text["long_term_context"] and "@" in text["long_term_context"]
    assert text["short_term_context"].startswith("inventory:")
    assert minihack.actions[:4] == ["north", "east", "south", "west"] and minihack.default_action == "north"
    assert "You are an agent playing MiniHack" in minihack.instruction_prompt()
    minihack.close()


def test_every_registered_id_belongs_to_its_family():
    for name in families.available_families():
        ids = families.registered_envs(name)
        assert ids and all(families.family_of(i) == name for i in ids), name
    assert "BabyAI-GoToRedBall-v0" in families.registered_envs("babyai")
    assert "MiniHack-Room-5x5-v0" in families.registered_envs("minihack")
    with pytest.raises(ValueError, match="no text family"):
        make_text_env("CartPole-v1")
    assert as_text({"long_term_context": "a\n", "short_term_context": ""}) == "a"


def test_balrog_babyai_frames_reach_fastlane(tmp_path, monkeypatch):
    """The random baseline on BabyAI with frames on: the env's RGB frames land in the run's FastLane ring."""
    import os

    from workers.balrog_worker import WORKER
    from workers.balrog_worker.runtime import BalrogRun
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    from workers.sdk.frames import env_frames
    from workers.sdk.telemetry import Emitter

    monkeypatch.chdir(tmp_path)
    run_id = f"TESTBALROGFRAMES{os.getpid()}"
    config = WORKER.validate({"worker": "balrog", "algo": "random", "env": "BabyAI-GoToRedBallGrey-v0",
                              "run_id": run_id, "frames": {"enabled": True, "fps": 120, "max_dim": 64},
                              "params": {"episodes": 1, "max_steps_per_episode": 3}})
    frames = env_frames(config)
    with open(tmp_path / "events.jsonl", "wb") as out:
        emitter = Emitter(out.fileno())
        try:
            results = BalrogRun(config, emitter, frames).run()
            emitter.close()
            with FrameReader(run_id) as reader:
                assert reader.attach() and reader.head >= 1
                n, image = reader.latest()
                assert image.shape[2] == 3 and max(image.shape[:2]) <= 64 and image.any()
        finally:
            frames.close()
            layout.cleanup(run_id)
    assert results["episodes"][0]["steps"] == 3 and results["totals"]["steps"] == 3
