"""MOSAIC MultiGrid as flat arrays and string agent ids: what every worker's adapter needs.

mosaic_multigrid's envs speak a dict API keyed by integer agent index, with
observations ``Dict(direction: Discrete(4), image: Box(3, 3, 3), mission)``.
XuanCe's and RLlib's multi-agent learners want string agent ids and flat
vectors. ``MultiGridView`` wraps one env (made with ``gymnasium.make``, its
family registered by workers/sdk/registration.py) and gives:

- agent ids by team colour: ``green_0``, ``green_1``, ``blue_0``... (a team is
  the agents sharing ``team_index``; 2v2 is {green_0, green_1} vs {blue_0, blue_1});
- a flat observation per agent: the 3x3 view's cells (type, colour, state) as
  floats, then the facing direction one-hot (31 values for every game, so a
  curriculum can move from collect to soccer with the same networks; the
  mission string is constant and left out);
- a global state for centralised critics: the whole grid's encoding, padded to
  the largest field of the package (19x11, basketball), then each agent's x, y
  and direction;
- steps taking and returning dicts keyed by those ids.

Worker processes only (numpy, gymnasium, mosaic_multigrid are imported here).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workers.sdk.envs import MULTIGRID
from workers.sdk.registration import register_family

VIEW_CELLS = 3 * 3 * 3
DIRECTIONS = 4
OBSERVATION_SIZE = VIEW_CELLS + DIRECTIONS
STATE_GRID = (19, 11)  # (width, height) of the largest field: basketball; soccer 16x11, collect 10x10


def make(env_id: str, render_mode: str | None = "rgb_array", **kwargs: Any):
    """The unwrapped mosaic_multigrid env (gymnasium's passive checker would warn at every
    dict-valued reward)."""
    register_family(MULTIGRID)
    import gymnasium

    return gymnasium.make(env_id, render_mode=render_mode, **kwargs).unwrapped


class MultiGridView:
    """A mosaic_multigrid env as the workers see it: agents named by team colour (``green_0``, ``blue_1``),
    their teams, and each agent's flat observation and the global state built from the env."""
    def __init__(self, env):
        self.env = env
        env.reset()  # agents take their team's colour at reset
        counts: dict[str, int] = {}
        self.agents: list[str] = []
        self.teams: dict[str, list[str]] = {}
        for agent in env.agents:
            colour = str(getattr(agent.color, "value", agent.color))
            name = f"{colour}_{counts.get(colour, 0)}"
            counts[colour] = counts.get(colour, 0) + 1
            self.agents.append(name)
            self.teams.setdefault(colour, []).append(name)
        self.index = {name: i for i, name in enumerate(self.agents)}
        width, height = env.grid.width, env.grid.height
        if width > STATE_GRID[0] or height > STATE_GRID[1]:
            raise ValueError(f"a {width}x{height} MultiGrid field does not fit the {STATE_GRID} global state")
        self.max_steps = int(env.max_steps)

    # -- spaces ------------------------------------------------------------
    @staticmethod
    def observation_space():
        """Each agent's observation: its view's cells and a one-hot direction, flat."""
        from gymnasium.spaces import Box

        return Box(0.0, 255.0, shape=(OBSERVATION_SIZE,), dtype=np.float32)

    def action_space(self):
        """Each agent's actions (every agent has the same)."""
        return self.env.action_space[0]

    def state_space(self):
        """The global state a centralised critic sees: the whole grid and every agent's position and direction."""
        from gymnasium.spaces import Box

        size = STATE_GRID[0] * STATE_GRID[1] * 3 + 3 * len(self.agents)
        return Box(0.0, 255.0, shape=(size,), dtype=np.float32)

    # -- arrays ------------------------------------------------------------
    @staticmethod
    def flat(observation: dict[str, Any]) -> np.ndarray:
        """One agent's observation as the flat vector of ``observation_space``."""
        flat = np.zeros(OBSERVATION_SIZE, dtype=np.float32)
        flat[:VIEW_CELLS] = np.asarray(observation["image"], dtype=np.float32).reshape(-1)
        flat[VIEW_CELLS + int(observation["direction"])] = 1.0
        return flat

    def observations(self, raw: dict[int, Any]) -> dict[str, np.ndarray]:
        """Every agent's flat observation, by agent id."""
        return {name: self.flat(raw[i]) for name, i in self.index.items()}

    def state(self) -> np.ndarray:
        """The global state now (``state_space``)."""
        grid = np.zeros((*STATE_GRID, 3), dtype=np.float32)
        encoding = self.env.grid.encode()
        grid[:encoding.shape[0], :encoding.shape[1]] = encoding
        agents = [value for agent in self.env.agents for value in (*agent.pos, int(agent.dir))]
        return np.concatenate([grid.reshape(-1), np.asarray(agents, dtype=np.float32)])

    # -- the env -------------------------------------------------------------
    def reset(self, seed: int | None = None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode: each agent's first observation, by agent id, and an empty info."""
        raw, _ = self.env.reset(seed=seed)
        return self.observations(raw), {}

    def step(self, actions: dict[str, Any]):
        """(observations, rewards, terminated, truncated, info), each keyed by agent id."""
        raw_actions = {i: int(np.asarray(actions[name]).reshape(-1)[0]) for name, i in self.index.items()}
        raw, rewards, terminated, truncated, info = self.env.step(raw_actions)
        return (self.observations(raw),
                {name: float(rewards[i]) for name, i in self.index.items()},
                {name: bool(terminated[i]) for name, i in self.index.items()},
                {name: bool(truncated[i]) for name, i in self.index.items()},
                info)

    def render(self):
        """The env's RGB frame."""
        return self.env.render()

    def close(self) -> None:
        """Close the underlying env."""
        self.env.close()


class ParallelMultiGrid:
    """A MultiGrid env with PettingZoo's parallel API (``possible_agents``, ``observation_space(agent)``,
    ``reset``/``step`` with dicts keyed by agent id): what RLlib's ParallelPettingZooEnv wraps.
    An agent that is done leaves ``agents`` and gets no further entries, as PettingZoo's API says."""

    metadata = {"render_modes": ["rgb_array"], "name": "mosaic_multigrid"}

    def __init__(self, env_id: str, render_mode: str | None = "rgb_array", **kwargs: Any):
        self.view = MultiGridView(make(env_id, render_mode=render_mode, **kwargs))
        self.render_mode = render_mode
        self.possible_agents = list(self.view.agents)
        self.agents = list(self.possible_agents)
        self._observation_space = self.view.observation_space()
        self._action_space = self.view.action_space()

    def observation_space(self, agent: str):
        """The agent's observation space (every agent's is the same)."""
        return self._observation_space

    def action_space(self, agent: str):
        """The agent's action space (every agent's is the same)."""
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None):
        """Start an episode with every agent: observations and infos by agent."""
        observations, _ = self.view.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return observations, {agent: {} for agent in self.agents}

    def step(self, actions: dict[str, Any]):
        """Step the agents still playing (the others stand still): observations, rewards,
        terminations, truncations and infos, by agent."""
        acting = list(self.agents)
        # agents that are done stand still (action 0 is the no-op) in the underlying env
        full = {agent: actions.get(agent, 0) for agent in self.possible_agents}
        observations, rewards, terminated, truncated, _ = self.view.step(full)
        self.agents = [a for a in acting if not (terminated[a] or truncated[a])]
        pick = lambda table: {agent: table[agent] for agent in acting}  # noqa: E731
        return (pick(observations), pick(rewards), pick(terminated), pick(truncated),
                {agent: {} for agent in acting})

    def render(self, *args: Any):
        """The env's RGB frame."""
        return self.view.render()

    def close(self) -> None:
        """Close the underlying env."""
        self.view.close()
