"""The example worker's entry point, imported in the worker process only (heavy imports are fine here).

``train``: a random agent pushes the cart for ``steps`` env steps, then ``run_completed``, and
returns 0; an exception or a cancel is reported by the shared guard, not here. A worker with
checkpoints has ``evaluate(config, emitter)`` beside it for mode "eval": a checkpoint's policy
plays ``eval_episodes`` episodes (the example has no checkpoints, so no eval mode).
"""
import gymnasium as gym
import numpy as np

from workers.sdk.frames import env_frames


class Agent:
    """The policy: push left with probability ``push_left``."""

    def __init__(self, config):
        self.push_left = config["params"]["push_left"]
        self.rng = np.random.default_rng(config["seed"])

    def act(self):
        return 0 if self.rng.random() < self.push_left else 1


def train(config, emitter):
    p = config["params"]
    env = gym.make(config["env"], render_mode="rgb_array" if config["frames"]["enabled"] else None)
    frames = env_frames(config)  # live frames through FastLane, or None when the run has them off
    agent = Agent(config)
    emitter.run_started("example", config["algo"], config["env"], total_steps=config["steps"],
                        upstream=f"gymnasium=={gym.__version__}")
    env.reset(seed=config["seed"])
    episode_return, length, returns = 0.0, 0, []
    try:
        for step in range(1, config["steps"] + 1):
            _, reward, terminated, truncated, _ = env.step(agent.act())
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
            emitter.heartbeat(step, every=1.0)
    finally:  # a cancel or a failure passes through here too: close what the run opened
        env.close()
        if frames is not None:
            frames.close()
    emitter.run_completed(step=config["steps"])
    return 0
