"""Key maps: which key plays which action, per env family, as data (docs/play.md has the tables).

Keys are Textual's key names (``left``, ``space``, ``enter``, ``a``, ``A`` for shift+a,
``ctrl+d``, ``alt+l``, ``full_stop``...). A map is read in the worker, where the env tells its
actions' names (ALE's action meanings, MiniGrid's ``Actions``, ViZDoom's buttons, Crafter's
``constants.actions``, NLE's action enums and their ASCII keys), and sent to the app in the
``keymap`` event; the app lays the user's own keymap file over it and sends the actions, not the
keys. An env without a map gets its actions on the digit keys (and letters after 9) with their
names. A text env (TextWorld) has no keys: its action is a typed command (``text: true``).
"""
from __future__ import annotations

from typing import Any

# classic control and Box2D: the env's action index for each key; "noop": the action of no key.
# CarRacing is its discrete variant (gymnasium's ``continuous=False``: 5 actions).
CONTROL_MAPS: dict[str, dict[str, Any]] = {
    "CartPole": {"actions": ["push left", "push right"], "keys": {"left": 0, "right": 1}, "noop": None},
    "MountainCar": {"actions": ["accelerate left", "don't accelerate", "accelerate right"],
                    "keys": {"left": 0, "down": 1, "right": 2}, "noop": 1},
    "Acrobot": {"actions": ["torque -1", "no torque", "torque +1"], "keys": {"left": 0, "down": 1, "right": 2},
                "noop": 1},
    "LunarLander": {"actions": ["do nothing", "fire left engine", "fire main engine", "fire right engine"],
                    "keys": {"down": 0, "left": 1, "up": 2, "right": 3}, "noop": 0},
    "CarRacing": {"actions": ["do nothing", "steer right", "steer left", "gas", "brake"],
                  "keys": {"right": 1, "left": 2, "up": 3, "down": 4, "d": 1, "a": 2, "w": 3, "s": 4}, "noop": 0},
}

# MiniGrid and BabyAI (and MOSAIC MultiGrid's solo drills, whose actions add noop): by the action's name
MINIGRID_KEYS = {"left": ["left"], "right": ["right"], "forward": ["up"], "pickup": ["p"], "drop": ["d"],
                 "toggle": ["space", "t"], "done": ["enter"], "noop": ["n"]}

# Atari: by ALE's action meaning. Directions on the arrows (and w a s d), FIRE on space; a terminal
# sends no two keys at once, so diagonals sit on q e z c and "with FIRE" is the shifted letter.
ATARI_KEYS = {
    "NOOP": ["n"], "FIRE": ["space", "f"], "UP": ["up", "w"], "RIGHT": ["right", "d"], "LEFT": ["left", "a"],
    "DOWN": ["down", "s"], "UPRIGHT": ["e"], "UPLEFT": ["q"], "DOWNRIGHT": ["c"], "DOWNLEFT": ["z"],
    "UPFIRE": ["W"], "RIGHTFIRE": ["D"], "LEFTFIRE": ["A"], "DOWNFIRE": ["S"], "UPRIGHTFIRE": ["E"],
    "UPLEFTFIRE": ["Q"], "DOWNRIGHTFIRE": ["C"], "DOWNLEFTFIRE": ["Z"],
}
# games whose ALE meanings are not what the screen shows: Pong's paddle goes up on RIGHT, down on LEFT
ATARI_GAME_KEYS = {"Pong": {"RIGHT": ["up", "w"], "LEFT": ["down", "s"], "RIGHTFIRE": ["W"], "LEFTFIRE": ["S"]}}

# ViZDoom: by button (an action is the buttons it presses; "NOOP" presses none). Without TURN_*
# buttons (Basic), strafing takes the arrows too. An action pressing several buttons has no key.
VIZDOOM_KEYS = {
    "NOOP": ["n"], "MOVE_FORWARD": ["up", "w"], "MOVE_BACKWARD": ["down", "s"], "TURN_LEFT": ["left"],
    "TURN_RIGHT": ["right"], "MOVE_LEFT": ["a"], "MOVE_RIGHT": ["d"], "ATTACK": ["space", "f"], "USE": ["e"],
    "JUMP": ["j"], "CROUCH": ["c"], "SPEED": ["r"], "STRAFE": ["x"], "MOVE_UP": ["q"], "MOVE_DOWN": ["z"],
    "RELOAD": ["R"], "ZOOM": ["Z"], "SELECT_NEXT_WEAPON": ["tab"], "SELECT_PREV_WEAPON": ["shift+tab"],
    "DROP_SELECTED_WEAPON": ["G"], "ACTIVATE_SELECTED_ITEM": ["i"], "SELECT_NEXT_ITEM": ["right_square_bracket"],
    "SELECT_PREV_ITEM": ["left_square_bracket"], "DROP_SELECTED_ITEM": ["I"], "LAND": ["l"],
    **{f"SELECT_WEAPON{i}": [str(i)] for i in range(10)},
}
VIZDOOM_SPARE_KEYS = {"MOVE_LEFT": ["left"], "MOVE_RIGHT": ["right"]}   # where the arrows are free

