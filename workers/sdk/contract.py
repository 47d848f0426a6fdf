"""The worker contract: what the daemon needs from a worker's descriptor.

A worker package registers, in the entry-point group ``mosaic.workers``, an
object (or a class, instantiated once without arguments) that satisfies
``Worker``. Nothing has to inherit from anything: ``WorkerDescriptor``
(workers/sdk/descriptor.py) is an optional helper that satisfies it and adds
the common validation. The descriptor runs inside the daemon, so its module
must stay light (no torch, ray, jax ...); the heavy part is the process that
``command`` starts. docs/workers/README.md walks through writing one.
"""
from __future__ import annotations

from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Worker(Protocol):
    """What the daemon needs of a worker's descriptor; ``missing_members`` names what an object lacks."""
    # the name users type (`mosaic submit --worker NAME`); the entry point's name
    name: str

    def metadata(self) -> dict[str, Any]:
        """At least ``name`` and ``available`` (bool: can it run here?); also version,
        upstream, upstream_version, description, hidden (listed by `--all` only)."""

    def capabilities(self) -> dict[str, Any]:
        """At least ``algorithms`` (list of names); also paradigms, env_families,
        envs, action_spaces, max_agents, pause, checkpoints, gpu, frames ..."""

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        """JSON schema (draft 2020-12) of the algorithm's params: the app's form."""

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        """A whole run config checked and normalised, or ConfigError naming the field."""

    def command(self, config: dict[str, Any]) -> list[str]:
        """argv of the worker process; it runs with the run directory as cwd, the
        validated config in ``config.json`` and stdout as the telemetry wire."""


# Members a descriptor may add; without them the daemon does what WorkerDescriptor does.
OPTIONAL = {
    "resolve_algo": "the algorithm a user means by what they typed ('ppo' for 'PPO')",
    "canonical_config": "a run config with the names users type made the worker's own",
}


def missing_members(obj: object) -> list[str]:
    """The members of ``Worker`` that ``obj`` lacks or has in the wrong kind (for the error message)."""
    missing = []
    for member in ("name", "metadata", "capabilities", "schema", "validate", "command"):
        value = getattr(obj, member, None)
        if member == "name":
            if not isinstance(value, str) or not value:
                missing.append("name (a non-empty str)")
        elif not callable(value):
            missing.append(f"{member}()")
    return missing
