"""The human worker's catalog: what a person can play, its params and their defaults (light:
the daemon imports it). The key maps themselves are keymaps.py's, read in the process."""
from __future__ import annotations

import functools
import glob
import os
import re
from typing import Any

from workers.sdk.config import SCHEMA_DIALECT
from workers.sdk.envs import JUMANJI_GYM_ENVS, PACKAGE_FAMILIES, env_info, family_envs, multigrid_aliases, unknown_env
from workers.sdk.packages import package_dirs

SCHEMA_VERSION = 1
ALGORITHMS = ["play"]
TURN, REALTIME = "turn", "realtime"

# env families by id prefix (ids gymnasium's own table does not hold), and how each is played
PREFIX_FAMILIES = {
    "MiniGrid-": "minigrid", "BabyAI-": "minigrid", "MosaicMultiGrid-": "multigrid", "MiniHack-": "minihack",
    "NetHack": "nethack", "ALE/": "atari", "Vizdoom": "vizdoom", "jumanji/": "jumanji", "crafter": "crafter",
    "textworld-": "textworld",
}
# envs where the action is a typed text (a command), not a key: turn by turn only, nothing to record
TEXT_FAMILIES = {"textworld"}
# envs whose one action is a cell of a board (row, column: a multi-discrete action): played by
# typing the cell, "row col"; the cells still open are the legal ones (runtime.CellChoice)
CELL_ENVS = {"jumanji/Minesweeper-v0"}
TEXTWORLD_ENVS = ["textworld-coin", "textworld-treasure", "textworld-cooking"]   # workers/sdk/llm/textworld.py
# continuous envs a person plays through their discrete variant: gymnasium.make's kwargs for it
DISCRETE_VARIANTS = {"CarRacing-v3": {"continuous": False}}
# the timing a family is played in by default: one step a key where the env waits for a move,
# a fixed rate where it would not (docs/play.md)
DEFAULT_MODE = {"classic_control": TURN, "box2d": REALTIME, "minigrid": TURN, "multigrid": TURN,
                "minihack": TURN, "nethack": TURN, "atari": REALTIME, "vizdoom": REALTIME, "jumanji": TURN,
                "crafter": TURN, "textworld": TURN}
EXAMPLES = ["MiniGrid-Empty-5x5-v0", "CartPole-v1", "MountainCar-v0", "Acrobot-v1", "LunarLander-v3",
            "ALE/Breakout-v5", "ALE/Pong-v5", "BabyAI-GoToRedBallGrey-v0", "CarRacing-v3", "VizdoomBasic-v1",
            "crafter", "MiniHack-Room-5x5-v0", "NetHackScore-v0", "jumanji/Snake-v1", "jumanji/Game2048-v1",
            "MosaicMultiGrid-S-G-1v0-v1", "textworld-coin"]

PARAMS: dict[str, Any] = {
    "mode": {"type": ["string", "null"], "enum": [TURN, REALTIME, None], "default": None,
             "description": "turn: one env step a key; realtime: the env steps at `rate` and a held key repeats "
                            "(default: the family's, docs/play.md)"},
    "rate": {"type": "number", "default": 15.0, "exclusiveMinimum": 0, "maximum": 120,
             "description": "realtime: env steps a second"},
    "hold_ms": {"type": "integer", "default": 150, "minimum": 10, "maximum": 5000,
                "description": "realtime, where the terminal sends no key releases: a key stays held so long "
                               "after its last press (its auto-repeat renews it)"},
    "episodes": {"type": "integer", "default": 10, "minimum": 0, "maximum": 100000,
                 "description": "episodes to play (0: until cancelled)"},
}


# the files where a family's package registers its gymnasium ids, each as a literal id="..." (read, not
# imported: the daemon stays light); (package, glob under it, the family's distribution)
REGISTRATION_FILES = {
    "gymnasium": ("gymnasium", "envs/__init__.py", "gymnasium"),
    "minigrid": ("minigrid", "__init__.py", "minigrid"),
    "minihack": ("minihack", "envs/*.py", "minihack"),
    "nethack": ("nle", "env/__init__.py", "nle"),
}
_REGISTERED_ID = re.compile(r"""\bid\s*=\s*["']([A-Za-z0-9_/.:-]+)["']""")
# NLE registers its tasks in a loop: ``for name in ("NetHack", "NetHackScore", ...)`` with ``_version``
_NLE_TASK = re.compile(r"""^\s*["'](NetHack[A-Za-z]*)["'],?\s*$""", re.MULTILINE)
_NLE_VERSION = re.compile(r"""^_version\s*=\s*["'](v\d+)["']""", re.MULTILINE)