# Crafter: by its action names (crafter.constants.actions), on the keys of crafter's own run_gui.py
# (w a s d, space, tab, r t f p, 1 to 6) and the arrows; sleep on z too (a terminal's tab may move focus)
CRAFTER_KEYS = {
    "noop": ["n", "full_stop"], "move_left": ["left", "a"], "move_right": ["right", "d"], "move_up": ["up", "w"],
    "move_down": ["down", "s"], "do": ["space", "enter"], "sleep": ["tab", "z"], "place_stone": ["r"],
    "place_table": ["t"], "place_furnace": ["f"], "place_plant": ["p"], "make_wood_pickaxe": ["1"],
    "make_stone_pickaxe": ["2"], "make_iron_pickaxe": ["3"], "make_wood_sword": ["4"], "make_stone_sword": ["5"],
    "make_iron_sword": ["6"],
}

# Jumanji (gymnasium ids ``jumanji/<Env>``): action names as each env's docstring gives them (Jumanji
# has no action-name metadata); the grid games on the arrows and w a s d
JUMANJI_MOVES = ["up", "right", "down", "left"]
JUMANJI_ACTIONS = {"Snake": JUMANJI_MOVES, "Game2048": JUMANJI_MOVES, "Maze": JUMANJI_MOVES,
                   "Sokoban": JUMANJI_MOVES, "SlidingTilePuzzle": JUMANJI_MOVES,
                   "PacMan": [*JUMANJI_MOVES, "no-op"]}
JUMANJI_KEYS = {"up": ["up", "w"], "right": ["right", "d"], "down": ["down", "s"], "left": ["left", "a"],
                "no-op": ["n", "space"]}
# the envs whose action picks one of N things: "<thing> i" on the digit keys, then letters (36 at most)
JUMANJI_CHOICES = {"TSP": "city", "CVRP": "node", "Knapsack": "item", "GraphColoring": "colour"}

# NetHack's keys as Textual names: NLE's actions carry the byte NetHack reads (``nle.nethack.actions``:
# letters, M-x as 0x80|x, C-x as x&0x1f); printable punctuation is named as Textual names it
ASCII_KEYS = {
    "!": "exclamation_mark", '"': "quotation_mark", "#": "number_sign", "$": "dollar_sign", "%": "percent_sign",
    "&": "ampersand", "'": "apostrophe", "(": "left_parenthesis", ")": "right_parenthesis", "*": "asterisk",
    "+": "plus", ",": "comma", "-": "minus", ".": "full_stop", "/": "slash", ":": "colon", ";": "semicolon",
    "<": "less_than_sign", "=": "equals_sign", ">": "greater_than_sign", "?": "question_mark", "@": "at",
    "[": "left_square_bracket", "\\": "backslash", "]": "right_square_bracket", "^": "circumflex_accent",
    "_": "underscore", "`": "grave_accent", "{": "left_curly_bracket", "|": "vertical_line",
    "}": "right_curly_bracket", "~": "tilde", " ": "space",
}
CONTROL_KEYS = {13: "enter", 27: "escape", 9: "tab", 8: "backspace"}

DIGIT_KEYS = [str(i) for i in range(10)] + list("abcdefghijklmnopqrstuvwxyz")


def by_names(actions: list[str], keys_by_name: dict[str, list[str] | str],
             keys: dict[str, int] | None = None) -> dict[str, int]:
    """{key: action index} from keys given per action name (an action the env lacks is left out;
    a key already in ``keys`` keeps its action)."""
    index = {name: i for i, name in enumerate(actions)}
    keys = {} if keys is None else keys
    for name, bound in keys_by_name.items():
        for key in [bound] if isinstance(bound, str) else bound:
            if name in index:
                keys.setdefault(key, index[name])
    return keys


def digits(actions: list[str]) -> dict[str, int]:
    return {key: i for i, key in zip(range(len(actions)), DIGIT_KEYS)}


def nethack_key(code: int) -> str:
    """Textual's name of the key that types NetHack's byte ``code`` (as Textual's parser names it)."""
    if code & 0x80:                  # M-x: alt, as a terminal sends it (ESC, then x)
        key = nethack_key(code & 0x7F)
        return f"alt+shift+{key.lower()}" if len(key) == 1 and key.isupper() else f"alt+{key}"
    if code in CONTROL_KEYS:
        return CONTROL_KEYS[code]
    if code < 32:                    # C-x
        return f"ctrl+{chr(code + 96)}"
    char = chr(code)
    return char if char.isalnum() else ASCII_KEYS.get(char, char)


