"""PettingZoo's image games on the RLlib worker (issue 34): pistonball_v6 and cooperative_pong_v6,
observed as images (envs.ImageParallelEnv: resized, grey, frame-stacked) by RLlib's CNN encoder.

The refusals need no Ray. The trainings go through the real daemon and CLI with live frames;
pistonball runs a small CNN on 42x42 views so the default suite stays short, cooperative pong
(long) runs the defaults: 64x64, RLlib's default filters, then an evaluation of its checkpoint.
"""
from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import events_of, wait_for
from workers.ray_worker import WORKER, catalog
from workers.sdk.config import ConfigError

pytestmark = pytest.mark.ray   # its runs start private Ray clusters: one at a time (tests/conftest.py)


def _config(env: str = "pistonball_v6", algo: str = "PPO", **params) -> dict:
    return {"worker": "ray", "algo": algo, "env": env, "steps": 1000, "params": params}


# -- the descriptor: the encoder fits the observations --------------------------------------
def test_image_games_are_offered_and_take_the_cnn_by_default():
    envs = WORKER.capabilities()["envs"]
    assert {"pistonball_v6", "cooperative_pong_v6"} <= set(envs)
    config = WORKER.validate(_config())
    assert config["params"]["model"] == "auto" and config["params"]["conv_filters"] is None
    assert {k: config["params"][k] for k in catalog.IMAGE_DEFAULTS} == catalog.IMAGE_DEFAULTS
    # a form sends every param: their defaults are never refused
    schema = WORKER.schema("PPO")["properties"]
    WORKER.validate(_config(env="ALE/Pong-v5", **{k: v["default"] for k, v in schema.items()}))
    WORKER.validate(_config(env="CartPole-v1", **{k: v["default"] for k, v in schema.items()}))
    # pistonball's pistons are discrete with {"continuous": false}
    WORKER.validate(_config(algo="DQN", env_kwargs={"continuous": False}))


@pytest.mark.parametrize("config, field, words", [
    (_config(model="mlp"), "params.model", "pistonball_v6 is observed as 64x64 images"),
    (_config(env="ALE/Pong-v5", model="mlp"), "params.model", "RLlib's MLP takes vectors"),
    (_config(env="CartPole-v1", model="cnn"), "params.model", "CartPole-v1 observes vectors"),
    (_config(fcnet_hiddens=[64]), "params.fcnet_hiddens", "set conv_filters instead"),
    (_config(env="simple_spread_v3", conv_filters=[[8, 4, 2]]), "params.conv_filters", "observes vectors"),
    (_config(env="CartPole-v1", frame_stack=4), "params.frame_stack", "not CartPole-v1's"),
    (_config(env="VizdoomBasic-v1", image_size=42), "params.image_size", "not VizdoomBasic-v1's"),
    (_config(image_size=50), "params.conv_filters", "give conv_filters for image_size 50"),
    (_config(conv_filters=[[8, 4]]), "params.conv_filters[0]", "[out_channels, kernel, stride]"),
    (_config(conv_filters=[[8, 4, 2], [16, 0, 2]]), "params.conv_filters[1].kernel", ">= 1"),
    (_config(conv_filters=[]), "params.conv_filters", "is empty"),
    (_config(policy="shared_value"), "params.policy", "observed as 64x64 images"),
    (_config(algo="DQN"), "env", '(env_kwargs {"continuous": false}: discrete)'),
    (_config(env="cooperative_pong_v6", algo="SAC"), "env", "has discrete actions"),
])
def test_encoders_that_do_not_fit_are_refused_in_one_line(config, field, words):
    with pytest.raises(ConfigError) as err:
        WORKER.validate(config)
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- through the daemon ----------------------------------------------------------------------
def finish(mosaic, run_id: str) -> dict:
    mosaic.run("wait", run_id, "--timeout", "600", timeout=630)
    run = mosaic.show(run_id)
    if run["state"] != "succeeded":
        stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}):\n{stderr}")
    return run


def training_frame(run_id: str, timeout: float = 180) -> np.ndarray:
    """A frame of the training env, read from the run's FastLane segment while it trains."""
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    wait_for(lambda: layout.run_files(run_id), timeout, 0.1, what=f"run {run_id}'s FastLane segment")
    with FrameReader(run_id) as reader:
        _, frame = wait_for(reader.latest, 60, what="a frame")
    return frame


