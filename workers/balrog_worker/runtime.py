"""The balrog worker's loop: BALROG's evaluator (balrog/evaluator.py).

Per step: the agent acts on the observation and the action before it; the
action text is checked against the legal actions and an invalid one is
replaced by the env's default action (BALROG's ``check_action_validity``); the
env steps. Each LLM call is an ``llm_step`` event (the transcript), with its
episode and its step in that episode. Each episode ends in an ``episode`` event
and its metrics as scalars; the run's totals go to ``results.json`` in the run
directory and as ``total/...`` scalars.

``params.episodes_in_flight`` episodes are played at once (BALROG's
``eval.num_workers``), each by a thread with its own env and agent (its seed,
history, counters) against one shared client: a server batches them, and a 429
holds them all (``BackoffGate``). What they share, under ``BalrogRun.lock``: the
step counter, the run's LLM use and the budget it is checked against before each
call, and the order of the reports: episode events, scalars and results.json go
in episode order, whatever order the episodes finish in, so a run's results do
not depend on how many were in flight. A stop cuts the episodes in flight; they
are played again on continue, the ones that finished never (workers.sdk.series).
One episode in flight is played in the main thread, as before. With frames on, each thread
publishes its episodes' frames on a FastLane stream of its own (the first on stream 0, the one
every app shows; the frames view's key ``e`` goes to the next).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from workers.balrog_worker import summary as balrog_summary
from workers.balrog_worker.agents import AGENTS, Agent, FewShotAgent, RandomAgent
from workers.sdk.frames import EnvFrames, env_frames
from workers.sdk.guard import RunFailed
from workers.sdk.llm import families
from workers.sdk.llm.client import make_client, normalise_spec, spec_from_params
from workers.sdk.llm.history import HistoryPromptBuilder
from workers.sdk.llm.parse import match_choice
from workers.sdk.llm.stream import StepStream
from workers.sdk.llm.textenv import TextEnv, as_text, make_text_env
from workers.sdk.llm.usage import Budget, BudgetReached, Usage
from workers.sdk.packages import upstream
from workers.sdk.series import EpisodeCut, EpisodeSeries, to_play
from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import LLM_STEP, Emitter

RESULTS_FILE = "results.json"
# an episode's LLM use in its record (Usage.metrics), also its llm/... scalars
LLM_METRICS = ("llm_calls", "invalid_actions", "invalid_rate", "llm_errors", "tokens_in", "tokens_out",
               "latency_p50", "latency_p99", "cost")

class LLMFailed(RunFailed):
    """A call failed after its retries and params.on_error is 'fail' (the run's reason as it is)."""


def play(config: dict[str, Any], emitter: Emitter) -> int:
    """The run: ``params.episodes`` episodes of the agent, with frames when the run has them."""
    frames = env_frames(config)
    run = BalrogRun(config, emitter, frames)
    try:
        run.run()
    finally:
        if frames is not None:
            frames.close()
    emitter.run_completed(step=run.step)
    return 0


# -- demonstrations (few_shot) -----------------------------------------------------------

def demos_from_events(path: str, limit: int) -> list[list[tuple[str, str]]]:
    """Episodes of (observation, action) from an earlier run's events.jsonl: its final,
    valid llm_step events, grouped by episode."""
    episodes: dict[int, list[tuple[str, str]]] = {}
    with open(os.path.expanduser(path), "rb") as f:
        for line in f:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if (event.get("type") == LLM_STEP and not event.get("partial") and event.get("valid")
                    and event.get("action") and event.get("observation") is not None):
                episodes.setdefault(int(event.get("episode") or 0), []).append(
                    (event["observation"], event["action"]))
    return [episodes[k] for k in sorted(episodes)][:limit]


def demos_from_babyai_bot(env_id: str, seed: int, count: int, max_steps: int) -> list[list[tuple[str, str]]]:
    """Episodes of minigrid's BabyAI bot, on seeds the evaluation does not use."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from workers.sdk.llm.babyai import ACTION_LIST

    demos = []
    for k in range(count):
        env = make_text_env(env_id)
        text = env.reset(seed=10_000 + seed + k)
        bot = BabyAIBot(env.env.unwrapped)
        steps: list[tuple[str, str]] = []
        for _ in range(max_steps):
            action = bot.replan()
            if int(action) >= len(ACTION_LIST):  # "done": not in the language action space
                break
            name = ACTION_LIST[int(action)]
            steps.append((as_text(text), name))
            text, _, terminated, truncated = env.step(name)
            if terminated or truncated:
                break
        env.close()
        demos.append(steps)
    return demos


# -- the run -----------------------------------------------------------------------------

class BalrogRun:
    def __init__(self, config: dict[str, Any], emitter: Emitter, frames=None):
        self.config = config
        self.params = config["params"]
        self.emitter = emitter
        self.frames = frames
        self.streams: list[EnvFrames | None] = [frames]    # the frames of each episode in flight
        self.stream = StepStream(emitter)
        self.family = families.family_of(config["env"])
        self.total = Usage()
        self.step = 0
        self.budget = Budget(self.params)
        self.budget_note: str | None = None
        self.episodes: list[dict[str, Any]] = []
        self.series = EpisodeSeries("mosaic balrog", state=self.state, step=lambda: self.step)
        self.client = None
        self.demos: list[list[tuple[str, str]]] = []
        # shared by the episodes in flight: the counters above, and these
        self.lock = threading.Lock()
        self.queue: list[int] = []             # episodes not started yet, in order
        self.order: list[int] = []             # the episodes this process plays, in order (reports follow it)
        self.reported = 0                      # how many of ``order`` are reported
        self.unreported: dict[int, dict[str, Any]] = {}   # finished, waiting for an earlier one
        self.cut: set[int] = set()             # cut by a stop: played again on continue
        self.abort = False                     # an episode failed the run, or it was cancelled
        self.error: BaseException | None = None

    def prepare(self, env: TextEnv) -> None:
        """The model client and the demonstrations, shared by every episode's agent."""
        if self.config["algo"] == "random":
            return
        self.client = make_client(normalise_spec(spec_from_params(self.params)))
        self.model = self.client.model
        if AGENTS[self.config["algo"]]["cls"] is FewShotAgent:
            if self.params["demos"]:
                self.demos = demos_from_events(self.params["demos"], self.params["demo_episodes"])
            else:
                self.demos = demos_from_babyai_bot(self.config["env"], self.config["seed"],
                                                   self.params["demo_episodes"], env.max_steps)

    def make_agent(self) -> Agent:
        """An agent of its own (its history) for each episode in flight."""
        agent_type = self.config["algo"]
        if agent_type == "random":
            return RandomAgent(self.config["seed"])
        builder = HistoryPromptBuilder(max_text_history=self.params["max_text_history"],
                                       max_cot_history=self.params["max_cot_history"], keep_prefix=True)
        cls = AGENTS[agent_type]["cls"]
        if cls is FewShotAgent:
            return FewShotAgent(self.client, builder, self.demos, self.params["max_icl_history"])
        return cls(self.client, builder)

    def run(self) -> dict[str, Any]:
        config = self.config
        env = make_text_env(config["env"], **self.params["env_kwargs"])
        envs = [env]
        try:
            self.prepare(env)
            self.emitter.run_started(worker="balrog", algo=config["algo"], env=config["env"],
                                     total_steps=config.get("steps"), upstream=upstream(rebuilt="BALROG"),
                                     model=getattr(self, "model", None), family=self.family)
            first = self.series.restore(config["continue_from"], self.apply) if config.get("continue_from") else 0
            self.order = to_play(first, self.params["episodes"], [e["episode"] for e in self.episodes])
            self.queue = list(self.order)
            slots = max(1, min(self.params.get("episodes_in_flight", 1), len(self.queue)))
            envs += [make_text_env(config["env"], **self.params["env_kwargs"]) for _ in range(slots - 1)]
            if self.frames is not None:
                self.streams += [env_frames(config, stream=i) for i in range(1, slots)]
            if slots == 1:
                self.play_slot(0, env)
            else:
                self.play_slots(envs)
        finally:
            if not (self.abort and len(envs) > 1):  # threads cut by a cancel may still hold theirs
                for each in envs:
                    each.close()
                for frames in self.streams[1:]:     # stream 0 is play()'s
                    if frames is not None:
                        frames.close()
        if self.budget_note is not None:
            try:   # the reason at the run's total: the calls in flight when the budget was reached count too
                self.budget.check(self.total.tokens, self.total.cost)
            except BudgetReached as exc:
                self.budget_note = str(exc)
            sys.stderr.write(f"mosaic balrog: {self.budget_note}; stopping\n")
            self.emitter.phase(self.budget_note, step=self.step)
        with self.lock:
            self.report_all()
        remaining = sorted(self.cut | set(self.queue))
        if SIGNALS.stop_requested and remaining and self.budget_note is None:
            raise self.series.stopped(remaining[0], sorted(self.cut))
        return self.write_results()

    def play_slots(self, envs: list[TextEnv]) -> None:
        """One thread per episode in flight, each playing episodes off the queue until it is empty
        (or a stop, the budget or a failure ends the run); the main thread waits, open to signals."""
        def slot(index: int) -> None:
            try:
                self.play_slot(index, envs[index])
            except BaseException as exc:  # noqa: BLE001 -- the run's failure, raised in the main thread
                with self.lock:
                    self.error = self.error or exc
                    self.abort = True

        threads = [threading.Thread(target=slot, args=(i,), name=f"balrog-episodes-{i}", daemon=True)
                   for i in range(len(envs))]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(0.2)
        except BaseException:   # a cancel (SIGTERM): the other episodes end at their next step
            self.abort = True
            raise
        if self.error is not None:
            raise self.error

    def play_slot(self, index: int, env: TextEnv) -> None:
        """Episodes off the queue, one after another, with one env and one agent."""
        agent = self.make_agent()
        while True:
            with self.lock:
                if not self.queue or self.abort or SIGNALS.stop_requested or self.budget_note is not None or (
                        self.config.get("steps") is not None and self.step >= self.config["steps"]):
                    return
                episode = self.queue.pop(0)
            try:
                self.play_episode(env, agent, episode, index)
            except EpisodeCut:
                with self.lock:
                    self.cut.add(episode)
            except BudgetReached as exc:
                with self.lock:
                    self.budget_note = self.budget_note or str(exc)

    def begin_step(self, agent: Agent) -> int | None:
        """A step of an episode begins: its number in the run, or None when the run's steps are
        done. Raises EpisodeCut on a stop (or another episode's failure) and BudgetReached once the
        run's LLM use has reached the budget, so no call starts past it."""
        with self.lock:
            if SIGNALS.stop_requested or self.abort:
                raise EpisodeCut()
            if self.config.get("steps") is not None and self.step >= self.config["steps"]:
                return None
            if not isinstance(agent, RandomAgent):
                self.budget.check(self.total.tokens, self.total.cost)
            self.step += 1
            return self.step - 1

    def play_episode(self, env: TextEnv, agent: Agent, episode: int, stream: int = 0) -> None:
        """One episode, its frames on ``stream`` (its thread's)."""
        params = self.params
        frames = self.streams[stream] if stream < len(self.streams) else None
        seed = self.config["seed"] + episode
        observation = env.reset(seed=seed)
        agent.reset()
        agent.builder.update_instruction_prompt(env.instruction_prompt())
        if frames is not None:
            frames.maybe_publish(env.render)
        usage = Usage()
        limit = params["max_steps_per_episode"] or env.max_steps or 10**9
        prev_action: str | None = None
        episode_return, length, started = 0.0, 0, time.monotonic()
        record: dict[str, Any] = {"episode": episode, "seed": seed}
        actions: dict[str, int] = {}    # BALROG's action_frequency: the actions played
        done = False
        cut = False
        try:
            for _ in range(limit):
                try:
                    step = self.begin_step(agent)
                except EpisodeCut:
                    cut = True
                    raise
                except BudgetReached:
                    cut = length == 0   # a budget reached before its first step: the episode was not played
                    raise
                if step is None:
                    break
                legal = list(env.actions)
                decision = agent.act(observation, prev_action, legal, on_text=self.stream.on_text(step, "0"))
                reply = decision.reply
                chosen = None if reply.error else match_choice(decision.candidate, legal)
                action = chosen if chosen is not None else env.default_action
                if not isinstance(agent, RandomAgent):
                    usage.add(chosen is not None, reply)
                    with self.lock:
                        self.total.add(chosen is not None, reply)
                    self.stream.final(step=step, agent="0", episode=episode, episode_step=length, reply=reply,
                                      prompt=decision.prompt, observation=as_text(observation),
                                      action=chosen, valid=chosen is not None,
                                      played=action, candidate=decision.candidate[:500])
                    if reply.error and params["on_error"] == "fail":
                        raise LLMFailed(f"LLM call failed at step {step}: {reply.error}")
                actions[action] = actions.get(action, 0) + 1
                observation, reward, terminated, truncated = env.step(action)
                prev_action = action
                episode_return += reward
                length += 1
                if frames is not None:
                    frames.maybe_publish(env.render)
                if terminated or truncated:
                    done = True
                    break
        finally:
            # an episode cut by the budget still reports what it did; one cut by a stop does not
            # (it is played again on continue; its steps stay in the transcript)
            if not cut:
                record.update(steps=length, episode_return=episode_return, progression=env.progression(),
                              success=bool(env.success()), seconds=round(time.monotonic() - started, 3),
                              done=done, action_frequency=actions, **usage.metrics())
                with self.lock:
                    self.unreported[episode] = record
                    self.report_ready()

    def report_ready(self) -> None:
        """Report the finished episodes whose earlier ones are all reported (episode order).
        Called with the lock held."""
        while self.reported < len(self.order) and self.order[self.reported] in self.unreported:
            self._record(self.unreported.pop(self.order[self.reported]))
            self.reported += 1

    def report_all(self) -> None:
        """At the run's end (or a stop): the finished episodes still waiting behind a cut one."""
        self.report_ready()
        for episode in sorted(self.unreported):
            self._record(self.unreported.pop(episode))

    def _record(self, record: dict[str, Any]) -> None:
        """The episode's record (results.json), its episode event and its scalars."""
        self.episodes.append(record)
        self.emitter.episode(step=self.step, episode_return=record["episode_return"], length=record["steps"],
                             success=record["success"], progression=record["progression"])
        scalars = {"episode/success": float(record["success"]), "episode/progression": record["progression"]}
        scalars.update({f"llm/{key}": record[key] for key in LLM_METRICS if record.get(key) is not None})
        self.emitter.scalars(scalars, step=self.step)

    # -- stop and continue ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The run's state at a stop (``workers.sdk.series``): the episodes played (results.json's
        records), the step and the LLM use so far (the budget goes on counting from it)."""
        return {"step": self.step, "episodes": sorted(self.episodes, key=lambda e: e["episode"]),
                "budget_note": self.budget_note,
                "total": self.total.state()}

    def apply(self, state: dict[str, Any]) -> None:
        """A stop's state back (``state``)."""
        self.step, self.episodes, self.budget_note = state["step"], state["episodes"], state["budget_note"]
        self.total = Usage.from_state(state["total"])

    def write_results(self) -> dict[str, Any]:
        """The per-episode records (in episode order) and the run's averages in results.json, with
        BALROG's summary.json and <env>_summary.json in it (``balrog``, ``balrog_envs``), and
        BALROG's output directory beside it (workers.balrog_worker.summary)."""
        self.episodes.sort(key=lambda e: e["episode"])
        n = len(self.episodes)
        totals: dict[str, Any] = {
            "episodes": n,
            "success_rate": sum(e["success"] for e in self.episodes) / n if n else 0.0,
            "progression": sum(e["progression"] for e in self.episodes) / n if n else 0.0,
            "mean_return": sum(e["episode_return"] for e in self.episodes) / n if n else 0.0,
            "steps": self.step,
        }
        if self.config["algo"] != "random":
            totals.update(self.total.metrics())
        env_name, task = self.family or "unknown", self.config["env"]
        agent = balrog_summary.agent_config(self.config["algo"], self.params)
        client = None if self.config["algo"] == "random" else balrog_summary.client_config(
            normalise_spec(spec_from_params(self.params)))
        logs = [(e["episode"], balrog_summary.episode_log(e, task, agent, client)) for e in self.episodes]
        env_summary = balrog_summary.env_summary([log for _, log in logs])
        overall = balrog_summary.summary({env_name: env_summary}, agent, client)
        balrog_summary.write_tree(balrog_summary.TREE, env_name, logs, env_summary, overall)
        totals.update(progression_percentage=env_summary["progression_percentage"],
                      standard_error=env_summary["standard_error"])
        results = {"worker": "balrog", "agent": self.config["algo"], "env": self.config["env"],
                   "family": self.family, "model": getattr(self, "model", None),
                   "stopped_by_budget": self.budget_note, "totals": totals, "episodes": self.episodes,
                   "balrog": overall, "balrog_envs": {env_name: env_summary}}
        with open(RESULTS_FILE, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        self.emitter.scalars({f"total/{k}": float(v) for k, v in totals.items()
                              if isinstance(v, (int, float)) and v is not None}, step=self.step)
        return results
