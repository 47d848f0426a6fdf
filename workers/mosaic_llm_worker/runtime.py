"""Seats, matches and ratings: what the MOSAIC LLM worker process runs.

A match is one env and one seat per agent. Each seat chooses its agent's moves:

- ``LLMSeat``: a prompt (instructions at the run's coordination level, then the
  observation as text) to an LLM client from workers/sdk/llm, the reply
  constrained to (or parsed into) the legal actions; one ``llm_step`` event per
  call, its reply streamed;
- ``RandomSeat``: a uniformly random legal action (seeded);
- ``StockfishSeat``: the Stockfish engine over UCI (python-chess's engine
  module) at a Skill Level and a time per move, chess only;
- ``CheckpointSeat``: a trained policy from another run's checkpoint, greedy:
  an RLlib module loaded and called with the ray worker's own eval code (its
  module, its observation layout), or (MultiGrid) a XuanCe model loaded by the
  xuance worker's ``evaluate.Policy``;
- ``HumanSeat``: a person, through the client that holds the seat (``human.py``:
  the run's control pipe, typed moves in the env's notation, refusals).

MultiGrid agents act at once each step: the LLM seats of a step are asked
concurrently, one thread each; then the human seats' actions are awaited (no LLM
call runs while a person thinks), and the env steps. Board games are played move
by move. After each
episode every seat gets win/draw/loss from its team's return, and an Elo rating
updated pairwise against every seat of another team.
"""
from __future__ import annotations

import json
import os
import random
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from workers.mosaic_llm_worker import human
from workers.sdk.frames import env_frames
from workers.sdk.guard import RunFailed
from workers.sdk.llm import classic, multigrid
from workers.sdk.llm.client import make_client
from workers.sdk.llm.stream import StepStream
from workers.sdk.llm.usage import Budget, BudgetReached, Usage, percentile
from workers.sdk.packages import upstream
from workers.sdk.series import EpisodeSeries

ELO_START = 1500.0
MOVES_FILE = "moves.jsonl"   # in the run directory: every seat's move, step by step

def play(config: dict[str, Any], emitter) -> int:
    """The run: seat the agents (LLM clients load their model once, Stockfish starts, checkpoints
    load), then play ``params.episodes`` episodes (``Match``); engines and clients closed on the way out."""
    from workers.mosaic_llm_worker import catalog

    _cache_dirs()
    params = config["params"]
    ids = catalog.seat_ids(config["env"])
    emitter.run_started(worker="mosaic_llm", algo=config["algo"], env=config["env"], total_steps=None,
                        upstream=upstream(_library(config["env"])),
                        seats={sid: describe_seat(spec) for sid, spec in zip(ids, params["seats"])},
                        coordination=params["coordination"], observation_mode=params["observation_mode"])
    seats, match, frames, humans = [], None, None, None
    try:
        if any(spec["kind"] == "human" for spec in params["seats"]):
            humans = human.Humans(".")   # the control pipe: a client can take a seat from now on
            names = None if config["env"] in classic.GAMES else multigrid.action_names()
            for sid, spec in zip(ids, params["seats"]):
                if spec["kind"] == "human":
                    controls = human.keymap(config["env"], names)
                    emitter.keymap(sid, controls["actions"], controls["keys"], "turn", text=controls["text"],
                                   noop=controls["noop"])
        emitter.phase("seat", step=0)
        seats = make_seats(config["env"], params["seats"], params, int(config["seed"]), humans, emitter)
        frames = env_frames(config)
        match = Match(config, seats, emitter, frames)
        emitter.phase("play", step=0)
        match.play()
    finally:
        if match is not None:
            match.close()
        for seat in seats:
            seat.close()
        if frames is not None:
            frames.close()
        if humans is not None:
            humans.close()
    emitter.run_completed(step=match.steps)
    return 0


def _cache_dirs() -> None:
    """mosaic-multigrid compiles its observation code with numba (cache=True): the cache goes under
    the mosaic home, not into site-packages (read-only for a user) or the run directory."""
    home = os.environ.get("MOSAIC_HOME")
    if home:
        os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(home, "cache", "numba"))
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")       # pygame renders boards off screen
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _library(env_id: str) -> str:
    """The distribution that makes the run's env."""
    from workers.mosaic_llm_worker import catalog

    return "pettingzoo" if catalog.env_family(env_id) == "classic" else "mosaic-multigrid"


