"""Running a patch right after a module has been imported, whoever imports it.

    when_imported("gymnasium", patch)   # patch(module) now if imported, else after its import

A ``sys.meta_path`` finder lets the other finders find the module, then wraps
its loader's ``exec_module`` so the patch runs once the module's code has run.
Workers use it for import-time patches of unmodified upstream code (CleanRL's
scripts, XuanCe's environment registry) without importing anything early.
"""
from __future__ import annotations

import importlib.abc
import sys
from typing import Any, Callable


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Lets the other finders find a module, then runs a patch after it executes."""

    def __init__(self, patches: dict[str, Callable[[Any], None]]):
        self.patches = patches

    def find_spec(self, name, path, target=None):
        patch = self.patches.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            self.patches.pop(name, None)
            patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def when_imported(name: str, patch: Callable[[Any], None]) -> None:
    """``patch(module)`` now if ``name`` is imported already, else right after it is."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    sys.meta_path.insert(0, PostImportFinder({name: patch}))
