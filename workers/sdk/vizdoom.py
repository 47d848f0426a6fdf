"""ViZDoom as the image observation every worker's CNN takes: one wrapper, shared.

vizdoom.gymnasium_wrapper's envs (``VizdoomBasic-v1``...) observe
``Dict(screen: Box(240, 320, 3), gamevariables: Box(n,))``. The learners' image
networks (Tianshou's DQNet, XuanCe's CNN representations, RLlib's default CNN
encoder) take one Box image, as they do on Atari. ``make(env_id)`` makes the env
and turns it into what the DQN-style Atari preprocessing gives:

- the ``screen`` only (the game variables are left out: health, ammo... are
  in the picture);
- grey, resized to 84x84 (``cv2.INTER_AREA``, as Atari's WarpFrame);
- the last 4 frames stacked, channels first ``(4, 84, 84)`` (Tianshou,
  XuanCe) or last ``(84, 84, 4)`` (RLlib's encoder, which convolves HWC),
  uint8 0..255;
- ``frame_skip`` 4 (vizdoom's own argument: the action is repeated, the
  engine skips rendering of the frames in between).

``render()`` still gives the rgb screen (240x320) for live frames. A worker's
env-making path calls ``make`` for any id whose family is ``vizdoom``
(``workers.sdk.envs.env_family``), so users type ``VizdoomBasic-v1``.
"""
from __future__ import annotations

from typing import Any

SIZE = 84            # pixels, square, as Atari
STACK = 4            # frames stacked
FRAME_SKIP = 4       # engine tics an action lasts


def make(env_id: str, render_mode: str | None = None, channels_first: bool = True, frame_skip: int = FRAME_SKIP,
         **kwargs: Any):
    """The ViZDoom env ``env_id`` with screen-only, grey 84x84, 4-stacked uint8 observations."""
    import gymnasium as gym

    from workers.sdk.registration import register_family_of

    register_family_of(env_id)
    env = gym.make(env_id, render_mode=render_mode, frame_skip=frame_skip, **kwargs)
    return screen_only(env, channels_first=channels_first)


def screen_only(env, channels_first: bool = True, size: int = SIZE, stack: int = STACK):
    """Wrap a made ViZDoom env: Dict observation -> Box (stack, size, size) or (size, size, stack)."""
    import gymnasium as gym
    import numpy as np
    from gymnasium.wrappers import FrameStackObservation, GrayscaleObservation, ResizeObservation, TransformObservation

    screen_space = env.observation_space["screen"]
    env = TransformObservation(env, lambda obs: obs["screen"], screen_space)
    env = GrayscaleObservation(env, keep_dim=False)
    env = ResizeObservation(env, (size, size))
    env = FrameStackObservation(env, stack)          # (stack, size, size)
    if not channels_first:
        shape = (size, size, stack)
        env = TransformObservation(env, lambda obs: np.transpose(obs, (1, 2, 0)),
                                   gym.spaces.Box(0, 255, shape, np.uint8))
    return env