@dataclass
class Move:
    """A seat's choice: the env action, its name, and (LLM seats) the call behind it."""
    action: int
    name: str
    valid: bool = True
    reply: Any = None            # workers.sdk.llm.client.Reply
    prompt: Any = None
    observation: str = ""
    policy_observation: list[float] | None = None   # checkpoint seats: what the policy was given
    typed: Any = None            # human seats: what the person sent (a chess move in SAN, a number ...)
    shown: str | None = None     # human seats: the move as the person reads it (chess: SAN)


class LLMFailed(RunFailed):
    """An LLM call failed after its retries and the run says on_error = fail."""


# -- seats ----------------------------------------------------------------------------------------
class Seat:
    kind = ""

    def __init__(self, seat_id: str, spec: dict[str, Any], rng: random.Random):
        self.seat_id = seat_id
        self.spec = spec
        self.rng = rng
        self.role: str | None = spec.get("role")

    @property
    def label(self) -> str:
        return self.kind

    def close(self) -> None:
        pass


class RandomSeat(Seat):
    kind = "random"

    def choose(self, legal: dict[str, int]) -> Move:
        name = self.rng.choice(list(legal))
        return Move(legal[name], name)


class LLMSeat(Seat):
    kind = "llm"

    def __init__(self, seat_id, spec, rng, on_error: str):
        super().__init__(seat_id, spec, rng)
        self.client = make_client(spec["llm"])
        self.on_error = on_error
        self.usage = Usage()

    @property
    def label(self) -> str:
        return f"llm:{self.spec['llm']['backend']}:{self.client.model}"

    def choose(self, legal: dict[str, int], instructions: str, observation: str, stream: StepStream,
               step: int, episode: int, fallback: str | None = None) -> Move:
        names = list(legal)
        prompt = [{"role": "system", "content": instructions},
                  {"role": "user", "content": f"{observation}\n\nChoose one of: {', '.join(names)}\n"
                                              f"Your action:"}]
        reply = self.client.complete(prompt, choices=names, on_text=stream.on_text(step, self.seat_id))
        valid = reply.error is None and reply.valid and reply.action in legal
        self.usage.add(valid, reply)
        # an invalid or failed reply still moves: the env's do-nothing, else a random legal move
        name = reply.action if valid else (fallback if fallback in legal else self.rng.choice(names))
        stream.final(step=step, agent=self.seat_id, episode=episode, reply=reply, prompt=prompt,
                     observation=observation, action=reply.action if valid else None, valid=valid,
                     played=name, seat=self.label)
        if reply.error is not None and self.on_error == "fail":
            raise LLMFailed(f"seat {self.seat_id}: the LLM call failed: {reply.error}")
        return Move(legal[name], name, valid, reply, prompt, observation)

    def close(self) -> None:
        self.client.close()


class StockfishSeat(Seat):
    kind = "stockfish"

    def __init__(self, seat_id, spec, rng, path: str):
        super().__init__(seat_id, spec, rng)
        import chess.engine

        self.limit = chess.engine.Limit(time=spec["movetime_ms"] / 1000.0)
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.engine.configure({"Skill Level": spec["level"], "Threads": 1})

    @property
    def label(self) -> str:
        return f"stockfish:{self.spec['level']}"

    def choose(self, legal: dict[str, int], board) -> Move:
        move = self.engine.play(board, self.limit).move.uci()
        return Move(legal[move], move)

    def close(self) -> None:
        try:
            self.engine.quit()
        except Exception:  # noqa: BLE001 -- an engine already gone
            pass


