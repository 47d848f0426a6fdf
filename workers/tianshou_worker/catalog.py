"""What the Tianshou worker runs, as data, and its params' schemas read from Tianshou's own source.

Imported by the daemon (through the descriptor): no tianshou, torch or gymnasium
import. A schema is made from the installed Tianshou's typed signatures and
docstrings, read with ``ast`` from its source files (no import):

- the algorithm class's ``__init__`` (``DQN(gamma=0.99, n_step_return_horizon=1, ...)``),
- the policy class's ``__init__`` (``DiscreteQLearningPolicy(eps_training=0.0, ...)``),
- the trainer's params dataclass (``OffPolicyTrainerParams``: batch_size,
  collection_step_num_env_steps, ...; each field's docstring),

taking every parameter whose type is a number, bool or string and whose default
is a literal; ``:param name:`` text (or the field's docstring) is its description.
Parameters that are objects (networks, optimizers, collectors, callbacks) are
built by the worker (runtime.py) from mosaic's own few params (``MOSAIC_PARAMS``:
hidden sizes, learning rates, env and buffer sizes). A newer Tianshou with a new
parameter shows it in the form without a change here.
"""
from __future__ import annotations

import ast
import functools
import os
import re
from typing import Any

from workers.sdk.config import SCHEMA_DIALECT, ConfigError
from workers.sdk.descriptor import package_dirs
from workers.sdk.envs import (
    ATARI,
    JUMANJI_GYM_ENVS,
    MINIGRID,
    MINIGRID_ENVS,
    MULTIGRID,
    VIZDOOM,
    gymnasium_envs,
    multigrid_envs,
    resolve_alias,
)

ONLINE_OFF, ONLINE_ON, OFFLINE = "off-policy", "on-policy", "offline"
TRAINER_PARAMS = {ONLINE_OFF: "OffPolicyTrainerParams", ONLINE_ON: "OnPolicyTrainerParams",
                  OFFLINE: "OfflineTrainerParams"}

