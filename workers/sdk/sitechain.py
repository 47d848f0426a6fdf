"""For the sitecustomize.py files workers put first on a child's PYTHONPATH.

Every such file is the same few lines: make ``workers`` importable, then
``arm(here, install, what)``, which installs the worker's import-time patches
and runs the sitecustomize the file shadows (a distribution's or the user's:
``run_shadowed_sitecustomize``), so installing mosaic's never silently drops
someone else's.
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def run_shadowed_sitecustomize(here: str) -> None:
    """Run the next sitecustomize on sys.path after the one in directory ``here``."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def arm(here: str, install, what: str, fatal: bool = False) -> None:
    """What every worker's sitecustomize.py does: ``install()`` (its import-time patches), then
    the sitecustomize it shadows. When ``install`` fails, ``fatal``: print the traceback and
    stop the process with status 3, saying "mosaic: cannot <what>" (Python would report
    "Error in sitecustomize" and go on unpatched); else one line on stderr, and the process goes
    on (the library's own error follows, where it matters)."""
    try:
        install()
    except BaseException as exc:
        if fatal:
            import traceback

            traceback.print_exc()
            sys.stderr.write(f"mosaic: cannot {what}\n")
            sys.stderr.flush()
            os._exit(3)
        sys.stderr.write(f"mosaic: cannot {what}: {exc!r}\n")
    run_shadowed_sitecustomize(here)
