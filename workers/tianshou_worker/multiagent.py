"""MOSAIC MultiGrid on Tianshou: every agent its own learner, all agents moving at once.

Tianshou 2.0.1's multi-agent path is ``PettingZooEnv`` (an AEC env: one agent
acts per step) feeding ``MultiAgentOffPolicyAlgorithm`` / ``MultiAgentOnPolicyAlgorithm``,
whose dispatcher (``MARLDispatcher``) hands each agent's transitions (``obs.agent_id``)
to that agent's algorithm with that agent's column of a reward vector.
A simultaneous-move game turned into an AEC env (pettingzoo's ``parallel_to_aec``)
breaks it: the game steps only when the last agent has chosen, so

- every agent but the last gets a zero reward on each of its transitions
  (``parallel_to_aec`` clears the rewards at the first agent's turn and fills them
  at the last's: Tianshou's ``PettingZooEnv`` stores them on the last agent's transition);
- an agent's ``obs_next`` is the next agent's observation, and the buffer's "next
  transition" (n-step returns, GAE) is another agent's.

So the game is given to Tianshou as a vector env of *seats*: one gymnasium-like env
per (game, agent), stepped by Tianshou's own ``BaseVectorEnv`` with ``SeatWorker``s.
Tianshou sends every seat its action before it receives any result (its synchronous
``step``), so the first result asked for steps the game with all the agents' actions.
Each seat's row of the buffer is then one agent's own trajectory (its own next
observation, its own reward), and the dispatcher and each agent's algorithm
(DQN, PPO...) work unchanged. The seat's observation is ``{"agent_id", "obs"}`` as
Tianshou's ``PettingZooEnv`` gives it; its reward a vector over the agents with
only its own entry set, so a seat's episode return reduces (sum) to its agent's.

The game itself is ``workers/sdk/multigrid.ParallelMultiGrid`` (the one shared
adapter: string ids by team colour, 31-float observations).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from tianshou.env import BaseVectorEnv
from tianshou.env.worker import EnvWorker

from workers.sdk.multigrid import ParallelMultiGrid
from workers.sdk.packages import upstream
from workers.sdk.worker_cli import training_begins
from workers.tianshou_worker import algorithms, catalog, resume
from workers.tianshou_worker.logger import TelemetryLogger

NOOP = 0  # MultiGrid's "still": what a seat the collector did not step this round does


class Game:
    """One MultiGrid game and its agents' choices of the current round.

    ``clock`` is shared by the games of one vector env: it counts game steps (all
    agents moving once) and calls ``on_episode`` with each finished episode."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], clock: "Clock", frames=None):
        self.env = ParallelMultiGrid(env_id, render_mode="rgb_array", **env_kwargs)
        self.agents = list(self.env.possible_agents)
        self.mask = [True] * int(self.env.action_space(self.agents[0]).n)
        self.clock = clock
        self.frames = frames
        self.actions: dict[str, int] = {}
        self.results: dict[str, tuple] | None = None  # this round's, per agent
        self.observations: dict[str, np.ndarray] = {}
        self.fresh = False  # reset, and no step since
        self.returns = dict.fromkeys(self.agents, 0.0)
        self.length = 0

    def seat_obs(self, agent: str, observations: dict[str, np.ndarray]) -> dict[str, Any]:
        """The observation as Tianshou's PettingZooEnv gives it (every action legal)."""
        return {"agent_id": agent, "obs": observations[agent], "mask": self.mask}

    # -- reset: the first seat asking after an episode ended resets the game -----
    def reset(self, agent: str, seed: int | None = None) -> tuple[dict[str, Any], dict]:
        if not self.fresh or seed is not None:
            self.observations, _ = self.env.reset(seed=seed)
            self.fresh, self.results, self.actions = True, None, {}
            self.returns, self.length = dict.fromkeys(self.agents, 0.0), 0
        return self.seat_obs(agent, self.observations), {}

    # -- step: every seat sends, then the first to receive steps the game ---------
    def act(self, agent: str, action: Any) -> None:
        if self.results is not None:  # a new round
            self.results, self.actions = None, {}
        self.actions[agent] = int(np.asarray(action).reshape(-1)[0])

    def result(self, agent: str) -> tuple:
        if self.results is None:
            self._step()
        return self.results[agent]

    def _step(self) -> None:
        actions = {agent: self.actions.get(agent, NOOP) for agent in self.agents}
        observations, rewards, terminated, truncated, _ = self.env.step(actions)
        self.fresh = False
        self.length += 1
        self.clock.steps += 1
        over = not self.env.agents or any(terminated.values()) or any(truncated.values())
        self.results = {}
        for index, agent in enumerate(self.agents):
            reward = np.zeros(len(self.agents), dtype=np.float32)
            reward[index] = rewards.get(agent, 0.0)
            self.returns[agent] += float(reward[index])
            obs = observations.get(agent, self.observations.get(agent))
            term = bool(terminated.get(agent, over))
            trunc = bool(truncated.get(agent, False)) or (over and not term)
            self.results[agent] = (self.seat_obs(agent, {agent: obs}), reward, term, trunc, {})
        self.observations = {**self.observations, **observations}
        if self.frames is not None:
            self.frames.maybe_publish(self.env.render)
        if over:
            self.clock.on_episode(dict(self.returns), self.length)


