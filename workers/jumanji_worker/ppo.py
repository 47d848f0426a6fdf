"""PPO on Jumanji's envs: rejax's ``PPO`` (rejax 0.1.3), trained chunk by chunk.

rejax builds the env itself (``PPO.create(env="jumanji/<Env>")`` goes through
its ``rejax.compat.jumanji2gymnax``: Jumanji's env as a gymnax env,
observations flattened) and trains in one jitted function, ``algo.train``:
a ``lax.scan`` of evaluations, each after ``eval_freq`` env steps of PPO
iterations. One call for the whole run would leave the app silent until the
end, so the run is cut into chunks of ``eval_freq`` steps: the same
``train`` with ``total_timesteps = eval_freq`` and no initial evaluation,
continued from the train state it returns (``train(train_state=ts)``). The
chunk function is compiled once, ahead of time (the "compiling" phase); after
each chunk: its evaluation (rejax's ``evaluate``: whole episodes of the
policy as rejax acts, sampled) as scalars and an episode record, a frame of
the first training env, checkpoints.

Checkpoints: the train state (actor and critic params with their Adam states,
the env states, the observation/reward statistics, the key, the step count)
as its list of leaves (numpy arrays, pickled): rejax makes the state's class at
run time (``init_state``), so it is rebuilt from a fresh ``init_state`` of the
same config and its leaves replaced.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from workers.jumanji_worker import catalog, checkpoints
from workers.sdk.packages import upstream

UNIT = "chunk"  # what one call of Trainer.run_unit trains: eval_freq env steps of PPO iterations

# the params that shape the saved train state: a checkpoint is refused at submit if they differ
STATE_SHAPING = ("num_envs", "agent_kwargs.hidden_layer_sizes", "agent_kwargs.activation")
UPSTREAM = ("rejax", "jumanji", "jax")   # what the trainer runs (workers.sdk.packages.upstream)


def total_timesteps(config: dict[str, Any]) -> int:
    return config.get("steps") or config["params"]["total_timesteps"]


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps at the end of training: whole chunks of whole PPO iterations."""
    if config["mode"] == "eval":
        return None
    params = config["params"]
    return math.ceil(total_timesteps(config) / params["eval_freq"]) * catalog.ppo_chunk_steps(params)


