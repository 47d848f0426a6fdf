"""What the balrog worker offers, as data: agent types, env families, the params' schema.

Light: the descriptor imports it in the daemon (no llama_cpp, gymnasium, nle ...).
"""
from __future__ import annotations

import copy
from typing import Any

from workers.sdk.config import SCHEMA_DIALECT
from workers.sdk.llm import families
from workers.sdk.llm.client import SPEC_PARAMS
from workers.sdk.llm.usage import BUDGET_PARAMS

SCHEMA_VERSION = 1

# the agent types (agents.AGENTS has the classes; this is their names and descriptions, kept light)
AGENTS: dict[str, str] = {
    "naive": "the action alone, no reasoning (BALROG's naive agent); constrained to the actions",
    "cot": "chain of thought, then 'ACTION: <action>'; the last plan stays in the prompt",
    "robust_naive": "the action between <|ACTION|> and <|END|>; constrained to that form",
    "robust_cot": "think, then <|ACTION|>action<|END|>; no tags: an invalid action",
    "few_shot": "naive after demonstration episodes (BabyAI: its bot's; or a run's transcript)",
    "random": "a random legal action: the baseline, no model",
}
LLM_AGENTS = [a for a in AGENTS if a != "random"]

RUN_PARAMS: dict[str, dict[str, Any]] = {
    "episodes": {"type": "integer", "default": 1, "minimum": 1, "maximum": 100000,
                 "description": "episodes to play (env seeds: seed, seed+1, ...)"},
    "episodes_in_flight": {"type": "integer", "default": 1, "minimum": 1, "maximum": 256,
                           "description": "episodes played at once against the model (BALROG's eval.num_workers): "
                                          "backends that serve several (openai, anthropic), not local"},
    "max_steps_per_episode": {"type": ["integer", "null"], "default": None, "minimum": 1,
                              "description": "cut an episode after this many steps (default: the env's own limit)"},
    "max_text_history": {"type": "integer", "default": 16, "minimum": 0, "maximum": 1000,
                         "description": "past observations in the prompt (BALROG's max_text_history)"},
    "max_cot_history": {"type": "integer", "default": 1, "minimum": 0, "maximum": 100,
                        "description": "past plans of a cot agent kept in the prompt"},
    "demos": {"type": ["string", "null"], "default": None,
              "description": "few_shot: an events.jsonl of an earlier run whose steps are the demonstrations "
                             "(default for BabyAI: episodes of minigrid's BabyAI bot)"},
    "demo_episodes": {"type": "integer", "default": 1, "minimum": 1, "maximum": 50,
                      "description": "few_shot: demonstration episodes"},
    "max_icl_history": {"type": "integer", "default": 100, "minimum": 1, "maximum": 10000,
                        "description": "few_shot: demonstration steps in the prompt, at most"},
    "on_error": {"type": "string", "default": "continue", "enum": ["continue", "fail"],
                 "description": "an LLM call that failed after its retries: record it and play the default "
                                "action (continue), or fail the run"},
    **BUDGET_PARAMS,
    "env_kwargs": {"type": "object", "default": {}, "description": "keyword arguments for the env"},
}


def schema(agent: str, env: str | None = None) -> dict[str, Any]:
    props = copy.deepcopy(RUN_PARAMS)
    if agent != "random":
        props.update(copy.deepcopy(SPEC_PARAMS))
    return {"$schema": SCHEMA_DIALECT, "title": f"balrog {agent}", "type": "object",
            "properties": props, "additionalProperties": False}


def available_families() -> list[str]:
    return [f for f in families.available_families() if f in FAMILIES]


# the families of workers.sdk.llm.families this worker plays (single-agent ones)
FAMILIES = ("babyai", "crafter", "textworld", "minihack", "nle")