class CheckpointSeat(Seat):
    """A policy of another run's checkpoint trained on the same env, played greedily.

    RLlib (the ray worker's checkpoints): tic-tac-toe and connect four take the board and its
    action mask, as the ray worker's TurnBasedEnv gives them. XuanCe (the xuance worker's,
    MultiGrid only). MultiGrid, either way: the flat 31-float view of workers/sdk/multigrid.py,
    the observation both workers train on; the seat's agent is the checkpoint's agent at the
    same index (green_0, green_1, blue_0 ... in the env's agent order)."""
    kind = "checkpoint"

    def __init__(self, seat_id, spec, rng, agent_index: int):
        super().__init__(seat_id, spec, rng)
        from pathlib import Path

        from workers.sdk.rundir import checkpoint_dir, read_checkpoint_meta

        path = Path(spec["checkpoint"])
        meta = read_checkpoint_meta(str(path)) or {}
        self.path, self.folder = path, Path(checkpoint_dir(str(path)))
        if meta.get("worker") == "xuance":
            from workers.xuance_worker.evaluate import Policy

            policy = Policy(str(path))
            self.module_id = policy.agent_keys[agent_index]
            self.act_flat = lambda flat, action_space: policy.act(self.module_id, flat)
            return
        from workers.ray_worker import evaluate

        modules = evaluate.load_modules(path)
        # board games name seats as the checkpoint names agents (player_1); MultiGrid seats are indices
        agents = meta.get("agents") or []
        agent = seat_id if seat_id in agents else agents[agent_index]
        module_id = spec.get("module") or ("main" if meta.get("policy") == "self_play"
                                           else meta["agent_to_module"].get(agent))
        if module_id not in modules:
            raise ValueError(f"seat {seat_id}: the checkpoint has no module {module_id!r} "
                             f"(it has {', '.join(modules)})")
        self.module = modules[module_id]
        self.module_id = module_id
        self.act = evaluate.act
        self.act_flat = lambda flat, action_space: evaluate.act(self.module, flat, action_space)

    @property
    def label(self) -> str:
        return f"checkpoint:{self.folder.parent.parent.name}/{self.folder.name}:{self.module_id}"

    def choose(self, legal: dict[str, int], observation: dict[str, Any], action_space) -> Move:
        """A board game's move: the observation with its action mask (illegal moves masked)."""
        import numpy as np

        obs = {"observation": np.asarray(observation["observation"], dtype=np.float32).reshape(-1),
               "action_mask": np.asarray(observation["action_mask"], dtype=np.float32)}
        action = int(self.act(self.module, obs, action_space))
        by_action = {a: n for n, a in legal.items()}
        if action not in by_action:  # the masking module should never do this; say so if it does
            name = self.rng.choice(list(legal))
            return Move(legal[name], name, valid=False)
        return Move(action, by_action[action])

    def choose_multigrid(self, legal: dict[str, int], observation: dict[str, Any], action_space) -> Move:
        """A MultiGrid action from the agent's raw observation (direction, 3x3 view), flattened as in training."""
        from workers.sdk.multigrid import MultiGridView

        flat = MultiGridView.flat(observation)
        action = int(self.act_flat(flat, action_space))
        by_action = {a: n for n, a in legal.items()}
        return Move(action, by_action[action], policy_observation=flat.tolist())


class HumanSeat(Seat):
    """A person: the client that holds the seat sends its moves (human.py); nobody holding it, it waits."""
    kind = "human"

    def __init__(self, seat_id, spec, rng, waiter: human.Waiter):
        super().__init__(seat_id, spec, rng)
        self.waiter = waiter


def describe_seat(spec: dict[str, Any]) -> str:
    """A seat as the run's record says it, before it is seated: llm:openai:gpt-4o-mini, stockfish:5 ..."""
    kind = spec["kind"]
    if kind == "llm":
        llm = spec["llm"]
        return f"llm:{llm['backend']}:{llm['model'] or 'gemma-3-270m (default)'}"
    if kind == "stockfish":
        return f"stockfish:{spec['level']}"
    if kind == "checkpoint":
        return f"checkpoint:{spec['checkpoint']}"
    return kind


def make_seats(env_id: str, seats: list[dict[str, Any]], params: dict[str, Any], seed: int,
               humans: human.Humans | None = None, emitter=None) -> list[Seat]:
    from workers.mosaic_llm_worker import catalog

    out: list[Seat] = []
    try:
        for index, (seat_id, spec) in enumerate(zip(catalog.seat_ids(env_id), seats)):
            rng = random.Random(seed * 1000 + index)
            if spec["kind"] == "llm":
                out.append(LLMSeat(seat_id, spec, rng, params["on_error"]))
            elif spec["kind"] == "random":
                out.append(RandomSeat(seat_id, spec, rng))
            elif spec["kind"] == "stockfish":
                out.append(StockfishSeat(seat_id, spec, rng, catalog.stockfish_path()))
            elif spec["kind"] == "human":
                out.append(HumanSeat(seat_id, spec, rng, human.Waiter(humans, seat_id, emitter)))
            else:
                out.append(CheckpointSeat(seat_id, spec, rng, index))
    except BaseException:
        for seat in out:
            seat.close()
        raise
    return out


