"""What a worker package tells the daemon about itself.

Each worker registers an entry point in the group ``mosaic.workers`` that
resolves to an object satisfying the contract ``workers.sdk.contract.Worker``;
``WorkerDescriptor`` is the optional helper base class the bundled workers use
(metadata from the installed distributions, algorithm names, validation). The
daemon loads descriptors to list workers, serve schemas, validate configs at
submit time and build the worker's command line. Descriptor modules must stay light: loading one never
imports torch, ray or xuance (a test checks ``sys.modules``).
"""
from __future__ import annotations

import sys
from typing import Any, Iterable

from workers.sdk.config import (
    ConfigError,
    RunConfig,
    canonical_params,
    check_params,
    did_you_mean,
    fold,
    parse_run_config,
)
from workers.sdk.envs import resolve_alias
from workers.sdk.modes import PLAY, submitted_mode

# re-exported: workers import them from here
from workers.sdk.packages import dist_version, module_available, package_dirs, torch_has_gpu_build  # noqa: F401


def check_torch_device(device: str) -> None:
    """ConfigError("device") for any device but "cpu" when the installed torch is a CPU-only build."""
    if device != "cpu" and not torch_has_gpu_build():
        raise ConfigError("device", f"the installed torch ({dist_version('torch')}) is a CPU-only build")


def resolve_algorithm(typed: str, names: list[str], worker: str) -> str:
    """The one of ``names`` a user means by ``typed``: itself, the same in any case
    or with '-' for '_' (``ppo`` for RLlib's ``PPO``), or the only name it begins
    (``sac`` for CleanRL's ``sac_continuous_action``). Else ConfigError, naming the
    candidates or the closest names."""
    if typed in names:
        return typed
    key = fold(typed)
    same = [n for n in names if fold(n) == key]
    if len(same) == 1:
        return same[0]
    starting = [n for n in names if fold(n).startswith(key)] if key else []
    if len(starting) == 1:
        return starting[0]
    if len(starting) > 1:
        raise ConfigError("algo", f"algorithm {typed!r} for worker {worker!r} is ambiguous: {', '.join(starting)}")
    hint = did_you_mean(typed, names) or f"; choose from {', '.join(names) or 'nothing: none is installed'}"
    raise ConfigError("algo", f"unknown algorithm {typed!r} for worker {worker!r}{hint}")


