"""MiniHack and NetHack (NLE) as text, after BALROG's NLELanguageWrapper in its "hybrid" mode.

BALROG builds on a fork of NLE with a language wrapper (text_glyphs,
text_message, text_cursor, text_inventory) that NLE 1.3.0 from PyPI does not
have. This module writes the same sections from NLE's own arrays: the
message, a "language observation" (the nearest thing of each kind on the map
with its distance and direction: monsters by name, objects by class, dungeon
features), the cursor, the ASCII map (the tty screen without its message
line), and, as short-term context, the inventory (and the status lines for
NLE). Actions by name as BALROG's: MiniHack's the env's own that are in
BALROG's MiniHack list, NLE's every action of the env. Default action: "north"
for MiniHack, "esc" for NLE.

Progression: MiniHack, 1.0 once the episode ends with a positive reward (its
goal reached); NLE, the deepest dungeon level reached, as a share of 50
(BALROG grades NLE against human play data, which is not packaged: this is a
simpler measure, said as such in docs/workers/balrog.md).
"""
from __future__ import annotations

from typing import Any

from typing_extensions import override

from workers.sdk.llm.textenv import TextEnv

MINIHACK_ACTIONS = {
    "north": "move north", "east": "move east", "south": "move south", "west": "move west",
    "northeast": "move northeast", "southeast": "move southeast", "southwest": "move southwest",
    "northwest": "move northwest", "far north": "move far north", "far east": "move far east",
    "far south": "move far south", "far west": "move far west", "far northeast": "move far northeast",
    "far southeast": "move far southeast", "far southwest": "move far southwest",
    "far northwest": "move far northwest", "up": "go up the stairs", "down": "go down the stairs",
    "wait": "rest one move while doing nothing", "more": "display more of the message",
    "apply": "apply (use) a tool", "close": "close an adjacent door", "open": "open an adjacent door",
    "eat": "eat something", "force": "force a lock", "kick": "kick an enemy or a locked door or chest",
    "loot": "loot a box on the floor", "pickup": "pick up things at the current location if there are any",
    "pray": "pray to the gods for help", "puton": "put on an accessory", "quaff": "quaff (drink) something",
    "search": "search for hidden doors and passages", "zap": "zap a wand",
}
COMPASS = {"N": "north", "E": "east", "S": "south", "W": "west", "NE": "northeast", "SE": "southeast",
           "SW": "southwest", "NW": "northwest"}
FEATURES = {">": "stairs down", "<": "stairs up", "{": "fountain", "_": "altar", "#": "corridor",
            "+": "door", "`": "boulder", "^": "trap", "}": "water"}
SKIP_CHARS = set(" .|-@")


def action_name(action: Any) -> str:
    """BALROG's name for an NLE action enum."""
    kind = type(action).__name__
    if kind == "CompassDirection":
        return COMPASS[action.name]
    if kind == "CompassDirectionLonger":
        return "far " + COMPASS[action.name]
    if kind == "MiscDirection":
        return {"UP": "up", "DOWN": "down", "WAIT": "wait"}[action.name]
    if kind == "MiscAction":
        return action.name.lower()
    if kind == "TextCharacters":
        return {"MINUS": "minus", "SPACE": "space", "APOS": "apos"}.get(action.name, chr(action.value))
    return action.name.lower()


def direction(dx: int, dy: int) -> str:
    """A compass direction in words for a step of (dx, dy), y growing south: ``northeast``."""
    ns = "north" if dy < 0 else "south" if dy > 0 else ""
    ew = "east" if dx > 0 else "west" if dx < 0 else ""
    return ns + ew


def glyph_name(glyph: int, char: str) -> str | None:
    """What a map glyph is, in words (a monster, an object, a feature), None for nothing worth naming."""
    from nle import nethack as nh

    if nh.glyph_is_monster(glyph):
        return nh.permonst(nh.glyph_to_mon(glyph)).mname + (" (pet)" if nh.glyph_is_pet(glyph) else "")
    if nh.glyph_is_object(glyph):
        return f"object {char!r}"
    if char in SKIP_CHARS:
        return None
    return FEATURES.get(char, f"{char!r}")


def language_observation(glyphs, chars, x: int, y: int) -> str:
    """The nearest thing of each kind on the map, with its distance and direction from the agent."""
    nearest: dict[str, tuple[int, str]] = {}
    rows, cols = glyphs.shape
    for row in range(rows):
        for col in range(cols):
            if (col, row) == (x, y):
                continue
            char = chr(chars[row + 1][col])  # the tty screen has the message line on top
            name = glyph_name(int(glyphs[row][col]), char)
            if name is None:
                continue
            dx, dy = col - x, row - y
            distance = max(abs(dx), abs(dy))
            if name not in nearest or distance < nearest[name][0]:
                nearest[name] = (distance, direction(dx, dy))
    lines = [f"{name} {'adjacent' if d == 1 else f'{d} steps'} {where}"
             for name, (d, where) in sorted(nearest.items(), key=lambda item: item[1][0])]
    return "\n".join(lines) if lines else "nothing in view"


