"""The synthetic worker: telemetry without learning.

It emits scalars and episodes at a chosen rate and can end in every way a real
worker can (success, an exit code, a signal, a hang that ignores SIGTERM,
leftover child processes, garbage on stdout). The daemon's tests, the
reliability tests and the telemetry benchmark use it; it is also a quick way to
see the app move without training anything.
"""
from __future__ import annotations

from typing import Any

from workers.sdk.config import SCHEMA_DIALECT, ConfigError, RunConfig
from workers.sdk.descriptor import WorkerDescriptor

_PARAMS: dict[str, Any] = {
    "rate": {"type": "number", "default": 1000.0, "minimum": 0,
             "description": "scalar lines per second (0: as fast as possible)"},
    "tags": {"type": "integer", "default": 2, "minimum": 1, "maximum": 1000,
             "description": "how many scalar tags, emitted round-robin"},
    "episode_every": {"type": "integer", "default": 100, "minimum": 0,
                      "description": "an episode event every N steps (0: none)"},
    "return_offset": {"type": "number", "default": 0.0,
                      "description": "added to every episode return (makes runs differ: sweep tests)"},
    "gain": {"type": "number", "default": 0.0,
             "description": "when not 0: each episode's return is a level that climbs by gain an episode and is "
                            "saved in a stop's checkpoint (population-based training's tests: a known score)"},
    "exit_code": {"type": "integer", "default": 0, "minimum": 0, "maximum": 255,
                  "description": "exit with this code at the end"},
    "die_by_signal": {"type": ["string", "null"], "default": None,
                      "enum": [None, "SIGKILL", "SIGSEGV", "SIGABRT", "SIGTERM"],
                      "description": "end by sending this signal to itself"},
    "phase": {"type": "string", "default": "",
              "description": "a phase event at the start (e.g. compiling, as Jumanji's JIT compilation)"},
    "ignore_sigterm": {"type": "boolean", "default": False,
                       "description": "ignore SIGTERM (tests the SIGKILL escalation)"},
    "children": {"type": "integer", "default": 0, "minimum": 0, "maximum": 16,
                 "description": "child processes to start (like env subprocesses)"},
    "garbage_every": {"type": "integer", "default": 0, "minimum": 0,
                      "description": "write a non-JSON line every N steps (0: never)"},
    "payload_bytes": {"type": "integer", "default": 0, "minimum": 0, "maximum": 10485760,
                      "description": "pad each scalar line with this many bytes"},
    "raise_message": {"type": ["string", "null"], "default": None,
                      "description": "raise RuntimeError with this message at the end"},
    "unbuffered": {"type": "boolean", "default": False,
                   "description": "write every line at once (latency measurements)"},
    "allocate_mb": {"type": "integer", "default": 0, "minimum": 0,
                    "description": "allocate this much memory before the first step"},
    "still_frames": {"type": "boolean", "default": False,
                     "description": "publish the same frame every time (tests that compare a screen)"},
    "frame_pattern": {"type": "string", "default": "noise", "enum": ["noise", "cartpole"],
                      "description": "frames: a noisy gradient (every pixel its own colour) or a moving CartPole"},
    "hold_seconds": {"type": "number", "default": 0, "minimum": 0,
                     "description": "keep running this long after the last step"},
    "startup_seconds": {"type": "number", "default": 0, "minimum": 0,
                        "description": "before anything (a library's imports): no stop handler yet, no line written"},
    "final_checkpoint": {"type": "boolean", "default": False,
                         "description": "at the end, save checkpoints/final.json (the step) and say so (checkpoint_saved)"},
    "linger_seconds": {"type": "number", "default": 0, "minimum": 0,
                       "description": "live this long after the last line (run_stopped, run_completed): a library's teardown"},
    "stop_save_seconds": {"type": "number", "default": 0, "minimum": 0,
                          "description": "how long saving a stop's checkpoint takes (tests the stop's grace)"},
    "start_file": {"type": ["string", "null"], "default": None,
                   "description": "after run_started, wait until this file exists before the first step "
                                  "(a benchmark's many workers start writing together)"},
}


class SyntheticDescriptor(WorkerDescriptor):
    name = "synthetic"
    package = "workers.synthetic_worker"
    upstream = "mosaic-tui"
    description = "Synthetic telemetry for tests, benchmarks and demos; trains nothing"
    hidden = True  # not offered to users (`mosaic workers --all` lists it); submitting by name works

    def capabilities(self) -> dict[str, Any]:
        return {
            "paradigms": ["single_agent"], "algorithms": ["emit"], "env_families": ["none"],
            "action_spaces": {"emit": ["none"]}, "max_agents": 1, "self_play": False,
            "pause": True, "checkpoints": False, "gpu": False, "frames": True, "stop": True,
        }

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo != "emit":
            raise self.unknown_algo(algo)
        return {"$schema": SCHEMA_DIALECT, "title": "synthetic emit", "type": "object",
                "properties": _PARAMS, "additionalProperties": False}

    def check_env(self, config: RunConfig) -> None:
        if config.steps is None:
            raise ConfigError("steps", "is required for the synthetic worker")


WORKER = SyntheticDescriptor()