# name users type -> the algorithm class (module under tianshou/, class), its policy
# class, how it trains, which actions it takes, and mosaic's own params it needs.
ALGORITHMS: dict[str, dict[str, Any]] = {
    "dqn": {"cls": ("algorithm/modelfree/dqn.py", "DQN"), "policy": ("algorithm/modelfree/dqn.py",
            "DiscreteQLearningPolicy"), "kind": ONLINE_OFF, "actions": "discrete", "nets": ("lr", "dueling")},
    "c51": {"cls": ("algorithm/modelfree/c51.py", "C51"), "policy": ("algorithm/modelfree/c51.py", "C51Policy"),
            "kind": ONLINE_OFF, "actions": "discrete", "nets": ("lr",)},
    "rainbow": {"cls": ("algorithm/modelfree/rainbow.py", "RainbowDQN"),
                "policy": ("algorithm/modelfree/c51.py", "C51Policy"), "kind": ONLINE_OFF, "actions": "discrete",
                "nets": ("lr",)},
    "qrdqn": {"cls": ("algorithm/modelfree/qrdqn.py", "QRDQN"),
              "policy": ("algorithm/modelfree/qrdqn.py", "QRDQNPolicy"), "kind": ONLINE_OFF, "actions": "discrete",
              "nets": ("lr",)},
    "iqn": {"cls": ("algorithm/modelfree/iqn.py", "IQN"), "policy": ("algorithm/modelfree/iqn.py", "IQNPolicy"),
            "kind": ONLINE_OFF, "actions": "discrete", "nets": ("lr", "num_cosines")},
    "fqf": {"cls": ("algorithm/modelfree/fqf.py", "FQF"), "policy": ("algorithm/modelfree/fqf.py", "FQFPolicy"),
            "kind": ONLINE_OFF, "actions": "discrete", "nets": ("lr", "num_cosines", "fraction_lr")},
    "reinforce": {"cls": ("algorithm/modelfree/reinforce.py", "Reinforce"),
                  "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
                  "actions": "both", "nets": ("lr",)},
    "a2c": {"cls": ("algorithm/modelfree/a2c.py", "A2C"),
            "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
            "actions": "both", "nets": ("lr",)},
    "ppo": {"cls": ("algorithm/modelfree/ppo.py", "PPO"),
            "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
            "actions": "both", "nets": ("lr",)},
    "npg": {"cls": ("algorithm/modelfree/npg.py", "NPG"),
            "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
            "actions": "both", "nets": ("lr",)},
    "trpo": {"cls": ("algorithm/modelfree/trpo.py", "TRPO"),
             "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
             "actions": "both", "nets": ("lr",)},
    "ddpg": {"cls": ("algorithm/modelfree/ddpg.py", "DDPG"),
             "policy": ("algorithm/modelfree/ddpg.py", "ContinuousDeterministicPolicy"), "kind": ONLINE_OFF,
             "actions": "continuous", "nets": ("actor_lr", "critic_lr", "exploration_noise")},
    "td3": {"cls": ("algorithm/modelfree/td3.py", "TD3"),
            "policy": ("algorithm/modelfree/ddpg.py", "ContinuousDeterministicPolicy"), "kind": ONLINE_OFF,
            "actions": "continuous", "nets": ("actor_lr", "critic_lr", "exploration_noise")},
    "sac": {"cls": ("algorithm/modelfree/sac.py", "SAC"), "policy": ("algorithm/modelfree/sac.py", "SACPolicy"),
            "kind": ONLINE_OFF, "actions": "continuous", "nets": ("actor_lr", "critic_lr")},
    "discrete_sac": {"cls": ("algorithm/modelfree/discrete_sac.py", "DiscreteSAC"),
                     "policy": ("algorithm/modelfree/discrete_sac.py", "DiscreteSACPolicy"), "kind": ONLINE_OFF,
                     "actions": "discrete", "nets": ("actor_lr", "critic_lr")},
    "redq": {"cls": ("algorithm/modelfree/redq.py", "REDQ"), "policy": ("algorithm/modelfree/redq.py",
             "REDQPolicy"), "kind": ONLINE_OFF, "actions": "continuous", "nets": ("actor_lr", "critic_lr")},
    # offline: trained from a recorded dataset (the run config's "dataset")
    "bcq": {"cls": ("algorithm/imitation/bcq.py", "BCQ"), "policy": ("algorithm/imitation/bcq.py", "BCQPolicy"),
            "kind": OFFLINE, "actions": "continuous", "nets": ("actor_lr", "critic_lr", "vae_lr")},
    "cql": {"cls": ("algorithm/imitation/cql.py", "CQL"), "policy": ("algorithm/modelfree/sac.py", "SACPolicy"),
            "kind": OFFLINE, "actions": "continuous", "nets": ("actor_lr", "critic_lr")},
    "td3_bc": {"cls": ("algorithm/imitation/td3_bc.py", "TD3BC"),
               "policy": ("algorithm/modelfree/ddpg.py", "ContinuousDeterministicPolicy"), "kind": OFFLINE,
               "actions": "continuous", "nets": ("actor_lr", "critic_lr")},
    "discrete_bcq": {"cls": ("algorithm/imitation/discrete_bcq.py", "DiscreteBCQ"),
                     "policy": ("algorithm/imitation/discrete_bcq.py", "DiscreteBCQPolicy"), "kind": OFFLINE,
                     "actions": "discrete", "nets": ("lr",)},
    "discrete_cql": {"cls": ("algorithm/imitation/discrete_cql.py", "DiscreteCQL"),
                     "policy": ("algorithm/modelfree/qrdqn.py", "QRDQNPolicy"), "kind": OFFLINE,
                     "actions": "discrete", "nets": ("lr",)},
    "discrete_crr": {"cls": ("algorithm/imitation/discrete_crr.py", "DiscreteCRR"),
                     "policy": ("algorithm/modelfree/reinforce.py", "DiscreteActorPolicy"), "kind": OFFLINE,
                     "actions": "discrete", "nets": ("lr",)},
    "bc": {"cls": ("algorithm/imitation/imitation_base.py", "OfflineImitationLearning"),
           "policy": ("algorithm/imitation/imitation_base.py", "ImitationPolicy"), "kind": OFFLINE,
           "actions": "both", "nets": ("lr",)},
    # GAIL: on-policy PPO whose reward comes from a discriminator trained against the dataset.
    # Continuous only: Tianshou 2.0.1's GAIL.disc concatenates obs with the raw action, and a
    # discrete action (1-D) fails in torch.cat
    "gail": {"cls": ("algorithm/imitation/gail.py", "GAIL"),
             "policy": ("algorithm/modelfree/reinforce.py", "ProbabilisticActorPolicy"), "kind": ONLINE_ON,
             "actions": "continuous", "nets": ("lr", "disc_lr"), "dataset": True},
}