# -- results and ratings --------------------------------------------------------------------------
@dataclass
class Standings:
    """Win/draw/loss per seat and Elo ratings across the series."""
    seats: list[str]
    k: float = 32.0
    rating: dict[str, float] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    draws: dict[str, int] = field(default_factory=dict)
    losses: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for s in self.seats:
            self.rating.setdefault(s, ELO_START)
            self.wins.setdefault(s, 0)
            self.draws.setdefault(s, 0)
            self.losses.setdefault(s, 0)

    def record(self, points: dict[Any, float], teams: dict[str, Any]) -> dict[str, str]:
        """One episode: each seat's outcome from its team's points (the most points win; a tie at the
        top is a draw for those teams), and Elo updated pairwise against every seat of another team."""
        best = max(points[team] for team in teams.values())
        top = {team for team in teams.values() if points[team] == best}
        outcome = {seat: ("win" if len(top) == 1 else "draw") if team in top else "loss"
                   for seat, team in teams.items()}
        for seat, result in outcome.items():
            {"win": self.wins, "draw": self.draws, "loss": self.losses}[result][seat] += 1
        old = dict(self.rating)
        for seat, team in teams.items():
            rivals = [o for o, t in teams.items() if t != team]
            if not rivals:
                continue
            delta = 0.0
            for other in rivals:
                mine, theirs = points[team], points[teams[other]]
                score = 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0
                expected = 1.0 / (1.0 + 10 ** ((old[other] - old[seat]) / 400.0))
                delta += score - expected
            self.rating[seat] = old[seat] + self.k * delta / len(rivals)
        return outcome


