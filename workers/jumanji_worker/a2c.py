"""jumanji.training's agents (A2C and the random agent) for the Jumanji worker, built as its train.py builds them.

``train.py`` (jumanji/training/train.py) builds, from a hydra config,
``setup_env`` (the env, vmapped with auto-reset), ``setup_agent`` (A2C or the
random agent), ``setup_evaluators`` (stochastic and greedy) and
``setup_training_state``, then per epoch: both evaluations, then one pmapped
``lax.scan`` of ``agent.run_epoch``. This module does exactly that, from the
same config (``jumanji_config``: the env's YAML with the run's params as
overrides); ``runtime.train`` drives it epoch by epoch and turns what the
loggers would write into telemetry. Added: the epoch function is compiled
ahead of time (``compile``), checkpoints of the whole training state (params,
optimiser state, env states, keys: what jumanji's own Logger pickles) with
resume, and ``episode`` for eval mode.
"""
from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from workers.jumanji_worker import catalog, checkpoints, shims
from workers.sdk.packages import upstream

UNIT = "epoch"  # what one call of Trainer.run_unit trains: a pmapped scan of learner steps
UPSTREAM = ("jumanji", "jax")   # what the trainer runs (workers.sdk.packages.upstream)


def jumanji_config(config: dict[str, Any]):
    """The DictConfig jumanji's setup_* functions take: configs/config.yaml's keys, the env's
    YAML, the run's params over it (and num_epochs from mosaic's ``steps`` when given)."""
    from omegaconf import OmegaConf

    params = config["params"]
    env = dict(catalog.env_config(config["env"]))
    for section, values in catalog.env_overrides(params).items():
        env[section] = {**env.get(section, {}), **values}
    if config.get("steps"):
        env["training"]["num_epochs"] = max(1, math.ceil(config["steps"] / catalog.steps_per_epoch(params)))
    return OmegaConf.create({"agent": config["algo"], "seed": config["seed"], "env": env,
                             "logger": {"type": "terminal", "save_checkpoint": False,
                                        "name": f"{config['algo']}_{env['name']}"}})


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps a training run will have done at its end (None in eval mode)."""
    if config["mode"] == "eval":
        return None
    return int(jumanji_config(config).env.training.num_epochs) * catalog.steps_per_epoch(config["params"])


class Trainer:
    """jumanji.training's objects for one run config, built as train.py builds them (the
    interface runtime.train and runtime.evaluate drive, as ppo.Trainer's)."""

    def __init__(self, config: dict[str, Any]):
        shims.install()
        import functools

        import jax
        import jax.numpy as jnp
        from jumanji.training.setup_train import setup_agent, setup_env, setup_evaluators, setup_training_state

        self.params = config["params"]
        self.cfg = cfg = jumanji_config(config)
        self.units = int(cfg.env.training.num_epochs)
        self.steps = 0
        self.key, init_key = jax.random.split(jax.random.PRNGKey(cfg.seed))
        self.env = setup_env(cfg)
        self.agent = setup_agent(cfg, self.env)
        self.stochastic_eval, self.greedy_eval = setup_evaluators(cfg, self.agent)
        self.training_state = setup_training_state(self.env, self.agent, init_key)
        t = cfg.env.training
        self.steps_per_epoch = t.n_steps * t.total_batch_size * t.num_learner_steps_per_epoch
        agent = self.agent

        @functools.partial(jax.pmap, axis_name="devices")
        def epoch_fn(training_state):
            training_state, metrics = jax.lax.scan(
                lambda training_state, _: agent.run_epoch(training_state),
                training_state, None, t.num_learner_steps_per_epoch)
            metrics = jax.tree_util.tree_map(jnp.mean, metrics)
            return training_state, metrics

        self.epoch_fn = epoch_fn

    def compile(self) -> float:
        """Compile the epoch function ahead of time; seconds it took."""
        started = time.monotonic()
        self.epoch_fn = self.epoch_fn.lower(self.training_state).compile()
        return time.monotonic() - started

    @property
    def greedy(self) -> bool:
        from jumanji.training.agents.random import RandomAgent
        return not isinstance(self.agent, RandomAgent)

    @property
    def render_env(self):
        """The Jumanji env frames are drawn from."""
        return self.stochastic_eval.eval_env

    # -- training -------------------------------------------------------------
    def evaluation_before(self, epoch: int) -> tuple[dict[str, float], tuple[float, int]] | None:
        """Both evaluations before ``epoch``, as train.py runs them (every ``eval_every`` epochs and
        before the last; the first call compiles the evaluators): scalars and one episode record,
        the mean over the evaluation's batch of whole episodes."""
        if epoch % self.params["eval_every"] and epoch != self.units - 1:
            return None
        import jax
        from jumanji.training import utils

        self.key, stochastic_key, greedy_key = jax.random.split(self.key, 3)
        started = time.monotonic()
        metrics = self.stochastic_eval.run_evaluation(self.training_state.params_state, stochastic_key)
        jax.block_until_ready(metrics)
        scalars = scalars_of(utils.first_from_device(metrics), "eval_stochastic")
        if self.greedy:
            greedy = self.greedy_eval.run_evaluation(self.training_state.params_state, greedy_key)
            jax.block_until_ready(greedy)
            scalars.update(scalars_of(utils.first_from_device(greedy), "eval_greedy"))
        scalars["time/eval_s"] = time.monotonic() - started
        return scalars, (scalars["eval_stochastic/episode_return"], round(scalars["eval_stochastic/episode_length"]))

    def run_unit(self) -> tuple[dict[str, float], tuple[float, int] | None]:
        """One epoch: its training metrics as scalars (no episode record: evaluations give those)."""
        import jax
        from jumanji.training import utils

        self.training_state, metrics = self.epoch_fn(self.training_state)
        jax.block_until_ready((self.training_state, metrics))
        self.steps += self.steps_per_epoch
        return scalars_of(utils.first_from_device(metrics), "train"), None

    def frame_state(self):
        """The first env's state of the batch on the first device (for a frame)."""
        import jax
        return jax.tree_util.tree_map(lambda x: x[0, 0], self.training_state.acting_state.state)

    # -- evaluation -----------------------------------------------------------
    def episode(self, key):
        """Play one episode of the policy (A2C: greedy, as jumanji's greedy evaluator plays it,
        first device's params; the random agent's has no params): yields (reward, state) a step."""
        import jax
        import numpy as np

        if not hasattr(self, "_play"):
            if self.greedy:
                actor = jax.tree_util.tree_map(lambda x: x[0], self.training_state.params_state.params.actor)
                policy = self.agent.make_policy(policy_params=actor, stochastic=False)
            else:
                policy = self.agent.make_policy(policy_params=None)

            def act(observation, key):
                batched = jax.tree_util.tree_map(lambda x: x[None], observation)
                out = policy(batched, key)
                action = out[0] if self.greedy else out
                return jax.numpy.squeeze(action, axis=0)

            env = self.render_env
            self._play = jax.jit(env.reset), jax.jit(env.step), jax.jit(act)
        reset, step, act = self._play
        key, reset_key = jax.random.split(key)
        state, timestep = reset(reset_key)
        length = 0
        while not bool(timestep.last()) or length == 0:
            key, action_key = jax.random.split(key)
            state, timestep = step(state, act(timestep.observation, action_key))
            length += 1
            yield float(np.asarray(timestep.reward)), state

    # -- checkpoints ----------------------------------------------------------
    def save(self, path: Path, epoch: int, config: dict[str, Any]) -> str:
        import jax

        state = {"training_state": jax.device_get(self.training_state), "key": jax.device_get(self.key),
                 "epoch": epoch, "steps": self.steps}
        network = {k: v for k, v in config["params"].items() if k.startswith("network.")}
        return checkpoints.save(path, state, {"algo": config["algo"], "env": config["env"], "epoch": epoch,
                                              "steps": self.steps, "network": network, "upstream": upstream(*UPSTREAM)})

    def load(self, checkpoint: str) -> int:
        """Restore a saved training state; the epoch it had reached (its steps in ``steps``)."""
        state = checkpoints.load(checkpoint)
        self.training_state = state["training_state"]
        self.key = state["key"]
        self.steps = int(state["steps"])
        return int(state["epoch"])


def scalars_of(metrics: dict[str, Any], prefix: str) -> dict[str, float]:
    """The scalar entries of jumanji's metrics (first device), tagged ``prefix/name``."""
    import numpy as np

    out = {}
    for name, value in metrics.items():
        array = np.asarray(value)
        if array.size:
            out[f"{prefix}/{name}"] = float(array.reshape(-1)[0])
    return out
