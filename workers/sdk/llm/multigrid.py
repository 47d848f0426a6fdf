"""MOSAIC MultiGrid (``mosaic-multigrid``: soccer, basketball, American football, collect) as text for LLM agents.

Two observation modes, the "theory of mind" comparison MOSAIC studies:

- ``egocentric``: what the agent itself perceives -- its own position, heading and
  what it carries, and each object in its partial view (``view_size`` x ``view_size``
  cells ahead of it), said relative to its heading ("1 step ahead, 1 to the left").
  Other agents are seen by colour only, as the pixels show them.
- ``visible_teammates``: the same, and for each teammate that is actually in view
  (its cell is in the agent's observation, not hidden behind a wall), its id,
  colour, heading and what it carries. Teammates out of view are not mentioned:
  the mode adds what the agent could know by looking, nothing omniscient.

The instruction prompt has three coordination levels (MOSAIC's L1/L2/L3): the
rules and actions only; the same with cooperation hints; and explicit roles
(forward / defender in team sports). Teams, colours, goals and end zones are read
from the env itself, so the text is right for every variant (1v1 ... 4v4, solo).

Worker processes only: imports mosaic_multigrid (numba) on first use.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OBSERVATION_MODES = ("egocentric", "visible_teammates")
LEVELS = ("L1", "L2", "L3")
ROLES = ("forward", "defender")

# mosaic_multigrid's Action enum (noop=0 ... done=7), said for a model
ACTION_HELP = {
    "noop": "do nothing this step",
    "left": "turn 90 degrees to your left",
    "right": "turn 90 degrees to your right",
    "forward": "move one cell in the direction you face",
    "pickup": "pick up the ball in front of you, or steal it from an opponent in front of you",
    "drop": "drop the ball in front of you: scores at the other team's goal, passes to a teammate in front",
    "toggle": "interact with the object in front of you",
    "done": "declare that you are done (rarely useful)",
}
HEADINGS = ("east", "south", "west", "north")          # mosaic_multigrid Direction 0..3
CARRYING_BALL = 100                                     # added to an agent cell's state when it carries the ball
SPORTS = {"S": "soccer", "BB": "basketball", "AF": "American football", "C": "collect"}


def action_names() -> list[str]:
    """mosaic_multigrid's action names, in the order of their numbers."""
    from mosaic_multigrid.core.actions import Action
    return [a.name for a in Action]


def sport_of(env_id: str) -> str:
    """'soccer', 'basketball', 'American football' or 'collect', from MosaicMultiGrid-<S|BB|AF|C>-..."""
    code = env_id.split("-")[1] if env_id.count("-") >= 2 else ""
    return SPORTS.get(code, "multigrid")


def _steps(n: int, word: str) -> str:
    return f"{n} step{'s' if n != 1 else ''} {word}"


def relative(forward: int, right: int) -> str:
    """(cells ahead, cells to the right) as words: "2 steps ahead and 1 step to the left"."""
    parts = []
    if forward > 0:
        parts.append(_steps(forward, "ahead"))
    elif forward < 0:
        parts.append(_steps(-forward, "behind"))
    if right > 0:
        parts.append(_steps(right, "to the right"))
    elif right < 0:
        parts.append(_steps(-right, "to the left"))
    return " and ".join(parts) or "where you stand"


def to_view(dx: int, dy: int, heading: int) -> tuple[int, int]:
    """A world offset (dx east, dy south) as (ahead, right) for an agent facing ``heading``."""
    if heading == 0:   # east
        return dx, dy
    if heading == 1:   # south
        return dy, -dx
    if heading == 2:   # west
        return -dx, -dy
    return -dy, dx     # north


