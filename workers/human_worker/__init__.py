"""The human worker: a person plays an env from the keyboard (docs/play.md).

A run of it is a run like any other (telemetry, episodes, frames, a moves log, a recorded
dataset), whose actions come from the client that holds its seat: the app sends them through
the daemon (the ``seat`` and ``act`` methods) into the run's control pipe (workers/sdk/control.py).
The daemon imports this module: it stays light (no gymnasium).
"""
from __future__ import annotations

from typing import Any

from workers.human_worker import catalog
from workers.sdk.config import ConfigError, RunConfig
from workers.sdk.descriptor import WorkerDescriptor


class HumanDescriptor(WorkerDescriptor):
    name = "human"
    catalog = catalog   # its module: WorkerDescriptor.schema serves catalog.schema
    modes = ("play",)   # its agents learn nothing in the run: they play episodes (workers/sdk/modes.py)
    package = "workers.human_worker"
    upstream = "gymnasium"
    description = ("a person at the keyboard plays any env with discrete actions (or typed commands: TextWorld): "
                   "turn by turn or in real time, watched like any run, recorded as demonstrations")

    def capabilities(self) -> dict[str, Any]:
        return {
            "paradigms": ["single_agent"],
            "modes": list(self.modes),
            "algorithms": catalog.ALGORITHMS,
            "env_families": sorted(set(catalog.DEFAULT_MODE)),
            "envs": {"play": catalog.EXAMPLES},
            "action_spaces": {"play": ["discrete", "text"]},
            "max_agents": 1,
            "self_play": False,
            "pause": False, "stop": False,
            "checkpoints": False,
            "gpu": False,
            "frames": True,
            "human": True,
            "schema_version": catalog.SCHEMA_VERSION,
        }

    def check_env(self, config: RunConfig) -> None:
        problem = catalog.unplayable(config.env)
        if problem is not None:
            raise ConfigError("env", problem)
        if catalog.is_text(config.env) and config.record is not None:
            raise ConfigError("record", f"{config.env}'s actions are typed commands, which a dataset of numbered "
                                        f"actions cannot hold: its moves.jsonl has every command as typed")
        if config.mode == "eval":
            raise ConfigError("mode", "a human play is its own kind of run: use mode 'play' (the default)")
        if config.checkpoint is not None:
            raise ConfigError("checkpoint", "a person has no checkpoint to start from")
        if config.placement.backend != "local":
            raise ConfigError("placement", "a play runs beside its player: its placement is local")

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        if "episodes" not in given and config.record is not None and config.record.episodes:
            # a demonstration play ends with its recording
            config.params["episodes"] = min(config.record.episodes, catalog.PARAMS["episodes"]["maximum"])
        if config.params.get("mode") is None:
            config.params["mode"] = catalog.default_mode(config.env)
        if catalog.is_text(config.env) and config.params["mode"] != catalog.TURN:
            raise ConfigError("params.mode", f"{config.env}'s actions are typed commands: it is played turn by turn")
        # a person sees each step: frames always, at the most the limiter allows (a turn's frame is
        # never dropped), unless the run says otherwise
        frames = given.get("frames") or {}
        config.frames.enabled = True
        if "fps" not in frames:
            config.frames.fps = 120.0


WORKER = HumanDescriptor()
