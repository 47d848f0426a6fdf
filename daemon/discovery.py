"""Worker discovery through the entry-point group ``mosaic.workers``.

An entry point resolves to anything that satisfies the worker contract
(``workers.sdk.contract.Worker``), or to a class whose instance does.
Loading a descriptor imports only its light descriptor module (never torch,
ray or xuance); an entry point that fails to import, or whose object does not
satisfy the contract, is reported with one clear error instead of taking the
daemon (or the other workers) down.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any

from workers.sdk.config import ConfigError, did_you_mean, fold
from workers.sdk.contract import Worker, missing_members
from workers.sdk.descriptor import WorkerDescriptor

GROUP = "mosaic.workers"


class PlainWorker(WorkerDescriptor):
    """A descriptor that satisfies the contract without the helper base class,
    given the base class's behaviour for the optional members it lacks
    (``resolve_algo``, ``canonical_config``), so the daemon asks one shape."""

    def __init__(self, worker: Worker):
        self.worker = worker
        self.name = worker.name

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "available": True, "hidden": False, **self.worker.metadata()}

    def available(self) -> bool:
        return bool(self.metadata()["available"])

    def capabilities(self) -> dict[str, Any]:
        return self.worker.capabilities()

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        return self.worker.schema(algo, env)

    def validate(self, config: dict[str, Any]) -> dict[str, Any]:
        return self.worker.validate(config)

    def command(self, config: dict[str, Any]) -> list[str]:
        return self.worker.command(config)

    def resolve_algo(self, algo: str) -> str:
        own = getattr(self.worker, "resolve_algo", None)
        return own(algo) if callable(own) else super().resolve_algo(algo)

    def canonical_config(self, config: dict[str, Any]) -> dict[str, Any]:
        own = getattr(self.worker, "canonical_config", None)
        return own(config) if callable(own) else super().canonical_config(config)


def load(ep: importlib.metadata.EntryPoint) -> WorkerDescriptor:
    """The descriptor an entry point names; TypeError saying what breaks the contract."""
    obj = ep.load()
    descriptor = obj() if isinstance(obj, type) else obj
    if not isinstance(descriptor, Worker) or missing_members(descriptor):
        lacks = ", ".join(missing_members(descriptor))
        raise TypeError(f"{ep.value} does not satisfy the mosaic worker contract "
                        f"(workers.sdk.contract.Worker): it lacks {lacks}")
    if descriptor.name != ep.name:
        raise TypeError(f"{ep.value} is the worker {descriptor.name!r}, but its entry point is named {ep.name!r}")
    return descriptor if isinstance(descriptor, WorkerDescriptor) else PlainWorker(descriptor)


def discover() -> tuple[dict[str, WorkerDescriptor], dict[str, str]]:
    """(descriptors by name, load errors by name)."""
    found: dict[str, WorkerDescriptor] = {}
    errors: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        try:
            found[ep.name] = load(ep)
        except Exception as exc:  # a broken plugin must not break the others
            errors[ep.name] = f"{type(exc).__name__}: {exc}"
    return found, errors


def resolve_worker(descriptors: dict[str, WorkerDescriptor], name: str) -> WorkerDescriptor:
    """The worker a user means (``CleanRL`` is ``cleanrl``); ConfigError("worker")
    naming the closest names, or the installed ones, if there is none."""
    desc = descriptors.get(name)
    if desc is None:
        same = [n for n in descriptors if fold(n) == fold(name)]
        if len(same) == 1:
            return descriptors[same[0]]
        hint = did_you_mean(name, list(descriptors)) or f"; installed: {', '.join(sorted(descriptors))}"
        raise ConfigError("worker", f"unknown worker {name!r}{hint}")
    return desc


def describe(descriptors: dict[str, WorkerDescriptor], errors: dict[str, str]) -> list[dict[str, Any]]:
    """The `workers` method's answer: metadata and capabilities of each worker."""
    out = []
    for name, desc in sorted(descriptors.items()):
        # an outside worker's bug is listed with it, not raised into every client's `workers` call
        entry: dict[str, Any] = {"name": name, "available": False}
        try:
            entry = desc.metadata()
            entry["capabilities"] = desc.capabilities()
        except Exception as exc:
            entry.update(capabilities={}, error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    for name, err in sorted(errors.items()):
        out.append({"name": name, "available": False, "error": err, "capabilities": {}})
    return out

