"""The environments every worker shares, as data: ids, families, aliases.

Which family an env id belongs to (so a worker can say which package it
needs), whether its actions are discrete or continuous (so a descriptor can
refuse DQN on Pendulum at submit), and the "did you mean" for an id a user
mistyped. Read by descriptors in the daemon: no gymnasium import here. The
families whose ids come from a package (Atari's ROMs in ale_py, ViZDoom's
scenarios, MOSAIC MultiGrid's games) are listed by reading that package's
files, found without importing it. Registering them with gymnasium, in a
worker's process, is workers/sdk/registration.py.
"""
from __future__ import annotations

import functools
import os
import re
from typing import Any, Iterable

from workers.sdk.config import ConfigError, did_you_mean
from workers.sdk.packages import package_dirs

# env id -> family (the gymnasium extra that brings it), action kind and, for
# the small tasks, observation / action spaces (XuanCe checks a curriculum with them)
GYMNASIUM_ENVS: dict[str, dict[str, str]] = {
    "CartPole-v0": {"family": "classic_control", "actions": "discrete", "spaces": "Box(4,) / Discrete(2)"},
    "CartPole-v1": {"family": "classic_control", "actions": "discrete", "spaces": "Box(4,) / Discrete(2)"},
    "Acrobot-v1": {"family": "classic_control", "actions": "discrete", "spaces": "Box(6,) / Discrete(3)"},
    "MountainCar-v0": {"family": "classic_control", "actions": "discrete", "spaces": "Box(2,) / Discrete(3)"},
    "Pendulum-v1": {"family": "classic_control", "actions": "continuous", "spaces": "Box(3,) / Box(1,)"},
    "MountainCarContinuous-v0": {"family": "classic_control", "actions": "continuous",
                                 "spaces": "Box(2,) / Box(1,)"},
    "LunarLander-v3": {"family": "box2d", "actions": "discrete"},
    "LunarLanderContinuous-v3": {"family": "box2d", "actions": "continuous"},
    "BipedalWalker-v3": {"family": "box2d", "actions": "continuous"},
    "BipedalWalkerHardcore-v3": {"family": "box2d", "actions": "continuous"},
    "CarRacing-v3": {"family": "box2d", "actions": "continuous"},
}
for _name in ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup", "InvertedPendulum",
              "InvertedDoublePendulum", "Reacher", "Swimmer", "Pusher"):
    for _version in ("v4", "v5"):
        GYMNASIUM_ENVS[f"{_name}-{_version}"] = {"family": "mujoco", "actions": "continuous"}


# The families of envs that come from packages other than gymnasium, and the
# module a worker's process imports to register their ids with gymnasium.
ATARI, VIZDOOM, MULTIGRID = "atari", "vizdoom", "multigrid"
MINIGRID = "minigrid"
# MiniGrid's single-agent grid worlds (Farama's minigrid, registered when it is imported): the
# ones a learner here trains on, through workers/sdk/minigrid.py's flat view of the agent's 7x7
# cells. The human worker plays any MiniGrid or BabyAI id.
MINIGRID_ENVS: dict[str, dict[str, str]] = {env: {"family": MINIGRID, "actions": "discrete"} for env in (
    "MiniGrid-Empty-5x5-v0", "MiniGrid-Empty-Random-5x5-v0", "MiniGrid-Empty-6x6-v0", "MiniGrid-Empty-8x8-v0",
    "MiniGrid-Empty-16x16-v0", "MiniGrid-DoorKey-5x5-v0", "MiniGrid-DoorKey-6x6-v0", "MiniGrid-DoorKey-8x8-v0",
    "MiniGrid-FourRooms-v0", "MiniGrid-LavaGapS5-v0", "MiniGrid-SimpleCrossingS9N1-v0",
    "MiniGrid-KeyCorridorS3R1-v0", "MiniGrid-Unlock-v0", "MiniGrid-Dynamic-Obstacles-5x5-v0")}
PACKAGE_FAMILIES = {ATARI: "ale_py", VIZDOOM: "vizdoom.gymnasium_wrapper", MULTIGRID: "mosaic_multigrid"}
# the distribution that brings each family (what a user installs)
FAMILY_DISTRIBUTIONS = {"classic_control": "gymnasium", "box2d": "gymnasium[box2d]", "mujoco": "gymnasium[mujoco]",
                        ATARI: "ale-py", VIZDOOM: "vizdoom", MULTIGRID: "mosaic-multigrid"}