def registered_ids(package: str, pattern: str) -> list[str]:
    """The ids a package registers with gymnasium, read from its files (none when not installed)."""
    ids: list[str] = []
    for folder in package_dirs(package):
        for path in sorted(glob.glob(os.path.join(folder, pattern))):
            try:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            ids += _REGISTERED_ID.findall(text)
            version = _NLE_VERSION.search(text) if package == "nle" else None
            if version is not None:
                ids += [f"{name}-{version.group(1)}" for name in _NLE_TASK.findall(text)]
    return ids


@functools.lru_cache(maxsize=1)
def known_envs() -> frozenset[str]:
    """Every env id the human worker can make here (runtime.make_env): gymnasium's own, the
    packages' registered ids, the env table's families, Jumanji's, TextWorld's games, Crafter."""
    known = set(JUMANJI_GYM_ENVS) | set(TEXTWORLD_ENVS) | {"crafter"} | set(multigrid_aliases())
    for family in PACKAGE_FAMILIES:
        known |= set(family_envs(family))
    for package, pattern, _ in REGISTRATION_FILES.values():
        known |= set(registered_ids(package, pattern))
    return frozenset(known)


def unknown(env: str) -> str | None:
    """Why ``env`` is no env the worker can make (one line: the closest known ids), or None."""
    if env in known_envs() or env_info(env) is not None:
        return None
    family = family_of(env)
    if family in REGISTRATION_FILES and not package_dirs(REGISTRATION_FILES[family][0]):
        return f"{env} is a {family} env, which needs {REGISTRATION_FILES[family][2]}: not installed"
    return unknown_env(env, sorted(known_envs()), "human").message


def family_of(env: str) -> str | None:
    info = env_info(env)
    if info is not None:
        return info["family"]
    for prefix, family in PREFIX_FAMILIES.items():
        if env.startswith(prefix):
            return family
    return None


def continuous_only(env: str) -> bool:
    info = env_info(env)
    return info is not None and info.get("actions") == "continuous" and env not in DISCRETE_VARIANTS


def unplayable(env: str) -> str | None:
    """Why a person cannot play ``env`` from the keyboard (one line), or None."""
    if continuous_only(env):
        return (f"{env} has continuous actions only: a person plays discrete actions from the keyboard (a "
                f"discrete variant, e.g. LunarLander-v3, or MountainCar-v0 for MountainCarContinuous)")
    jumanji = JUMANJI_GYM_ENVS.get(env)
    if jumanji is not None and jumanji["actions"] != "discrete" and env not in CELL_ENVS:
        kind = jumanji["actions"].replace("_", "-")
        return (f"{env} has {kind} actions (several numbers in one action: a cell's row and column, a piece's "
                f"place and turn...): a person plays one discrete action a key (docs/play.md)")
    info = env_info(env)
    if info is not None and info.get("agents", 1) > 1:
        return (f"{env} has {info['agents']} agents: a person plays MultiGrid's solo drills (e.g. "
                f"MosaicMultiGrid-S-G-1v0-v1); a seat beside agents is a MOSAIC LLM match's")
    if env.startswith("textworld-") and env not in TEXTWORLD_ENVS:
        return f"unknown TextWorld game {env!r}: choose from {', '.join(TEXTWORLD_ENVS)}"
    return unknown(env)


def is_text(env: str) -> bool:
    return family_of(env) in TEXT_FAMILIES


def default_mode(env: str) -> str:
    return DEFAULT_MODE.get(family_of(env) or "", TURN)


def schema(algo: str, env: str | None = None) -> dict[str, Any]:
    return {"$schema": SCHEMA_DIALECT, "title": f"human {algo}", "type": "object", "properties": PARAMS,
            "additionalProperties": False}
