"""The Jumanji worker: Jumanji 1.1's own A2C (and random) agents on its JAX environments.

The daemon imports this module to list, describe and validate: it must stay
light (no jax, haiku or jumanji import; the configs are read from jumanji's
package files by ``catalog``). The worker process is ``cli.py``, the training
loop ``runtime.py``. docs/workers/jumanji.md is the user's guide.
"""
from __future__ import annotations

import json
import os
from typing import Any

from workers.jumanji_worker import catalog
from workers.sdk.config import ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, dist_version
from workers.sdk.envs import unknown_env
from workers.sdk.rundir import CHECKPOINT_META

# the pickled TrainingState inside a checkpoint directory (jumanji's own Logger calls it "training_state")
STATE_FILE = "training_state.pkl"
# what jumanji.training needs beside jumanji (its [train] extra, without the logger packages)
NEEDS = ("jumanji", "jax", "optax", "dm-haiku", "rlax", "distrax", "omegaconf", "chex")


def checkpoint_dir(path: str) -> str:
    """The checkpoint directory (users may point at the state file inside it)."""
    path = os.path.expanduser(path)
    return os.path.dirname(path) if os.path.isfile(path) else path


def read_checkpoint_meta(path: str) -> dict[str, Any] | None:
    meta_file = os.path.join(checkpoint_dir(path), CHECKPOINT_META)
    if not os.path.isfile(meta_file):
        return None
    with open(meta_file, encoding="utf-8") as f:
        return json.load(f)


class JumanjiDescriptor(WorkerDescriptor):
    name = "jumanji"
    package = "workers.jumanji_worker"
    upstream = "jumanji"
    description = ("Jumanji 1.1 (JAX): its own A2C and random agents, jitted and vmapped, on its combinatorial, "
                   "routing and logic environments (BinPack, TSP, CVRP, Snake, 2048, Sudoku, ...)")

    def available(self) -> bool:
        return all(dist_version(dist) is not None for dist in NEEDS)

    def capabilities(self) -> dict[str, Any]:
        envs = catalog.known_envs()
        return {
            "paradigms": ["single_agent"],
            "algorithms": list(catalog.ALGORITHMS),
            "env_families": ["jumanji"],
            "envs": {algo: envs for algo in catalog.ALGORITHMS},
            "action_spaces": {algo: ["discrete", "multi_discrete"] for algo in catalog.ALGORITHMS},
            "max_agents": 1,
            "self_play": False,
            "pause": True,
            "checkpoints": True,
            "resume": True,
            "gpu": False,
            "frames": True,
            "phases": ["compiling", "train"],
            "schema_version": catalog.SCHEMA_VERSION,
        }

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo not in catalog.ALGORITHMS:
            raise ConfigError("algo", f"unknown algorithm {algo!r} for worker 'jumanji'; "
                                      f"choose from {', '.join(catalog.ALGORITHMS)}")
        if env is not None and catalog.env_config(env) is None:
            raise unknown_env(env, catalog.known_envs(), self.name)
        return catalog.schema(algo, env)

    # -- validation (WorkerDescriptor.validate calls check_env, then check_run) ----
    def check_env(self, config: RunConfig) -> None:
        if catalog.env_config(config.env) is None:
            raise unknown_env(config.env, catalog.known_envs(), self.name)
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
        if config.steps is not None and "training.num_epochs" in given:
            raise ConfigError("steps", "give either steps or params.training.num_epochs, not both")
        if config.checkpoint is not None:
            self._check_checkpoint(config)

    @staticmethod
    def _check_checkpoint(config: RunConfig) -> None:
        path = os.path.expanduser(config.checkpoint or "")
        if not os.path.isabs(path):
            raise ConfigError("checkpoint", "must be an absolute path")
        if not os.path.isfile(os.path.join(checkpoint_dir(path), STATE_FILE)):
            raise ConfigError("checkpoint", f"{path} is not a Jumanji worker checkpoint (no {STATE_FILE})")
        meta = read_checkpoint_meta(path) or {}
        if meta.get("env") != config.env:
            raise ConfigError("checkpoint", f"was trained on {meta.get('env')}, not {config.env}")
        if meta.get("algo") != config.algo:
            raise ConfigError("checkpoint", f"is a {meta.get('algo')} checkpoint, not {config.algo}")
        network = {k: v for k, v in config.params.items() if k.startswith("network.")}
        for key, value in (meta.get("network") or {}).items():
            if network.get(key) != value:
                raise ConfigError(f"params.{key}", f"the checkpoint's network has {key} = {value!r}")


WORKER = JumanjiDescriptor()