class Clock:
    """Game steps of one vector env's games, and what to do with a finished episode."""

    def __init__(self, on_episode: Callable[[dict[str, float], int], None] = lambda returns, length: None):
        self.steps = 0
        self.on_episode = on_episode


class Seat:
    """One agent's place at one game: what a worker of Tianshou's vector env holds."""

    def __init__(self, game: Game, agent: str):
        self.game = game
        self.agent = agent
        self.observation_space = game.env.observation_space(agent)
        self.action_space = game.env.action_space(agent)
        self.unwrapped = self


class SeatWorker(EnvWorker):
    """Tianshou's EnvWorker for a seat: ``send`` gives the agent's action (or a reset) to
    its game, ``recv`` returns the agent's part of the round, stepping the game once."""

    def __init__(self, seat_fn: Callable[[], Seat]):
        self.seat = seat_fn()
        super().__init__(seat_fn)
        self._reset_kwargs: dict[str, Any] | None = None

    def get_env_attr(self, key: str) -> Any:
        return getattr(self.seat, key)

    def set_env_attr(self, key: str, value: Any) -> None:
        setattr(self.seat, key, value)

    def reset(self, **kwargs: Any) -> tuple[dict, dict]:
        return self.seat.game.reset(self.seat.agent, kwargs.get("seed"))

    def send(self, action: np.ndarray | None, **kwargs: Any) -> None:
        if action is None:
            self._reset_kwargs = kwargs
        else:
            self._reset_kwargs = None
            self.seat.game.act(self.seat.agent, action)

    def recv(self):
        if self._reset_kwargs is not None:
            return self.reset(**self._reset_kwargs)
        return self.seat.game.result(self.seat.agent)

    @staticmethod
    def wait(workers: list["SeatWorker"], wait_num: int, timeout: float | None = None) -> list["SeatWorker"]:
        return workers

    def seed(self, seed: int | None = None) -> list[int] | None:
        super().seed(seed)
        self.seat.game.reset(self.seat.agent, seed)
        return [seed]  # type: ignore[list-item]

    def render(self, **kwargs: Any) -> Any:
        return self.seat.game.env.render()

    def close_env(self) -> None:
        self.seat.game.env.close()


