"""What the XuanCe worker knows without importing XuanCe: algorithms, environments, configs.

The daemon loads the worker's descriptor to list algorithms, serve schemas and
validate configs; it must not import xuance or torch. Everything here reads
files: XuanCe's YAML configs (``xuance/configs/<algo>/<family>/<env_id>.yaml``
on top of ``basic.yaml``) are read with PyYAML straight from the installed
package directory, which ``importlib.util.find_spec`` finds without importing it.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Any

from workers.sdk.config import ConfigError, did_you_mean
from workers.sdk.descriptor import module_available, package_dirs  # noqa: F401  (catalog.module_available)
from workers.sdk.envs import (
    JUMANJI_GYM_ENVS,
    MULTIGRID,
    aliases_among,
    gymnasium_envs,
    multigrid_envs,
    resolve_alias,
    unknown_env,
)

CLASSIC_CONTROL = "classic_control"
MPE = "mpe"
BOX2D, MUJOCO, ATARI, VIZDOOM = "box2d", "mujoco", "atari", "vizdoom"
# XuanCe's built-in single-agent families beyond classic control: its configs are
# <algo>/box2d/<env_id>.yaml, <algo>/mujoco.yaml and <algo>/atari.yaml; ViZDoom (not XuanCe's:
# workers/xuance_worker/vizdoom.py) runs from the atari.yaml of the algorithm
SINGLE_AGENT_EXTRA = (BOX2D, MUJOCO, ATARI, VIZDOOM)

# The families this worker runs, and the module each needs. MultiGrid
# (mosaic_multigrid) is not XuanCe's: workers/xuance_worker/multigrid.py adds it.
# PettingZoo's SISL games (pursuit, multiwalker) are not XuanCe's family either: workers/xuance_worker/sisl.py.
SISL = "sisl"
FAMILIES = {CLASSIC_CONTROL: "gymnasium", BOX2D: "Box2D", MUJOCO: "mujoco", ATARI: "ale_py", VIZDOOM: "vizdoom",
            MPE: "mpe2", MULTIGRID: "mosaic_multigrid", SISL: "pettingzoo"}
MULTI_AGENT = (MPE, MULTIGRID, SISL)
# XuanCe's name for the family inside its configs (``env_name``), and its runner.
ENV_NAME = {CLASSIC_CONTROL: "Classic Control", BOX2D: "Box2D", MUJOCO: "MuJoCo", ATARI: "Atari", VIZDOOM: "ViZDoom",
            MPE: "mpe", MULTIGRID: "multigrid", SISL: "sisl"}
RUNNER = {CLASSIC_CONTROL: "DRL", BOX2D: "DRL", MUJOCO: "DRL", ATARI: "DRL", VIZDOOM: "DRL", MPE: "MARL",
          MULTIGRID: "MARL", SISL: "MARL"}
VECTORIZERS = {CLASSIC_CONTROL: ["DummyVecEnv", "SubprocVecEnv"],
               BOX2D: ["DummyVecEnv", "SubprocVecEnv"], MUJOCO: ["DummyVecEnv", "SubprocVecEnv"],
               ATARI: ["Dummy_Atari", "Subproc_Atari"], VIZDOOM: ["DummyVecEnv", "SubprocVecEnv"],
               MPE: ["DummyVecMultiAgentEnv", "SubprocVecMultiAgentEnv"],
               MULTIGRID: ["DummyVecMultiAgentEnv", "SubprocVecMultiAgentEnv"],
               SISL: ["DummyVecMultiAgentEnv", "SubprocVecMultiAgentEnv"]}

# Gymnasium's classic-control tasks: action kind, and the spaces (for
# checking a curriculum at submit time; the worker checks again with the real envs).
CLASSIC_CONTROL_ENVS: dict[str, dict[str, str]] = gymnasium_envs(family="classic_control",
                                                                 fields=("actions", "spaces"))
ALL_GYMNASIUM = set(gymnasium_envs())


def _count(*terms: tuple[str, int], plus: int = 0):
    """Agent count of a scenario as a function of its keyword arguments."""
    return lambda kwargs: plus + sum(int(kwargs.get(name, default)) for name, default in terms)


# MPE scenarios (mpe2 1.1.1): how many agents a scenario has for its keyword
# arguments, whether the agents' observation spaces are all alike (parameter
# sharing needs that), and whether teams play against each other.
MPE_ENVS: dict[str, dict[str, Any]] = {
    "simple_v3": {"agents": _count(plus=1), "alike": True, "competitive": False},
    "simple_spread_v3": {"agents": _count(("N", 3)), "alike": True, "competitive": False},
    "simple_reference_v3": {"agents": _count(plus=2), "alike": True, "competitive": False},
    "simple_formation_v1": {"agents": _count(("N", 4)), "alike": True, "competitive": False},
    "simple_line_v1": {"agents": _count(("N", 4)), "alike": True, "competitive": False},
    "simple_speaker_listener_v4": {"agents": _count(plus=2), "alike": False, "competitive": False},
    "collect_treasure_v1": {"agents": _count(("num_collectors", 6), ("num_deposits", 2)), "alike": False,
                            "competitive": False},
    "simple_adversary_v3": {"agents": _count(("N", 2), plus=1), "alike": False, "competitive": True},
    "simple_crypto_v3": {"agents": _count(plus=3), "alike": False, "competitive": True},
    "simple_push_v3": {"agents": _count(plus=2), "alike": False, "competitive": True},
    "simple_tag_v3": {"agents": _count(("num_good", 1), ("num_adversaries", 3)), "alike": False,
                      "competitive": True},
    "simple_world_comm_v3": {"agents": _count(("num_good", 2), ("num_adversaries", 4)), "alike": False,
                             "competitive": True},
}

# PettingZoo 1.27's SISL games: agents for their keyword arguments, and their kind of action. Cooperative:
# the agents share the reward (pursuit's shared_reward, multiwalker's shared_reward).
SISL_ENVS: dict[str, dict[str, Any]] = {
    "pursuit_v5": {"agents": _count(("n_pursuers", 8)), "actions": "discrete"},
    "multiwalker_v9": {"agents": _count(("n_walkers", 3)), "actions": "continuous"},
}

# The algorithms that run here (XuanCe 1.4.4, torch 2.13 CPU, gymnasium 1.2.2,
# mpe2 1.1.1), each checked by tests/workers/xuance_worker/test_xuance_worker.py::test_every_algorithm_runs.
# "actions": the kinds of action its XuanCe configs are made for; "competitive":
# it trains each agent on its own reward (no team value), so agents can play
# against each other. COMA and DreamerV2/V3 run with fixes of XuanCe's at import
# (fixes.py). "defaults": the algorithm's own schema defaults, over XuanCe's configs (every family
# of it); "max_actor_layer_weights": the largest actor weight tensor (inputs x units) taken at
# submit. Left out, as found on this machine:
#   dcg        -- needs torch_scatter, which is not installed
ALGORITHMS: dict[str, dict[str, Any]] = {
    # single agent, classic control
    "ppo": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"]},
    "a2c": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"]},
    "pg": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"]},
    "ppg": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"]},
    "sac": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"]},
    "ddpg": {"family": CLASSIC_CONTROL, "actions": ["continuous"]},
    "td3": {"family": CLASSIC_CONTROL, "actions": ["continuous"]},
    "dqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "ddqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "dueldqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "noisydqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "perdqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "c51": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "qrdqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    "drqn": {"family": CLASSIC_CONTROL, "actions": ["discrete"]},
    # natural policy gradient: its learner builds and inverts a dense (weights x weights) Fisher matrix
    # for each actor weight tensor at every learner step (npg_learner.py), so XuanCe's 128-unit layers
    # (a 16,384 x 16,384 matrix) take minutes a step; layers of 32 a fraction of a second
    # (docs/workers/xuance.md, "NPG")
    "npg": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"],
            "defaults": {"representation_hidden_size": [32], "actor_hidden_size": [32]},
            "max_actor_layer_weights": 2048},
    # model-based: a world model learnt from sequences (XuanCe's SequentialReplayBuffer, fixed at import by
    # fixes.py)
    # "not_on": families it has a config for but does not run on (ViZDoom's 84x84 frames: Dreamer's
    # image decoder makes 64x64 ones, and its loss fails on the shapes)
    "dreamerv2": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"], "not_on": [VIZDOOM]},
    "dreamerv3": {"family": CLASSIC_CONTROL, "actions": ["discrete", "continuous"], "not_on": [VIZDOOM]},
    # multi-agent, MPE: independent learners and centralised critics
    # "stacked_critic": without parameter sharing its critic stacks the agents' observations
    # (np.stack), which needs them alike; on other scenarios it takes the global state instead
    "mappo": {"family": MPE, "actions": ["continuous"], "competitive": True, "stacked_critic": True},
    "ippo": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "maddpg": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "masac": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "matd3": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "iddpg": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "isac": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "itd3": {"family": MPE, "actions": ["continuous"], "competitive": True},
    "iql": {"family": MPE, "actions": ["discrete"], "competitive": True},
    "iac": {"family": MPE, "actions": ["discrete"], "competitive": True},
    # value decomposition, mean field, communication: one team
    "qmix": {"family": MPE, "actions": ["discrete"]},
    "vdn": {"family": MPE, "actions": ["discrete"]},
    "qtran": {"family": MPE, "actions": ["discrete"]},
    "wqmix": {"family": MPE, "actions": ["discrete"]},
    "vdac": {"family": MPE, "actions": ["discrete"]},
    "mfq": {"family": MPE, "actions": ["discrete"]},
    "mfac": {"family": MPE, "actions": ["discrete"]},
    "commnet": {"family": MPE, "actions": ["discrete"]},
    "ic3net": {"family": MPE, "actions": ["discrete"]},
    "tarmac": {"family": MPE, "actions": ["discrete"]},
    # counterfactual baseline from one centralised critic (its learner fixed at import by fixes.py)
    "coma": {"family": MPE, "actions": ["discrete"]},
}


# The multi-agent algorithms that also train on MultiGrid (discrete actions, fourteen of them),
# from their MPE configuration (simple_spread_v3.yaml) with discrete actions; each checked by
# tests/workers/sdk/test_env_families.py::test_every_multigrid_algorithm_runs. The others of ALGORITHMS' MPE
# list take continuous actions only (MADDPG, MATD3, ISAC...).
MULTIGRID_ALGORITHMS = ("mappo", "ippo", "iql", "iac", "qmix", "vdn", "qtran", "wqmix", "vdac", "mfq", "mfac",
                        "commnet", "ic3net", "tarmac")
# Those whose actors read only their own agent's view (and its id): one agent's action can be asked
# of them from that agent's observation alone, as a seat of another worker's match does
# (evaluate.Policy). MFQ/MFAC read the neighbours' mean action, CommNet/IC3Net/TarMAC others' messages.
OWN_VIEW_ALGOS = ("mappo", "ippo", "iql", "iac", "qmix", "vdn", "qtran", "wqmix", "vdac")


# What changes in an algorithm's MPE configuration for MultiGrid's Discrete(8) actions.
MULTIGRID_DEFAULTS: dict[str, dict[str, Any]] = {
    algo: {"continuous_action": False, **({"policy": "Categorical_MAAC_Policy"} if algo in ("mappo", "ippo") else {})}
    for algo in MULTIGRID_ALGORITHMS
}


def families_of(algo: str) -> list[str]:
    """The env families an algorithm trains on: its own, MultiGrid for the discrete MARL
    algorithms, and for single-agent ones the built-in families XuanCe has a config of it for."""
    family = ALGORITHMS[algo]["family"]
    if family == CLASSIC_CONTROL:
        not_on = ALGORITHMS[algo].get("not_on", ())
        return [family, *(f for f in SINGLE_AGENT_EXTRA if f not in not_on and config_file(algo, f, "") is not None)]
    families = [family, MULTIGRID] if algo in MULTIGRID_ALGORITHMS else [family]
    if family == MPE and sisl_envs_of(algo):
        families.append(SISL)
    return families


def sisl_envs_of(algo: str) -> list[str]:
    """The SISL games an MPE algorithm takes: the discrete one (pursuit) as MultiGrid's discrete
    algorithms take it, the continuous one (multiwalker) with its continuous MPE configuration."""
    actions = ALGORITHMS[algo]["actions"]
    return [env for env, info in SISL_ENVS.items()
            if (algo in MULTIGRID_ALGORITHMS if info["actions"] == "discrete" else "continuous" in actions)]


# -- the installed package ----------------------------------------------------
@functools.lru_cache(maxsize=1)
def configs_dir() -> str | None:
    """xuance/configs of the installed package (found, not imported)."""
    folders = package_dirs("xuance")
    if not folders:
        return None
    path = os.path.join(folders[0], "configs")
    return path if os.path.isdir(path) else None


def available_families() -> list[str]:
    return [family for family, module in FAMILIES.items() if module_available(module)]


def installed_algorithms() -> list[str]:
    """The algorithms of ALGORITHMS whose configs and environment family are installed."""
    root = configs_dir()
    if root is None:
        return []
    families = set(available_families())
    return [algo for algo, info in ALGORITHMS.items()
            if set(families_of(algo)) & families and os.path.isdir(os.path.join(root, algo, info["family"]))]


@functools.lru_cache(maxsize=None)
def load_yaml(path: str) -> dict[str, Any]:
    import yaml  # comes with xuance; only needed once xuance is installed
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    return data


_COMMENT_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*:[^#]*#\s*(.+?)\s*$")


@functools.lru_cache(maxsize=None)
def yaml_comments(path: str) -> dict[str, str]:
    """``key: value  # comment`` -> {key: comment}: XuanCe documents its keys this way."""
    comments = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            match = _COMMENT_RE.match(line)
            if match:
                comments[match.group(1)] = match.group(2)
    return comments


