"""What is installed, read from metadata and the import system's finders: nothing is imported.

Descriptors (daemon side) and the env table (workers/sdk/envs.py) use these to
say what a worker can run without importing torch, ray, xuance or the env packages.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util


def dist_version(dist: str) -> str | None:
    """Installed version of a distribution, read from its metadata (no import)."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def upstream(*dists: str, rebuilt: str | None = None) -> str:
    """The library a run runs, as its ``run_started`` and checkpoint manifests say it:
    ``"xuance==1.3.2"``, several separated by spaces (``"jumanji==1.1.0 jax==0.4.30"``),
    ``?`` for one not installed; ``rebuilt`` names a library the worker rebuilt rather than imports
    (BALROG: ``"BALROG (rebuilt) llama-cpp-python==0.3.2"``)."""
    names = [f"{dist}=={dist_version(dist) or '?'}" for dist in dists]
    return " ".join(([f"{rebuilt} (rebuilt)"] if rebuilt else []) + names)


def module_available(name: str | None) -> bool:
    """Could ``name`` be imported? Found on the path, not imported (None: nothing needed)."""
    if name is None:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def package_dirs(name: str) -> list[str]:
    """The folders of an installed package, found without importing it (a
    namespace package such as cleanrl may have several); [] if not installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    return list(spec.submodule_search_locations)


def torch_has_gpu_build() -> bool:
    """False for the CPU build of torch (version "2.x+cpu") or none, read from its metadata."""
    version = dist_version("torch")
    return version is not None and "+cpu" not in version
