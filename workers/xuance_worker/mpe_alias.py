"""``pettingzoo.mpe.<scenario>`` for XuanCe, served by the ``mpe2`` package.

XuanCe 1.4.4 creates an MPE scenario with
``importlib.import_module(f"pettingzoo.mpe.{env_id}")``, but PettingZoo 1.27
moved MPE out into ``mpe2``: ``pettingzoo/mpe/__init__.py`` now only raises
ImportError. ``install()`` puts a finder first on ``sys.meta_path`` that
answers for ``pettingzoo.mpe`` and its submodules before PettingZoo's own
package is looked at:

- ``pettingzoo.mpe`` is an empty package;
- ``pettingzoo.mpe.simple_spread_v3`` is a small module whose ``env``,
  ``parallel_env`` and ``raw_env`` call ``mpe2.simple_spread_v3``'s, adding the
  keyword arguments found in the environment variable ``MOSAIC_XUANCE_ENV_KWARGS``
  (a JSON object, e.g. ``{"N": 2, "max_cycles": 25}``). XuanCe passes only
  ``continuous_actions`` and ``render_mode``; this is how a run's
  ``params.env_kwargs`` reach the scenario.

The variable is read when a scenario is created, so a curriculum phase can
change it between two environments, and processes that XuanCe spawns for its
vectorised environments inherit it. Those processes import everything afresh:
``sitedir/sitecustomize.py`` calls ``install()`` in them (the worker puts
``sitedir`` on PYTHONPATH).

Standard library only, and nothing is imported until XuanCe asks for a scenario.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

PREFIX = "pettingzoo.mpe"
ENV_KWARGS_VAR = "MOSAIC_XUANCE_ENV_KWARGS"
FACTORIES = ("env", "parallel_env", "raw_env")


def env_kwargs_from_environ() -> dict:
    text = os.environ.get(ENV_KWARGS_VAR, "")
    if not text:
        return {}
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{ENV_KWARGS_VAR} must hold a JSON object, not {text!r}")
    return value


def _with_env_kwargs(factory):
    def make(*args, **kwargs):
        return factory(*args, **{**env_kwargs_from_environ(), **kwargs})
    make.__name__ = factory.__name__
    make.__doc__ = factory.__doc__
    return make


class _AliasLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None  # a plain module object

    def exec_module(self, module):
        name = module.__name__
        if name == PREFIX:
            module.__path__ = []  # a package: submodule imports come back to the finder
            return
        target = importlib.import_module("mpe2" + name[len(PREFIX):])
        for attr, value in vars(target).items():
            if not attr.startswith("__"):
                setattr(module, attr, value)
        for attr in FACTORIES:
            if hasattr(target, attr):
                setattr(module, attr, _with_env_kwargs(getattr(target, attr)))


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != PREFIX and not fullname.startswith(PREFIX + "."):
            return None
        if fullname != PREFIX and importlib.util.find_spec("mpe2" + fullname[len(PREFIX):]) is None:
            return None  # no such scenario in mpe2 either: a plain ModuleNotFoundError
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(), is_package=fullname == PREFIX)


def install() -> None:
    """Serve ``pettingzoo.mpe.*`` from mpe2 in this process (idempotent)."""
    if any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        return
    if importlib.util.find_spec("mpe2") is None:
        return  # MPE is not installed: XuanCe's own ImportError will say so
    # PettingZoo's stub may have been imported (and failed) already
    for name in [n for n in sys.modules if n == PREFIX or n.startswith(PREFIX + ".")]:
        del sys.modules[name]
    sys.meta_path.insert(0, _AliasFinder())


def set_env_kwargs(kwargs: dict | None) -> None:
    """The scenario keyword arguments for the environments created from now on."""
    if kwargs:
        os.environ[ENV_KWARGS_VAR] = json.dumps(kwargs)
    else:
        os.environ.pop(ENV_KWARGS_VAR, None)

