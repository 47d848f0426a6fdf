"""What both modes of the Tianshou worker process share (training in ``runtime``, eval in
``evaluate``): the run's env (``make_env``; a training env, the first one publishing frames:
``training_env_maker``) and its algorithm, loaded from a checkpoint when the run names one (``build``).
"""
from __future__ import annotations

from typing import Any

from workers.sdk import minigrid, vizdoom
from workers.sdk.dataset import Recorder
from workers.sdk.envs import ATARI, MINIGRID_ENVS, VIZDOOM
from workers.sdk.frames import EnvFrames, publishing
from workers.sdk.registration import register_family_of
from workers.tianshou_worker import algorithms, resume


def make_env(env_id: str, recorder: Recorder | None = None, render: bool = False, train: bool = False):
    """The env of ``env_id``; image families preprocessed to 4 stacked grey 84x84 frames:
    Atari by Tianshou's own ``wrap_deepmind`` (its examples/atari: no-op reset, max-and-skip 4, fire
    reset; while training also end-of-life as episode end and rewards clipped to their sign),
    ViZDoom by ``workers.sdk.vizdoom``; MiniGrid as its agent's flat view (``workers.sdk.minigrid``).
    ``render()`` gives the game's rgb screen either way."""
    import gymnasium as gym

    family = register_family_of(env_id)  # Atari, ViZDoom, MultiGrid, jumanji/<Env> (Jumanji's gym wrapper)
    render_mode = "rgb_array" if render else None
    if family == VIZDOOM:
        env = vizdoom.make(env_id, render_mode=render_mode)
    elif env_id in MINIGRID_ENVS:
        env = minigrid.make(env_id, render_mode=render_mode)
    elif family == ATARI:
        from tianshou.env.atari.atari_wrapper import wrap_deepmind

        # ALE/*-v5 skips 4 frames itself; wrap_deepmind's MaxAndSkipEnv does the skipping (as on NoFrameskip-v4)
        skip = {"frameskip": 1} if env_id.startswith("ALE/") else {}
        env = wrap_deepmind(gym.make(env_id, render_mode=render_mode, **skip), episode_life=train,
                            clip_rewards=train)
    else:
        env = gym.make(env_id, render_mode=render_mode)
    return recorder.wrap(env) if recorder is not None else env


def build(config: dict[str, Any]):
    """The run's algorithm, its env spaces and, for offline runs and GAIL, the dataset."""
    from tianshou.data import ReplayBuffer

    probe = make_env(config["env"])
    spaces = algorithms.spaces_of(probe)
    probe.close()
    dataset = ReplayBuffer.load_hdf5(config["dataset"]) if config.get("dataset") else None
    algorithm = algorithms.build(config["algo"], config["params"], spaces, dataset)
    state = resume.load_state(config)
    if state is not None:
        algorithm.load_state_dict(state["algorithm"])
    return algorithm, dataset, state


def training_env_maker(env_id: str, recorder: Recorder | None, frames: EnvFrames | None, index: int):
    """What DummyVectorEnv calls to make training env ``index``: the first one publishes live frames."""
    def make():
        if frames is not None and index == 0:
            return publishing(make_env(env_id, recorder, render=True, train=True), frames)
        return make_env(env_id, recorder, train=True)
    return make
