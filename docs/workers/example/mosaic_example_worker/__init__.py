"""The daemon's side of the example worker: light (no gymnasium import), no base class.

Any object with these members satisfies workers.sdk.contract.Worker.
"""
import sys
from importlib.metadata import version

from workers.sdk.config import SCHEMA_DIALECT, ConfigError, check_params, parse_run_config

PARAMS = {
    "episodes_per_log": {"type": "integer", "default": 5, "minimum": 1,
                         "description": "episodes between two 'random/mean_return' scalars"},
    "push_left": {"type": "number", "default": 0.5, "minimum": 0, "maximum": 1,
                  "description": "probability of pushing the cart left"},
}


class ExampleWorker:
    name = "example"

    def metadata(self):
        return {"name": self.name, "version": "0.1.0", "upstream": "gymnasium",  # read without importing it
                "upstream_version": version("gymnasium"), "available": True,
                "description": "A random agent on gymnasium's CartPole (docs/workers/README.md)"}

    def capabilities(self):
        return {"paradigms": ["single_agent"], "algorithms": ["random"], "env_families": ["classic_control"],
                "envs": {"random": ["CartPole-v1"]}, "action_spaces": {"random": ["discrete"]},
                "max_agents": 1, "pause": True, "checkpoints": False, "gpu": False, "frames": True}

    def schema(self, algo, env=None):
        return {"$schema": SCHEMA_DIALECT, "title": "example random", "type": "object",
                "properties": PARAMS, "additionalProperties": False}

    def validate(self, config):
        run = parse_run_config(config)  # the fields every run has: worker, algo, env, steps, seed, frames ...
        if run.algo != "random":
            raise ConfigError("algo", f"unknown algorithm {run.algo!r} for worker 'example'; choose from random")
        if run.mode == "eval":
            raise ConfigError("mode", "the example has no checkpoints to evaluate: its runs are mode 'train'")
        if run.env != "CartPole-v1" or run.steps is None:
            raise ConfigError("env", "the example runs CartPole-v1 for a given number of steps")
        run.params = check_params(self.schema(run.algo), run.params)  # defaults filled in, bad values named
        return run.model_dump()

    def command(self, config):
        return [sys.executable, "-m", "mosaic_example_worker.cli", "--config", "config.json"]


WORKER = ExampleWorker()