# Tianshou's defaults that suit an Atari-sized run, replaced by ones a CartPole-sized
# run on a CPU finishes with (the form shows these; Tianshou's own is in the description).
MOSAIC_DEFAULTS: dict[str, Any] = {
    "epoch_num_steps": 5000,          # Tianshou: 30000
    "collection_step_num_env_steps": None,  # set per kind below
    "test_step_num_episodes": 5,      # Tianshou: 1
    "target_update_freq": 320,        # DQN family: Tianshou 0 (no target network)
    "n_step_return_horizon": 3,       # DQN family: Tianshou 1
    "eps_training": 0.1,              # Tianshou: 0.0 (no exploration)
    "eps_inference": 0.05,            # Tianshou: 0.0
    "update_step_num_gradient_steps_per_sample": 0.1,  # off-policy: Tianshou 1.0
}
COLLECT_STEPS = {ONLINE_OFF: 10, ONLINE_ON: 2000}

# Tianshou parameters mosaic sets itself (not user params): objects, or facts of the env.
NOT_PARAMS = {"policy", "optim", "critic", "critic2", "critic_optim", "critic2_optim", "actor", "actor_optim",
              "policy_optim", "model", "action_space", "observation_space", "action_scaling", "action_bound_method",
              "dist_fn", "fraction_model", "fraction_optim", "vae", "vae_optim", "imitator", "q_model", "disc_net",
              "disc_optim", "expert_buffer", "exploration_noise", "alpha", "actor_perturbation", "training_collector",
              "test_collector", "buffer", "logger", "verbose", "show_progress", "resume_from_log", "max_epochs",
              "multi_agent_return_reduction", "test_in_training", "collection_step_num_episodes",
              "deterministic_eval", "max_action", "lr_scheduler", "ensemble_size", "subset_size"}

# mosaic's own params: what the networks, optimizers, envs and buffer are made of.
MOSAIC_PARAMS: dict[str, dict[str, Any]] = {
    "hidden_sizes": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 4096},
                     "default": [64, 64], "description": "hidden layer sizes of every network (tianshou Net)"},
    "lr": {"type": "number", "exclusiveMinimum": 0, "default": 1e-3, "description": "Adam learning rate"},
    "actor_lr": {"type": "number", "exclusiveMinimum": 0, "default": 1e-3,
                 "description": "Adam learning rate of the actor"},
    "critic_lr": {"type": "number", "exclusiveMinimum": 0, "default": 1e-3,
                  "description": "Adam learning rate of the critic(s)"},
    "vae_lr": {"type": "number", "exclusiveMinimum": 0, "default": 1e-3, "description": "BCQ: the VAE's learning rate"},
    "disc_lr": {"type": "number", "exclusiveMinimum": 0, "default": 5e-4,
                "description": "GAIL: the discriminator's learning rate"},
    "fraction_lr": {"type": "number", "exclusiveMinimum": 0, "default": 2.5e-9,
                    "description": "FQF: RMSprop learning rate of the fraction proposal network"},
    "num_cosines": {"type": "integer", "minimum": 1, "default": 64,
                    "description": "IQN/FQF: cosine embeddings of the quantile fractions"},
    "dueling": {"type": "boolean", "default": False, "description": "DQN: dueling heads (value and advantage)"},
    "exploration_noise": {"type": "number", "minimum": 0, "default": 0.1,
                          "description": "DDPG/TD3: std of the Gaussian exploration noise (in action units)"},
    "training_envs": {"type": "integer", "minimum": 1, "maximum": 256, "default": 4,
                      "description": "training envs (tianshou DummyVectorEnv)"},
    "test_envs": {"type": "integer", "minimum": 0, "maximum": 256, "default": 2,
                  "description": "test envs: a test step after each epoch (0: none)"},
    "buffer_size": {"type": "integer", "minimum": 1, "default": 20000,
                    "description": "replay buffer size (off-policy), in transitions"},
    "ensemble": {"type": "integer", "minimum": 2, "maximum": 64, "default": 10,
                 "description": "REDQ: critics in the ensemble"},
    "torch_threads": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1,
                      "description": "torch intra-op threads"},
    "checkpoint_every": {"type": "integer", "minimum": 0, "default": 1,
                         "description": "save a checkpoint (policy and optimizers) every N epochs (0: only at the end)"},
    # exploration annealing as Tianshou's own EpochTrainCallbackDQNEpsLinearDecay does it
    "eps_training_final": {"type": ["number", "null"], "minimum": 0, "maximum": 1, "default": None,
                           "description": "DQN family: anneal eps_training linearly to this over eps_decay_steps env "
                                          "steps (Tianshou's EpochTrainCallbackDQNEpsLinearDecay); empty: constant"},
    "eps_decay_steps": {"type": "integer", "minimum": 1, "default": 50000,
                        "description": "DQN family: env steps over which eps_training falls to eps_training_final"},
}


