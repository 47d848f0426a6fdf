"""Crafter as text, as BALROG's CrafterLanguageWrapper gives it (balrog/environments/crafter/env.py).

The observation: whether the player sleeps or died, the nearest thing of each
kind in view ("- tree 2 steps to your north-west"), what the player faces;
the short-term context is the status (health, food, drink, energy of 9) and
the inventory. 17 actions by name, "Noop" in place of an invalid one;
progression is the share of the 22 achievements unlocked. crafter has the old
4-tuple gym API: used as it is.
"""
from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from typing_extensions import override

from workers.sdk.llm.textenv import TextEnv

ACTIONS = ["Noop", "Move West", "Move East", "Move North", "Move South", "Do", "Sleep", "Place Stone",
           "Place Table", "Place Furnace", "Place Plant", "Make Wood Pickaxe", "Make Stone Pickaxe",
           "Make Iron Pickaxe", "Make Wood Sword", "Make Stone Sword", "Make Iron Sword"]
ACTION_DICT = {
    "Noop": "do nothing",
    "Move West": "move west on flat ground",
    "Move East": "move east on flat ground",
    "Move North": "move north on flat ground",
    "Move South": "move south on flat ground",
    "Do": "Multiuse action to collect material, drink from lake and hit creature in front",
    "Sleep": "sleep when energy level is below maximum",
    "Place Stone": "place a stone in front",
    "Place Table": "place a table",
    "Place Furnace": "place a furnace",
    "Place Plant": "place a plant",
    "Make Wood Pickaxe": "craft a wood pickaxe with a nearby table and wood in inventory",
    "Make Stone Pickaxe": "craft a stone pickaxe with a nearby table, wood, and stone in inventory",
    "Make Iron Pickaxe": "craft an iron pickaxe with a nearby table and furnace, wood, coal, and iron in inventory",
    "Make Wood Sword": "craft a wood sword with a nearby table and wood in inventory",
    "Make Stone Sword": "craft a stone sword with a nearby table, wood, and stone in inventory",
    "Make Iron Sword": "craft an iron sword with a nearby table and furnace, wood, coal, and iron in inventory",
}
ACHIEVEMENTS = 22
VITALS = ["health", "food", "drink", "energy"]


def instruction_prompt() -> str:
    """BALROG's Crafter instruction prompt."""
    action_strings = ",\n".join(f"{action}: {ACTION_DICT[action]}" for action in ACTIONS)
    return f"""
You are an agent playing Crafter. The following are the only valid actions you can take in the game, followed by a short description of each action:

{action_strings}.

These are the game achievements you can get:
1. Collect Wood
2. Place Table
3. Eat Cow
4. Collect Sapling
5. Collect Drink
6. Make Wood Pickaxe
7. Make Wood Sword
8. Place Plant
9. Defeat Zombie
10. Collect Stone
11. Place Stone
12. Eat Plant
13. Defeat Skeleton
14. Make Stone Pickaxe
15. Make Stone Sword
16. Wake Up
17. Place Furnace
18. Collect Coal
19. Collect Iron
20. Make Iron Pickaxe
21. Make Iron Sword
22. Collect Diamond

In a moment I will present a history of actions and observations from the game.
Your goal is to get as far as possible by completing all the achievements.

PLAY!
""".strip()


def describe_inventory(info: dict[str, Any]) -> str:
    """The vitals (of 9) and the non-empty inventory, as the prompt lists them."""
    status = "Your status:\n" + "\n".join(f"- {v}: {info['inventory'][v]}/9" for v in VITALS)
    items = "\n".join(f"- {i}: {n}" for i, n in info["inventory"].items() if i not in VITALS and n != 0)
    inventory = f"Your inventory:\n{items}" if items else "You have nothing in your inventory."
    return (status + "\n\n" + inventory).strip()


def describe_loc(ref, p) -> str:
    """BALROG's describe_loc_old: "<distance> steps to your <north-west>"."""
    desc = []
    if ref[1] > p[1]:
        desc.append("north")
    elif ref[1] < p[1]:
        desc.append("south")
    if ref[0] > p[0]:
        desc.append("west")
    elif ref[0] < p[0]:
        desc.append("east")
    distance = abs(ref[1] - p[1]) + abs(ref[0] - p[0])
    return f"{distance} step{'s' if distance > 1 else ''} to your {'-'.join(desc)}"