def nethack_action_name(action: Any) -> str:
    """An NLE action's name: BALROG's words for directions ("north", "far north", "up", "wait",
    "more"), the command's own otherwise ("kick", "loot", "esc")."""
    from workers.sdk.llm.nethack import action_name  # light: NLE is not imported for a name

    return action_name(action)


def nethack_keymap(env_actions: list[Any]) -> dict[str, Any]:
    """Every action of an NLE env (MiniHack's subset or NetHack's full set) on the key NetHack
    itself reads for it: typing NetHack's keys plays NetHack. Two actions of one byte (``+``:
    spells and the character) share a key: the first has it, both send the same byte."""
    actions = [nethack_action_name(a) for a in env_actions]
    keys: dict[str, int] = {}
    for i, action in enumerate(env_actions):
        keys.setdefault(nethack_key(int(action)), i)
    noop = next((i for i, a in enumerate(env_actions) if int(a) == ord(".")), None)   # wait / rest
    return {"actions": actions, "keys": keys, "noop": noop}


def vizdoom_keymap(buttons: list[str], button_map: list[Any]) -> dict[str, Any]:
    """ViZDoom's discrete actions: each a combination of its buttons (``button_map``)."""
    actions = []
    for pressed in button_map:
        names = [button for button, on in zip(buttons, pressed) if on]
        actions.append("+".join(names) if names else "NOOP")
    keys = by_names(actions, VIZDOOM_KEYS)
    if "TURN_LEFT" not in actions and "TURN_RIGHT" not in actions:
        by_names(actions, VIZDOOM_SPARE_KEYS, keys)
    return {"actions": actions, "keys": keys, "noop": actions.index("NOOP") if "NOOP" in actions else None}


def jumanji_keymap(name: str, n: int) -> dict[str, Any]:
    if name in JUMANJI_ACTIONS and len(JUMANJI_ACTIONS[name]) == n:
        actions = list(JUMANJI_ACTIONS[name])
        return {"actions": actions, "keys": by_names(actions, JUMANJI_KEYS),
                "noop": actions.index("no-op") if "no-op" in actions else None}
    thing = JUMANJI_CHOICES.get(name, "action")
    actions = [f"{thing} {i}" for i in range(n)]
    return {"actions": actions, "keys": digits(actions), "noop": None}


TEXT_KEYMAP = {"actions": [], "keys": {}, "noop": None, "text": True}


def keymap_for(env_id: str, family: str | None, env: Any) -> dict[str, Any]:
    """{"actions": names, "keys": {key: index}, "noop": index or None[, "text": True]} for a made env."""
    if family == "textworld":
        return dict(TEXT_KEYMAP)
    cells = getattr(env, "cell_names", None)
    if cells is not None:   # a board's cell, typed "row col" (runtime.CellChoice): no keys
        return {"actions": list(cells), "keys": {}, "noop": None, "text": True}
    n = env.action_space.n
    base = env_id.split("/")[-1].split("-")[0]
    if base in CONTROL_MAPS:
        return dict(CONTROL_MAPS[base])
    unwrapped = env.unwrapped
    if family in ("minigrid", "multigrid"):
        actions = [a.name for a in unwrapped.actions][:n]
        return {"actions": actions, "keys": by_names(actions, MINIGRID_KEYS),
                "noop": actions.index("noop") if "noop" in actions else None}
    if family == "atari":
        actions = list(unwrapped.get_action_meanings())
        keys = by_names(actions, ATARI_GAME_KEYS.get(base.removesuffix("NoFrameskip"), {}))
        return {"actions": actions, "keys": by_names(actions, ATARI_KEYS, keys),
                "noop": actions.index("NOOP") if "NOOP" in actions else None}
    if family == "vizdoom":
        buttons = [str(b).split(".")[-1] for b in unwrapped.game.get_available_buttons()]
        return vizdoom_keymap(buttons, list(unwrapped.button_map)[:n])
    if family == "crafter":
        actions = list(unwrapped.action_names)
        return {"actions": actions, "keys": by_names(actions, CRAFTER_KEYS), "noop": actions.index("noop")}
    if family in ("minihack", "nethack"):
        return nethack_keymap(list(unwrapped.actions))
    if family == "jumanji":
        return jumanji_keymap(base, n)
    actions = [f"action {i}" for i in range(n)]
    return {"actions": actions, "keys": digits(actions), "noop": None}