def rejax_config(config: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``PPO.create``: rejax's fields from the params, one chunk of steps."""
    config_kwargs: dict[str, Any] = {"env": f"jumanji/{config['env']}", "agent_kwargs": {}}
    for key, value in config["params"].items():
        if key in catalog.PPO_MOSAIC_PARAMS:
            continue
        if key.startswith("agent_kwargs."):
            config_kwargs["agent_kwargs"][key.split(".", 1)[1]] = value
        elif value is not None:  # max_grad_norm null: rejax's default (jnp.inf)
            config_kwargs[key] = value
    # one call of train is one chunk: eval_freq steps, its evaluation at the end
    config_kwargs["total_timesteps"] = config_kwargs["eval_freq"]
    config_kwargs["skip_initial_evaluation"] = True
    return config_kwargs


class Trainer:
    """rejax's PPO for one config, its chunk function and its evaluation (the interface
    runtime.train and runtime.evaluate drive, as a2c.Trainer's)."""

    def __init__(self, config: dict[str, Any]):
        import jax
        from rejax import PPO
        from rejax.evaluate import evaluate

        self.params = config["params"]
        self.units = math.ceil(total_timesteps(config) / self.params["eval_freq"])
        self.algo = PPO.create(**rejax_config(config))
        self.state = self.algo.init_state(jax.random.PRNGKey(config["seed"]))
        algo, seeds = self.algo, config["params"]["eval_seeds"]
        env, env_params = algo.env, algo.env_params

        def evaluation(ts):  # rejax's create() callback, with eval_seeds episodes instead of its 128
            return evaluate(algo.make_act(ts), ts.rng, env, env_params, seeds, env_params.max_steps_in_episode)

        self.algo = algo.replace(eval_callback=lambda _algo, ts, _rng: evaluation(ts))
        self.chunk = jax.jit(lambda ts: self.algo.train(train_state=ts))
        self.evaluate = jax.jit(evaluation)

    def compile(self) -> float:
        started = time.monotonic()
        self.chunk = self.chunk.lower(self.state).compile()
        return time.monotonic() - started

    @property
    def steps(self) -> int:
        return int(self.state.global_step)

    @property
    def render_env(self):
        """The Jumanji env under rejax's wrappers (FloatObsWrapper, FlattenObsWrapper, Jumanji2GymnaxEnv)."""
        from jumanji.env import Environment

        env = self.algo.env
        while not isinstance(env, Environment):
            env = env.env
        return env

    # -- training -------------------------------------------------------------
    def evaluation_before(self, chunk: int) -> tuple[dict[str, float], tuple[float, int]] | None:
        """The evaluation rejax's train runs first (unless ``skip_initial_evaluation``)."""
        if chunk or self.params["skip_initial_evaluation"]:
            return None
        return self._evaluation(self.evaluate(self.state))

    def run_unit(self) -> tuple[dict[str, float], tuple[float, int] | None]:
        """One chunk, and the evaluation at its end."""
        import jax

        self.state, evaluation = self.chunk(self.state)
        jax.block_until_ready((self.state, evaluation))
        scalars, episode = self._evaluation(evaluation)
        scalars["train/env_steps"] = float(self.steps)
        return scalars, episode

    @staticmethod
    def _evaluation(evaluation) -> tuple[dict[str, float], tuple[float, int]]:
        scalars = evaluation_scalars(evaluation)
        return scalars, (scalars["eval/episode_return"], round(scalars["eval/episode_length"]))

    def frame_state(self):
        """The first training env's state (for a frame)."""
        import jax
        return jax.tree_util.tree_map(lambda x: x[0], self.state.env_state)

    # -- evaluation -----------------------------------------------------------
    def episode(self, key):
        """Play one episode of the policy (as rejax acts: sampled) through rejax's gymnax adapter:
        yields (reward, state) a step, the state None after the last step (the adapter's step
        auto-resets: that state is a new episode's, not drawn)."""
        import jax
        import numpy as np

        env, env_params = self.algo.env, self.algo.env_params
        if not hasattr(self, "_act"):
            self._act = jax.jit(self.algo.make_act(self.state))
        key, reset_key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)
        length, done = 0, False
        # rejax's evaluate stops at max_steps_in_episode too (the env's time limit)
        while not done and length < env_params.max_steps_in_episode:
            key, act_key, step_key = jax.random.split(key, 3)
            obs, state, reward, done, _ = env.step(step_key, state, self._act(obs, act_key), env_params)
            done = bool(done)
            length += 1
            yield float(np.asarray(reward)), None if done else state

    # -- checkpoints ----------------------------------------------------------
    def save(self, path: Path, chunk: int, config: dict[str, Any]) -> str:
        import jax
        import numpy as np

        steps = self.steps
        leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.device_get(self.state))]
        network = {k: config["params"][k] for k in STATE_SHAPING}
        return checkpoints.save(path, {"leaves": leaves, "chunk": chunk, "steps": steps},
                                {"algo": "ppo", "env": config["env"], "chunk": chunk, "steps": steps,
                                 "network": network, "upstream": upstream(*UPSTREAM)})

    def load(self, checkpoint: str) -> int:
        """Restore a saved train state into this config's; the chunk it had reached."""
        import jax
        import jax.numpy as jnp

        saved = checkpoints.load(checkpoint)
        fresh, treedef = jax.tree_util.tree_flatten(self.state)  # (a fresh state has Python scalars too)
        if len(saved["leaves"]) != len(fresh) or \
                any(a.shape != jnp.shape(b) for a, b in zip(saved["leaves"], fresh)):
            raise ValueError(f"{checkpoint}: its train state does not fit this config's (other network or num_envs)")
        # the saved leaves have the dtypes a chunk returns, which the chunk function is compiled for
        self.state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in saved["leaves"]])
        return int(saved["chunk"])


def evaluation_scalars(evaluation) -> dict[str, float]:
    """rejax's evaluation (lengths, returns of eval_seeds episodes) as scalars: mean, and return's min/max."""
    import numpy as np

    lengths, returns = (np.asarray(x).reshape(-1) for x in evaluation)
    return {"eval/episode_return": float(returns.mean()), "eval/episode_return_min": float(returns.min()),
            "eval/episode_return_max": float(returns.max()), "eval/episode_length": float(lengths.mean())}
