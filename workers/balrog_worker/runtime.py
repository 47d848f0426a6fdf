"""The balrog worker's loop: BALROG's evaluator (balrog/evaluator.py), one episode after another.

Per step: the agent acts on the observation and the action before it; the
action text is checked against the legal actions and an invalid one is
replaced by the env's default action (BALROG's ``check_action_validity``); the
env steps. Each LLM call is an ``llm_step`` event (the transcript). Each
episode ends in an ``episode`` event and its metrics as scalars; the run's
totals go to ``results.json`` in the run directory and as ``total/...``
scalars.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from workers.balrog_worker.agents import AGENTS, Agent, FewShotAgent, RandomAgent
from workers.sdk.frames import env_frames
from workers.sdk.guard import RunFailed
from workers.sdk.llm import families
from workers.sdk.llm.client import make_client, normalise_spec, spec_from_params
from workers.sdk.llm.history import HistoryPromptBuilder
from workers.sdk.llm.parse import match_choice
from workers.sdk.llm.stream import StepStream
from workers.sdk.llm.textenv import TextEnv, as_text, make_text_env
from workers.sdk.llm.usage import Budget, BudgetReached, Usage
from workers.sdk.packages import upstream
from workers.sdk.series import EpisodeCut, EpisodeSeries
from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import Emitter, LLM_STEP

RESULTS_FILE = "results.json"

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
        self.stream = StepStream(emitter)
        self.family = families.family_of(config["env"])
        self.total = Usage()
        self.step = 0
        self.budget = Budget(self.params)
        self.budget_note: str | None = None
        self.episodes: list[dict[str, Any]] = []
        self.series = EpisodeSeries("mosaic balrog", state=self.state, step=lambda: self.step)

    def make_agent(self, env: TextEnv) -> Agent:
        agent_type = self.config["algo"]
        if agent_type == "random":
            return RandomAgent(self.config["seed"])
        client = make_client(normalise_spec(spec_from_params(self.params)))
        self.model = client.model
        builder = HistoryPromptBuilder(max_text_history=self.params["max_text_history"],
                                       max_cot_history=self.params["max_cot_history"], keep_prefix=True)
        cls = AGENTS[agent_type]["cls"]
        if cls is FewShotAgent:
            if self.params["demos"]:
                demos = demos_from_events(self.params["demos"], self.params["demo_episodes"])
            else:
                demos = demos_from_babyai_bot(self.config["env"], self.config["seed"],
                                              self.params["demo_episodes"], env.max_steps)
            return FewShotAgent(client, builder, demos, self.params["max_icl_history"])
        return cls(client, builder)

    def run(self) -> dict[str, Any]:
        config = self.config
        env = make_text_env(config["env"], **self.params["env_kwargs"])
        agent = self.make_agent(env)
        self.emitter.run_started(worker="balrog", algo=config["algo"], env=config["env"],
                                 total_steps=config.get("steps"), upstream=upstream(rebuilt="BALROG"),
                                 model=getattr(self, "model", None), family=self.family)
        first = self.series.restore(config["continue_from"], self.apply) if config.get("continue_from") else 0
        try:
            for episode in range(first, self.params["episodes"]):
                if config.get("steps") is not None and self.step >= config["steps"]:
                    break
                self.series.check(episode)
                with self.series.episode(episode):
                    self.play_episode(env, agent, episode)
        except BudgetReached as exc:
            self.budget_note = str(exc)
            sys.stderr.write(f"mosaic balrog: {exc}; stopping\n")
            self.emitter.phase(str(exc), step=self.step)
        finally:
            env.close()
        return self.write_results()

    def play_episode(self, env: TextEnv, agent: Agent, episode: int) -> None:
        config, params = self.config, self.params
        seed = config["seed"] + episode
        observation = env.reset(seed=seed)
        agent.reset()
        agent.builder.update_instruction_prompt(env.instruction_prompt())
        self._frame(env)
        usage = Usage()
        limit = params["max_steps_per_episode"] or env.max_steps or 10**9
        prev_action: str | None = None
        episode_return, length, started = 0.0, 0, time.monotonic()
        record: dict[str, Any] = {"episode": episode, "seed": seed}
        cut = False
        try:
            for _ in range(limit):
                if config.get("steps") is not None and self.step >= config["steps"]:
                    break
                if SIGNALS.stop_requested:
                    cut = True
                    break
                legal = list(env.actions)
                decision = agent.act(observation, prev_action, legal,
                                     on_text=self.stream.on_text(self.step, "0"))
                reply = decision.reply
                chosen = None if reply.error else match_choice(decision.candidate, legal)
                action = chosen if chosen is not None else env.default_action
                if not isinstance(agent, RandomAgent):
                    usage.add(chosen is not None, reply)
                    self.total.add(chosen is not None, reply)
                    self.stream.final(step=self.step, agent="0", episode=episode, reply=reply,
                                      prompt=decision.prompt, observation=as_text(observation),
                                      action=chosen, valid=chosen is not None,
                                      played=action, candidate=decision.candidate[:500])
                    if reply.error and params["on_error"] == "fail":
                        raise LLMFailed(f"LLM call failed at step {self.step}: {reply.error}")
                observation, reward, terminated, truncated = env.step(action)
                prev_action = action
                episode_return += reward
                length += 1
                self.step += 1
                self._frame(env)
                if terminated or truncated:
                    break
                if not isinstance(agent, RandomAgent):
                    self.budget.check(self.total.tokens, self.total.cost)
        finally:
            # an episode cut by the budget still reports what it did; one cut by a stop does not
            # (it is played again on continue; its steps stay in the transcript)
            if not cut:
                self._record(record, usage, episode_return, length, started, env)
        if cut:
            raise EpisodeCut()

    def _record(self, record: dict[str, Any], usage: Usage, episode_return: float, length: int,
                started: float, env: TextEnv) -> None:
        """The episode's record (results.json), its episode event and its scalars."""
        record.update(steps=length, episode_return=episode_return, progression=env.progression(),
                      success=bool(env.success()), seconds=round(time.monotonic() - started, 3),
                      **usage.metrics())
        self.episodes.append(record)
        self.emitter.episode(step=self.step, episode_return=episode_return, length=length,
                             success=record["success"], progression=record["progression"])
        scalars = {"episode/success": float(record["success"]), "episode/progression": record["progression"]}
        scalars.update({f"llm/{key}": value for key, value in usage.metrics().items() if value is not None})
        self.emitter.scalars(scalars, step=self.step)

    # -- stop and continue ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The run's state at a stop (``workers.sdk.series``): the episodes played (results.json's
        records), the step and the LLM use so far (the budget goes on counting from it)."""
        return {"step": self.step, "episodes": self.episodes, "budget_note": self.budget_note,
                "total": self.total.state()}

    def apply(self, state: dict[str, Any]) -> None:
        """A stop's state back (``state``)."""
        self.step, self.episodes, self.budget_note = state["step"], state["episodes"], state["budget_note"]
        self.total = Usage.from_state(state["total"])

    def _frame(self, env: TextEnv) -> None:
        if self.frames is not None:
            self.frames.maybe_publish(env.render)

    def write_results(self) -> dict[str, Any]:
        """BALROG's summary: per-episode records and the run's averages, in results.json."""
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
        results = {"worker": "balrog", "agent": self.config["algo"], "env": self.config["env"],
                   "family": self.family, "model": getattr(self, "model", None),
                   "stopped_by_budget": self.budget_note, "totals": totals, "episodes": self.episodes}
        with open(RESULTS_FILE, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
        self.emitter.scalars({f"total/{k}": float(v) for k, v in totals.items()
                              if isinstance(v, (int, float)) and v is not None}, step=self.step)
        return results