# -- environments -------------------------------------------------------------
def mpe_scenarios() -> list[str]:
    """Scenario modules of the installed mpe2 (``simple_spread_v3``...), found without importing them."""
    folders = package_dirs("mpe2")
    if not folders:
        return []
    folder = folders[0]
    return sorted(name[:-3] for name in os.listdir(folder) if re.fullmatch(r"[a-z_]+_v\d+\.py", name))


def known_envs() -> dict[str, list[str]]:
    families = available_families()
    envs: dict[str, list[str]] = {}
    if CLASSIC_CONTROL in families:
        envs[CLASSIC_CONTROL] = list(CLASSIC_CONTROL_ENVS)
    if BOX2D in families:
        envs[BOX2D] = list(gymnasium_envs(family=BOX2D))
    if MUJOCO in families:
        envs[MUJOCO] = list(gymnasium_envs(family=MUJOCO))
    if ATARI in families:
        envs[ATARI] = [env for env in gymnasium_envs(family=ATARI) if env.startswith("ALE/")]
    if VIZDOOM in families:
        envs[VIZDOOM] = list(gymnasium_envs(family=VIZDOOM))
    if MPE in families:
        envs[MPE] = mpe_scenarios()
    if MULTIGRID in families:
        envs[MULTIGRID] = list(multigrid_envs())
    if SISL in families:
        envs[SISL] = list(SISL_ENVS)
    return envs


