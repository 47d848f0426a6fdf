"""For the sitecustomize.py files workers put first on a child's PYTHONPATH.

Such a file shadows any other sitecustomize (a distribution's or the user's);
``run_shadowed_sitecustomize`` finds and runs that one too, so installing
mosaic's never silently drops someone else's.
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
