"""The Jumanji worker: Jumanji 1.1's own A2C (and random) agents on its JAX environments, and rejax's PPO.

The daemon imports this module to list, describe and validate: it must stay
light (no jax, haiku or jumanji import; the configs are read from jumanji's
package files by ``catalog``). The worker process is ``cli.py``, the training
loop ``runtime.py``. docs/workers/jumanji.md is the user's guide.
"""
from __future__ import annotations

import math
import os
from typing import Any

from workers.jumanji_worker import catalog
from workers.sdk.config import ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, dist_version
from workers.sdk.envs import unknown_env
from workers.sdk.rundir import check_trained_on, checkpoint_dir, read_checkpoint_meta

# the pickled TrainingState inside a checkpoint directory (jumanji's own Logger calls it "training_state")
STATE_FILE = "training_state.pkl"
# what jumanji.training needs beside jumanji (its [train] extra, without the logger packages)
NEEDS = ("jumanji", "jax", "optax", "dm-haiku", "rlax", "distrax", "omegaconf", "chex")
# what algo ppo needs beside those: rejax and its flax networks, gymnax envs
PPO_NEEDS = ("rejax", "flax", "gymnax")


class JumanjiDescriptor(WorkerDescriptor):
    name = "jumanji"
    package = "workers.jumanji_worker"
    upstream = "jumanji"
    description = ("Jumanji 1.1 (JAX): its own A2C and random agents, jitted and vmapped, on its combinatorial, "
                   "routing and logic environments (BinPack, TSP, CVRP, Snake, 2048, Sudoku, ...); rejax's PPO")

    def available(self) -> bool:
        return all(dist_version(dist) is not None for dist in NEEDS)

    def capabilities(self) -> dict[str, Any]:
        envs = catalog.known_envs()
        algorithms = list(catalog.JUMANJI_ALGORITHMS)
        if all(dist_version(dist) is not None for dist in PPO_NEEDS):
            algorithms.append("ppo")
        return {
            "paradigms": ["single_agent"],
            "algorithms": algorithms,
            "env_families": ["jumanji"],
            "envs": {algo: catalog.ppo_envs() if algo == "ppo" else envs for algo in algorithms},
            "action_spaces": {algo: ["discrete", "continuous"] if algo == "ppo" else ["discrete", "multi_discrete"]
                              for algo in algorithms},
            "max_agents": 1,
            "self_play": False,
            "pause": True, "stop": ["train"],   # mosaic stop / continue: training runs
            "checkpoints": True,
            "resume": True,
            "gpu": False,
            "frames": True,
            "phases": ["compiling", "train"],
            "schema_version": catalog.SCHEMA_VERSION,
        }

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo not in catalog.ALGORITHMS:
            raise self.unknown_algo(algo, catalog.ALGORITHMS)
        if env is not None:
            self._check_env_id(algo, env)
        return catalog.schema(algo, env)

    def _check_env_id(self, algo: str, env: str) -> None:
        if algo == "ppo":  # any Jumanji env rejax's adapter takes (no jumanji.training network needed)
            if env not in catalog.jumanji_ids():
                raise unknown_env(env, catalog.jumanji_ids(), self.name)
            refusal = catalog.ppo_refusal(env)
            if refusal is not None:
                raise ConfigError("env", f"{env}: {refusal}; ppo takes {', '.join(catalog.ppo_envs())}")
        elif catalog.env_config(env) is None:
            raise unknown_env(env, catalog.known_envs(), self.name)

    # -- validation (WorkerDescriptor.validate calls check_env, then check_run) ----
    def check_env(self, config: RunConfig) -> None:
        self._check_env_id(config.algo, config.env)
        if config.device not in ("cpu", "auto"):
            raise ConfigError("device", "the installed jax is the CPU build (jax[cpu])")

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        props = self.schema(config.algo, config.env)["properties"]
        for key, value in config.params.items():  # check_params leaves array items to us
            if props[key].get("type") == "array":
                if not value:
                    raise ConfigError(f"params.{key}", "must have at least one item")
                for index, item in enumerate(value):
                    check_value(f"params.{key}[{index}]", props[key]["items"], item)
        if config.algo == "ppo":
            self._check_ppo(config, given)
        elif config.steps is not None:  # steps sets the epochs (the daemon's config.json has both, agreeing)
            epochs = self._fit_epochs(config.steps, config.params, given)
            if given.get("training.num_epochs", epochs) != epochs:
                raise ConfigError("steps", "give either steps or params.training.num_epochs, not both")
            config.params["training.num_epochs"] = epochs
        if config.checkpoint is not None:
            self._check_checkpoint(config)

    @staticmethod
    def _fit_epochs(steps: int, params: dict[str, Any], given: dict[str, Any]) -> int:
        """Epochs for ``steps`` env steps. An epoch is num_learner_steps_per_epoch updates of
        n_steps x total_batch_size env steps each (500 x 20 x 128 = 1,280,000 by default): 20,000
        steps once trained a whole one, 64 times what was asked. Unless the user set the updates
        per epoch, they are fitted (as few epochs as the default allows, updates spread evenly),
        so the run trains the steps asked, rounded up to one update's env steps. With the
        updates set, steps must come within one update of whole epochs, or the nearest are named."""
        update = params["training.n_steps"] * params["training.total_batch_size"]
        updates = max(1, math.ceil(steps / update))
        key = "training.num_learner_steps_per_epoch"
        if key not in given:
            epochs = math.ceil(updates / params[key])
            params[key] = math.ceil(updates / epochs)
            return epochs
        epoch = update * params[key]
        epochs = max(1, math.ceil(steps / epoch))
        if epochs * epoch - steps >= update:
            below = (epochs - 1) * epoch
            nearest = " or ".join(f"{n:,}" for n in (below, epochs * epoch) if n > 0)
            raise ConfigError("steps", f"{steps:,} is not a whole number of epochs of {epoch:,} env steps "
                                       f"({key} {params[key]} x n_steps {params['training.n_steps']} x "
                                       f"total_batch_size {params['training.total_batch_size']}): give {nearest}, "
                                       f"or leave {key} unset and it is fitted to the steps")
        return epochs

    @staticmethod
    def _check_ppo(config: RunConfig, given: dict[str, Any]) -> None:
        params = config.params
        if config.steps is not None:  # steps sets total_timesteps (the daemon's config.json has both, agreeing)
            if given.get("total_timesteps", config.steps) != config.steps:
                raise ConfigError("steps", "give either steps or params.total_timesteps, not both")
            params["total_timesteps"] = config.steps
        batch = params["num_envs"] * params["num_steps"]
        if batch % params["num_minibatches"]:  # rejax asserts it inside the jitted update
            raise ConfigError("params.num_minibatches", f"must divide num_envs x num_steps = {batch}")

    @staticmethod
    def _check_checkpoint(config: RunConfig) -> None:
        path = os.path.expanduser(config.checkpoint or "")
        if not os.path.isabs(path):
            raise ConfigError("checkpoint", "must be an absolute path")
        if not os.path.isfile(os.path.join(checkpoint_dir(path), STATE_FILE)):
            raise ConfigError("checkpoint", f"{path} is not a Jumanji worker checkpoint (no {STATE_FILE})")
        meta = read_checkpoint_meta(path) or {}
        check_trained_on(meta, config.env, config.algo)
        # the params that shape the saved state (network sizes; PPO: also the batch of env states)
        for key, value in (meta.get("network") or {}).items():
            if config.params.get(key) != value:
                raise ConfigError(f"params.{key}", f"the checkpoint was saved with {key} = {value!r}")


WORKER = JumanjiDescriptor()
