"""What the CleanRL worker runs: the installed scripts, the envs, and how a run config maps onto flags.

Standard library only (the daemon imports it through the descriptor): scripts
are found with ``importlib.util.find_spec`` and read as text, never imported.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Any

from workers.cleanrl_worker.argparse_schema import Arg, parse_script_args
from workers.sdk.descriptor import module_available, package_dirs  # noqa: F401  (catalog.module_available)
from workers.sdk.envs import GYMNASIUM_ENVS, JUMANJI_GYM_ENVS, atari_envs

# The scripts of cleanrl 1.2.0 that run on this stack (Python 3.11, torch CPU,
# gym 0.23.1 + gymnasium 1.2.2), each with the action space it accepts and the
# library it makes its envs with. tests/workers/cleanrl_worker/test_cleanrl_worker.py trains every one.
# The gym 0.23 Atari scripts are not listed (docs/envs.md says why), nor the
# envpool, jax, procgen, pettingzoo and isaacgym ones: their dependencies
# (envpool, jax, procgen, supersuit, isaacgym) are not part of mosaic's environment.
SCRIPTS: dict[str, tuple[str, str]] = {
    "ppo": ("discrete", "gym"),
    "dqn": ("discrete", "gymnasium"),
    "c51": ("discrete", "gym"),
    "ppo_continuous_action": ("continuous", "gymnasium"),
    "rpo_continuous_action": ("continuous", "gymnasium"),
    "sac_continuous_action": ("continuous", "gym"),
    "td3_continuous_action": ("continuous", "gym"),
    "ddpg_continuous_action": ("continuous", "gymnasium"),
    # Atari: gymnasium, SB3's Atari wrappers (84x84 grey, 4 frames, its own frame skip): the
    # <Game>NoFrameskip-v4 ids. ppo_atari, c51_atari and sac_atari are gym 0.23 scripts: see
    # docs/envs.md for why they cannot run here unmodified.
    "dqn_atari": ("discrete", "gymnasium"),
}
# the env families a script is made for (others: classic control, Box2D, MuJoCo by action kind)
SCRIPT_FAMILIES = {"dqn_atari": ("atari",)}

# Options set by the run config's common fields, not by params:
#   env -> --env-id, steps -> --total-timesteps, seed -> --seed, device -> --cuda
OWNED_ARGS = {"env-id": "env", "total-timesteps": "steps", "seed": "seed", "cuda": "device"}

# Options that cannot work without a package mosaic does not install: hidden
# from the schema while that package is missing.
NEEDS_MODULE = {"upload-model": "huggingface_hub", "hf-entity": "huggingface_hub"}

# Added by the worker to scripts that have no --save-model of their own: the
# patches then save the script's networks into checkpoints/ when training ends.
SAVE_MODEL_ARG = Arg(flag="--save-model", dest="save_model", type="boolean", default=False,
                     has_default=True, bool_parser="strtobool",
                     help="(mosaic) save the trained networks into the run's checkpoints/ "
                          "when training ends, for evaluation")

# Bounds for well-known CleanRL option names, so obvious mistakes are refused
# at submit time. Only applied where a script has the option with that type.
BOUNDS: dict[str, dict[str, float]] = {
    "learning-rate": {"exclusiveMinimum": 0}, "q-lr": {"exclusiveMinimum": 0},
    "policy-lr": {"exclusiveMinimum": 0},
    "num-envs": {"minimum": 1}, "num-steps": {"minimum": 1}, "num-minibatches": {"minimum": 1},
    "update-epochs": {"minimum": 1}, "buffer-size": {"minimum": 1}, "batch-size": {"minimum": 1},
    "n-atoms": {"minimum": 2}, "train-frequency": {"minimum": 1},
    "target-network-frequency": {"minimum": 1}, "policy-frequency": {"minimum": 1},
    "learning-starts": {"minimum": 0},
    "gamma": {"minimum": 0, "maximum": 1}, "gae-lambda": {"minimum": 0, "maximum": 1},
    "tau": {"minimum": 0, "maximum": 1}, "start-e": {"minimum": 0, "maximum": 1},
    "end-e": {"minimum": 0, "maximum": 1}, "exploration-fraction": {"minimum": 0, "maximum": 1},
    "clip-coef": {"minimum": 0}, "ent-coef": {"minimum": 0}, "vf-coef": {"minimum": 0},
    "max-grad-norm": {"exclusiveMinimum": 0}, "exploration-noise": {"minimum": 0},
    "policy-noise": {"minimum": 0}, "noise-clip": {"minimum": 0}, "alpha": {"minimum": 0},
}

# Env ids mosaic knows: family, action space, and which libraries register
# them (gym 0.23 and gymnasium 1.2 differ: LunarLander is v2 in one, v3 in the
# other; the v4/v5 MuJoCo envs are gymnasium's only). A continuous-action
# algorithm on a discrete env, or an id the script's library lacks, is refused
# before any process starts.
# family -> module that must be importable for the family to run.
ENV_FAMILIES = {"classic_control": None, "box2d": "Box2D", "mujoco": "mujoco", "atari": "ale_py", "jumanji": "jumanji"}
BOTH = ("gym", "gymnasium")
GYMNASIUM_ONLY = ("LunarLander-v3", "LunarLanderContinuous-v3")  # and MuJoCo: CleanRL's gym 0.23 scripts use none
ENVS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    env: (info["family"], info["actions"],
          ("gymnasium",) if info["family"] == "mujoco" or env in GYMNASIUM_ONLY else BOTH)
    for env, info in GYMNASIUM_ENVS.items()
}
ENVS.update({env: ("atari", "discrete", ("gymnasium",)) for env in atari_envs() if env.endswith("NoFrameskip-v4")})
# Jumanji's envs through gymnasium (jumanji/<Env>, workers/sdk/jumanji_envs.py): the make hook of
# the script's sitecustomize registers them; gym 0.23 scripts cannot see gymnasium's registry
ENVS.update({env: ("jumanji", info["actions"], ("gymnasium",)) for env, info in JUMANJI_GYM_ENVS.items()})
# gym 0.23's LunarLander (gymnasium's is v3)
ENVS["LunarLander-v2"] = ("box2d", "discrete", ("gym",))
ENVS["LunarLanderContinuous-v2"] = ("box2d", "continuous", ("gym",))


def cleanrl_dir() -> str | None:
    """Directory of the installed ``cleanrl`` package (a namespace package: no __init__)."""
    for location in package_dirs("cleanrl"):
        if os.path.isfile(os.path.join(location, "ppo.py")):
            return location
    return None


def installed_scripts() -> list[str]:
    """The algorithms of SCRIPTS whose file is in the installed cleanrl."""
    directory = cleanrl_dir()
    if directory is None:
        return []
    return [name for name in SCRIPTS if os.path.isfile(os.path.join(directory, f"{name}.py"))]


def is_script_path(algo: str) -> bool:
    """A user's own CleanRL-style script: ``algo`` is the path of a .py file."""
    return algo.endswith(".py") or os.sep in algo