# -- matches --------------------------------------------------------------------------------------
class Match:
    """One run: ``episodes`` episodes of one env between the seats."""

    def __init__(self, config: dict[str, Any], seats: list[Seat], emitter, frames):
        self.config = config
        self.params = config["params"]
        self.env_id = config["env"]
        self.seats = seats
        self.by_id = {s.seat_id: s for s in seats}
        self.emitter = emitter
        self.stream = StepStream(emitter)
        self.frames = frames
        self.steps = 0
        self.standings = Standings([s.seat_id for s in seats], k=float(self.params["elo_k"]))
        self.llm_seats = [s for s in seats if isinstance(s, LLMSeat)]
        self.human_seats = [s for s in seats if isinstance(s, HumanSeat)]
        self.pool = ThreadPoolExecutor(max_workers=len(self.llm_seats), thread_name_prefix="seat") \
            if len(self.llm_seats) > 1 and self.params["concurrent"] else None
        self.budget = Budget(self.params)
        self.moves = open(MOVES_FILE, "a", encoding="utf-8", buffering=1)
        self.series = EpisodeSeries("mosaic_llm", state=self.state, step=lambda: self.steps)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
        self.moves.close()

    def play(self) -> None:
        family = "classic" if self.env_id in classic.GAMES else "multigrid"
        first = self.series.restore(self.config["continue_from"], self.apply) \
            if self.config.get("continue_from") else 0
        for episode in range(first, self.params["episodes"]):
            seed = int(self.config["seed"]) + episode
            self.series.check(episode)
            try:
                with self.series.episode(episode):
                    if family == "classic":
                        returns, length, teams, points = self.classic_episode(episode, seed)
                    else:
                        returns, length, teams, points = self.multigrid_episode(episode, seed)
            except BudgetReached as exc:
                # a planned end: the episode it cuts has no result; the run completes
                sys.stderr.write(f"mosaic_llm: {exc}; stopping\n")
                self.emitter.phase(str(exc), step=self.steps)
                return
            self.finish_episode(returns, length, teams, points, episode)

    def check_stop(self) -> None:
        """Before a step: a stop cuts the episode here (its moves so far stay in the transcript)."""
        self.series.cut()

    # -- stop and continue ---------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The series' state at a stop (``workers.sdk.series``): the standings (win/draw/loss, Elo),
        each LLM seat's use (the budget goes on counting from it) and the step."""
        s = self.standings
        return {"steps": self.steps, "usage": {seat.seat_id: seat.usage.state() for seat in self.llm_seats},
                "standings": {"rating": s.rating, "wins": s.wins, "draws": s.draws, "losses": s.losses}}

    def apply(self, state: dict[str, Any]) -> None:
        """A stop's state back (``state``)."""
        self.steps = int(state["steps"])
        for key, values in state["standings"].items():
            getattr(self.standings, key).update(values)
        for seat in self.llm_seats:
            if seat.seat_id in state["usage"]:
                seat.usage = Usage.from_state(state["usage"][seat.seat_id])

    def check_budget(self) -> None:
        """Before a step: BudgetReached once the LLM seats together used the run's tokens or money."""
        tokens = sum(s.usage.tokens for s in self.llm_seats)
        costs = [s.usage.cost for s in self.llm_seats if s.usage.cost is not None]
        self.budget.check(tokens, sum(costs) if costs else None)

    def log_moves(self, episode: int, step: int, moves: dict[str, Move]) -> None:
        """One line of moves.jsonl: each seat's move at this step, and what each checkpoint policy saw."""
        line: dict[str, Any] = {"episode": episode, "step": step,
                                "moves": {sid: move.name for sid, move in moves.items()}}
        typed = {sid: move.typed for sid, move in moves.items() if move.typed is not None}
        if typed:
            line["typed"] = typed
        seen = {sid: move.policy_observation for sid, move in moves.items() if move.policy_observation is not None}
        if seen:
            line["policy_observations"] = seen
        self.moves.write(json.dumps(line) + "\n")

    # -- MultiGrid: simultaneous moves ---------------------------------------------------------
    def multigrid_episode(self, episode: int, seed: int) -> tuple[dict[str, float], int, dict[str, Any]]:
        import gymnasium as gym
        import mosaic_multigrid  # noqa: F401  (registers the ids)

        env = gym.make(self.env_id, render_mode="rgb_array" if self.frames is not None else None,
                       disable_env_checker=True, **self.params["env_kwargs"])
        try:
            obs, _ = env.reset(seed=seed)
            game = env.unwrapped
            names = multigrid.action_names()
            legal = {name: index for index, name in enumerate(names)}
            roles = multigrid.default_roles(game)
            level, mode = self.params["coordination"], self.params["observation_mode"]
            prompts = {s.seat_id: multigrid.instructions(self.env_id, game, int(s.seat_id), level,
                                                         s.role or roles[int(s.seat_id)]) for s in self.seats}
            teams = {s.seat_id: game.agents[int(s.seat_id)].team_index for s in self.seats}
            returns = {s.seat_id: 0.0 for s in self.seats}
            limit = self.params["max_steps"]
            length = 0
            while True:
                self.check_stop()
                self.check_budget()  # every step asks the LLM seats (if any)
                self.publish(env)
                step = self.steps

                def choose(seat: Seat) -> Move:
                    index = int(seat.seat_id)
                    if isinstance(seat, LLMSeat):
                        text = multigrid.describe(game, index, obs[index], mode)
                        return seat.choose(legal, prompts[seat.seat_id], text, self.stream, step, episode,
                                           fallback="noop")
                    if isinstance(seat, CheckpointSeat):
                        return seat.choose_multigrid(legal, obs[index], game.action_space[index])
                    return seat.choose(legal)

                # the agents' moves first (LLM calls timed by themselves), then the people's: nobody's
                # thinking time runs against an LLM call's limit
                agents = [seat for seat in self.seats if not isinstance(seat, HumanSeat)]
                if self.pool is not None:
                    chosen = dict(zip([s.seat_id for s in agents], self.pool.map(choose, agents)))
                else:
                    chosen = {seat.seat_id: choose(seat) for seat in agents}
                if self.human_seats:
                    self.show(env)
                    chosen.update(self.multigrid_humans(names, legal, step, episode, returns))
                moves = [chosen[seat.seat_id] for seat in self.seats]
                actions = {int(s.seat_id): m.action for s, m in zip(self.seats, moves)}
                self.log_moves(episode, step, {s.seat_id: m for s, m in zip(self.seats, moves)})
                obs, rewards, terminated, truncated, _ = env.step(actions)
                for seat in self.seats:
                    returns[seat.seat_id] += float(rewards[int(seat.seat_id)])
                self.steps += 1
                length += 1
                ended = all(terminated.values()) or all(truncated.values())
                for seat in self.human_seats:
                    move = chosen[seat.seat_id]
                    seat.waiter.tell(self.steps, episode, action=move.action, action_name=move.name,
                                     reward=float(rewards[int(seat.seat_id)]), waiting=False,
                                     **{"return": returns[seat.seat_id]})
                if ended or (limit is not None and length >= limit):
                    self.publish(env)
                    return returns, length, teams, self.multigrid_points(game, returns, teams)
        finally:
            env.close()

    def multigrid_humans(self, names: list[str], legal: dict[str, int], step: int, episode: int,
                         returns: dict[str, float]) -> dict[str, Move]:
        """The human seats' actions of a simultaneous step, the agents' being chosen: each seat is told
        it is awaited (and which seats still are), then each is waited for in turn (one's early act
        waits in the pipe for its turn)."""
        pending = [seat.seat_id for seat in self.human_seats]
        keys = ", ".join(f"{i} {name}" for i, name in enumerate(names))

        def shown(seat: HumanSeat) -> dict[str, Any]:
            others = [sid for sid in pending if sid != seat.seat_id]
            also = f"; the step also waits for {', '.join(others)}" if others else ""
            return {"message": f"agent {seat.seat_id}: your action ({keys}){also}", "waiting_for": list(pending),
                    "return": returns[seat.seat_id]}

        for seat in self.human_seats:
            seat.waiter.tell(step, episode, waiting=True, legal=names, **shown(seat))
        out: dict[str, Move] = {}
        for seat in self.human_seats:
            name, typed = seat.waiter.wait(step, episode, lambda t: human.read_action(names, t), names,
                                           self.check_stop, **shown(seat))
            pending.remove(seat.seat_id)
            out[seat.seat_id] = Move(legal[name], name, typed=typed, shown=name)
            if pending:   # in: the step waits for the others
                seat.waiter.tell(step, episode, waiting=False, action=legal[name], action_name=name,
                                 waiting_for=list(pending), message=f"{name} is in; waiting for {', '.join(pending)}")
        return out

    @staticmethod
    def multigrid_points(game, returns: dict[str, float], teams: dict[str, Any]) -> dict[Any, float]:
        """Goals (touchdowns) per team where the game counts them; else the team's summed return
        (collect: balls). Returns include shaping (+0.01 near the ball...): goals decide a match."""
        scores = getattr(game, "team_scores", None)
        if scores:
            return {team: float(scores.get(team, 0)) for team in set(teams.values())}
        points: dict[Any, float] = {}
        for seat, team in teams.items():
            points[team] = points.get(team, 0.0) + returns[seat]
        return points

    # -- board games: one move at a time -------------------------------------------------------
    def classic_episode(self, episode: int, seed: int) -> tuple[dict[str, float], int, dict[str, Any]]:
        env = classic.make(self.env_id, render_mode="rgb_array" if self.frames is not None else None,
                           **self.params["env_kwargs"])
        try:
            env.reset(seed=seed)
            level = self.params["coordination"]
            returns = {s.seat_id: 0.0 for s in self.seats}
            teams = {s.seat_id: s.seat_id for s in self.seats}
            prompts = {s.seat_id: classic.instructions(self.env_id, env, s.seat_id, level) for s in self.seats}
            limit = self.params["max_steps"]
            length = 0
            for agent in env.agent_iter():
                observation, reward, terminated, truncated, _ = env.last()
                returns[agent] += float(reward)
                if terminated or truncated:
                    env.step(None)
                    continue
                if limit is not None and length >= limit:
                    break  # a draw by the run's move limit
                self.check_stop()
                self.publish(env)
                seat = self.by_id[agent]
                legal = classic.legal_moves(self.env_id, env, agent)
                if isinstance(seat, LLMSeat):
                    self.check_budget()  # before a call: the other seats' moves cost nothing
                    move = seat.choose(legal, prompts[agent], classic.board_text(self.env_id, env, agent),
                                       self.stream, self.steps, episode)
                elif isinstance(seat, StockfishSeat):
                    move = seat.choose(legal, env.unwrapped.board)
                elif isinstance(seat, CheckpointSeat):
                    move = seat.choose(legal, observation, env.action_space(agent))
                elif isinstance(seat, HumanSeat):
                    move = self.classic_human(seat, env, legal, episode, returns[agent])
                else:
                    move = seat.choose(legal)
                self.log_moves(episode, self.steps, {agent: move})
                env.step(move.action)
                self.steps += 1
                length += 1
                if isinstance(seat, HumanSeat):
                    seat.waiter.tell(self.steps, episode, action=move.action, action_name=move.shown, waiting=False)
            self.publish(env)
            return returns, length, teams, dict(returns)  # +1 / -1 / 0: a board game's result
        finally:
            env.close()

    def classic_human(self, seat: HumanSeat, env, legal: dict[str, int], episode: int, ret: float) -> Move:
        """A person's move, typed in the game's notation; refused until it is legal."""
        self.show(env)
        names = human.shown(self.env_id, env, legal)
        last = human.last_move(self.env_id, env)
        side = classic.seat_name(self.env_id, env, seat.seat_id)
        fields = {"message": f"{side} to move{f' after {last}' if last else ''}: {human.HOW[self.env_id]}",
                  "return": ret}
        seat.waiter.tell(self.steps, episode, waiting=True, legal=names, **fields)
        name, typed = seat.waiter.wait(self.steps, episode, lambda t: human.read_move(self.env_id, env, legal, t),
                                       names, self.check_stop, **fields)
        return Move(legal[name], name, typed=typed,
                    shown=human.san(env, name) if self.env_id == "chess_v6" else name)

    # -- telemetry ----------------------------------------------------------------------------
    def publish(self, env) -> None:
        """A frame of the env, when one is due (LLM steps are slower than the frame rate: most are)."""
        if self.frames is not None:
            self.frames.maybe_publish(env.render)

    def show(self, env) -> None:
        """A frame now, before a person moves: they move on what they see (waits out the rate limit,
        at most one frame interval)."""
        if self.frames is None:
            return
        for _ in range(50):
            if self.frames.failed or self.frames.writer.due():
                break
            time.sleep(0.005)
        self.frames.maybe_publish(env.render)

    def finish_episode(self, returns: dict[str, float], length: int, teams: dict[str, Any],
                       points: dict[Any, float], episode: int = 0) -> None:
        outcome = self.standings.record(points, teams)
        step = self.steps
        for seat in self.human_seats:   # the person is told how it ended
            seat.waiter.tell(step, episode, waiting=False, ended=True, message=f"the game is over: a "
                             f"{outcome[seat.seat_id]} for {seat.seat_id}", **{"return": returns[seat.seat_id]})
        self.emitter.episode(step, sum(returns.values()), length, agents=dict(returns))
        scalars: dict[str, float] = {}
        for seat in self.seats:
            sid = seat.seat_id
            scalars[f"results/{sid}/score"] = {"win": 1.0, "draw": 0.5, "loss": 0.0}[outcome[sid]]
            scalars[f"results/{sid}/wins"] = self.standings.wins[sid]
            scalars[f"results/{sid}/draws"] = self.standings.draws[sid]
            scalars[f"results/{sid}/losses"] = self.standings.losses[sid]
            scalars[f"elo/{sid}"] = self.standings.rating[sid]
            if isinstance(seat, LLMSeat) and seat.usage.calls:
                usage = seat.usage
                scalars[f"llm/{sid}/calls"] = usage.calls
                scalars[f"llm/{sid}/invalid_rate"] = usage.stats.invalid_rate
                scalars[f"llm/{sid}/failed_calls"] = usage.errors
                scalars[f"llm/{sid}/tokens_in"] = usage.tokens_in
                scalars[f"llm/{sid}/tokens_out"] = usage.tokens_out
                scalars[f"llm/{sid}/latency_p50_s"] = percentile(usage.latencies, 50)
                scalars[f"llm/{sid}/latency_p99_s"] = percentile(usage.latencies, 99)
                if usage.cost is not None:
                    scalars[f"llm/{sid}/cost"] = usage.cost
        self.emitter.scalars(scalars, step)
        self.emitter.heartbeat(step)
        sys.stderr.write(f"mosaic_llm: episode of {length} steps: "
                         + ", ".join(f"{s.seat_id} ({s.label}) {outcome[s.seat_id]}" for s in self.seats) + "\n")