class WorkerDescriptor:
    """The helper base class of the bundled workers' descriptors (``workers.sdk.contract.Worker``): metadata from
    the installed distributions, capabilities, schemas from the catalog module, validation and the command line."""
    name: str = ""            # entry-point name, e.g. "cleanrl"
    package: str = ""         # python package; the worker runs as `python -m <package>.cli`
    upstream: str = ""        # upstream distribution, e.g. "cleanrl"
    description: str = ""
    hidden: bool = False      # a worker for tests: listed by `mosaic workers --all` only
    # the worker's catalog module (ALGORITHMS, schema(algo, env)), when the default schema() serves it
    catalog: Any = None
    # what its runs do when not train (and eval with checkpoints): ("play",) for agents that learn
    # nothing in the run (workers/sdk/modes.py); its capabilities' "modes" say the same to clients
    modes: tuple[str, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """The worker's name and version, its upstream library and that library's installed version."""
        return {
            "name": self.name,
            "version": dist_version("mosaic-tui") or "0",
            "upstream": self.upstream,
            "upstream_version": dist_version(self.upstream),
            "description": self.description,
            "available": self.available(),
            "hidden": self.hidden,
        }

    def available(self) -> bool:
        """Whether the upstream library is installed."""
        return dist_version(self.upstream) is not None

    def capabilities(self) -> dict[str, Any]:
        """paradigms, algorithms, env_families, action_spaces, max_agents,
        self_play, pause, checkpoints, gpu, frames."""
        raise NotImplementedError

    def algorithms(self) -> list[str]:
        """The algorithms its capabilities list."""
        return list(self.capabilities()["algorithms"])

    def stop_refusal(self, config: dict[str, Any]) -> str | None:
        """Why a run of this config cannot stop and continue (mosaic stop), in words; None when it
        can: the capabilities' ``stop`` is true for every mode, or lists the modes it stops in."""
        modes = (self.capabilities() or {}).get("stop")
        if modes is True or (isinstance(modes, list) and config.get("mode", "train") in modes):
            return None
        what = "an evaluation" if config.get("mode") == "eval" else "a run"
        return f"the {self.name} worker cannot stop {what} and continue it yet"

    def accepts_algo(self, algo: str) -> bool:
        """Does ``algo`` name something this worker runs? The listed algorithms;
        a worker may accept more (CleanRL: the path of a user's own script)."""
        return algo in self.algorithms()

    def unknown_algo(self, algo: str, names: Iterable[str] | None = None, noun: str = "algorithm") -> ConfigError:
        """The error for an algorithm this worker does not run, naming the ones it does (``names``:
        default, the listed algorithms): ``raise self.unknown_algo(algo, catalog.ALGORITHMS)``."""
        names = self.algorithms() if names is None else list(names)
        return ConfigError("algo", f"unknown {noun} {algo!r} for worker {self.name!r}; choose from {', '.join(names)}")

    def resolve_algo(self, algo: str) -> str:
        """The canonical name of the algorithm a user typed (see ``resolve_algorithm``);
        ConfigError("algo") naming close matches if there is none."""
        if self.accepts_algo(algo):
            return algo
        return resolve_algorithm(algo, self.algorithms(), self.name)

    def canonical_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """A run config with the names users type made the ones the worker uses:
        the env (a MultiGrid alias such as ``soccer_1vs1`` becomes its id), the
        algorithm (``resolve_algo``) and the params' keys in the schema's own
        spelling (``learning_starts`` for ``learning-starts``). The daemon calls
        this at submit, before ``validate``, so the CLI, the app and config files
        all get it and the run record stores the canonical names."""
        algo = config.get("algo")
        if not isinstance(algo, str):
            return config  # validate says what is wrong
        config = {**config, "algo": self.resolve_algo(algo)}
        if isinstance(config.get("env"), str):  # an alias users type (soccer_1vs1) is stored as its real id
            config["env"] = resolve_alias(config["env"])
        if isinstance(config.get("params"), dict) and config["params"]:
            env = config.get("env") if isinstance(config.get("env"), str) else None
            try:
                schema = self.schema(config["algo"], env)
            except ConfigError:
                return config  # e.g. a bad env: validate reports it, in its order
            config["params"] = canonical_params(schema, config["params"])
        return config

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        """JSON schema of the algorithm's params: by default the ``catalog`` module's (its
        ``ALGORITHMS`` and ``schema(algo, env)``), an unknown algorithm refused naming the known ones."""
        if self.catalog is None:
            raise NotImplementedError
        if algo not in self.catalog.ALGORITHMS:
            raise self.unknown_algo(algo, self.catalog.ALGORITHMS)
        return self.catalog.schema(algo, env)

    def check_env(self, config: RunConfig) -> None:
        """Refuse what the run's fields ask that the algorithm cannot run (its env,
        steps, device, checkpoint; params as given), before the params are checked
        against the schema; override per worker."""

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        """Refuse combinations the schema cannot express, with the params checked
        and given their defaults (``given``: the params as the config gave them);
        override per worker."""

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check a whole run config; return it normalised, or raise ConfigError."""
        playing = PLAY in self.modes
        if isinstance(config, dict) and playing:   # an older client's (or daemon's) "train" is a play
            config = {**config, "mode": submitted_mode(config.get("mode"), True)}
        parsed = parse_run_config(config)
        if parsed.worker != self.name:
            raise ConfigError("worker", f"is {parsed.worker!r}, this is the {self.name!r} worker")
        if parsed.mode == PLAY and not playing:
            raise ConfigError("mode", f"the {self.name} worker trains: mode play is for the workers whose runs "
                                      f"play (LLM agents, a person), not play")
        if not self.accepts_algo(parsed.algo):
            raise self.unknown_algo(parsed.algo)
        self.check_env(parsed)
        given = dict(parsed.params)
        parsed.params = check_params(self.schema(parsed.algo, parsed.env), parsed.params)
        self.check_run(parsed, given)
        return parsed.model_dump()

    def command(self, config: dict[str, Any]) -> list[str]:
        """argv of the worker process; it runs with the run directory as cwd."""
        return [sys.executable, "-m", f"{self.package}.cli", "--config", "config.json"]