def resolve_env(env: str) -> tuple[str, str]:
    """(family, env_id) of a run's ``env``: ``CartPole-v1``, ``simple_spread_v3``,
    or explicitly ``mpe:simple_spread_v3`` / ``classic_control:CartPole-v1``; a MultiGrid
    alias (``soccer_1vs1``) is its real id."""
    envs = known_envs()
    env = resolve_alias(env)
    if ":" in env:
        family, env_id = env.split(":", 1)
        if family not in FAMILIES:
            raise ConfigError("env", f"unknown environment family {family!r}; "
                                     f"choose from {', '.join(FAMILIES)}")
        if family not in envs:
            raise ConfigError("env", f"the {family} family needs the '{FAMILIES[family]}' package; "
                                     f"it is not installed")
        return family, env_id
    for family, ids in envs.items():
        if env in ids:
            return family, env
    known = [env_id for ids in envs.values() for env_id in ids]
    if did_you_mean(env, known + list(aliases_among(known))):
        raise unknown_env(env, known, "xuance")
    listing = "; ".join(f"{family}: {', '.join(ids)}" if len(ids) <= 12 else
                        f"{family}: {len(ids)} ids ({', '.join(ids[:3])}..., aliases such as soccer_1vs1)"
                        for family, ids in envs.items())
    raise ConfigError("env", f"unknown environment {env!r}; known: {listing} "
                             f"(or name the family: 'classic_control:<gymnasium id>')")


