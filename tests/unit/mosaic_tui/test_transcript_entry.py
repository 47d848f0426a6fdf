"""mosaic_tui/transcript.py: an entry's head says which episode a step belongs to, and its step in it
(episodes played in parallel interleave their steps in the run)."""
from __future__ import annotations

from mosaic_tui.transcript import entry_text, step_matches

STEP = {"type": "llm_step", "step": 7, "agent": "0", "episode": 2, "episode_step": 1, "observation": "a wall",
        "prompt": "p", "reply": "turn left", "action": "turn left", "valid": True, "tokens_in": 30, "tokens_out": 2}


def test_the_head_names_the_episode_and_the_step_in_it():
    head = entry_text(STEP).splitlines()[0]
    assert head.startswith("step 7  agent 0  episode 2 step 1  valid: turn left")


def test_a_step_of_an_older_run_without_its_episode_step():
    old = {k: v for k, v in STEP.items() if k != "episode_step"}
    assert entry_text(old).splitlines()[0].startswith("step 7  agent 0  episode 2  valid: turn left")


def test_the_episode_filter():
    assert step_matches(STEP, episode=2) and not step_matches(STEP, episode=1)
