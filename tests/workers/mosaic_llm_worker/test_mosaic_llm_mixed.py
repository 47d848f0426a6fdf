"""A mixed MultiGrid team in one episode through the real daemon: the local LLM (Gemma through llama.cpp),
a trained RLlib policy from a ray-worker checkpoint of the same env, and random seats. Each seat's moves are
checked against what its kind must have played: the LLM's are its llm_step replies, the checkpoint's the
policy's greedy action on the observation the env gave (replayed here), the random seats' their seeded draws.
The checkpoint is trained once for the module by the real ray worker (PPO, 200 steps, about 35 s).
A XuanCe MAPPO policy (the xuance worker's checkpoint, 200 steps) takes a seat of soccer 1v1 the same way."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.workers.mosaic_llm_worker.test_mosaic_llm_worker import (
    SOCCER,
    events_of,
    finish,
    llm_steps,
    needs_model,
    scalars,
    submit,
)


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


def replay(seed: int, moves: list[dict], env_id: str = SOCCER, **env_kwargs):
    """The soccer episode again, in this process, with the logged moves: each step's raw observations."""
    import gymnasium as gym
    import mosaic_multigrid  # noqa: F401  (registers the ids)

    from workers.sdk.llm.multigrid import action_names

    index = {name: i for i, name in enumerate(action_names())}
    env = gym.make(env_id, disable_env_checker=True, **env_kwargs)
    obs, _ = env.reset(seed=seed)
    try:
        for line in moves:
            yield obs
            obs, *_ = env.step({int(seat): index[name] for seat, name in line["moves"].items()})
    finally:
        env.close()


@pytest.mark.ray   # the module's checkpoint: the ray worker trains it with a private Ray
@pytest.mark.long  # 85 s with its checkpoint (CI's half hour): a XuanCe policy's seat stays in CI, below
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


SOCCER_1V1 = "MosaicMultiGrid-S-1v1-IndAgObs-v1"
XUANCE_ENV_KWARGS = {"max_steps": 50}


@pytest.fixture(scope="module")
def xuance_soccer_checkpoint(tmp_path_factory) -> str:
    """A XuanCe MAPPO policy (one network per agent, as competitive training has it) on soccer 1v1,
    trained by the xuance worker process itself (200 steps): the path of its model file."""
    from workers.xuance_worker import WORKER as XUANCE

    run_dir = tmp_path_factory.mktemp("soccer-mappo")
    config = XUANCE.validate({"worker": "xuance", "algo": "mappo", "env": SOCCER_1V1, "run_id": "soccer-mappo",
                              "steps": 200, "seed": 1,
                              "params": {"parallels": 1, "buffer_size": 100, "n_epochs": 1,
                                         "vectorize": "DummyVecMultiAgentEnv", "use_parameter_sharing": False,
                                         "env_kwargs": XUANCE_ENV_KWARGS}})
    (run_dir / "config.json").write_text(json.dumps(config))
    with open(run_dir / "events.jsonl", "w") as out, open(run_dir / "stderr.log", "w") as err:
        subprocess.run([sys.executable, "-m", "workers.xuance_worker.cli", "--config", "config.json"],
                       cwd=run_dir, stdout=out, stderr=err, timeout=600,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    model = run_dir / "checkpoints" / "final" / "final_train_model.pth"
    assert model.exists(), (run_dir / "stderr.log").read_text()[-3000:]
    return str(model)


@pytest.mark.slow  # the module's XuanCe checkpoint is trained first (about 40 s)
def test_a_xuance_policy_takes_a_soccer_seat(daemon, mosaic, xuance_soccer_checkpoint):
    """The checkpoint seat (blue_0, agent 1) plays the XuanCe policy's greedy action on the observation the
    env gave it, flattened as the xuance worker trained on it; a checkpoint that cannot play the run's env
    is refused at submit with one line naming the seat."""
    from workers.sdk.llm.multigrid import action_names
    from workers.sdk.multigrid import MultiGridView, make
    from workers.xuance_worker.evaluate import Policy

    seed = 5
    kwargs = f"env_kwargs={json.dumps(XUANCE_ENV_KWARGS)}"
    run_id = submit(mosaic, SOCCER_1V1, f'seats=["random", "checkpoint:{xuance_soccer_checkpoint}"]', kwargs,
                    "max_steps=3", extra=("--seed", str(seed)))
    finish(mosaic, run_id)
    moves = [json.loads(line) for line in (mosaic.home.run_dir(run_id) / "moves.jsonl").read_text().splitlines()]
    assert len(moves) == 3

    policy = Policy(xuance_soccer_checkpoint)
    view = MultiGridView(make(SOCCER_1V1, render_mode=None, **XUANCE_ENV_KWARGS))
    agent_key = view.agents[1]          # the env's own name of agent 1, not the checkpoint's list
    view.close()
    assert agent_key == "blue_0"
    names = action_names()
    played = []
    for raw, line in zip(replay(seed, moves, SOCCER_1V1, **XUANCE_ENV_KWARGS), moves):
        flat = MultiGridView.flat(raw[1])
        assert line["policy_observations"]["1"] == pytest.approx(flat.tolist())
        played.append(line["moves"]["1"])
        assert line["moves"]["1"] == names[policy.act(agent_key, flat)]
    rng = random.Random(seed * 1000 + 0)
    assert [line["moves"]["0"] for line in moves] == [rng.choice(names) for _ in moves]

    started = next(e for e in events_of(mosaic.home, run_id) if e["type"] == "run_started")
    assert started["seats"]["1"] == f"checkpoint:{xuance_soccer_checkpoint}"

    # trained on 1v1 with max_steps 50: refused for 2v2, and for 1v1 with other env kwargs
    for env, sets, says in ((SOCCER, (f'seats=["random", "checkpoint:{xuance_soccer_checkpoint}", "random", '
                                      f'"random"]', kwargs), f"was trained on {SOCCER_1V1}, not {SOCCER}"),
                            (SOCCER_1V1, (f'seats=["random", "checkpoint:{xuance_soccer_checkpoint}"]',),
                             "was trained with env_kwargs {'max_steps': 50}, this run has {}")):
        args = ["submit", "--worker", "mosaic_llm", "--algo", "play", "--env", env]
        for s in sets:
            args += ["--set", s]
        refused = mosaic.run(*args)
        line = refused.stderr.strip()
        assert refused.returncode != 0 and line.startswith("mosaic: error:") and "\n" not in line, line
        assert "params.seats[1].checkpoint" in line and says in line, line
