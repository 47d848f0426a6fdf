"""The BALROG worker: a language-model agent plays BabyAI, Crafter, TextWorld, MiniHack or NetHack.

BALROG (balrog-ai/BALROG, not on PyPI) evaluates LLMs as single agents: its
agent types (naive, cot, robust_naive, robust_cot, few_shot), history prompt
builder, env text wrappers and metrics are rebuilt faithfully on the shared LLM
layer (workers/sdk/llm). The "algorithm" is the agent type; the model is any
backend of the LLM layer, by default the local Gemma model. The daemon imports
this module: it stays light (no llama_cpp, gymnasium, nle). docs/workers/balrog.md
is the user's guide.
"""
from __future__ import annotations

import os
from typing import Any

from workers.balrog_worker import catalog
from workers.sdk.config import ConfigError, RunConfig
from workers.sdk.descriptor import WorkerDescriptor, dist_version
from workers.sdk.envs import unknown_env
from workers.sdk.llm import families
from workers.sdk.llm.client import SpecError, normalise_spec, spec_from_params
from workers.sdk.llm.usage import check_budget_params


class BalrogDescriptor(WorkerDescriptor):
    name = "balrog"
    modes = ("play",)   # its agents learn nothing in the run: they play episodes (workers/sdk/modes.py)
    package = "workers.balrog_worker"
    upstream = "llama-cpp-python"
    description = ("BALROG's LLM agents (naive, chain of thought, robust, few-shot; random baseline) on BabyAI, "
                   "Crafter, TextWorld, MiniHack and NetHack; a local Gemma model by default, or any "
                   "OpenAI-compatible or Anthropic endpoint")

    def metadata(self) -> dict[str, Any]:
        meta = super().metadata()
        meta["upstream"] = "BALROG (rebuilt), llama.cpp"
        return meta

    def available(self) -> bool:
        return dist_version("llama-cpp-python") is not None and bool(catalog.available_families())

    def capabilities(self) -> dict[str, Any]:
        available = catalog.available_families()
        return {
            "paradigms": ["single_agent"],
            "modes": list(self.modes),
            "algorithms": list(catalog.AGENTS),
            "env_families": available,
            "envs": {agent: [e for f in available for e in families.FAMILIES[f]["envs"]] for agent in catalog.AGENTS},
            "action_spaces": {agent: ["text"] for agent in catalog.AGENTS},
            "llm_backends": ["local", "openai", "anthropic"],
            "max_agents": 1,
            "self_play": False,
            "pause": True, "stop": True,   # mosaic stop / continue: the episodes not yet played, the cut ones again
            "checkpoints": False,
            "gpu": False,
            "frames": True,
            "transcript": True,
            "schema_version": catalog.SCHEMA_VERSION,
        }

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo not in catalog.AGENTS:
            raise self.unknown_algo(algo, catalog.AGENTS, noun="agent")
        return catalog.schema(algo, env)

    def check_env(self, config: RunConfig) -> None:
        family = families.family_of(config.env)
        if family is None or family not in catalog.FAMILIES:
            raise unknown_env(config.env, families.known_envs(available_only=False), self.name)
        if not families.family_available(family):
            needs = ", ".join(families.FAMILIES[family]["needs"])
            raise ConfigError("env", f"{config.env} is a {family} environment, which needs {needs}: "
                                     f"not all installed")
        known = families.registered_envs(family)
        if config.env not in known:
            raise unknown_env(config.env, list(known), self.name)
        if config.mode == "eval":
            raise ConfigError("mode", "a balrog run is an evaluation already; use mode 'play' (the default)")
        if config.checkpoint is not None:
            raise ConfigError("checkpoint", "a balrog agent has no checkpoint: its model is params.model")

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        p = config.params
        if config.algo != "random":
            try:
                spec = normalise_spec(spec_from_params(p))
            except SpecError as exc:
                raise ConfigError(f"params.{exc.field}", str(exc).split(": ", 1)[-1]) from None
            if spec["backend"] == "local" and spec["model"] and not os.path.isfile(os.path.expanduser(spec["model"])):
                raise ConfigError("params.model", f"{spec['model']} is not a file (a GGUF model for the local "
                                                  f"backend)")
            check_budget_params(p, [spec])
            if spec["backend"] == "local" and p.get("episodes_in_flight", 1) > 1:
                raise ConfigError("params.episodes_in_flight", "the local backend plays one episode at a time "
                                  "(llama.cpp in the worker); serve the model (backend openai, base_url) to play "
                                  "several at once")
        elif p.get("episodes_in_flight", 1) > 1:
            raise ConfigError("params.episodes_in_flight", "the random agent plays one episode at a time")
        if p["demos"] is not None:
            if config.algo != "few_shot":
                raise ConfigError("params.demos", "only the few_shot agent uses demonstrations")
            if not os.path.isfile(os.path.expanduser(p["demos"])):
                raise ConfigError("params.demos", f"{p['demos']} is not a file (an events.jsonl of an earlier run)")
        elif config.algo == "few_shot" and families.family_of(config.env) != "babyai":
            raise ConfigError("params.demos", "few_shot needs demonstrations outside BabyAI: an earlier run's "
                                              "events.jsonl")


WORKER = BalrogDescriptor()
