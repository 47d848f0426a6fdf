"""BabyAI / MiniGrid as text, as BALROG's BabyAI-Text wrapper gives it.

BALROG (balrog/environments/babyai_text) plays BabyAI through BabyAI-Text: the
mission goes into the instruction prompt, each observation is the list of
things in the agent's 7x7 egocentric view, one a line ("a wall 2 steps
forward", "a red ball 1 step left and 3 steps forward", "You carry a blue
key"), the actions are the six of the language action space ("done" is not
one), an invalid action is played as "go forward", and progression is 1 once
a reward came. The description is computed here from minigrid's own view
(``gen_obs_grid``), the way BabyAI-Text's ``gen_text_desc`` does.
"""
from __future__ import annotations

from typing import Any

from typing_extensions import override

from workers.sdk.llm.textenv import TextEnv

ACTIONS = {
    "turn left": "turn to the left",
    "turn right": "turn to the right",
    "go forward": "take one step forward",
    "pick up": "pick up the object below you",
    "drop": "drop the object that you are holding",
    "toggle": "manipulate the object in front of you",
}
ACTION_LIST = list(ACTIONS)  # minigrid's Actions 0..5, in order
DOOR_STATES = {0: "open ", 1: "closed ", 2: "locked "}


def instruction_prompt(mission: str) -> str:
    """BALROG's BabyAI instruction prompt (balrog/environments/babyai_text/__init__.py)."""
    action_strings = ",\n".join(f"{action}: {description}" for action, description in ACTIONS.items())
    return f"""
You are an agent playing a simple navigation game. Your goal is to {mission}. The following are the possible actions you can take in the game, followed by a short description of each action:

{action_strings}.

In a moment I will present you an observation.

Tips:
- Once the desired object you want to interact or pickup in front of you, you can use the 'toggle' action to interact with it.
- It doesn't make sense to repeat the same action over and over if the observation doesn't change.

PLAY!
""".strip()


def _steps(n: int, direction: str) -> str:
    return f"{n} step{'s' if n != 1 else ''} {direction}"


def describe(env: Any) -> list[str]:
    """The agent's view, one thing a line, BabyAI-Text's phrasing (without its "You see ")."""
    from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, OBJECT_TO_IDX

    base = env.unwrapped
    grid, vis_mask = base.gen_obs_grid()
    image = grid.encode(vis_mask)
    size = image.shape[0]
    ax, ay = size // 2, size - 1  # the agent in its own view: bottom middle, facing up
    lines = []
    if base.carrying is not None:
        lines.append(f"You carry a {base.carrying.color} {base.carrying.type}")
    wall = OBJECT_TO_IDX["wall"]
    # a wall is described straight ahead, left and right only, and only if nothing stands before it
    for direction, cells in (
            ("forward", [(ax, j) for j in range(ay - 1, -1, -1)]),
            ("left", [(i, ay) for i in range(ax - 1, -1, -1)]),
            ("right", [(i, ay) for i in range(ax + 1, size)])):
        for distance, (i, j) in enumerate(cells, start=1):
            kind = image[i][j][0]
            if kind in (OBJECT_TO_IDX["unseen"], OBJECT_TO_IDX["empty"]):
                continue
            if kind == wall:
                lines.append(f"a wall {_steps(distance, direction)}")
            break
    for i in range(size):
        for j in range(size):
            kind, color, state = (int(v) for v in image[i][j])
            if (i, j) == (ax, ay) or kind in (OBJECT_TO_IDX["unseen"], OBJECT_TO_IDX["empty"], wall):  # the agent, nothing, walls
                continue
            name = IDX_TO_OBJECT[kind]
            text = f"a {DOOR_STATES.get(state, '') if name == 'door' else ''}{IDX_TO_COLOR[color]} {name}"
            if name in ("goal", "lava", "floor"):
                text = f"a {name}" if name != "lava" else "lava"
            side, forward = i - ax, ay - j
            if side == 0:
                where = _steps(forward, "forward")
            elif forward == 0:
                where = _steps(abs(side), "right" if side > 0 else "left")
            else:
                where = f"{_steps(abs(side), 'right' if side > 0 else 'left')} and {_steps(forward, 'forward')}"
            lines.append(f"{text} {where}")
    return lines


class BabyAIText(TextEnv):
    """A BabyAI level as text (BALROG's BabyAI wrapper): the mission, what the agent sees in words, its six actions."""
    family = "babyai"
    default_action = "go forward"

    def __init__(self, env_id: str, seed: int | None = None, **kwargs: Any):
        import gymnasium as gym
        import minigrid

        minigrid.register_minigrid_envs()
        self.env_id = env_id
        self.env = gym.make(env_id, render_mode="rgb_array", **kwargs)
        self.max_steps = int(self.env.unwrapped.max_steps)
        self.mission = ""
        self._progression = 0.0
        self.seed = seed

    @property
    @override
    def actions(self) -> list[str]:
        return ACTION_LIST

    @override
    def instruction_prompt(self) -> str:
        return instruction_prompt(self.mission)

    def _text(self) -> dict[str, str]:
        # BabyAI-Text has no long-term context such as an inventory: all of it is the view
        return {"long_term_context": "\n".join(describe(self.env)), "short_term_context": ""}

    @override
    def reset(self, seed: int | None = None) -> dict[str, str]:
        obs, _ = self.env.reset(seed=seed)
        self.mission = obs["mission"]
        self._progression = 0.0
        return self._text()

    @override
    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool]:
        _, reward, terminated, truncated, _ = self.env.step(ACTION_LIST.index(action))
        if reward > 0:
            self._progression = 1.0
        return self._text(), float(reward), bool(terminated), bool(truncated)

    @override
    def progression(self) -> float:
        return self._progression

    @override
    def render(self) -> Any:
        return self.env.render()

    @override
    def close(self) -> None:
        self.env.close()


def make(env_id: str, seed: int | None = None, **kwargs: Any) -> BabyAIText:
    """The text env of a BabyAI id."""
    return BabyAIText(env_id, seed=seed, **kwargs)