def default_env(algo: str) -> str:
    """The environment an algorithm's schema describes when none is named."""
    info = ALGORITHMS[algo]
    if info["family"] == MPE:
        return "simple_spread_v3"
    if info["family"] == MULTIGRID:
        return "MosaicMultiGrid-S-1v1-IndAgObs-v1"
    return "CartPole-v1" if "discrete" in info["actions"] else "Pendulum-v1"


def action_kind(family: str, env_id: str, params: dict[str, Any] | None = None) -> str | None:
    """'discrete' or 'continuous' (None when unknown)."""
    if family == CLASSIC_CONTROL:  # gymnasium's own ids, or Jumanji's through gymnasium (jumanji/<Env>)
        return (CLASSIC_CONTROL_ENVS.get(env_id) or JUMANJI_GYM_ENVS.get(env_id) or {}).get("actions")
    if family == MPE:
        if params is None or "continuous_action" not in params:
            return None
        return "continuous" if params["continuous_action"] else "discrete"
    if family in (MULTIGRID, ATARI, VIZDOOM):
        return "discrete"
    if family == SISL:
        return SISL_ENVS.get(env_id, {}).get("actions")
    if family in (BOX2D, MUJOCO):
        return gymnasium_envs([env_id]).get(env_id, {}).get("actions") if env_id in ALL_GYMNASIUM else None
    return None