@dataclass
class Landmark:
    """A goal or an end zone on the field: its kind, its team colour and its cells."""
    kind: str       # "goal" or "end zone"
    colour: str
    cells: list[tuple[int, int]]

    def where(self) -> str:
        """The landmark's cells in words: its column(s) and row(s)."""
        xs = sorted({x for x, _ in self.cells})
        ys = sorted({y for _, y in self.cells})
        col = f"column {xs[0]}" if len(xs) == 1 else f"columns {xs[0]}-{xs[-1]}"
        row = f"row {ys[0]}" if len(ys) == 1 else f"rows {ys[0]}-{ys[-1]}"
        return f"{col}, {row}"


def landmarks(env: Any) -> list[Landmark]:
    """The goals and end zones on the grid, by colour (read once per episode)."""
    found: dict[tuple[str, str], list[tuple[int, int]]] = {}
    grid = env.grid
    for x in range(grid.width):
        for y in range(grid.height):
            obj = grid.get(x, y)
            kind = getattr(getattr(obj, "type", None), "value", None)
            if kind in ("objgoal", "endzone"):
                name = "goal" if kind == "objgoal" else "end zone"
                found.setdefault((name, str(obj.color.value)), []).append((x, y))
    return [Landmark(kind, colour, cells) for (kind, colour), cells in sorted(found.items())]


def team_colour(agent: Any) -> str:
    """The colour of the agent's team (``green``, ``blue``...)."""
    return str(agent.color.value)


def teammates(env: Any, index: int) -> list[int]:
    """The indices of the other agents of agent ``index``'s team."""
    me = env.agents[index]
    return [a.index for a in env.agents if a.index != index and a.team_index == me.team_index]


def opponents(env: Any, index: int) -> list[int]:
    """The indices of the agents of the other teams."""
    me = env.agents[index]
    return [a.index for a in env.agents if a.team_index != me.team_index]


def default_roles(env: Any) -> dict[int, str]:
    """L3's roles when none are given: each team's first agent is the forward, the others defenders."""
    roles: dict[int, str] = {}
    seen: set[int] = set()
    for agent in env.agents:
        roles[agent.index] = "defender" if agent.team_index in seen else "forward"
        seen.add(agent.team_index)
    return roles


def _carried(agent: Any) -> str:
    obj = agent.carrying
    if obj is None:
        return "nothing"
    return f"a {obj.color.value} {obj.type.value}"


def instructions(env_id: str, env: Any, index: int, level: str, role: str | None = None) -> str:
    """The instruction prompt of agent ``index`` at coordination level L1, L2 or L3."""
    sport = sport_of(env_id)
    me = env.agents[index]
    colour = team_colour(me)
    mates = teammates(env, index)
    rivals = opponents(env, index)
    lines = [f"You are agent {index} in a game of {sport} on a {env.width}x{env.height} grid "
             f"(columns 0-{env.width - 1} west to east, rows 0-{env.height - 1} north to south)."]
    if sport == "collect":
        lines.append(f"You are {colour}. Other agents: "
                     + (", ".join(f"agent {i} ({team_colour(env.agents[i])})" for i in rivals) or "none") + ".")
        lines.append("Goal: pick up more balls than the others. Walk next to a ball, face it and use pickup.")
    else:
        team = ", ".join(f"agent {i}" for i in mates) or "no teammates"
        lines.append(f"Your team is {colour} ({team} with you). Opponents: "
                     + (", ".join(f"agent {i} ({team_colour(env.agents[i])})" for i in rivals) or "none") + ".")
        for mark in landmarks(env):
            owner = "your team's" if mark.colour == colour else "the other team's"
            lines.append(f"The {mark.colour} {mark.kind} ({owner}) is at {mark.where()}.")
        if sport == "American football":
            lines.append("Goal: carry the ball into the other team's end zone. Steal with pickup; pass with drop.")
        else:
            lines.append("Goal: carry the ball to the other team's goal, face it and drop the ball to score. "
                         "Steal the ball from an opponent in front of you with pickup; drop towards a teammate "
                         "passes to them.")
    lines.append("")
    lines.append("Actions:")
    lines.extend(f"- {name}: {ACTION_HELP.get(name, name)}" for name in action_names())
    if level in ("L2", "L3"):
        lines.append("")
        if sport == "collect":
            lines += ["Tips:", "- Go for the nearest ball.",
                      "- If another agent is closer to a ball, choose a different one.",
                      "- Do not repeat an action that changes nothing (walking into a wall)."]
        else:
            lines += ["Tips for coordination:",
                      "- Spread out: two players chasing the same ball leave space open.",
                      "- If a teammate has the ball, move to open space to receive a pass.",
                      "- If an opponent has the ball, block its way to your goal or steal it.",
                      "- Do not repeat an action that changes nothing (walking into a wall)."]
    if level == "L3" and role and sport != "collect":
        lines.append("")
        if role == "forward":
            lines += [f"Your role: FORWARD. Score goals: get the ball and carry it to the other team's "
                      f"{'end zone' if sport == 'American football' else 'goal'}; press the ball carrier "
                      f"when the other team has it; stay in the other team's half."]
        else:
            lines += ["Your role: DEFENDER. Protect your goal: stay between the ball and your goal, steal "
                      "from attackers, and pass forward to your forward when you win the ball."]
        if mates:
            lines.append("Your teammates' roles are theirs to play; keep to yours.")
    lines.append("")
    lines.append("Answer with one action name.")
    return "\n".join(lines)


