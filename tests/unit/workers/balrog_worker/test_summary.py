"""BALROG's results layout (workers.balrog_worker.summary) against BALROG's own summariser."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.plugins.balrog_upstream import collect_and_summarize_results
from workers.balrog_worker import summary

AGENT = summary.agent_config("naive", {"max_text_history": 16, "max_cot_history": 1, "max_icl_history": 1000})
CLIENT = summary.client_config({"backend": "openai", "model": "m", "base_url": "http://x/v1", "temperature": 0.0,
                                "max_tokens": 8, "timeout_s": 60, "retries": 2, "api_key_env": "SOME_KEY"})


def record(episode: int, progression: float, steps: int, tokens: tuple[int, int] = (0, 0), **more) -> dict:
    return {"episode": episode, "seed": 7 + episode, "steps": steps, "episode_return": progression / 2,
            "success": progression == 1.0, "progression": progression, "tokens_in": tokens[0],
            "tokens_out": tokens[1], "done": True, "action_frequency": {"go forward": steps}, **more}


def close(ours, theirs) -> bool:
    """Equal, floats to the last bits (BALROG scales to percent at another point of the sum)."""
    if isinstance(ours, dict):
        return isinstance(theirs, dict) and ours.keys() == theirs.keys() and all(
            close(ours[k], theirs[k]) for k in ours)
    if isinstance(ours, float):
        return ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)
    return ours == theirs


def balrog_reference(tree, tmp_path) -> dict:
    """BALROG's summariser on the episode files alone (a fresh copy without our summaries)."""
    only_episodes = tmp_path / "reference"
    shutil.copytree(tree, only_episodes, ignore=shutil.ignore_patterns("*summary.json"))
    return collect_and_summarize_results(str(only_episodes)), only_episodes


def test_two_envs_of_several_tasks_summarised_as_balrog_does(tmp_path):
    """Two envs, three tasks, uneven progressions and tokens: each env's summary and the aggregate
    equal what BALROG's summariser makes of the same episode logs, and so do the files."""
    runs = {"babyai": [("BabyAI-GoToObj-v0", [record(0, 1.0, 4, (100, 3)), record(1, 0.0, 64, (900, 20)),
                                              record(2, 1.0, 9, (150, 4))]),
                       ("BabyAI-PickupLoc-v0", [record(0, 0.0, 64, (800, 30))])],
            "minihack": [("MiniHack-Room-5x5-v0", [record(0, 0.25, 12, (40, 2)), record(1, 0.5, 30, (60, 5)),
                                                   record(2, 1.0, 7, (30, 1)), record(3, 0.0, 100, (90, 9))])]}
    root = tmp_path / "ours"
    envs = {}
    for env_name, tasks in runs.items():
        logs = [(r["episode"], summary.episode_log(r, task, AGENT, CLIENT)) for task, records in tasks for r in records]
        envs[env_name] = summary.env_summary([log for _, log in logs])
        summary.write_tree(str(root), env_name, logs, envs[env_name], {})
    overall = summary.summary(envs, AGENT, CLIENT)
    summary.write_tree(str(root), "babyai", [], envs["babyai"], overall)

    reference, written = balrog_reference(root, tmp_path)
    assert close(overall, reference)
    assert overall["average_progress"] == pytest.approx((100 * 2 / 4 + 100 * 1.75 / 4) / 2)
    for env_name, env in envs.items():
        assert close(env, json.loads((written / env_name / f"{env_name}_summary.json").read_text()))
        assert env == json.loads((root / env_name / f"{env_name}_summary.json").read_text())
    assert json.loads((root / "summary.json").read_text()) == overall
    assert "SOME_KEY" not in json.dumps(overall)


def test_an_episode_cut_by_its_step_limit_and_an_older_record():
    """BALROG leaves ``done`` out of an episode the step limit cut; a record from before ``done`` and
    ``action_frequency`` were kept still becomes a log."""
    cut = summary.episode_log(record(3, 0.0, 64, done=False), "T", AGENT, None)
    assert "done" not in cut and cut["num_steps"] == 64 and cut["task"] == "T" and cut["client"] is None
    old = {"episode": 0, "seed": 1, "steps": 5, "episode_return": 1.0, "success": True, "progression": 1.0}
    log = summary.episode_log(old, "T", AGENT, None)
    assert log["action_frequency"] == {} and log["input_tokens"] == 0 and "done" not in log
    assert summary.env_summary([log])["progression_percentage"] == 100.0