def tianshou_dir() -> str | None:
    dirs = package_dirs("tianshou")
    return dirs[0] if dirs else None


def available() -> bool:
    return tianshou_dir() is not None


# -- reading Tianshou's signatures -------------------------------------------------
_JSON_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "None": "null"}


def _json_types(annotation: str) -> list[str] | None:
    """JSON types of a Python annotation made of int/float/bool/str/None (others dropped:
    ``float | Alpha`` is a number); None when nothing of it is a plain type."""
    parts = [p.strip() for p in annotation.replace("Optional[", "").rstrip("]").split("|")]
    types = [_JSON_TYPES[p] for p in parts if p in _JSON_TYPES]
    if not [t for t in types if t != "null"]:
        return None
    if "number" in types and "integer" in types:
        types.remove("integer")
    return list(dict.fromkeys(types))


def _param_docs(doc: str) -> dict[str, str]:
    """``:param name: text`` sections of a docstring, each as one line."""
    found: dict[str, str] = {}
    for match in re.finditer(r":param (\w+):(.*?)(?=\n\s*:param |\n\s*:return|\Z)", doc, re.S):
        found[match.group(1)] = " ".join(match.group(2).split())
    return found


@functools.lru_cache(maxsize=None)
def _module(path: str) -> ast.Module:
    root = tianshou_dir()
    if root is None:
        raise ConfigError("worker", "tianshou is not installed (pip install -e '.[tianshou]')")
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return ast.parse(f.read())


def _class(path: str, name: str) -> ast.ClassDef:
    for node in _module(path).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"tianshou/{path} has no class {name}")


def _literal(node: ast.AST | None) -> tuple[bool, Any]:
    if node is None:
        return False, None
    try:
        return True, ast.literal_eval(node)
    except ValueError:
        return False, None


def init_params(path: str, name: str) -> dict[str, dict[str, Any]]:
    """The plain-typed, literal-defaulted parameters of a class's ``__init__`` as JSON schema properties."""
    init = next((n for n in _class(path, name).body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None)
    if init is None:
        return {}
    docs = _param_docs(ast.get_docstring(init) or "")
    args = init.args
    positional = args.posonlyargs + args.args
    pos_defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip(positional, pos_defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))
    out: dict[str, dict[str, Any]] = {}
    for arg, default in pairs:
        if arg.arg == "self" or arg.annotation is None:
            continue
        spec = _property(ast.unparse(arg.annotation), default, docs.get(arg.arg, ""))
        if spec is not None:
            out[arg.arg] = spec
    return out


def dataclass_params(path: str, name: str) -> dict[str, dict[str, Any]]:
    """The plain-typed fields of a params dataclass and of the dataclasses it extends (in the same file)."""
    node = _class(path, name)
    out: dict[str, dict[str, Any]] = {}
    for base in node.bases:
        if isinstance(base, ast.Name):
            try:
                out.update(dataclass_params(path, base.id))
            except LookupError:
                pass
    body = node.body
    for index, item in enumerate(body):
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        doc = ""
        following = body[index + 1] if index + 1 < len(body) else None
        if isinstance(following, ast.Expr) and isinstance(getattr(following, "value", None), ast.Constant):
            doc = " ".join(str(following.value.value).split())
        spec = _property(ast.unparse(item.annotation), item.value, doc)
        if spec is not None:
            out[item.target.id] = spec
    return out


