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

PPO is rejax's (``rejax.PPO``, on Jumanji's envs through its own adapter
``rejax.compat.jumanji2gymnax``): its params are the fields of rejax's ``PPO``
dataclass and of the mixins it is built from, with their defaults, and the
``agent_kwargs`` its ``create_agent`` pops -- all read here from rejax's
source files with ``ast`` (no jax or flax import).
"""
from __future__ import annotations

import ast
import functools
import math
import os
from typing import Any

from workers.sdk.descriptor import package_dirs

SCHEMA_VERSION = 1
ALGORITHMS = ["a2c", "random", "ppo"]
JUMANJI_ALGORITHMS = ("a2c", "random")  # jumanji.training's agents; ppo is rejax's
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


# -- PPO: rejax's ---------------------------------------------------------------
# the PPO fields create() fills itself (the env, its params, the networks, the evaluation callback)
# or that mosaic drives (the chunks are eval_freq steps, each one call of rejax's train)
REJAX_SET_BY_CREATE = ("env", "env_params", "eval_callback", "actor", "critic")
# flax.linen's activation names that are not an elementwise activation (create_agent does getattr(nn, name))
NOT_ACTIVATIONS = ("PReLU", "glu", "logsumexp", "normalize", "one_hot", "softmax", "log_softmax", "standardize")
PPO_MOSAIC_PARAMS: dict[str, dict[str, Any]] = {
    "checkpoint_every": {"type": "integer", "minimum": 0, "default": 10,
                         "description": "save the train state (params and optimiser state) every N chunks of "
                                        "eval_freq steps (0: only at the end)"},
    "eval_seeds": {"type": "integer", "minimum": 1, "default": 128,
                   "description": "episodes of each evaluation (rejax's create evaluates 128)"},
}
PPO_DESCRIPTIONS = {
    "eval_freq": "env steps between evaluations: a chunk, one call of rejax's jitted train (telemetry per chunk)",
    "total_timesteps": "env steps to train (mosaic's `steps`, when given, sets it instead)",
    "skip_initial_evaluation": "no evaluation before the first chunk",
    "learning_rate": "Adam's learning rate (actor and critic)",
    "gamma": "discount factor",
    "max_grad_norm": "clip gradients to this global norm (null: rejax's default, no clipping)",
    "num_envs": "envs stepped in parallel (vmapped)",
    "num_steps": "env steps per rollout of each env",
    "num_minibatches": "minibatches per PPO epoch (num_envs x num_steps must divide by it)",
    "num_epochs": "PPO epochs over each rollout",
    "gae_lambda": "GAE's lambda",
    "clip_eps": "PPO's clipping epsilon (policy ratio and value)",
    "vf_coef": "value loss weight",
    "ent_coef": "entropy bonus weight",
    "normalize_observations": "running mean/std normalisation of observations",
    "normalize_rewards": "scale rewards by the running std of the discounted return",
    "reward_normalization_discount": "discount of the return whose std scales the rewards",
    "agent_kwargs.hidden_layer_sizes": "the actor's and the critic's MLP layers",
    "agent_kwargs.activation": "flax.linen activation of the MLPs",
}
# Jumanji envs rejax's jumanji2gymnax refuses beyond the multi-discrete ones (its Jumanji2GymnaxEnv
# checks the action spec: flat Discrete or 1-D BoundedArray only); tests check this against the adapter.
REJAX_REFUSES = {"SearchAndRescue-v0": "rejax.compat.jumanji2gymnax only supports flat action arrays "
                                       "(SearchAndRescue-v0's actions have shape (2, 2))"}
MULTI_DISCRETE_REFUSAL = ("rejax.compat.jumanji2gymnax does not take multi-discrete actions "
                          "(MultiDiscreteArray is not supported)")


def rejax_dir() -> str | None:
    dirs = package_dirs("rejax")
    return dirs[0] if dirs else None


def _classes(path: str) -> dict[str, ast.ClassDef]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def _field_default(value: ast.expr | None) -> tuple[bool, Any]:
    """(has a default, the default) of ``struct.field(..., default=X)`` or ``= X``; jnp.inf is None."""
    if isinstance(value, ast.Call):
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    if value is None:
        return False, None
    if isinstance(value, ast.Attribute) and value.attr == "inf":
        return True, None
    try:
        return True, ast.literal_eval(value)
    except ValueError:
        return False, None


@functools.lru_cache(maxsize=1)
def ppo_fields() -> dict[str, tuple[str, Any]]:
    """rejax PPO's fields: name -> (annotation, default), subclasses' defaults first (as Python resolves them)."""
    root = rejax_dir()
    if root is None:
        return {}
    classes: dict[str, ast.ClassDef] = {}
    for file in ("algorithm.py", "mixins.py", "ppo.py"):
        classes.update(_classes(os.path.join(root, "algos", file)))
    fields: dict[str, tuple[str, Any]] = {}

    def visit(name: str) -> None:
        node = classes.get(name)
        if node is None:
            return
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                has_default, default = _field_default(item.value)
                if has_default and item.target.id not in fields and item.target.id not in REJAX_SET_BY_CREATE:
                    fields[item.target.id] = (ast.unparse(item.annotation), default)
        for base in node.bases:
            visit(base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", ""))

    visit("PPO")
    # create_agent's agent_kwargs.pop(name, default) calls
    for node in ast.walk(classes["PPO"]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pop" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "agent_kwargs":
            name, default = (ast.literal_eval(arg) for arg in node.args)
            fields[f"agent_kwargs.{name}"] = (type(default).__name__, list(default) if isinstance(default, tuple)
                                              else default)
    return fields


@functools.lru_cache(maxsize=1)
def activations() -> list[str]:
    """The activation names flax.linen exports from its activation module (create_agent: getattr(nn, name))."""
    dirs = package_dirs("flax")
    if not dirs:
        return []
    with open(os.path.join(dirs[0], "linen", "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = [alias.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "activation"
             for alias in node.names]
    return [n for n in names if n not in NOT_ACTIVATIONS]


def ppo_schema_properties() -> dict[str, Any]:
    props: dict[str, Any] = {}
    for name, (annotation, default) in ppo_fields().items():
        spec: dict[str, Any]
        if name == "agent_kwargs.activation":
            spec = {"type": "string", "enum": activations()}
        elif annotation == "bool":
            spec = {"type": "boolean"}
        elif annotation == "int":
            spec = {"type": "integer", "minimum": 1}
        elif isinstance(default, list):
            spec = {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 1}
        elif default is None:  # max_grad_norm: jnp.inf
            spec = {"type": ["number", "null"], "exclusiveMinimum": 0}
        else:
            spec = {"type": "number", "minimum": 0}
        spec["default"] = default
        spec["description"] = PPO_DESCRIPTIONS.get(name, f"rejax PPO's {name}")
        props[name] = spec
    props.update({k: dict(v) for k, v in PPO_MOSAIC_PARAMS.items()})
    return props


def ppo_envs() -> list[str]:
    """The Jumanji envs rejax's adapter takes (discrete, or flat continuous, actions)."""
    return [env for env in jumanji_ids() if ppo_refusal(env) is None]


def jumanji_ids() -> list[str]:
    from workers.sdk.envs import JUMANJI_ACTIONS
    return sorted(JUMANJI_ACTIONS)


def ppo_refusal(env: str) -> str | None:
    """Why rejax's jumanji2gymnax does not take ``env`` (None if it does)."""
    from workers.sdk.envs import JUMANJI_ACTIONS
    if JUMANJI_ACTIONS.get(env) == "multi_discrete":
        return MULTI_DISCRETE_REFUSAL
    return REJAX_REFUSES.get(env)


def ppo_chunk_steps(params: dict[str, Any]) -> int:
    """Env steps of one chunk (rejax's train with total_timesteps = eval_freq): whole PPO iterations."""
    iteration = params["num_envs"] * params["num_steps"]
    return math.ceil(params["eval_freq"] / iteration) * iteration


def ppo_chunks(params: dict[str, Any]) -> int:
    return math.ceil(params["total_timesteps"] / params["eval_freq"])


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

    if algo == "ppo":
        return {"$schema": SCHEMA_DIALECT, "type": "object", "title": f"rejax ppo on {env or 'Snake-v1'}",
                "properties": ppo_schema_properties(), "additionalProperties": False}
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
