"""What a worker package tells the daemon about itself.

Each worker registers an entry point in the group ``mosaic.workers`` that
resolves to a ``WorkerDescriptor`` instance. The daemon loads descriptors to
list workers, serve schemas, validate configs at submit time and build the
worker's command line. Descriptor modules must stay light: loading one never
imports torch, ray or xuance (a test checks ``sys.modules``).
"""
from __future__ import annotations

import importlib.metadata
import sys
from typing import Any

from workers.sdk.config import ConfigError, RunConfig, check_params, parse_run_config


def dist_version(dist: str) -> str | None:
    """Installed version of a distribution, read from its metadata (no import)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


class WorkerDescriptor:
    name: str = ""            # entry-point name, e.g. "cleanrl"
    package: str = ""         # python package; the worker runs as `python -m <package>.cli`
    upstream: str = ""        # upstream distribution, e.g. "cleanrl"
    description: str = ""

    def metadata(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": dist_version("mosaic-tui") or "0",
            "upstream": self.upstream,
            "upstream_version": dist_version(self.upstream),
            "description": self.description,
            "available": self.available(),
        }

    def available(self) -> bool:
        return dist_version(self.upstream) is not None

    def capabilities(self) -> dict[str, Any]:
        """paradigms, algorithms, env_families, action_spaces, max_agents,
        self_play, pause, checkpoints, gpu, frames."""
        raise NotImplementedError

    def algorithms(self) -> list[str]:
        return list(self.capabilities()["algorithms"])

    def accepts_algo(self, algo: str) -> bool:
        """Does ``algo`` name something this worker runs? The listed algorithms;
        a worker may accept more (CleanRL: the path of a user's own script)."""
        return algo in self.algorithms()

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        """JSON schema of the algorithm's params."""
        raise NotImplementedError

    def check_env(self, config: RunConfig) -> None:
        """Refuse an env the algorithm cannot run; override per worker."""

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check a whole run config; return it normalised, or raise ConfigError."""
        parsed = parse_run_config(config)
        if parsed.worker != self.name:
            raise ConfigError("worker", f"is {parsed.worker!r}, this is the {self.name!r} worker")
        if not self.accepts_algo(parsed.algo):
            raise ConfigError("algo", f"unknown algorithm {parsed.algo!r} for worker {self.name!r}; "
                                      f"choose from {', '.join(self.algorithms())}")
        self.check_env(parsed)
        parsed.params = check_params(self.schema(parsed.algo, parsed.env), parsed.params)
        return parsed.model_dump()

    def command(self, config: dict[str, Any]) -> list[str]:
        """argv of the worker process; it runs with the run directory as cwd."""
        return [sys.executable, "-m", f"{self.package}.cli", "--config", "config.json"]
