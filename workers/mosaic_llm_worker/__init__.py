"""The MOSAIC LLM worker: multi-agent LLM teams and mixed seats on MultiGrid and PettingZoo board games.

The daemon imports this module to list, describe and validate: it stays light
(no llama_cpp, openai, gymnasium, pettingzoo, numba or torch import). What can
be played is data in ``catalog``; the worker process is ``cli.py`` and ``runtime.py``
(the entry point), the seats ``seats.py``, the match ``match.py``, the ratings
``standings.py``; the LLM client and the env-to-text modules are the
shared ones in workers/sdk/llm. docs/workers/mosaic_llm.md is the user's guide.
"""
from __future__ import annotations

from typing import Any

from workers.mosaic_llm_worker import catalog
from workers.sdk.config import ConfigError, RunConfig
from workers.sdk.descriptor import WorkerDescriptor, dist_version, module_available
from workers.sdk.envs import unknown_env


class MosaicLLMDescriptor(WorkerDescriptor):
    name = "mosaic_llm"
    catalog = catalog   # its module: WorkerDescriptor.schema serves catalog.schema
    modes = ("play",)   # its agents learn nothing in the run: they play episodes (workers/sdk/modes.py)
    package = "workers.mosaic_llm_worker"
    upstream = "mosaic-multigrid"
    description = ("Multi-agent LLM teams (coordination levels L1-L3, egocentric or visible-teammates "
                   "observations) on MultiGrid soccer/basketball/football/collect and PettingZoo chess, connect "
                   "four, go, tic-tac-toe; seats mix LLMs (local Gemma, OpenAI-compatible, Anthropic), random, "
                   "Stockfish, RLlib checkpoints and people (human seats); win/draw/loss and Elo per seat")

    def available(self) -> bool:
        return module_available("gymnasium") and (dist_version("mosaic-multigrid") is not None
                                                  or module_available("pettingzoo"))

    def capabilities(self) -> dict[str, Any]:
        envs = catalog.known_envs()
        return {
            "paradigms": ["multi_agent"],
            "modes": list(self.modes),
            "algorithms": list(catalog.ALGORITHMS),
            "env_families": sorted({catalog.env_family(e) for e in envs}),
            "envs": {"play": envs},
            "seat_kinds": list(catalog.AGENT_KINDS),
            "coordination_levels": list(catalog.LEVELS),
            "observation_modes": list(catalog.OBSERVATION_MODES),
            "llm_backends": ["local", "openai", "anthropic"],
            "stockfish": catalog.stockfish_path() is not None,
            "max_agents": max((len(catalog.seat_ids(e)) for e in envs), default=0),
            "pause": True, "stop": True,   # mosaic stop / continue: the episodes not yet played
            "checkpoints": False,
            "gpu": False,
            "frames": True,
            "human": True,   # a "human" seat: the client that holds it plays (docs/play.md)
            "schema_version": catalog.SCHEMA_VERSION,
        }

    def check_env(self, config: RunConfig) -> None:
        family = catalog.env_family(config.env)
        if family is None or (family == "multigrid" and config.env not in catalog.multigrid_envs()):
            raise unknown_env(config.env, catalog.known_envs(), self.name)
        if family == "classic" and not catalog.classic_available(config.env):
            needs = catalog.CLASSIC[config.env][1] or "pettingzoo"
            raise ConfigError("env", f"{config.env} needs the Python package {needs!r}, which is not installed")
        if config.mode == "eval":
            raise ConfigError("mode", "mosaic_llm plays matches; a trained policy joins as a checkpoint seat "
                                      "(params.seats), not through mode 'eval'")

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        seats = catalog.check_seats(config.env, config.params)
        config.params["seats"] = seats
        humans = [i for i, seat in enumerate(seats) if seat["kind"] == "human"]
        if humans and config.placement.backend != "local":
            raise ConfigError(f"params.seats[{humans[0]}]", f"a human seat is played from a client of this "
                                                            f"daemon: the run's placement is local, not "
                                                            f"{config.placement.backend}")
        if humans:   # the person sees the board or the pitch
            config.frames.enabled = True


WORKER = MosaicLLMDescriptor()
