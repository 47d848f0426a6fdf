"""What both modes of the Jumanji worker process share (training in ``runtime``, eval in
``evaluate``): the environment jax reads at import, the run's trainer module, its rgb renderer.

Imported before jax by either mode: it sets what jax and matplotlib read at import.
"""
from __future__ import annotations

import os
from typing import Any

# Before jax is imported: matplotlib viewers draw off-screen; XLA on CPU is told to
# keep to one device (pmap over one device is what jumanji's train.py does on a laptop).
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from workers.sdk import registration  # noqa: E402

registration.prepare_process()  # the JAX compilation cache under the home: a resumed run does not compile again


def trainer_module(config: dict[str, Any]):
    """The module of the run's trainer: ``ppo`` (rejax) or ``a2c`` (jumanji.training's agents)."""
    if config["algo"] == "ppo":
        from workers.jumanji_worker import ppo
        return ppo
    from workers.jumanji_worker import a2c
    return a2c


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps a training run will have done at its end (None in eval mode)."""
    return trainer_module(config).total_steps(config)


def renderer(frames, tr):
    """The rgb renderer of the trainer's Jumanji env when the run has frames, else None."""
    if frames is None:
        return None
    from workers.sdk.jumanji_envs import rgb_render
    return rgb_render(tr.render_env)
