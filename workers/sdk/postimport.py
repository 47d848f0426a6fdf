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

from typing_extensions import override


class PostImportFinder(importlib.abc.MetaPathFinder):
    """Lets the other finders find a module, then runs its patches after it executes.

    One finder per process holds every pending patch: two finders with a patch for the
    same module would each ask the other to find it, for ever (a process whose
    sitecustomize and whose own start-up both install a worker's patches)."""

    def __init__(self) -> None:
        self.patches: dict[str, list[Callable[[Any], None]]] = {}

    @override
    def find_spec(self, name, path, target=None):
        patches = self.patches.get(name)
        if not patches:
            return None
        for finder in sys.meta_path:
            if isinstance(finder, PostImportFinder) or not hasattr(finder, "find_spec"):
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
            for patch in self.patches.pop(name, []):
                patch(module)

        spec.loader.exec_module = exec_and_patch
        return spec


def when_imported(name: str, patch: Callable[[Any], None]) -> None:
    """``patch(module)`` now if ``name`` is imported already, else right after it is."""
    if name in sys.modules:
        patch(sys.modules[name])
        return
    finder = next((f for f in sys.meta_path if isinstance(f, PostImportFinder)), None)
    if finder is None:
        finder = PostImportFinder()
        sys.meta_path.insert(0, finder)
    finder.patches.setdefault(name, []).append(patch)
