"""A match: ``episodes`` episodes of one env between the seats (``seats.py``).

MultiGrid agents act at once each step: the LLM seats of a step are asked
concurrently, one thread each; then the human seats' actions are awaited (no LLM
call runs while a person thinks), and the env steps. Board games are played move
by move. After each episode every seat gets win/draw/loss from its team's return,
and an Elo rating (``standings.py``); every move goes to ``moves.jsonl``. A stop
cuts the series between steps and continues it from the standings and each LLM
seat's use (``workers.sdk.series``).
"""
from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from workers.mosaic_llm_worker import human
from workers.mosaic_llm_worker.seats import CheckpointSeat, HumanSeat, LLMSeat, Move, Seat, StockfishSeat
from workers.mosaic_llm_worker.standings import Standings
from workers.sdk.llm import classic, multigrid
from workers.sdk.llm.stream import StepStream
from workers.sdk.llm.usage import Budget, BudgetReached, Usage, percentile
from workers.sdk.series import EpisodeSeries

MOVES_FILE = "moves.jsonl"   # in the run directory: every seat's move, step by step


def moves_line(episode: int, step: int, moves: dict[str, Move]) -> dict[str, Any]:
    """One line of moves.jsonl: each seat's move at this step, what each person typed, and what each
    checkpoint policy saw (the last two only when a seat has one)."""
    line: dict[str, Any] = {"episode": episode, "step": step,
                            "moves": {sid: move.name for sid, move in moves.items()}}
    typed = {sid: move.typed for sid, move in moves.items() if move.typed is not None}
    if typed:
        line["typed"] = typed
    seen = {sid: move.policy_observation for sid, move in moves.items() if move.policy_observation is not None}
    if seen:
        line["policy_observations"] = seen
    return line


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
        self.moves.write(json.dumps(moves_line(episode, step, moves)) + "\n")

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