class NetHackText(TextEnv):
    """NetHack and MiniHack as text (BALROG's NLE wrapper): the message, what is around the hero in words, the map; the inventory."""
    def __init__(self, env_id: str, seed: int | None = None, max_episode_steps: int | None = None, **kwargs: Any):
        import gymnasium as gym
        import nle  # noqa: F401 -- registers NetHack*

        self.family = "minihack" if env_id.startswith("MiniHack-") else "nle"
        if self.family == "minihack":
            import minihack  # noqa: F401 -- registers MiniHack*
        keys = ("glyphs", "blstats", "tty_chars", "inv_letters", "inv_strs", "tty_cursor", "message")
        if max_episode_steps is not None:
            kwargs["max_episode_steps"] = max_episode_steps
        self.env = gym.make(env_id, observation_keys=keys, **kwargs)
        self.env_id = env_id
        self.max_steps = int(getattr(self.env.unwrapped, "_max_episode_steps", 0) or 0)
        base_actions = list(self.env.unwrapped.actions)
        names = [action_name(a) for a in base_actions]
        if self.family == "minihack":
            self._actions = [n for n in names if n in MINIHACK_ACTIONS]
        else:
            self._actions = list(dict.fromkeys(names))
        self._index = {name: names.index(name) for name in self._actions}
        self.default_action = "north" if self.family == "minihack" else "esc"
        if self.default_action not in self._actions:
            self.default_action = self._actions[0]
        self._reached = False
        self._max_depth = 1

    @property
    @override
    def actions(self) -> list[str]:
        return self._actions

    @override
    def instruction_prompt(self) -> str:
        task = self.env_id.lower()
        if self.family == "nle":
            action_strings = ",\n".join(self._actions)
            return ("You are an agent playing NetHack. The following are the possible actions you can take in the "
                    f"game:\n\n{action_strings}.\n\nTips:\n- When the message has --More-- at the end, your next "
                    "action should be \"more\" to see the rest of the message.\n- Explore the environment to find "
                    "the stairs down to the next level.\n- You can attack monsters by moving into them.\n\nIn a "
                    "moment I will present a history of actions and observations from the game.\nYour goal is to get "
                    "as far as possible in the game.\n\nPLAY!")
        if "corridor" in task:
            goal = "Your goal is to explore the level and reach the stairs down"
        elif "quest" in task:
            goal = ("Your goal is to explore the level, fight monsters, and navigate rooms and mazes to ultimately "
                    "reach the stairs down.")
        elif "boxoban" in task:
            goal = ("You are playing Boxoban, a box-pushing game inspired by Sokoban. Your goal is to push the "
                    "boulders onto the fountains on the map. You can push the boulders by walking into them, as long "
                    "as there are no obstacles behind them.")
        else:
            goal = "Your goal is to get as far as possible in the game."
        action_strings = ",\n".join(f"{a}: {MINIHACK_ACTIONS[a]}" for a in self._actions)
        return f"""
You are an agent playing MiniHack. The following are the possible actions you can take in the game, followed by a short description of each action:

{action_strings}.

In a moment I will present a history of actions and observations from the game.

Tip: there is no point in outputting the same action over and over if nothing changes.

{goal}

PLAY!
""".strip()

    def describe(self, obs: dict[str, Any]) -> dict[str, str]:
        """NLE's observation as text: the map and message (long-term context) and the status line
        (short-term context)."""
        from nle import nethack as nh

        chars = obs["tty_chars"]
        message = bytes(obs["message"]).rstrip(b"\0").decode("latin-1").strip()
        x, y = int(obs["blstats"][nh.NLE_BL_X]), int(obs["blstats"][nh.NLE_BL_Y])
        self._max_depth = max(self._max_depth, int(obs["blstats"][nh.NLE_BL_DEPTH]))
        screen = ["".join(chr(c) for c in row).rstrip() for row in chars]
        cursor = obs["tty_cursor"]
        inventory = "\n".join(chr(letter) + ": " + bytes(line).rstrip(b"\0").decode("latin-1")
                              for letter, line in zip(obs["inv_letters"], obs["inv_strs"]) if letter)
        long_term = "\n".join([
            f"message:\n{message}\n",
            f"language observation:\n{language_observation(obs['glyphs'], chars, x, y)}\n",
            f"cursor:\n(x={int(cursor[1])}, y={int(cursor[0])})\n",
            "map:\n" + "\n".join(screen[1:]) + "\n"])
        short_term = f"inventory:\n{inventory or 'nothing'}\n"
        return {"long_term_context": long_term, "short_term_context": short_term}

    @override
    def reset(self, seed: int | None = None) -> dict[str, str]:
        obs, _ = self.env.reset(seed=seed)
        self._reached = False
        self._max_depth = 1
        return self.describe(obs)

    @override
    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool]:
        obs, reward, terminated, truncated, _ = self.env.step(self._index[action])
        if terminated and reward > 0:
            self._reached = True
        return self.describe(obs), float(reward), bool(terminated), bool(truncated)

    @override
    def progression(self) -> float:
        if self.family == "minihack":
            return 1.0 if self._reached else 0.0
        return min(1.0, (self._max_depth - 1) / 49)

    @override
    def success(self) -> bool:
        return self._reached if self.family == "minihack" else False

    @override
    def render(self) -> Any:
        return None  # a text game: the map is in the transcript

    @override
    def close(self) -> None:
        self.env.close()


def make(env_id: str, seed: int | None = None, **kwargs: Any) -> NetHackText:
    """The text env of a NetHack or MiniHack id."""
    return NetHackText(env_id, seed=seed, **kwargs)