def mpe_agent_count(env_id: str, env_kwargs: dict[str, Any] | None) -> int | None:
    info = MPE_ENVS.get(env_id)
    if info is None:
        return None
    try:
        return info["agents"](env_kwargs or {})
    except (TypeError, ValueError):
        return None


def agent_count(family: str, env_id: str, env_kwargs: dict[str, Any] | None) -> int | None:
    """How many agents a multi-agent env has (None when unknown)."""
    if family == MULTIGRID:
        return multigrid_envs().get(env_id, {}).get("agents")
    if family == SISL:
        try:
            return SISL_ENVS[env_id]["agents"](env_kwargs or {}) if env_id in SISL_ENVS else None
        except (TypeError, ValueError):
            return None
    return mpe_agent_count(env_id, env_kwargs)


def mpe_teams(agent_keys: list[str]) -> dict[str, list[str]]:
    """Agents grouped by name: adversary_0, adversary_1 -> team 'adversary'."""
    teams: dict[str, list[str]] = {}
    for key in agent_keys:
        teams.setdefault(key.rsplit("_", 1)[0], []).append(key)
    return teams


# -- XuanCe's configs ---------------------------------------------------------
def config_file(algo: str, family: str, env_id: str) -> str | None:
    """The YAML XuanCe would read for (algo, family, env_id), or the nearest one.

    An environment without its own file takes a file of the same family for
    the same kind of actions (``ppo`` on ``MountainCarContinuous-v0`` starts
    from ``ppo/classic_control/Pendulum-v1.yaml``); for MPE, the
    ``simple_spread_v3`` file (the one every MPE algorithm has).
    """
    root = configs_dir()
    if root is None:
        return None
    if family in (MUJOCO, ATARI, VIZDOOM):  # one file for the whole family (ViZDoom: the Atari CNN's)
        path = os.path.join(root, algo, (ATARI if family == VIZDOOM else family) + ".yaml")
        return path if os.path.isfile(path) else None
    if family == SISL:  # no file of XuanCe's: the algorithm's MPE configuration, as MultiGrid's
        return config_file(algo, MPE, "simple_spread_v3")
    folder = os.path.join(root, algo, MPE if family == MULTIGRID else family)
    if not os.path.isdir(folder):
        return None
    exact = os.path.join(folder, env_id + ".yaml")
    if os.path.isfile(exact):
        return exact
    files = sorted(f for f in os.listdir(folder) if f.endswith(".yaml"))
    if family == MULTIGRID:  # no file of XuanCe's: the algorithm's MPE configuration
        return config_file(algo, MPE, "simple_spread_v3")
    if family == MPE:
        preferred = [f for f in files if f == "simple_spread_v3.yaml"]
        return os.path.join(folder, (preferred or files)[0]) if files else None
    kind = action_kind(family, env_id)
    table = CLASSIC_CONTROL_ENVS if family == CLASSIC_CONTROL else gymnasium_envs(family=family)
    for name in files:
        if kind is None or table.get(name[:-5], {}).get("actions") == kind:
            return os.path.join(folder, name)
    return None


def merged_config(path: str) -> dict[str, Any]:
    """basic.yaml updated with the algorithm's file, as XuanCe's get_arguments does."""
    basic = load_yaml(os.path.join(configs_dir() or "", "basic.yaml"))
    family = os.path.basename(os.path.dirname(path))
    learner = LEARNER_DEFAULTS[MPE] if family == MPE else LEARNER_DEFAULTS[CLASSIC_CONTROL]
    return _recursive_update({**basic, **learner}, load_yaml(path))


def _recursive_update(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, dict):
            out[key] = _recursive_update(out.get(key) or {}, value)
        else:
            out[key] = value
    return out


def comments_for(path: str) -> dict[str, str]:
    return {**LEARNER_COMMENTS, **yaml_comments(os.path.join(configs_dir() or "", "basic.yaml")),
            **yaml_comments(path)}


