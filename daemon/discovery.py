"""Worker discovery through the entry-point group ``mosaic.workers``.

Loading a descriptor imports only its light descriptor module (never torch,
ray or xuance); a worker whose entry point fails to load is reported with the
error instead of taking the daemon down.
"""
from __future__ import annotations

import importlib.metadata
from typing import Any

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