class CrafterText(TextEnv):
    """Crafter as text (BALROG's Crafter wrapper): what the agent sees nearby and its inventory, in words; its named actions."""
    family = "crafter"
    default_action = "Noop"

    def __init__(self, env_id: str = "crafter", seed: int | None = None, length: int = 10000, **kwargs: Any):
        import crafter

        self.kwargs = {"length": length, **kwargs}
        self.crafter = crafter
        self.env = crafter.Env(seed=seed, **self.kwargs)
        self.max_steps = length
        self.names = self._item_names()
        self.achievements: dict[str, int] = {}

    def _item_names(self) -> list[str]:
        names = [""] * 64
        import itertools
        for name, index in itertools.chain(self.env._world._mat_ids.items(), self.env._sem_view._obj_ids.items()):
            text = str(name)
            names[index] = text[text.find("objects.") + len("objects."):-2].lower() if "objects." in text else text
        return names

    @property
    @override
    def actions(self) -> list[str]:
        return ACTIONS

    @override
    def instruction_prompt(self) -> str:
        return instruction_prompt()

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        player = self.env._player
        return {**info, "sleeping": player.sleeping, "player_facing": player.facing,
                "dead": player.health <= 0, "view": self.env._view}

    def describe(self, info: dict[str, Any]) -> dict[str, str]:
        """Crafter's view as text: what lies around the player (long-term context) and its status and
        inventory (short-term context)."""
        import numpy as np

        status = ("You are sleeping, and will not be able take actions until energy is full.\n\n" if info["sleeping"]
                  else "You died.\n\n" if info["dead"] else "")
        try:
            player = self.names.index("player")
            x, y = info["player_pos"]
            view = info["view"]
            semantic = info["semantic"][x - view[0] // 2: x + view[0] // 2 + 1,
                                        y - view[1] // 2 + 1: y + view[1] // 2]
            center = np.array([view[0] // 2, view[1] // 2 - 1])
            fx, fy = center[0] + info["player_facing"][0], center[1] + info["player_facing"][1]
            front = (self.names[semantic[int(fx), int(fy)]] if 0 <= fx < semantic.shape[0]
                     and 0 <= fy < semantic.shape[1] else "nothing")
            seen = []
            for i in range(semantic.shape[0]):
                for j in range(semantic.shape[1]):
                    if semantic[i, j] != player:
                        seen.append((self.names[semantic[i, j]], describe_loc(np.array([0, 0]), np.array([i, j]) - center)))
            closest: dict[str, str] = defaultdict(str)
            for name, loc in seen:  # the closest of each kind only (unique_items)
                dist = sum(int(n) for n in re.findall(r"\d+", loc))
                best = closest[name]
                if not best or dist < sum(int(n) for n in re.findall(r"\d+", best)):
                    closest[name] = loc
            text = ("You see:\n" + "\n".join(f"- {n} {loc}" for n, loc in closest.items()) if closest
                    else "You see nothing away from you.")
            long_term = (status + "\n\n" + text + "\n\n" + f"You face {front} at your front.").strip()
        except Exception:  # noqa: BLE001 -- upstream's words for a view cut by the map's edge
            long_term = "Error, you are out of the map."
        return {"long_term_context": long_term, "short_term_context": describe_inventory(info)}

    @override
    def reset(self, seed: int | None = None) -> dict[str, str]:
        if seed is not None:
            self.env = self.crafter.Env(seed=seed, **self.kwargs)
        self.env.reset()
        _, _, _, info = self.env.step(0)  # upstream: a Noop gives the first info
        self.achievements = {}
        return self.describe(self._info(info))

    @override
    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool]:
        _, reward, done, info = self.env.step(ACTIONS.index(action))
        info = self._info(info)
        self.achievements = dict(info["achievements"])
        return self.describe(info), float(reward), bool(done and info["dead"]), bool(done and not info["dead"])

    @override
    def progression(self) -> float:
        return sum(1.0 for v in self.achievements.values() if v > 0) / ACHIEVEMENTS

    @override
    def success(self) -> bool:
        return self.progression() >= 1.0

    @override
    def render(self) -> Any:
        return self.env.render()


def make(env_id: str, seed: int | None = None, **kwargs: Any) -> CrafterText:
    """The text env of Crafter."""
    return CrafterText(env_id, seed=seed, **kwargs)