def _cell_text(obj_type: str, colour: str, state: int, where: str) -> str | None:
    if obj_type in ("empty", "unseen", "floor"):
        return None
    if obj_type == "agent":
        heading = HEADINGS[(state % CARRYING_BALL) % 4]
        carrying = ", carrying the ball" if state >= CARRYING_BALL else ""
        return f"- a {colour} agent {where}, facing {heading}{carrying}"
    if obj_type in ("objgoal", "endzone"):
        return f"- the {colour} {'goal' if obj_type == 'objgoal' else 'end zone'} {where}"
    return f"- a {colour} {obj_type} {where}" if obj_type != "wall" else f"- a wall {where}"


def describe(env: Any, index: int, obs: dict[str, Any], mode: str = "egocentric") -> str:
    """Agent ``index``'s observation ``obs`` (its entry of the env's obs dict) as text."""
    from mosaic_multigrid.core.constants import Color, Type

    me = env.agents[index]
    image = obs["image"]
    view = image.shape[0]
    heading = int(obs["direction"])
    x, y = (int(v) for v in me.pos)
    lines = [f"You are at column {x}, row {y}, facing {HEADINGS[heading]}, carrying {_carried(me)}.",
             "You see:"]
    seen = 0
    for i in range(view):
        for j in range(view):
            ahead, right = view - 1 - j, i - view // 2
            if ahead == 0 and right == 0:
                continue  # your own cell holds what you carry
            type_index, colour_index, state = (int(v) for v in image[i, j][:3])
            text = _cell_text(Type.from_index(type_index).value, Color.from_index(colour_index).value, state,
                              relative(ahead, right))
            if text:
                lines.append(text)
                seen += 1
    if not seen:
        lines.append("- nothing but open floor")
    if mode == "visible_teammates":
        lines.append("Visible teammates:")
        shown = 0
        for mate in teammates(env, index):
            other = env.agents[mate]
            if other.pos is None or other.state.terminated:
                continue
            ahead, right = to_view(int(other.pos[0]) - x, int(other.pos[1]) - y, heading)
            i, j = view // 2 + right, view - 1 - ahead
            if not (0 <= i < view and 0 <= j < view) or Type.from_index(int(image[i, j][0])) != Type.agent:
                continue  # out of view, or hidden
            lines.append(f"- teammate agent {mate} ({team_colour(other)}) {relative(ahead, right)}, facing "
                         f"{HEADINGS[int(other.dir)]}, carrying {_carried(other)}")
            shown += 1
        if not shown:
            lines.append("- none in view")
    return "\n".join(lines)