def _property(annotation: str, default: ast.AST | None, doc: str) -> dict[str, Any] | None:
    types = _json_types(annotation)
    has_default, value = _literal(default)
    if types is None or not has_default:
        return None
    spec: dict[str, Any] = {"type": types[0] if len(types) == 1 else types, "default": value,
                            "description": doc or annotation}
    if isinstance(value, bool) and "boolean" not in types:
        return None
    return spec


# -- schemas ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def schema(algo: str) -> dict[str, Any]:
    info = ALGORITHMS[algo]
    trainer = TRAINER_PARAMS[info["kind"]]
    upstream: dict[str, dict[str, Any]] = {}
    upstream.update(dataclass_params("trainer.py", trainer))
    upstream.update(init_params(*info["policy"]))
    upstream.update(init_params(*info["cls"]))
    props: dict[str, Any] = {}
    for key, spec in upstream.items():
        if key in NOT_PARAMS:
            continue
        spec = dict(spec)
        ours = MOSAIC_DEFAULTS.get(key, spec["default"])
        if key == "collection_step_num_env_steps":
            ours = COLLECT_STEPS.get(info["kind"], spec["default"])
        if ours != spec["default"]:
            spec["description"] = f"{spec['description']} (Tianshou's default: {spec['default']!r})"
            spec["default"] = ours
        props[key] = spec
    for key in ("hidden_sizes", *info["nets"], "training_envs", "test_envs", "torch_threads", "checkpoint_every"):
        props[key] = MOSAIC_PARAMS[key]
    if info["kind"] == ONLINE_OFF:
        props["buffer_size"] = MOSAIC_PARAMS["buffer_size"]
    if "eps_training" in props and info["kind"] != OFFLINE:
        props["eps_training_final"] = MOSAIC_PARAMS["eps_training_final"]
        props["eps_decay_steps"] = MOSAIC_PARAMS["eps_decay_steps"]
    if algo == "redq":
        props["ensemble"] = MOSAIC_PARAMS["ensemble"]
    if info["kind"] == OFFLINE:
        props.pop("training_envs", None)
    _bounds(props)
    return {"$schema": SCHEMA_DIALECT, "title": f"tianshou {info['cls'][1]} ({info['kind']})", "type": "object",
            "properties": props, "additionalProperties": False}


def _bounds(props: dict[str, Any]) -> None:
    """Ranges Tianshou asserts at construction, said at submit instead."""
    for key in ("gamma", "tau"):
        if key in props:
            props[key].update(minimum=0, maximum=1)
    for key in ("batch_size", "epoch_num_steps", "test_step_num_episodes", "n_step_return_horizon",
                "update_step_num_repetitions", "num_atoms", "num_quantiles", "num_fractions"):
        if key in props and "integer" in str(props[key]["type"]):
            props[key]["minimum"] = 1
    for key in ("eps_training", "eps_inference"):
        if key in props:
            props[key].update(minimum=0, maximum=1)
    for key in ("lr", "actor_lr", "critic_lr"):
        if key in props:
            props[key]["exclusiveMinimum"] = 0


# -- environments -------------------------------------------------------------------------
FAMILIES = {"classic_control": ("gymnasium",), "box2d": ("gymnasium", "box2d"), "mujoco": ("gymnasium", "mujoco"),
            ATARI: ("gymnasium", "ale-py", "opencv-python"), VIZDOOM: ("gymnasium", "vizdoom", "opencv-python"),
            "jumanji": ("gymnasium", "jumanji")}
ENVS: dict[str, dict[str, Any]] = gymnasium_envs(
    ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0", "LunarLander-v3",
     "LunarLanderContinuous-v3", "BipedalWalker-v3", "Hopper-v5", "HalfCheetah-v5", "InvertedPendulum-v5"])
# Image observations: Atari through Tianshou's own wrap_deepmind (tianshou/env/atari/atari_wrapper.py),
# ViZDoom through workers/sdk/vizdoom.py; both give 4 stacked grey 84x84 frames, channels first.
ENVS.update({env: {**info, "image": True} for family in (ATARI, VIZDOOM)
             for env, info in gymnasium_envs(family=family).items()})

