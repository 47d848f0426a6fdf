"""Key maps: which key plays which action, per env family, as data (docs/play.md has the tables).

Keys are Textual's key names (``left``, ``space``, ``enter``, ``a``, ``A`` for shift+a). A map
is read in the worker, where the env tells its actions' names (ALE's action meanings, MiniGrid's
``Actions``), and sent to the app in the ``keymap`` event; the app lays the user's own keymap
file over it and sends the actions, not the keys. An env without a map gets its actions on the
digit keys (and letters after 9) with their names.
"""
from __future__ import annotations

from typing import Any

# classic control and Box2D: the env's action index for each key; "noop": the action of no key
CONTROL_MAPS: dict[str, dict[str, Any]] = {
    "CartPole": {"actions": ["push left", "push right"], "keys": {"left": 0, "right": 1}, "noop": None},
    "MountainCar": {"actions": ["accelerate left", "don't accelerate", "accelerate right"],
                    "keys": {"left": 0, "down": 1, "right": 2}, "noop": 1},
    "Acrobot": {"actions": ["torque -1", "no torque", "torque +1"], "keys": {"left": 0, "down": 1, "right": 2},
                "noop": 1},
    "LunarLander": {"actions": ["do nothing", "fire left engine", "fire main engine", "fire right engine"],
                    "keys": {"down": 0, "left": 1, "up": 2, "right": 3}, "noop": 0},
}

# MiniGrid and BabyAI: by the name of MiniGrid's action
MINIGRID_KEYS = {"left": ["left"], "right": ["right"], "forward": ["up"], "pickup": ["p"], "drop": ["d"],
                 "toggle": ["space", "t"], "done": ["enter"]}

# Atari: by ALE's action meaning. Directions on the arrows (and w a s d), FIRE on space; a terminal
# sends no two keys at once, so diagonals sit on q e z c and "with FIRE" is the shifted letter.
ATARI_KEYS = {
    "NOOP": ["n"], "FIRE": ["space", "f"], "UP": ["up", "w"], "RIGHT": ["right", "d"], "LEFT": ["left", "a"],
    "DOWN": ["down", "s"], "UPRIGHT": ["e"], "UPLEFT": ["q"], "DOWNRIGHT": ["c"], "DOWNLEFT": ["z"],
    "UPFIRE": ["W"], "RIGHTFIRE": ["D"], "LEFTFIRE": ["A"], "DOWNFIRE": ["S"], "UPRIGHTFIRE": ["E"],
    "UPLEFTFIRE": ["Q"], "DOWNRIGHTFIRE": ["C"], "DOWNLEFTFIRE": ["Z"],
}

DIGIT_KEYS = [str(i) for i in range(10)] + list("abcdefghijklmnopqrstuvwxyz")


def by_names(actions: list[str], keys_by_name: dict[str, list[str] | str]) -> dict[str, int]:
    """{key: action index} from keys given per action name (an action the env lacks is left out)."""
    index = {name: i for i, name in enumerate(actions)}
    keys: dict[str, int] = {}
    for name, bound in keys_by_name.items():
        for key in [bound] if isinstance(bound, str) else bound:
            if name in index:
                keys[key] = index[name]
    return keys


def digits(actions: list[str]) -> dict[str, int]:
    return {key: i for i, key in zip(range(len(actions)), DIGIT_KEYS)}


def keymap_for(env_id: str, family: str | None, env: Any) -> dict[str, Any]:
    """{"actions": names, "keys": {key: index}, "noop": index or None} for a made env."""
    n = env.action_space.n
    base = env_id.split("/")[-1].split("-")[0]
    if base in CONTROL_MAPS:
        return dict(CONTROL_MAPS[base])
    unwrapped = env.unwrapped
    if family == "minigrid":
        actions = [a.name for a in unwrapped.actions][:n]
        return {"actions": actions, "keys": by_names(actions, MINIGRID_KEYS), "noop": None}
    if family == "atari":
        actions = list(unwrapped.get_action_meanings())
        return {"actions": actions, "keys": by_names(actions, ATARI_KEYS),
                "noop": actions.index("NOOP") if "NOOP" in actions else None}
    actions = [f"action {i}" for i in range(n)]
    return {"actions": actions, "keys": digits(actions), "noop": None}