def _package_file(package: str, *parts: str) -> str | None:
    folders = package_dirs(package)
    path = os.path.join(folders[0], *parts) if folders else None
    return path if path and os.path.exists(path) else None


@functools.lru_cache(maxsize=1)
def atari_games() -> list[str]:
    """The games whose ROMs ale_py ships (``Pong``, ``SpaceInvaders``...), as ale_py names them
    (its ``rom_id_to_name``)."""
    folder = _package_file("ale_py", "roms")
    if folder is None:
        return []
    roms = sorted(name[:-4] for name in os.listdir(folder) if name.endswith(".bin"))
    return [rom.title().replace("_", "") for rom in roms]


def atari_envs() -> dict[str, dict[str, str]]:
    """``ALE/<Game>-v5`` (sticky actions, frameskip 4) and ``<Game>NoFrameskip-v4`` (what the
    DQN-style Atari wrappers expect) of every shipped game."""
    envs = {}
    for game in atari_games():
        envs[f"ALE/{game}-v5"] = {"family": ATARI, "actions": "discrete"}
        envs[f"{game}NoFrameskip-v4"] = {"family": ATARI, "actions": "discrete"}
    return envs


@functools.lru_cache(maxsize=1)
def vizdoom_envs() -> dict[str, dict[str, str]]:
    """The ids vizdoom.gymnasium_wrapper registers (``VizdoomBasic-v1``...); observations are
    ``Dict(screen, gamevariables)``. The MultiBinary variants are left out: no worker's
    algorithms take MultiBinary actions."""
    path = _package_file("vizdoom", "gymnasium_wrapper", "__init__.py")
    if path is None:
        return {}
    with open(path, encoding="utf-8") as f:
        ids = re.findall(r'id="(Vizdoom[A-Za-z0-9]+-v\d+)"', f.read())
    return {env: {"family": VIZDOOM, "actions": "discrete"} for env in ids}


_SPORTS = {"S": "soccer", "BB": "basketball", "AF": "american_football", "C": "collect"}
_MULTIGRID_ID = re.compile(r"MosaicMultiGrid-(?P<sport>S|BB|AF|C)-(?:(?P<side>[GB])-)?"
                           r"(?:(?P<green>\d)v(?P<blue>\d)-)?(?:IndAgObs-)?v\d+")


@functools.lru_cache(maxsize=1)
def multigrid_envs() -> dict[str, dict[str, Any]]:
    """mosaic_multigrid's gymnasium ids (``MosaicMultiGrid-S-2v2-IndAgObs-v1``...), each with its
    game, team sizes (green, blue: agents 0..green-1 are green, the rest blue), agent count and
    whether the teams play against each other, read from the package's registration table."""
    path = _package_file("mosaic_multigrid", "envs", "__init__.py")
    if path is None:
        return {}
    with open(path, encoding="utf-8") as f:
        ids = re.findall(r"'(MosaicMultiGrid-[A-Za-z0-9-]+)'\s*:", f.read())
    envs = {}
    for env in ids:
        match = _MULTIGRID_ID.fullmatch(env)
        if match is None:
            continue
        if match["green"] is None:  # solo (1v0 / 0v1 in the name's team letter) or collect's 3 players
            teams = (1, 0) if match["side"] == "G" else (0, 1) if match["side"] == "B" else (1, 1, 1)
        else:
            teams = (int(match["green"]), int(match["blue"]))
        envs[env] = {"family": MULTIGRID, "actions": "discrete", "game": _SPORTS[match["sport"]],
                     "teams": list(teams), "agents": sum(teams),
                     "competitive": sum(1 for size in teams if size) > 1}
    return envs


@functools.lru_cache(maxsize=1)
def multigrid_aliases() -> dict[str, str]:
    """Short names users type -> real ids: ``soccer_2vs2`` -> ``MosaicMultiGrid-S-2v2-IndAgObs-v1``
    (both teams playing; the solo drills keep their ids)."""
    aliases = {}
    for env, info in multigrid_envs().items():
        teams = info["teams"]
        if len(teams) == 2 and all(teams):
            aliases[f"{info['game']}_{teams[0]}vs{teams[1]}"] = env
        elif len(teams) == 3:
            aliases[f"{info['game']}_{len(teams)}players"] = env
    return aliases


def resolve_alias(env: str) -> str:
    """The real id of an alias (``soccer_1vs1``, any case, ``-`` or ``_``); other ids unchanged."""
    return multigrid_aliases().get(env.lower().replace("-", "_"), env)


