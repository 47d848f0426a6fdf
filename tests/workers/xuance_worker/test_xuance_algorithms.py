"""XuanCe's algorithms that run only with the worker's import-time fixes (workers/xuance_worker/fixes.py):
COMA (its learner's ``huber_delta=None``) and DreamerV2/V3 (``SequentialReplayBuffer``'s constructor),
and NPG, which runs only at the catalog's small actor layers, trained through a real daemon. Every algorithm of the catalog, these included, is also walked by
tests/workers/xuance_worker/test_xuance_worker.py::test_every_algorithm_runs (MOSAIC_LONG=1).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from workers.sdk.telemetry import check_event

# Dreamer at a size that trains a few hundred steps in seconds on a CPU: XuanCe's CartPole configs have
# 512-unit layers, 64-step sequences and a gradient step per environment step. Nested keys are merged into
# XuanCe's own dicts (recursive_dict_update), so only the sizes change.
SMALL_DREAMER = {
    "start_training": 64, "buffer_size": 1000, "batch_size": 4, "seq_len": 16, "horizon": 5, "replay_ratio": 0.1,
    "actor": {"dense_units": 32, "mlp_layers": 1}, "critic": {"dense_units": 32, "mlp_layers": 1},
    "world_model": {"discrete_size": 8, "stochastic_size": 8,
                    "encoder": {"dense_units": 32, "mlp_layers": 1},
                    "recurrent_model": {"recurrent_state_size": 32, "dense_units": 32},
                    "transition_model": {"hidden_size": 32}, "representation_model": {"hidden_size": 32},
                    "observation_model": {"dense_units": 32, "mlp_layers": 1},
                    "reward_model": {"dense_units": 32, "mlp_layers": 1},
                    "discount_model": {"dense_units": 32, "mlp_layers": 1}},
}


def submit(mosaic, config: dict) -> str:
    path = Path(mosaic.home.root) / f"{config['algo']}.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


def trained(mosaic, run_id: str, steps: int) -> tuple[dict, list[dict]]:
    """Wait for the run; (its summary, its events) once it succeeded."""
    mosaic.run("wait", run_id, "--timeout", "300")
    run = mosaic.show(run_id)
    run_dir = mosaic.home.run_dir(run_id)
    assert run["state"] == "succeeded", (run.get("reason"), (run_dir / "stderr.log").read_text(errors="replace")[-3000:])
    summary = run["summary"]
    assert summary["steps"] == summary["total_steps"] == steps and summary["invalid"] == 0
    assert summary["checkpoints"] and summary["checkpoints"][-1].endswith("final_train_model.pth")
    events = [check_event(json.loads(line)) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return summary, events


def losses(events: list[dict], tag: str) -> list[float]:
    return [e["value"] for e in events if e["type"] == "scalar" and e["tag"] == tag]


def test_coma_trains_on_simple_spread_through_the_daemon(daemon, mosaic):
    """Without the fix COMA's learner is never built: ``nn.HuberLoss(delta=None)`` raises TypeError."""
    run_id = submit(mosaic, {"worker": "xuance", "algo": "coma", "env": "simple_spread_v3", "steps": 600,
                             "params": {"parallels": 2, "buffer_size": 100, "n_epochs": 1,
                                        "vectorize": "DummyVecMultiAgentEnv", "env_kwargs": {"N": 2}}})
    summary, events = trained(mosaic, run_id, 600)
    episodes = [e for e in events if e["type"] == "episode"]
    # 600 steps of 2 envs, simple_spread's 25-step episodes: 12 in each env
    assert len(episodes) == summary["episodes"] == 24
    for episode in episodes:
        assert set(episode["agents"]) == {"agent_0", "agent_1"} and episode["length"] == 25
        assert math.isfinite(episode["return"]) and episode["return"] < 0   # minus the distances to landmarks
    # its own losses (actor: the counterfactual advantage; critic: the squared TD error), once per update:
    # a rollout of buffer_size 100 transitions every 50 steps of 2 envs
    actor, critic = losses(events, "actor_loss"), losses(events, "critic_loss")
    assert len(actor) == len(critic) == 6 and all(map(math.isfinite, actor + critic))


def test_dreamerv3_trains_on_cartpole_through_the_daemon(daemon, mosaic):
    """Without the fix every Dreamer agent fails to build its replay buffer (``Buffer.__init__`` TypeError)."""
    run_id = submit(mosaic, {"worker": "xuance", "algo": "dreamerv3", "env": "CartPole-v1", "steps": 400,
                             "params": {**SMALL_DREAMER, "parallels": 2}})
    summary, events = trained(mosaic, run_id, 400)
    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes and len(episodes) == summary["episodes"]
    assert all(e["return"] == e["length"] >= 8 for e in episodes)   # CartPole: +1 a step
    # the world model, actor and critic learn after start_training: (400 - 64) x replay_ratio gradient steps
    gradient_steps = losses(events, "step/gradient_step")
    assert gradient_steps and gradient_steps[-1] == int((400 - 64) * 0.1)
    for tag in ("model_loss/model_loss", "actor_loss/actor_loss", "critic_loss/critic_loss"):
        values = losses(events, tag)
        assert values and all(map(math.isfinite, values)), tag


def test_npg_trains_on_cartpole_at_its_small_default_layers(daemon, mosaic):
    """The catalog's NPG defaults (32-unit layers: a 1,024 x 1,024 Fisher matrix per learner step, not
    XuanCe's 16,384 x 16,384) train CartPole in seconds."""
    run_id = submit(mosaic, {"worker": "xuance", "algo": "npg", "env": "CartPole-v1", "steps": 512,
                             "params": {"parallels": 2, "horizon_size": 64, "n_minibatch": 1}})
    summary, events = trained(mosaic, run_id, 512)
    config = json.loads((mosaic.home.run_dir(run_id) / "config.json").read_text())
    assert config["params"]["actor_hidden_size"] == config["params"]["representation_hidden_size"] == [32]
    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes and len(episodes) == summary["episodes"]
    assert all(e["return"] == e["length"] >= 8 for e in episodes)   # CartPole: +1 a step
    # one learner step a rollout (64 steps of 2 envs): 512 / 128 updates
    for tag in ("actor-loss", "critic-loss"):
        values = losses(events, tag)
        assert len(values) == 4 and all(map(math.isfinite, values)), tag


def test_npg_with_xuance_layer_sizes_is_refused_at_submit(daemon, mosaic):
    """XuanCe's own 128-unit actor (a 16,384 x 16,384 matrix inverted each learner step) never starts."""
    path = Path(mosaic.home.root) / "npg-large.json"
    path.write_text(json.dumps({"worker": "xuance", "algo": "npg", "env": "CartPole-v1", "steps": 512,
                                "params": {"representation_hidden_size": [128], "actor_hidden_size": [128]}}))
    out = mosaic.run("submit", str(path))
    assert out.returncode != 0
    message = out.stdout + out.stderr
    assert "params.actor_hidden_size" in message and "16384 x 16384 matrix" in message, message
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []   # no run was made
