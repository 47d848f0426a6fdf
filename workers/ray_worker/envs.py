"""Environments as RLlib sees them: gymnasium ids, and PettingZoo games as MultiAgentEnvs.

Imported in the worker process and in every env-runner actor (the env creator
registered with Ray is ``make_env`` below, pickled by reference).

Observations are reshaped for RLlib's default (MLP) models:

- Box observations of more than one dimension (pursuit's 7x7x3 view, the
  boards of Classic games) are flattened to float32 vectors;
- turn-based Classic games keep their action mask next to the observation,
  ``{"observation": vector, "action_mask": vector}``, for the masking module
  (``modules.py``);
- with the ``shared_value`` policy configuration every agent observes
  ``[own observation, state]``, the state being all agents' observations
  concatenated (zeros for an agent that is gone): the centralised critic reads
  the state, the agent's actor only its own part.

The PettingZoo image games (pistonball, cooperative pong) keep their images,
for RLlib's CNN encoder: ``ImageParallelEnv`` below.
"""
from __future__ import annotations

import importlib
from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

from workers.ray_worker import catalog
from workers.sdk import registration

ENV_NAME = "mosaic_env"


def flat_box(space: gym.spaces.Box) -> gym.spaces.Box:
    return gym.spaces.Box(np.asarray(space.low, dtype=np.float32).reshape(-1),
                          np.asarray(space.high, dtype=np.float32).reshape(-1), dtype=np.float32)


def flat(obs) -> np.ndarray:
    return np.asarray(obs, dtype=np.float32).reshape(-1)


def pettingzoo_module(env_id: str):
    return importlib.import_module(catalog.ENVS[env_id]["module"])


class ParallelEnv(ParallelPettingZooEnv):
    """A PettingZoo parallel env with flat float32 observations, optionally with the global state."""

    def __init__(self, par_env, global_state: bool = False):
        super().__init__(par_env)
        self.global_state = global_state
        # possible_agents is the fixed order of the state vector
        self.possible_agents = list(par_env.possible_agents)
        self.own_spaces = {aid: flat_box(par_env.observation_space(aid)) for aid in self.possible_agents}
        self.own_dims = {aid: int(self.own_spaces[aid].shape[0]) for aid in self.possible_agents}
        self.state_dim = sum(self.own_dims.values())
        spaces = {}
        for aid in self.possible_agents:
            space = self.own_spaces[aid]
            if global_state:
                low = np.full(self.state_dim, -np.inf, dtype=np.float32)
                high = np.full(self.state_dim, np.inf, dtype=np.float32)
                space = gym.spaces.Box(np.concatenate([space.low, low]), np.concatenate([space.high, high]),
                                       dtype=np.float32)
            spaces[aid] = space
        self.observation_spaces = spaces
        self.action_spaces = {aid: par_env.action_space(aid) for aid in self.possible_agents}
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Dict(self.action_spaces)

    def _convert(self, obs: dict) -> dict:
        own = {aid: flat(o) for aid, o in obs.items()}
        if not self.global_state:
            return own
        state = np.concatenate([own.get(aid, np.zeros(self.own_dims[aid], np.float32))
                                for aid in self.possible_agents])
        return {aid: np.concatenate([o, state]) for aid, o in own.items()}

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return self._convert(obs), info

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        return self._convert(obs), rewards, terminateds, truncateds, infos

    def render(self):
        return self.par_env.render()


GREY = np.array([0.299, 0.587, 0.114], dtype=np.float32)   # ITU-R BT.601 luma, as OpenCV's RGB2GRAY


class ImageParallelEnv(ParallelPettingZooEnv):
    """A PettingZoo parallel game observed as images by RLlib's CNN encoder.

    Each agent's RGB view is resized to size x size (PIL's BOX, an exact area average, as
    FastLane shrinks frames: thin objects such as pong's ball survive a 5x reduction), optionally made grey,
    scaled to -1..1 as RLlib's Atari wrapper scales its frames, and the last
    ``frames`` views are stacked on the channel axis (the first view repeated
    after a reset). PettingZoo's own RLlib tutorial does the same with SuperSuit
    (not a dependency here).
    """

    def __init__(self, par_env, image_size: int = 84, grayscale: bool = True, frame_stack: int = 3):
        super().__init__(par_env)
        self.possible_agents = list(par_env.possible_agents)
        self.size = image_size
        self.grayscale = grayscale
        self.frames = frame_stack
        channels = (1 if grayscale else 3) * frame_stack
        space = gym.spaces.Box(-1.0, 1.0, (image_size, image_size, channels), dtype=np.float32)
        self.observation_spaces = {aid: space for aid in self.possible_agents}
        self.action_spaces = {aid: par_env.action_space(aid) for aid in self.possible_agents}
        self.observation_space = gym.spaces.Dict(self.observation_spaces)
        self.action_space = gym.spaces.Dict(self.action_spaces)
        self._stacks: dict[str, deque] = {}

    def view(self, rgb) -> np.ndarray:
        """One agent's RGB view (H, W, 3) as a (size, size, 1 or 3) float32 image in -1..1."""
        from PIL import Image
        small = np.asarray(Image.fromarray(np.asarray(rgb, dtype=np.uint8)).resize((self.size, self.size), Image.BOX),
                           dtype=np.float32)
        if self.grayscale:
            small = (small @ GREY)[..., None]
        return small / 128.0 - 1.0

    def _convert(self, obs: dict, reset: bool) -> dict:
        out = {}
        for aid, rgb in obs.items():
            image = self.view(rgb)
            if reset or aid not in self._stacks:
                self._stacks[aid] = deque([image] * self.frames, maxlen=self.frames)
            else:
                self._stacks[aid].append(image)
            out[aid] = np.concatenate(self._stacks[aid], axis=-1, dtype=np.float32)
        return out

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        self._stacks.clear()
        return self._convert(obs, reset=True), info

    def step(self, action_dict):
        obs, rewards, terminateds, truncateds, infos = super().step(action_dict)
        return self._convert(obs, reset=False), rewards, terminateds, truncateds, infos

    def render(self):
        return self.par_env.render()


