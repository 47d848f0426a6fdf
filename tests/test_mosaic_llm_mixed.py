"""A mixed MultiGrid team in one episode through the real daemon: the local LLM (Gemma through llama.cpp),
a trained RLlib policy from a ray-worker checkpoint of the same env, and random seats. Each seat's moves are
checked against what its kind must have played: the LLM's are its llm_step replies, the checkpoint's the
policy's greedy action on the observation the env gave (replayed here), the random seats' their seeded draws.
The checkpoint is trained once for the module by the real ray worker (PPO, 200 steps, about 35 s)."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_mosaic_llm_worker import SOCCER, events_of, finish, llm_steps, needs_model, scalars, submit

os.environ.setdefault("NUMBA_CACHE_DIR", "/tmp/mosaic-test-numba")


@pytest.fixture(scope="module")
def soccer_checkpoint(tmp_path_factory) -> str:
    """An RLlib PPO policy per agent (`independent`) on 2v2 soccer, trained by the ray worker process itself
    (200 steps), for every test of this module."""
    run_dir = tmp_path_factory.mktemp("soccer-ppo")
    config = {"worker": "ray", "algo": "PPO", "env": SOCCER, "run_id": "soccer-ppo", "steps": 200, "seed": 1,
              "params": {"policy": "independent", "train_batch_size_per_learner": 200, "minibatch_size": 100,
                         "num_epochs": 1, "fcnet_hiddens": [16], "env_runners": 0}}
    (run_dir / "config.json").write_text(json.dumps(config))
    with open(run_dir / "events.jsonl", "w") as out, open(run_dir / "stderr.log", "w") as err:
        subprocess.run([sys.executable, "-m", "workers.ray_worker.cli", "--config", "config.json"],
                       cwd=run_dir, stdout=out, stderr=err, timeout=600,
                       env={**os.environ, "MOSAIC_HOME": str(run_dir),
                            "PYTHONPATH": os.pathsep.join(sys.path)})
    checkpoint = run_dir / "checkpoints" / "final"
    assert (checkpoint / "mosaic_checkpoint.json").exists(), (run_dir / "stderr.log").read_text()[-3000:]
    return str(checkpoint)


def replay(seed: int, moves: list[dict]):
    """The soccer episode again, in this process, with the logged moves: each step's raw observations."""
    import gymnasium as gym
    import mosaic_multigrid  # noqa: F401  (registers the ids)

    from workers.sdk.llm.multigrid import action_names

    index = {name: i for i, name in enumerate(action_names())}
    env = gym.make(SOCCER, disable_env_checker=True)
    obs, _ = env.reset(seed=seed)
    try:
        for line in moves:
            yield obs
            obs, *_ = env.step({int(seat): index[name] for seat, name in line["moves"].items()})
    finally:
        env.close()


@pytest.mark.ray   # the module's checkpoint: the ray worker trains it with a private Ray
@pytest.mark.slow  # the module's checkpoint is trained first (about 35 s), then 2 calls of the local model
@needs_model
def test_llm_checkpoint_and_random_seats_in_one_soccer_episode(daemon, mosaic, soccer_checkpoint):
    from gymnasium.spaces import Discrete

    from workers.ray_worker import evaluate
    from workers.sdk.llm.multigrid import action_names
    from workers.sdk.multigrid import MultiGridView

    seed = 3
    run_id = submit(mosaic, SOCCER, f'seats=["llm", "checkpoint:{soccer_checkpoint}", "random", "random"]',
                    "max_steps=2", extra=("--seed", str(seed)))
    finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    started = next(e for e in events if e["type"] == "run_started")
    assert started["seats"] == {"0": "llm:local:gemma-3-270m (default)", "1": f"checkpoint:{soccer_checkpoint}",
                                "2": "random", "3": "random"}
    moves = [json.loads(line) for line in (mosaic.home.run_dir(run_id) / "moves.jsonl").read_text().splitlines()]
    assert [(m["episode"], m["step"]) for m in moves] == [(0, 0), (0, 1)]

    # the LLM seat, and only it, called the model; what it played is what it replied (the grammar keeps it legal)
    calls = llm_steps(events)
    assert [(e["step"], e["agent"]) for e in calls] == [(0, "0"), (1, "0")]
    for call, line in zip(calls, moves):
        assert call["valid"] and line["moves"]["0"] == call["action"] == call["played"]

    # the checkpoint seat (green_1: agent 1 of green_0, green_1, blue_0, blue_1) played its module's greedy
    # action on the observation the env gave it, flattened as the ray worker trained on it
    module = evaluate.load_modules(Path(soccer_checkpoint))["green_1"]
    names = action_names()
    for raw, line in zip(replay(seed, moves), moves):
        flat = MultiGridView.flat(raw[1])
        assert line["policy_observations"]["1"] == pytest.approx(flat.tolist())
        assert line["moves"]["1"] == names[int(evaluate.act(module, flat, Discrete(8)))]
        assert set(line["policy_observations"]) == {"1"}           # only checkpoint seats log an input

    # the random seats drew from their own seeded generators (the run's seed, the seat's index)
    for index in (2, 3):
        rng = random.Random(seed * 1000 + index)
        assert [line["moves"][str(index)] for line in moves] == [rng.choice(names) for _ in moves]

    [episode] = [e for e in events if e["type"] == "episode"]
    assert episode["length"] == 2 and set(episode["agents"]) == {"0", "1", "2", "3"}
    tags = scalars(events)
    assert tags["llm/0/calls"] == [2.0] and "llm/1/calls" not in tags
    assert all(f"elo/{seat}" in tags for seat in "0123")