def family_envs(family: str) -> dict[str, dict[str, Any]]:
    """Every env id of one family, with its facts."""
    if family == ATARI:
        return atari_envs()
    if family == VIZDOOM:
        return vizdoom_envs()
    if family == MULTIGRID:
        return multigrid_envs()
    return {env: info for env, info in GYMNASIUM_ENVS.items() if info["family"] == family}


def env_info(env: str) -> dict[str, Any] | None:
    """The facts of an env id (or alias), in whichever family it is; None if none has it."""
    env = resolve_alias(env)
    if env in GYMNASIUM_ENVS:
        return GYMNASIUM_ENVS[env]
    for family in PACKAGE_FAMILIES:
        info = family_envs(family).get(env)
        if info is not None:
            return info
    return None


def env_family(env: str) -> str | None:
    """The family of a known env id (``env_info``'s), None for one this table does not know."""
    info = env_info(env)
    return None if info is None else info["family"]


def gymnasium_envs(ids: Iterable[str] | None = None, family: str | None = None,
                   fields: tuple[str, ...] = ("family", "actions")) -> dict[str, dict[str, str]]:
    """The envs ``ids`` (or those of ``family``, or all), each with only ``fields``:
    a worker's own table is this plus the facts only it needs."""
    if family in PACKAGE_FAMILIES:
        table = family_envs(family)
    else:
        table = GYMNASIUM_ENVS
    chosen = list(ids) if ids is not None else [e for e, i in table.items() if family in (None, i["family"])]
    facts = {env: (GYMNASIUM_ENVS.get(env) or env_info(env) or {}) for env in chosen}
    return {env: {k: facts[env][k] for k in fields if k in facts[env]} for env in chosen}


def unknown_env(env: str, known: list[str], worker: str) -> ConfigError:
    """The error for an env id a worker does not know: the closest known ids, else all of them."""
    hint = did_you_mean(env, known + list(aliases_among(known))) or (
        f"; choose from {', '.join(known) or 'nothing: no env family is installed'}" if len(known) <= 40 else
        f"; {len(known)} ids are known, e.g. {', '.join(known[:12])}")
    return ConfigError("env", f"unknown environment {env!r} for worker {worker!r}{hint}")


# Jumanji's envs through gymnasium (workers/sdk/jumanji_envs.py registers them in a worker's
# process): id -> family "jumanji" and action kind (from each env's action_spec, single-agent
# view; multi-agent envs are made single-agent with MultiToSingleWrapper, as jumanji.training does).
# Observations are flattened to one Box. Sokoban-v0 downloads its levels (boxoban) from Hugging
# Face when first made.
JUMANJI_ACTIONS = {
    "BinPack-v2": "multi_discrete", "CVRP-v1": "discrete", "Cleaner-v0": "multi_discrete",
    "Connector-v3": "multi_discrete", "FlatPack-v0": "multi_discrete", "Game2048-v1": "discrete",
    "GraphColoring-v1": "discrete", "JobShop-v0": "multi_discrete", "Knapsack-v1": "discrete",
    "LevelBasedForaging-v0": "multi_discrete", "MMST-v0": "multi_discrete", "Maze-v0": "discrete",
    "Minesweeper-v0": "multi_discrete", "MultiCVRP-v0": "continuous", "PacMan-v1": "discrete",
    "RobotWarehouse-v0": "multi_discrete", "RubiksCube-partly-scrambled-v0": "multi_discrete",
    "RubiksCube-v0": "multi_discrete", "SearchAndRescue-v0": "continuous", "SlidingTilePuzzle-v0": "discrete",
    "Snake-v1": "discrete", "Sokoban-v0": "discrete", "Sudoku-v0": "multi_discrete",
    "Sudoku-very-easy-v0": "multi_discrete", "TSP-v1": "discrete", "Tetris-v0": "multi_discrete",
}
JUMANJI_GYM_ENVS: dict[str, dict[str, str]] = {
    f"jumanji/{env}": {"family": "jumanji", "actions": kind} for env, kind in JUMANJI_ACTIONS.items()
}


def aliases_among(known: Iterable[str]) -> dict[str, str]:
    """The aliases of the ids in ``known``."""
    known = set(known)
    return {alias: env for alias, env in multigrid_aliases().items() if env in known}


def missing_family(env: str, family: str, needs: Iterable[str]) -> ConfigError:
    """The error for an env whose family's distributions are not all installed."""
    return ConfigError("env", f"{env} is a {family} environment, which needs {', '.join(needs)}: not all installed")