# The algorithms Tianshou 2.0.1 wires to its Atari CNNs (tianshou/env/atari/atari_network.py) in its
# examples/atari/atari_<algo>.py, and the net each example builds; a2c has no example of its own
# and takes PPO's actor-critic (the same A2C loss on the same networks).
IMAGE_NETS = {"dqn": "DQNet", "c51": "C51Net", "rainbow": "RainbowNet", "qrdqn": "QRDQNet",
              "iqn": "DQNet features + ImplicitQuantileNetwork", "fqf": "DQNet features + FullQuantileFunction",
              "ppo": "DQNet features (scaled obs) + DiscreteActor/DiscreteCritic",
              "a2c": "DQNet features (scaled obs) + DiscreteActor/DiscreteCritic (atari_ppo.py's nets)",
              "discrete_sac": "DQNet features + DiscreteActor, 2 DiscreteCritic"}
# Jumanji's envs through gymnasium (jumanji/<Env>: its JumanjiToGymWrapper, observation flattened;
# workers/sdk/jumanji_envs.py registers them in the worker process). Those with multi-discrete
# actions (BinPack, Cleaner, Tetris...) are left out: Tianshou 2.0.1's actors (DiscreteActor,
# the Q-networks) output one categorical over Discrete(n).
ENVS.update({env: info for env, info in JUMANJI_GYM_ENVS.items() if info["actions"] in ("discrete", "continuous")})

# MiniGrid through workers/sdk/minigrid.py: the agent's 7x7 view, flattened (Box(147,) uint8) for the
# MLPs; the human worker records plays through the same view (docs/play.md: demonstrations)
FAMILIES[MINIGRID] = ("gymnasium", "minigrid")
ENVS.update(MINIGRID_ENVS)

# MOSAIC MultiGrid (multiagent.py): every agent its own learner under Tianshou's multi-agent
# dispatcher, all agents moving at once. The DQN family only: Tianshou 2.0.1's MultiAgentPolicy
# hands each agent's policy the multi-agent observation Batch(agent_id, obs, mask), which only the
# DQN family's policies unwrap (obs.obs); without a mask, MultiAgentPolicy.forward reads the
# collected batch's obs_next, which a batch being collected does not have (AttributeError).
FAMILIES[MULTIGRID] = ("mosaic-multigrid", "pettingzoo")
ENVS.update({env: {"family": MULTIGRID, "actions": "discrete"} for env in multigrid_envs()})
MULTI_AGENT_ALGORITHMS = ["dqn", "c51", "rainbow", "qrdqn", "iqn", "fqf"]
ENV_KWARGS = {"type": "object", "default": {},
              "description": "keyword arguments of the MultiGrid game (e.g. {\"max_steps\": 100}: shorter episodes)"}


def is_multigrid(env: str) -> bool:
    return ENVS.get(resolve_alias(env), {}).get("family") == MULTIGRID


def env_schema(algo: str, env: str | None) -> dict[str, Any]:
    """The algorithm's schema, with the game's keyword arguments for a MultiGrid env."""
    if env is None or not is_multigrid(env):
        return schema(algo)
    own = schema(algo)
    return {**own, "properties": {**own["properties"], "env_kwargs": ENV_KWARGS}}


def takes(algo: str, actions: str) -> bool:
    kind = ALGORITHMS[algo]["actions"]
    return kind == "both" or kind == actions


def takes_env(algo: str, env: str) -> bool:
    """Whether ``algo`` trains on ``env``: its action kind, a CNN for image observations, the
    multi-agent dispatcher for MultiGrid."""
    info = ENVS[env]
    return (takes(algo, info["actions"]) and (not info.get("image") or algo in IMAGE_NETS)
            and (algo in MULTI_AGENT_ALGORITHMS or not is_multigrid(env)))


def image_refusal(algo: str) -> str:
    """Why ``algo`` is not offered on image observations (one line)."""
    if ALGORITHMS[algo]["kind"] == OFFLINE or ALGORITHMS[algo].get("dataset"):
        return (f"{algo} learns from a recorded dataset, and mosaic records no image observations; "
                f"image envs take {', '.join(IMAGE_NETS)}")
    return (f"{algo} has no image network: Tianshou 2.0.1 wires its Atari CNNs only in examples for "
            f"{', '.join(IMAGE_NETS)}")
