"""Import-time shims that let ``jumanji.training`` be imported without its ``[train]`` extra.

``jumanji/training/loggers.py`` imports ``tensorboardX`` and ``neptune.new`` at
module level, for its TensorboardLogger and NeptuneLogger. The ``[train]`` extra
pins ``tensorboardX==2.5.1`` (which downgrades protobuf) and ``neptune-client``;
mosaic keeps that extra out and never builds those loggers: telemetry goes to
mosaic's own wire. So both names are served here by placeholder modules whose
every attribute raises, which keeps the real packages from being imported (and
a missing one from failing the import of ``jumanji.training``).

``install()`` runs in the worker process before the first ``jumanji.training``
import, and in every Python process started with ``sitedir/`` on PYTHONPATH
(``sitedir/sitecustomize.py``; the bench runs jumanji's own loop that way).
Standard library only.
"""
from __future__ import annotations

import sys
import types

# jumanji.training.loggers: "import tensorboardX" and "from neptune import new as neptune";
# jumanji/training/train.py: "import hydra" (for its @hydra.main; hydra is not installed here).
SHIMMED = ("tensorboardX", "neptune", "neptune.new")
MARK = "__mosaic_shim__"


class _Unavailable(types.ModuleType):
    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise ImportError(f"{self.__name__}.{attr}: jumanji.training's {self.__name__} logger is not available "
                          f"in mosaic's Jumanji worker (telemetry goes to mosaic instead)")


def install() -> None:
    """Put the placeholder modules in sys.modules (idempotent; a real module already
    imported is left alone)."""
    for name in SHIMMED:
        if name in sys.modules:
            continue
        module = _Unavailable(name)
        setattr(module, MARK, True)
        if name == "neptune":
            module.__path__ = []  # a package, so "neptune.new" resolves as its submodule
        sys.modules[name] = module
    parent, child = sys.modules["neptune"], sys.modules["neptune.new"]
    if getattr(parent, MARK, False):
        parent.__dict__["new"] = child
