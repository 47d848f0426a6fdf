"""MiniGrid as the flat observation every worker's MLP takes: one wrapper, shared.

MiniGrid's envs observe ``Dict(image: Box(7, 7, 3), direction: Discrete(4), mission: Text)``:
the agent's egocentric 7x7 view, each cell (object, colour, state). ``make(env_id)`` keeps the
view alone (minigrid's own ``ImgObsWrapper``: the view turns with the agent, so it carries the
direction; the mission text is the same in every episode of these envs) flattened to
``Box(147,)`` uint8 (gymnasium's ``FlattenObservation``), what Tianshou's MLPs take.

The human worker records its plays through the same ``make``, so a recorded dataset's
observations are what a learner on the same env id sees (docs/play.md, demonstrations).
``render()`` still gives the full grid in rgb for live frames.
"""
from __future__ import annotations

from typing import Any


def make(env_id: str, render_mode: str | None = None, **kwargs: Any) -> Any:
    """A MiniGrid or BabyAI env whose observation is its agent's view alone, flattened (no mission text)."""
    import gymnasium as gym
    import minigrid  # noqa: F401 -- registers MiniGrid's and BabyAI's ids
    from minigrid.wrappers import ImgObsWrapper

    return gym.wrappers.FlattenObservation(ImgObsWrapper(gym.make(env_id, render_mode=render_mode, **kwargs)))