class TurnBasedEnv(PettingZooEnv):
    """A PettingZoo AEC game (agents move in turn) whose observations carry their action mask."""

    def __init__(self, aec_env):
        super().__init__(aec_env)
        self.possible_agents = list(aec_env.possible_agents)
        spaces = {}
        for aid in self.possible_agents:
            inner = aec_env.observation_space(aid)
            mask = inner["action_mask"]
            spaces[aid] = gym.spaces.Dict({
                "observation": flat_box(inner["observation"]),
                "action_mask": gym.spaces.Box(0.0, 1.0, mask.shape, dtype=np.float32),
            })
        self.observation_spaces = spaces
        self.observation_space = gym.spaces.Dict(spaces)

    @staticmethod
    def _convert(obs: dict) -> dict:
        return {aid: {"observation": flat(o["observation"]),
                      "action_mask": np.asarray(o["action_mask"], dtype=np.float32)}
                for aid, o in obs.items()}

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        # PettingZoo's AEC reset returns None: RLlib wants one info dict per agent that observes.
        return self._convert(obs), {aid: {} for aid in obs}

    def step(self, action):
        obs, rewards, terminateds, truncateds, infos = super().step(action)
        return self._convert(obs), rewards, terminateds, truncateds, infos

    def render(self):
        return self.env.render()


def make_pettingzoo(env_id: str, env_kwargs: dict[str, Any] | None = None, render_mode: str | None = None):
    """The raw PettingZoo env: parallel API for parallel families, AEC for turn-based games."""
    module = pettingzoo_module(env_id)
    kwargs = dict(env_kwargs or {})
    if render_mode:
        kwargs["render_mode"] = render_mode
    if catalog.env_info(env_id)["kind"] == "turn_based":
        return module.env(**kwargs)
    return module.parallel_env(**kwargs)


def make_env(env_config: dict[str, Any]):
    """The env creator registered with Ray as ``mosaic_env``.

    env_config: {"env": id, "env_kwargs": {...}, "policy": ..., "render_mode": None,
    "image": {"image_size": 84, "grayscale": True, "frame_stack": 3} (PettingZoo image games)}
    """
    env_id = env_config["env"]
    info = catalog.env_info(env_id)
    kwargs = env_config.get("env_kwargs") or {}
    render_mode = env_config.get("render_mode")
    registration.register_family_of(env_id)  # Atari, MultiGrid, ViZDoom, jumanji/<Env>: in every env-runner process
    if info is not None and info.get("atari"):
        kwargs = {"frameskip": 1, **kwargs}  # the wrapper below skips 4 frames (max-pooled)
    if info is not None and info["family"] == "vizdoom":
        from ray.rllib.env.wrappers.atari_wrappers import NormalizedImageEnv

        from workers.sdk import vizdoom
        # RLlib's CNN encoder convolves channels-last images
        return NormalizedImageEnv(vizdoom.make(env_id, render_mode=render_mode, channels_first=False, **kwargs))
    if info is None or info["kind"] == "gym":
        env = gym.make(env_id, render_mode=render_mode, **kwargs)
        if info is not None and info.get("atari"):
            # RLlib's own Atari preprocessing: 84x84 grey, 4 stacked frames, episodic life...
            from ray.rllib.env.wrappers.atari_wrappers import wrap_atari_for_new_api_stack
            env = wrap_atari_for_new_api_stack(env, dim=84, framestack=4)
        return env
    if info["family"] == "multigrid":
        from workers.sdk.multigrid import ParallelMultiGrid
        return ParallelEnv(ParallelMultiGrid(env_id, render_mode=render_mode or "rgb_array", **kwargs),
                           global_state=env_config.get("policy") == "shared_value")
    raw = make_pettingzoo(env_id, kwargs, render_mode)
    if info["kind"] == "turn_based":
        return TurnBasedEnv(raw)
    if catalog.pettingzoo_images(env_id):
        return ImageParallelEnv(raw, **{**catalog.IMAGE_DEFAULTS, **(env_config.get("image") or {})})
    return ParallelEnv(raw, global_state=env_config.get("policy") == "shared_value")


def agent_groups(env) -> dict[str, str]:
    """agent id -> kind (the name before the trailing _N): agents of one kind share spaces."""
    return {aid: aid.rsplit("_", 1)[0] if aid.rsplit("_", 1)[-1].isdigit() else aid
            for aid in env.possible_agents}
