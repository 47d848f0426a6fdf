"""The worker process: python -m mosaic_example_worker.cli --config config.json (cwd: the run directory)."""
import sys

import gymnasium as gym
import numpy as np

from workers.sdk.frames import env_frames
from workers.sdk.worker_cli import start
from mosaic_example_worker import WORKER


def main(argv=None):
    emitter, config = start("python -m mosaic_example_worker.cli", argv, WORKER)  # stdout is now the wire
    if config is None:
        return 2  # start() emitted run_failed naming the problem
    p = config["params"]
    env = gym.make(config["env"], render_mode="rgb_array" if config["frames"]["enabled"] else None)
    frames = env_frames(config)  # live frames through FastLane, or None when the run has them off
    rng = np.random.default_rng(config["seed"])
    emitter.run_started("example", config["algo"], config["env"], total_steps=config["steps"],
                        upstream=f"gymnasium=={gym.__version__}")
    env.reset(seed=config["seed"])
    episode_return, length, returns = 0.0, 0, []
    for step in range(1, config["steps"] + 1):
        action = 0 if rng.random() < p["push_left"] else 1
        _, reward, terminated, truncated, _ = env.step(action)
        episode_return, length = episode_return + reward, length + 1
        if frames is not None:
            frames.maybe_publish(env.render)  # renders only when the rate limit lets a frame through
        if terminated or truncated:
            emitter.episode(step, episode_return, length)
            returns.append(episode_return)
            n = p["episodes_per_log"]
            if len(returns) % n == 0:
                emitter.scalar("random/mean_return", sum(returns[-n:]) / n, step)
            env.reset()
            episode_return, length = 0.0, 0
    emitter.run_completed(step=config["steps"])
    emitter.close()
    if frames is not None:
        frames.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
