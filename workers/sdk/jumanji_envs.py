"""Jumanji's JAX environments in any worker's process: RGB frames, and gymnasium ids ``jumanji/<Env>``.

    from workers.sdk import jumanji_envs
    jumanji_envs.register_gymnasium()            # gymnasium.make("jumanji/Snake-v1") works after this
    render = jumanji_envs.rgb_render(env)        # render(state) -> an RGBA array

Process side (imports jumanji and jax when called): the Jumanji worker uses
``rgb_render`` for its frames; CleanRL, XuanCe, RLlib and Tianshou train on
``jumanji/<Env>`` through ``register_gymnasium``, which registers, for every
env Jumanji registers, Jumanji's own ``JumanjiToGymWrapper`` with its
observation flattened (``gymnasium.wrappers.FlattenObservation``: the
wrappers' Dict observations become one float32 Box, what an MLP policy takes). The
light facts (which ids exist) are in ``workers.sdk.envs`` (family "jumanji").
"""
from __future__ import annotations

import os
from typing import Any, Callable

NAMESPACE = "jumanji"
# Jumanji's envs end their episodes themselves (TSP after its cities, Snake at its 4000-step
# time limit); gymnasium's TimeLimit is there too, as a cap above those, because libraries read
# it (XuanCe reads env._max_episode_steps). gymnasium.make(..., max_episode_steps=N) overrides it.
MAX_EPISODE_STEPS = 10_000


def rgb_render(env) -> Callable[[Any], Any]:
    """A function state -> RGBA image (H, W, 4) of a Jumanji env, drawn by the env's own viewer.

    Jumanji's viewers draw with matplotlib in "human" mode unless built with
    render_mode="rgb_array", and each viewer class takes different arguments; so
    the env's own viewer is switched to returning the canvas (MatplotlibViewer's
    rgb_array display). The viewer is called directly: some envs' ``render``
    (Snake's) drop the viewer's return value.
    """
    os.environ.setdefault("MPLBACKEND", "Agg")
    viewer = getattr(env.unwrapped, "_viewer", None)
    if viewer is None or not hasattr(viewer, "_display_rgb_array"):
        raise TypeError(f"{type(env.unwrapped).__name__} has no matplotlib viewer to draw frames with")
    viewer._display = viewer._display_rgb_array
    return viewer.render


def make_gymnasium(jumanji_id: str, render_mode: str | None = None, seed: int = 0, **kwargs: Any):
    """The entry point of ``gymnasium.make("jumanji/<Env>")``: Jumanji's JumanjiToGymWrapper on CPU,
    multi-agent envs made single-agent as jumanji.training does (MultiToSingleWrapper),
    observations flattened to one float32 Box, RGB frames from the env's viewer."""
    import gymnasium
    import jumanji
    import numpy as np
    from jumanji.wrappers import JumanjiToGymWrapper, MultiToSingleWrapper

    env = jumanji.make(jumanji_id, **kwargs)
    if getattr(env, "num_agents", 1) > 1:
        env = MultiToSingleWrapper(env)
    frames = _frames_wrapper_class()(JumanjiToGymWrapper(env, seed=seed), render_mode)
    # float32, as torch networks take them (the flattened Dict of ints, bools and floats is float64;
    # CleanRL's dqn.py feeds its replay buffer's arrays to the Q-network as they are)
    return gymnasium.wrappers.DtypeObservation(gymnasium.wrappers.FlattenObservation(frames), np.float32)


def _frames_wrapper_class():
    import gymnasium
    import numpy as np

    class JumanjiFrames(gymnasium.Env):
        """JumanjiToGymWrapper as a gymnasium Env of its own (gymnasium.make sets the
        spec on ``unwrapped``, which the wrapper hands back as the Jumanji env), with
        render() as RGB frames of the current state (the wrapper's own render returns
        None for some envs: Snake's)."""
        metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

        def __init__(self, wrapped, render_mode: str | None):
            self.wrapped = wrapped
            self.render_mode = render_mode
            self.observation_space = wrapped.observation_space
            self.action_space = wrapped.action_space
            self._draw = rgb_render(wrapped) if render_mode == "rgb_array" else None

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            super().reset(seed=seed)
            return self.wrapped.reset(seed=seed, options=options)

        def step(self, action):
            return self.wrapped.step(action)

        def render(self):
            if self._draw is None or self.wrapped._state is None:
                return None
            return np.asarray(self._draw(self.wrapped._state))[..., :3]

        def close(self):
            self.wrapped.close()

    return JumanjiFrames


def gymnasium_ids() -> list[str]:
    """``jumanji/<Env>`` for every env Jumanji registers."""
    import jumanji

    return [f"{NAMESPACE}/{env_id}" for env_id in jumanji.registered_environments()]


def register_gymnasium() -> list[str]:
    """Register ``jumanji/<Env>`` with gymnasium for every env Jumanji registers (idempotent)."""
    import gymnasium

    ids = gymnasium_ids()
    for gym_id in ids:
        if gym_id not in gymnasium.registry:
            gymnasium.register(id=gym_id, entry_point=make_gymnasium,
                               kwargs={"jumanji_id": gym_id.split("/", 1)[1]}, disable_env_checker=True,
                               max_episode_steps=MAX_EPISODE_STEPS)
    return ids


def register_for(env_id: str) -> None:
    """Register the ``jumanji/`` ids if ``env_id`` is one (a worker calls this with its run's
    env id before making envs; for any other id it costs nothing and imports nothing)."""
    if env_id.startswith(f"{NAMESPACE}/"):
        register_gymnasium()