class SeatVectorEnv(BaseVectorEnv):
    """``games`` MultiGrid games as a Tianshou vector env of games x agents seats
    (seat ``g * agents + k`` is agent k of game g)."""

    def __init__(self, env_id: str, games: int, env_kwargs: dict[str, Any], clock: Clock, frames=None):
        self.games = [Game(env_id, env_kwargs, clock, frames if index == 0 else None) for index in range(games)]
        seats = [Seat(game, agent) for game in self.games for agent in game.agents]
        super().__init__([lambda seat=seat: seat for seat in seats], SeatWorker)

    def seed(self, seed: int | list[int] | None = None) -> list[list[int] | None]:
        # one seed per game (its seats share it): game g gets seed + g
        base = seed if isinstance(seed, int) else 0
        seeds = [base + index // len(self.games[0].agents) for index in range(self.env_num)]
        return [worker.seed(s) for worker, s in zip(self.workers, seeds, strict=True)]


# -- building the run ---------------------------------------------------------------
def agents_of(game: ParallelMultiGrid):
    """Tianshou's own PettingZooEnv over the game (pettingzoo's parallel_to_aec of the shared
    adapter): what Tianshou's multi-agent algorithms read their agent ids and order from
    (it also checks that every agent has the same spaces)."""
    from pettingzoo.utils.conversions import parallel_to_aec
    from tianshou.env.pettingzoo_env import PettingZooEnv

    return PettingZooEnv(parallel_to_aec(game))


def build(algo: str, params: dict[str, Any], env_id: str, kind: str):
    """One algorithm (``algorithms.build``) per agent, under Tianshou's multi-agent dispatcher."""
    from tianshou.algorithm.multiagent.marl import MultiAgentOffPolicyAlgorithm, MultiAgentOnPolicyAlgorithm

    game = ParallelMultiGrid(env_id, render_mode=None, **params["env_kwargs"])
    aec = agents_of(game)
    spaces = algorithms.Spaces(aec.observation_space.shape, aec.action_space, aec.observation_space)
    learners = [algorithms.build(algo, params, spaces) for _ in aec.agents]
    cls = MultiAgentOffPolicyAlgorithm if kind == catalog.ONLINE_OFF else MultiAgentOnPolicyAlgorithm
    return cls(algorithms=learners, env=aec), list(aec.agents), game.view.teams


def build_with_checkpoint(config: dict[str, Any]):
    kind = catalog.ALGORITHMS[config["algo"]]["kind"]
    algorithm, agents, teams = build(config["algo"], config["params"], config["env"], kind)
    state = resume.load_state(config)   # mosaic continue, or a new run's start
    if state is not None:
        load_agents(algorithm, state["algorithm"])
    return algorithm, agents, teams, state


def load_agents(algorithm, state: dict[str, Any]) -> None:
    """Load a multi-agent checkpoint agent by agent. The multi-agent algorithm's ``state_dict``
    holds each agent's algorithm under ``_submodules.<i>.``, with that algorithm's optimizers
    (``_submodules.<i>._optimizers``); torch's ``load_state_dict`` of the whole refuses those
    keys (only Tianshou's ``Algorithm.load_state_dict`` of the agent's own algorithm takes them)."""
    parts: dict[int, dict[str, Any]] = {}
    for key, value in state.items():
        if key.startswith("_submodules."):
            index, rest = key[len("_submodules."):].split(".", 1)
            parts.setdefault(int(index), {})[rest] = value
    for index, agent_algorithm in enumerate(algorithm._submodules):
        agent_algorithm.load_state_dict(parts[index])


def episode_reporter(emitter, teams: dict[str, list[str]], clock: Clock) -> Callable[[dict[str, float], int], None]:
    """An episode event per finished game (the mean of the agents' returns, each agent's),
    and ``returns/<team>`` scalars, as the XuanCe worker reports a multi-agent episode."""
    def report(agents: dict[str, float], length: int) -> None:
        emitter.episode(clock.steps, sum(agents.values()) / max(1, len(agents)), length, agents=agents)
        for team, value in team_returns(agents, teams).items():
            emitter.scalar(f"returns/{team}", value, clock.steps)
    return report


def logger_class():
    class MultiAgentLogger(TelemetryLogger):
        """The single-agent logger with Tianshou's env steps (one per seat) turned into game
        steps; the games report the episodes themselves (each agent's return, the teams')."""

        def __init__(self, emitter, agents: int, checkpoint_every: int, restored: tuple[int, int, int]):
            super().__init__(emitter, checkpoint_every, restored)
            self.agents = agents
            self.env_step = restored[1] // agents

        def write(self, step_type: str, step: int, data: dict) -> None:
            if step_type.startswith("training"):
                step = step // self.agents
                data = {k: v for k, v in data.items() if k not in ("returns", "lens")}
            super().write(step_type, step, data)

    return MultiAgentLogger


def train(config: dict[str, Any], emitter, save_checkpoint) -> int:
    """Train every agent's algorithm on ``training_envs`` games at once (``steps``, ``epoch_num_steps``
    and ``collection_step_num_env_steps`` count game steps: all agents moving once)."""
    import torch
    from tianshou.data import Collector, CollectStats, VectorReplayBuffer
    from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams

    from workers.sdk.frames import env_frames

    algo, params = config["algo"], config["params"]
    kind = catalog.ALGORITHMS[algo]["kind"]
    torch.set_num_threads(params["torch_threads"])
    np.random.seed(config["seed"])
    torch.manual_seed(config["seed"])
    algorithm, agents, teams, state = build_with_checkpoint(config)
    k = len(agents)
    restored = resume.restored(state)
    logger = logger_class()(emitter, k, params["checkpoint_every"], restored)
    total = int(config["steps"])
    epoch_steps = min(params["epoch_num_steps"], total)
    _, _, trainer_params = algorithms.split_params(algo, params)
    trainer_params["epoch_num_steps"] = seat_steps(epoch_steps, k)
    trainer_params["collection_step_num_env_steps"] = seat_steps(trainer_params["collection_step_num_env_steps"], k)

    def save_fn(epoch: int, env_step: int, update_step: int) -> str:
        return save_checkpoint(algorithm, config, f"epoch_{epoch:04d}", epoch, env_step, update_step, emitter, k,
                               periodic=True)

    logger.stop_checkpoint = lambda epoch, env_step, update_step: save_checkpoint(
        algorithm, config, resume.stop_name(epoch), epoch, env_step, update_step, emitter, k)
    logger.max_epochs = epochs(total, epoch_steps)

    clock = Clock()
    clock.steps = logger.env_step  # a resumed run's episodes go on from the checkpoint's step
    clock.on_episode = episode_reporter(emitter, teams, clock)
    frames = env_frames(config)
    games = params["training_envs"]
    training_envs = SeatVectorEnv(config["env"], games, params["env_kwargs"], clock, frames)
    training_envs.seed(config["seed"])
    seats = training_envs.env_num
    if kind == catalog.ONLINE_OFF:
        size = max(params["buffer_size"], seats)
    else:  # what one collection step gathers, in whole rounds of every seat
        size = math.ceil(trainer_params["collection_step_num_env_steps"] / seats) * seats + seats
    collector = Collector[CollectStats](algorithm, training_envs, VectorReplayBuffer(size, seats),
                                        exploration_noise=True)
    test_collector = None
    if params["test_envs"]:
        test_envs = SeatVectorEnv(config["env"], params["test_envs"], params["env_kwargs"], Clock())
        test_envs.seed(config["seed"] + 1000)
        test_collector = Collector[CollectStats](algorithm, test_envs)
        trainer_params["test_step_num_episodes"] = trainer_params["test_step_num_episodes"] * k
    else:
        trainer_params.pop("test_step_num_episodes", None)
    emitter.run_started("tianshou", algo, config["env"], total_steps=total, upstream=upstream("tianshou"))
    training_begins()
    emitter.phase("train", step=logger.env_step)
    cls = OffPolicyTrainerParams if kind == catalog.ONLINE_OFF else OnPolicyTrainerParams
    trainer = cls(training_collector=collector, max_epochs=epochs(total, epoch_steps), test_collector=test_collector,
                  logger=logger, save_checkpoint_fn=save_fn, resume_from_log=state is not None, verbose=True,
                  show_progress=False, multi_agent_return_reduction=lambda returns: returns.sum(axis=1),
                  **trainer_params)
    try:
        result = algorithm.run_training(trainer)
    finally:
        if frames is not None:
            frames.close()
    save_checkpoint(algorithm, config, "final", logger.epoch, seat_steps(logger.env_step, k), result.update_step,
                    emitter, k)
    emitter.run_completed(step=logger.env_step)
    return 0


def evaluate(config: dict[str, Any], emitter) -> int:
    """Play ``eval_episodes`` games with the checkpoint's policies (Tianshou's Collector on one game)."""
    import torch
    from tianshou.data import Collector, CollectStats

    from workers.sdk.frames import env_frames

    torch.set_num_threads(config["params"]["torch_threads"])
    algorithm, agents, teams, _ = build_with_checkpoint(config)
    algorithm.policy.eval()
    clock = Clock()
    clock.on_episode = episode_reporter(emitter, teams, clock)
    frames = env_frames(config)
    envs = SeatVectorEnv(config["env"], 1, config["params"]["env_kwargs"], clock, frames)
    envs.seed(config["seed"])
    emitter.run_started("tianshou", config["algo"], config["env"], upstream=upstream("tianshou"))
    emitter.phase("eval", step=0)
    try:
        Collector[CollectStats](algorithm, envs).collect(n_episode=config["eval_episodes"] * len(agents),
                                                         reset_before_collect=True)
    finally:
        if frames is not None:
            frames.close()
    emitter.run_completed(step=clock.steps)
    return 0


def team_returns(agents: dict[str, float], teams: dict[str, list[str]]) -> dict[str, float]:
    """Each team's return: the mean of its agents' (as the XuanCe worker reports them)."""
    return {team: sum(agents[m] for m in members) / max(1, len(members)) for team, members in teams.items()}


def seat_steps(game_steps: int, agents: int) -> int:
    """Tianshou counts a transition per seat: ``game_steps`` game steps are this many of its env steps."""
    return int(game_steps) * agents


def epochs(total: int, epoch_steps: int) -> int:
    return math.ceil(total / epoch_steps)
