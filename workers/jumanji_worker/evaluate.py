"""The Jumanji worker's eval mode (``runtime.evaluate``): a checkpoint's policy plays
``eval_episodes`` episodes one env at a time, with frames, either trainer's (a2c or ppo).
"""
from __future__ import annotations

from typing import Any

# first: it sets what jax reads at import
from workers.jumanji_worker.run_setup import renderer, trainer_module
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.telemetry import Emitter


def run(config: dict[str, Any], emitter: Emitter) -> int:
    """Play ``eval_episodes`` episodes of the checkpoint's policy, one env at a time, with frames."""
    import jax

    module = trainer_module(config)
    emitter.run_started("jumanji", config["algo"], config["env"], total_steps=None, upstream=upstream(*module.UPSTREAM))
    emitter.phase("setup", step=0)
    tr = module.Trainer({**config, "steps": None})
    tr.load(config["checkpoint"])
    frames = env_frames(config)
    render = renderer(frames, tr)
    emitter.phase("compiling", step=0)
    key = jax.random.PRNGKey(config["seed"])
    steps = 0
    try:
        for _ in range(config["eval_episodes"]):
            key, episode_key = jax.random.split(key)
            total, length = 0.0, 0
            for reward, state in tr.episode(episode_key):
                if steps == 0:  # the first step compiled reset, step and the policy
                    emitter.phase("eval", step=0)
                total += reward
                length += 1
                steps += 1
                if render is not None and state is not None:
                    frames.maybe_publish(render, state)
            emitter.episode(steps, total, length)
    finally:
        if frames is not None:
            frames.close()
    emitter.run_completed(step=steps)
    return 0
