"""What the Jumanji worker runs, read from Jumanji's own training configs.

``jumanji/training/configs/env/<name>.yaml`` (hydra configs, read here with
omegaconf from the installed package's files: no jax import) holds, per env, the
registered env id, the network's sizes, the training and evaluation batch sizes
and the A2C hyperparameters. An env is offered when it has such a config and a
network package in ``jumanji/training/networks/``: that is what
``jumanji.training.setup_train`` can build an agent for.

The params' names are the configs' own paths below ``env.`` ("training.n_steps",
"a2c.learning_rate", "network.num_channels"): what a Jumanji user writes as a
hydra override (``env.training.n_steps=10``), and their defaults are the files'.
"""
from __future__ import annotations

import functools
import os
from typing import Any

from workers.sdk.descriptor import package_dirs

SCHEMA_VERSION = 1
ALGORITHMS = ["a2c", "random"]
# sections of an env config that are params, per algorithm (the random agent has no network nor optimiser)
SECTIONS = {"a2c": ("training", "evaluation", "a2c", "network"), "random": ("training", "evaluation")}
# Of mosaic's own, not Jumanji's.
MOSAIC_PARAMS: dict[str, dict[str, Any]] = {
    "checkpoint_every": {"type": "integer", "minimum": 0, "default": 10,
                         "description": "save the training state (params and optimiser state) every N epochs "
                                        "(0: only at the end)"},
    "eval_every": {"type": "integer", "minimum": 1, "default": 1,
                   "description": "run jumanji's evaluators (stochastic, then greedy) before every Nth epoch"},
}
# jumanji's evaluation is a batch of whole episodes, jitted: large batches cost memory and
# compile time, the defaults (up to 10000 episodes) are sized for accelerators.
DESCRIPTIONS = {
    "training.num_epochs": "epochs to train (mosaic's `steps`, when given, sets it: steps / env steps per epoch)",
    "training.num_learner_steps_per_epoch": "A2C updates per epoch, scanned in one jitted call",
    "training.n_steps": "env steps per rollout of each env of the batch",
    "training.total_batch_size": "envs stepped in parallel (vmapped)",
    "evaluation.eval_total_batch_size": "episodes of the stochastic evaluation before each epoch",
    "evaluation.greedy_eval_total_batch_size": "episodes of the greedy evaluation before each epoch",
    "a2c.normalize_advantage": "standardise the advantages",
    "a2c.discount_factor": "discount factor (gamma)",
    "a2c.bootstrapping_factor": "TD(lambda)'s lambda",
    "a2c.l_pg": "policy-gradient loss weight",
    "a2c.l_td": "critic (TD) loss weight",
    "a2c.l_en": "entropy bonus weight",
    "a2c.learning_rate": "Adam's learning rate",
}


def jumanji_dir() -> str | None:
    dirs = package_dirs("jumanji")
    return dirs[0] if dirs else None


@functools.lru_cache(maxsize=1)
def env_configs() -> dict[str, dict[str, Any]]:
    """registered env id -> its training config (a plain dict), for every env with networks."""
    root = jumanji_dir()
    if root is None:
        return {}
    from omegaconf import OmegaConf  # pure Python; reads YAML 1.1 numbers (3e-4) as floats

    configs_dir = os.path.join(root, "training", "configs", "env")
    networks_dir = os.path.join(root, "training", "networks")
    if not os.path.isdir(configs_dir):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for file in sorted(os.listdir(configs_dir)):
        name, ext = os.path.splitext(file)
        if ext != ".yaml" or not os.path.isdir(os.path.join(networks_dir, name)):
            continue
        config = OmegaConf.to_container(OmegaConf.load(os.path.join(configs_dir, file)), resolve=True)
        out[config["registered_version"]] = config
    return out


def known_envs() -> list[str]:
    return list(env_configs())


def env_config(env: str) -> dict[str, Any] | None:
    return env_configs().get(env)


def _property(key: str, value: Any) -> dict[str, Any]:
    spec: dict[str, Any]
    if isinstance(value, bool):
        spec = {"type": "boolean"}
    elif isinstance(value, int):
        spec = {"type": "integer", "minimum": 0 if key.startswith("a2c.") else 1}
    elif isinstance(value, float):
        spec = {"type": "number", "minimum": 0}
    elif isinstance(value, list):
        item = "integer" if all(isinstance(v, int) and not isinstance(v, bool) for v in value) else "number"
        spec = {"type": "array", "items": {"type": item, "minimum": 1}, "minItems": 1}
    else:
        spec = {"type": "string"}
    spec["default"] = value
    spec["description"] = DESCRIPTIONS.get(key, f"jumanji's env.{key}")
    return spec


def schema(algo: str, env: str | None = None) -> dict[str, Any]:
    """The params of ``algo`` on ``env`` (Snake-v1 when no env is given: jumanji's default)."""
    from workers.sdk.config import SCHEMA_DIALECT

    config = env_config(env) if env else None
    if config is None:
        config = env_config("Snake-v1") or {}
    props: dict[str, Any] = {}
    for section in SECTIONS[algo]:
        for key, value in (config.get(section) or {}).items():
            props[f"{section}.{key}"] = _property(f"{section}.{key}", value)
    props.update({k: dict(v) for k, v in MOSAIC_PARAMS.items()})
    return {"$schema": SCHEMA_DIALECT, "type": "object", "title": f"jumanji {algo} on {config.get('registered_version', '?')}",
            "properties": props, "additionalProperties": False}


def env_overrides(params: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Params as the nested ``env`` sections of jumanji's config ({"training": {"n_steps": 10}})."""
    out: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        if key in MOSAIC_PARAMS:
            continue
        section, name = key.split(".", 1)
        out.setdefault(section, {})[name] = value
    return out


def steps_per_epoch(params: dict[str, Any]) -> int:
    """Env steps of one epoch, as jumanji's train.py counts them."""
    return params["training.n_steps"] * params["training.total_batch_size"] * \
        params["training.num_learner_steps_per_epoch"]
