"""The env families LLM agents play, as data: light enough for a worker's descriptor.

Each family: the module with its ``make(env_id, seed, **kwargs) -> TextEnv``,
the distributions it needs (checked without importing them), the env ids offered
(a form's suggestions; ``prefixes`` decides what else belongs to it). A family
that is added (the mosaic_llm worker's MultiGrid, PettingZoo classic) is one
entry here and one module beside this one.
"""
from __future__ import annotations

import functools
import glob
import os
import re
from typing import Any

from workers.sdk.descriptor import dist_version, package_dirs

FAMILIES: dict[str, dict[str, Any]] = {
    "babyai": {
        "module": "workers.sdk.llm.babyai",
        "needs": ["minigrid"],
        "prefixes": ("BabyAI-", "MiniGrid-"),
        "envs": ["BabyAI-GoToRedBall-v0", "BabyAI-GoToRedBallGrey-v0", "BabyAI-GoToLocal-v0",
                 "BabyAI-PickupLoc-v0", "BabyAI-OpenDoor-v0", "BabyAI-PutNextLocal-v0",
                 "BabyAI-GoTo-v0", "BabyAI-Pickup-v0", "MiniGrid-Empty-5x5-v0", "MiniGrid-DoorKey-5x5-v0"],
        "description": "BabyAI / MiniGrid: mission and an egocentric description of the 7x7 view",
        # where the package registers its ids (read as text: the descriptor imports nothing heavy)
        "registry": ("minigrid", "__init__.py"),
    },
    "crafter": {
        "module": "workers.sdk.llm.crafter",
        "needs": ["crafter"],
        "prefixes": ("crafter",),
        "envs": ["crafter"],
        "description": "Crafter: status, inventory, the nearest of each thing in view, what is in front",
    },
    "textworld": {
        "module": "workers.sdk.llm.textworld",
        "needs": ["textworld"],
        "prefixes": ("textworld",),
        "envs": ["textworld-coin", "textworld-treasure", "textworld-cooking"],
        "description": "TextWorld games made offline by its generator; the admissible commands are the actions",
    },
    "minihack": {
        "module": "workers.sdk.llm.nethack",
        "needs": ["minihack", "nle"],
        "prefixes": ("MiniHack-",),
        "envs": ["MiniHack-Room-5x5-v0", "MiniHack-Room-15x15-v0", "MiniHack-Corridor-R2-v0",
                 "MiniHack-MazeWalk-9x9-v0", "MiniHack-Eat-v0", "MiniHack-Boxoban-Unfiltered-v0"],
        "description": "MiniHack: message, things in view with their directions, the map, inventory",
        "registry": ("minihack", "envs/*.py"),
    },
    "nle": {
        "module": "workers.sdk.llm.nethack",
        "needs": ["nle"],
        "prefixes": ("NetHack",),
        "envs": ["NetHackScore-v0", "NetHackChallenge-v0", "NetHackStaircase-v0", "NetHackGold-v0"],
        "all_envs": [f"{name}-v0" for name in ("NetHack", "NetHackScore", "NetHackStaircase", "NetHackStaircasePet",
                                               "NetHackOracle", "NetHackGold", "NetHackEat", "NetHackScout",
                                               "NetHackChallenge")],
        "description": "NetHack (NLE): message, things in view with their directions, the map, stats, inventory",
    },
}


def family_of(env_id: str) -> str | None:
    """The text-env family whose id prefixes ``env_id`` has, None for none."""
    for name, family in FAMILIES.items():
        if env_id.startswith(family["prefixes"]):
            return name
    return None


@functools.lru_cache(maxsize=None)
def registered_envs(name: str) -> tuple[str, ...]:
    """Every env id of a family: what its package registers (read from its source, not
    imported), else its fixed list."""
    family = FAMILIES[name]
    if "registry" in family:
        package, pattern = family["registry"]
        ids: list[str] = []
        for folder in package_dirs(package):
            for path in sorted(glob.glob(os.path.join(folder, pattern))):
                with open(path, encoding="utf-8") as f:
                    ids += re.findall(r'id="([^"]+)"', f.read())
        prefixes = family["prefixes"]
        found = tuple(dict.fromkeys(i for i in ids if i.startswith(prefixes)))
        if found:
            return found
    return tuple(family.get("all_envs", family["envs"]))


def family_available(name: str) -> bool:
    """Whether every distribution the family needs is installed."""
    return all(dist_version(dist) is not None for dist in FAMILIES[name]["needs"])


def available_families() -> list[str]:
    """The families whose packages are installed, in FAMILIES' order."""
    return [name for name in FAMILIES if family_available(name)]


def known_envs(available_only: bool = True) -> list[str]:
    """The env ids of the families (only the installed ones', by default)."""
    names = available_families() if available_only else list(FAMILIES)
    return [env for name in names for env in FAMILIES[name]["envs"]]