def conv_weights(checkpoint: Path, module_id: str) -> list[tuple[int, ...]]:
    """Shapes of a module's 4-d (convolution) weights, from its state in the checkpoint: a pickle
    of numpy arrays (TorchRLModule.get_state), read without torch or Ray."""
    state_file = checkpoint / "learner_group" / "learner" / "rl_module" / module_id / "module_state.pkl"
    state = pickle.loads(state_file.read_bytes())
    return [tuple(v.shape) for k, v in state.items() if k.endswith("weight") and np.ndim(v) == 4]


def submit(mosaic, tmp_path: Path, config: dict) -> str:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


def test_ppo_on_pistonball_trains_its_cnn_with_frames(daemon, mosaic, tmp_path):
    """4 pistons, 25-step episodes, 42x42 grey views, 3 frames, a two-layer CNN: two iterations
    of 64 env steps (256 piston steps each), a live frame of the game, every piston's returns."""
    run_id = submit(mosaic, tmp_path, {
        "worker": "ray", "algo": "PPO", "env": "pistonball_v6", "steps": 128, "seed": 1,
        "frames": {"enabled": True, "fps": 30, "max_dim": 512},
        "params": {"model": "cnn", "image_size": 42, "conv_filters": [[8, 4, 2], [16, 4, 2]],
                   "env_kwargs": {"n_pistons": 4, "max_cycles": 25},
                   "train_batch_size_per_learner": 64, "minibatch_size": 64, "num_epochs": 1}})
    frame = training_frame(run_id)
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.std() > 0
    assert frame.shape[0] == 512 and frame.shape[1] < 512   # pistonball with 4 pistons: taller than wide
    run = finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    steps = [e["step"] for e in events if e["type"] == "scalar"
             and e["tag"] == "env_runners/num_env_steps_sampled_lifetime"]
    assert steps == [64, 128]
    tags = run["summary"]["tags"]
    assert {"learners/shared/policy_loss", "learners/shared/vf_loss",
            "env_runners/agent_episode_returns_mean/piston_0"} <= set(tags), tags
    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes and all(set(e["agents"]) == {f"piston_{i}" for i in range(4)} for e in episodes)
    assert all(0 < e["length"] <= 25 for e in episodes)
    final = mosaic.home.run_dir(run_id) / "checkpoints" / "final"
    meta = json.loads((final / "mosaic_checkpoint.json").read_text())
    assert meta["image"] == {"image_size": 42, "grayscale": True, "frame_stack": 3}
    # the learner's module: conv_filters' two layers over 3 channels (grey x 3 frames), kernels 4x4,
    # in the actor's encoder and the critic's (RLlib's PPO default: vf_share_layers off)
    assert sorted(conv_weights(final, "shared")) == [(8, 3, 4, 4)] * 2 + [(16, 8, 4, 4)] * 2


@pytest.mark.long
def test_ppo_on_cooperative_pong_with_the_default_cnn_then_evaluated(daemon, mosaic, tmp_path):
    """The defaults (64x64 grey, 3 frames, RLlib's default filters for 64x64), one iteration with
    frames, then its checkpoint plays an episode observed the same way: the views recorded in the
    checkpoint win over the evaluation's params (84x84 there would not fit the modules)."""
    run_id = submit(mosaic, tmp_path, {
        "worker": "ray", "algo": "PPO", "env": "cooperative_pong_v6", "steps": 100, "seed": 1,
        "frames": {"enabled": True, "fps": 30, "max_dim": 480},
        "params": {"env_kwargs": {"max_cycles": 50},
                   "train_batch_size_per_learner": 100, "minibatch_size": 100, "num_epochs": 1}})
    frame = training_frame(run_id)
    assert frame.shape == (280, 480, 3) and frame.std() > 0
    run = finish(mosaic, run_id)
    assert {"learners/shared/policy_loss", "env_runners/agent_episode_returns_mean/paddle_1"} <= \
        set(run["summary"]["tags"])
    # RLlib's default filters for 64x64 (get_filter_config), over grey x 3 frames
    final = mosaic.home.run_dir(run_id) / "checkpoints" / "final"
    assert sorted(conv_weights(final, "shared")) == sorted([(16, 3, 4, 4), (32, 16, 4, 4), (64, 32, 4, 4),
                                                            (128, 64, 4, 4)] * 2)
    evaluation = submit(mosaic, tmp_path, {
        "worker": "ray", "algo": "PPO", "env": "cooperative_pong_v6", "mode": "eval", "eval_episodes": 1,
        "checkpoint": f"run:{run['name']}", "params": {"image_size": 84}})
    finish(mosaic, evaluation)
    episodes = [e for e in events_of(mosaic.home, evaluation) if e["type"] == "episode"]
    assert len(episodes) == 1 and set(episodes[0]["agents"]) == {"paddle_0", "paddle_1"}
    assert 0 < episodes[0]["length"] <= 50