def script_path(algo: str) -> str:
    """The file ``algo`` runs: an installed CleanRL script or a user's path."""
    if is_script_path(algo):
        return os.path.abspath(os.path.expanduser(algo))
    directory = cleanrl_dir()
    if directory is None:
        raise FileNotFoundError("cleanrl is not installed")
    return os.path.join(directory, f"{algo}.py")


@functools.lru_cache(maxsize=64)
def _script_args_cached(path: str, mtime: float) -> tuple[Arg, ...]:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    return tuple(parse_script_args(source, path))


def script_args(path: str) -> list[Arg]:
    """The script's argparse options (re-read when the file changes)."""
    return list(_script_args_cached(path, os.path.getmtime(path)))


def param_args(path: str) -> list[Arg]:
    """The options a user sets through params: the script's own, minus the
    common fields and the unusable, plus mosaic's --save-model if it has none."""
    args = []
    for arg in script_args(path):
        if arg.name in OWNED_ARGS:
            continue
        if not module_available(NEEDS_MODULE.get(arg.name)):
            continue
        args.append(arg)
    if not any(arg.name == "save-model" for arg in args):
        args.append(SAVE_MODEL_ARG)
    return args


# CleanRL's PPO scripts (and RPO) train whole updates: ``num_updates = total_timesteps // batch_size``
# with ``batch_size = num_envs * num_steps``, so a run ends at the last whole update, short of the
# steps asked (3000 with PPO's 4 x 128: 2560).
_BATCH_SIZE = re.compile(r"args\.batch_size\s*=\s*int\(\s*args\.(\w+)\s*\*\s*args\.(\w+)\s*\)")
_WHOLE_UPDATES = re.compile(r"args\.total_timesteps\s*//\s*args\.batch_size")


@functools.lru_cache(maxsize=64)
def _steps_per_update_cached(path: str, mtime: float) -> tuple[str, ...]:
    with open(path, encoding="utf-8") as f:
        source = f.read()
    batch = _BATCH_SIZE.search(source)
    if batch is None or not _WHOLE_UPDATES.search(source):
        return ()
    names = {arg.dest: arg.name for arg in script_args(path)}
    if not all(dest in names for dest in batch.groups()):
        return ()
    return tuple(names[dest] for dest in batch.groups())


def steps_per_update(path: str) -> list[str]:
    """The options whose product is the steps of one update, for a script that trains whole
    updates only (["num-envs", "num-steps"] for ppo); [] for the others."""
    return list(_steps_per_update_cached(path, os.path.getmtime(path)))


def has_own_save_model(path: str) -> bool:
    return any(arg.name == "save-model" for arg in script_args(path))


def sniff_script(path: str) -> tuple[str | None, str | None]:
    """(action space, env library) of a user's script, read from its source:
    the ``assert isinstance(envs.single_action_space, gym.spaces.Discrete)``
    every CleanRL script has, and its ``import gymnasium as gym`` or ``import gym``."""
    with open(path, encoding="utf-8") as f:
        source = f.read()
    space = None
    if "single_action_space, gym.spaces.Discrete" in source:
        space = "discrete"
    elif "single_action_space, gym.spaces.Box" in source:
        space = "continuous"
    library = None
    if re.search(r"^import gymnasium as gym\b", source, re.M):
        library = "gymnasium"
    elif re.search(r"^import gym\b", source, re.M):
        library = "gym"
    return space, library


def envs_for(space: str, library: str, families: list[str], script: str | None = None) -> list[str]:
    """The known env ids an algorithm with this action space and library can run (an Atari
    script: Atari ids only; the others: all but Atari, whose pixels their MLPs cannot take)."""
    made_for = SCRIPT_FAMILIES.get(script or "", tuple(f for f in ENV_FAMILIES if f != "atari"))
    return [env for env, (family, env_space, libraries) in ENVS.items()
            if family in families and family in made_for and env_space == space and library in libraries]


def flags_for(path: str, params: dict[str, Any]) -> list[str]:
    """Command-line words passing ``params`` to the script (its own options only)."""
    words: list[str] = []
    by_name = {arg.name: arg for arg in script_args(path)}
    for name, value in params.items():
        arg = by_name.get(name)
        if arg is None:
            continue  # a worker option (mosaic's --save-model): not the script's
        words += arg.to_argv(value)
    return words
