"""Worker discovery through the entry-point group ``mosaic.workers``.

Loading a descriptor imports only its light descriptor module (never torch,
ray or xuance); a worker whose entry point fails to load is reported with the
error instead of taking the daemon down.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any

from workers.sdk.config import ConfigError, did_you_mean, fold
from workers.sdk.descriptor import WorkerDescriptor

GROUP = "mosaic.workers"


def discover() -> tuple[dict[str, WorkerDescriptor], dict[str, str]]:
    """(descriptors by name, load errors by name)."""
    found: dict[str, WorkerDescriptor] = {}
    errors: dict[str, str] = {}
    for ep in importlib.metadata.entry_points(group=GROUP):
        try:
            obj = ep.load()
            descriptor = obj() if isinstance(obj, type) else obj
            if not isinstance(descriptor, WorkerDescriptor):
                raise TypeError(f"{ep.value} is not a WorkerDescriptor")
            found[ep.name] = descriptor
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
        entry = desc.metadata()
        try:
            entry["capabilities"] = desc.capabilities()
        except Exception as exc:
            entry["capabilities"] = {}
            entry["error"] = f"{type(exc).__name__}: {exc}"
        out.append(entry)
    for name, err in sorted(errors.items()):
        out.append({"name": name, "available": False, "error": err, "capabilities": {}})
    return out