# Keys of XuanCe's configs that the run config or the worker sets: not params.
OWNED_KEYS = {
    "agent": "algo", "env_name": "env", "env_id": "env", "runner": "env",
    "seed": "seed", "env_seed": "seed", "running_steps": "steps", "device": "device",
    "log_dir": "the run directory", "model_dir": "the run directory",
    "logger": "the worker (tensorboard)", "wandb_user_name": "the worker", "project_name": "the worker",
    "dl_toolbox": "the worker (torch)", "distributed_training": "the worker",
    "master_port": "the worker", "render": "frames", "render_mode": "frames", "fps": "frames",
    "test_mode": "mode", "test_episode": "eval_episodes", "eval_interval": "the worker (train mode)",
}

# Keys XuanCe's base learners read with a default when its YAML file has none
# (``getattr(config, "end_factor_lr_decay", 1.0)``): params too, with those defaults.
LEARNER_DEFAULTS = {
    CLASSIC_CONTROL: {"use_linear_lr_decay": False, "end_factor_lr_decay": 1.0},  # xuance.torch.learners.Learner
    MPE: {"use_linear_lr_decay": False, "end_factor_lr_decay": 0.5},  # ...learners.LearnerMAS
}
LEARNER_COMMENTS = {
    "use_linear_lr_decay": "If to use linear learning rate decay (XuanCe's learner default).",
    "end_factor_lr_decay": "The end factor of the linear learning-rate schedule, over running_steps "
                           "(XuanCe's learner default).",
}

# Bounds for numeric keys, applied when XuanCe's default lies inside them.
BOUNDS: dict[str, dict[str, float]] = {
    "learning_rate": {"exclusiveMinimum": 0}, "learning_rate_actor": {"exclusiveMinimum": 0},
    "learning_rate_critic": {"exclusiveMinimum": 0}, "gamma": {"minimum": 0, "maximum": 1},
    "gae_lambda": {"minimum": 0, "maximum": 1}, "tau": {"minimum": 0, "maximum": 1},
    "parallels": {"minimum": 1, "maximum": 512}, "buffer_size": {"minimum": 1}, "batch_size": {"minimum": 1},
    "horizon_size": {"minimum": 1}, "n_epochs": {"minimum": 1}, "n_minibatch": {"minimum": 1},
    "start_training": {"minimum": 0}, "training_frequency": {"minimum": 1}, "sync_frequency": {"minimum": 1},
    "clip_range": {"minimum": 0}, "ent_coef": {"minimum": 0}, "vf_coef": {"minimum": 0},
    "grad_clip_norm": {"minimum": 0}, "start_greedy": {"minimum": 0, "maximum": 1},
    "end_greedy": {"minimum": 0, "maximum": 1}, "dropout": {"minimum": 0, "maximum": 1},
    "end_factor_lr_decay": {"minimum": 0, "maximum": 1},
    "decay_step_greedy": {"minimum": 1},
}

# Integer-valued defaults of keys that take fractions too (``gamma: 1``, ``dropout: 0``).
_FRACTIONAL = re.compile(r"coef|rate|lambda|gamma|tau|ratio|factor|delta|noise|greedy|alpha|beta|"
                         r"dropout|gain|kl|norm|weight_decay|clip_range|temperature|eps")


def property_for(key: str, value: Any, comment: str | None) -> dict[str, Any]:
    """A JSON-schema property from a YAML default."""
    if isinstance(value, bool):
        prop: dict[str, Any] = {"type": "boolean"}
    elif isinstance(value, int):
        fractional = _FRACTIONAL.search(key) and not key.endswith("_type")
        prop = {"type": "number" if fractional else "integer"}
    elif isinstance(value, float):
        prop = {"type": "number"}
    elif isinstance(value, str):
        prop = {"type": "string"}
    elif isinstance(value, list):
        prop = {"type": "array"}
        kinds = {type(item) for item in value}
        if kinds == {int}:
            prop["items"] = {"type": "integer", "minimum": 1}
        elif kinds and kinds <= {int, float}:
            prop["items"] = {"type": "number"}
    elif isinstance(value, dict):
        prop = {"type": "object"}
    else:  # no default in XuanCe's files: anything JSON
        prop = {}
    prop["default"] = value
    bounds = BOUNDS.get(key)
    if bounds and prop.get("type") in ("integer", "number") and _within(value, bounds):
        prop.update(bounds)
    if comment:
        prop["description"] = comment
    return prop


def _within(value: Any, bounds: dict[str, float]) -> bool:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    return (value >= bounds.get("minimum", value) and value <= bounds.get("maximum", value)
            and value > bounds.get("exclusiveMinimum", value - 1))
