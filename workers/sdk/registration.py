"""Registering the env families that need it, in a worker's process: the one place every worker uses.

Gymnasium knows classic control, Box2D and MuJoCo by itself. Atari ids exist
once ``gym.register_envs(ale_py)`` ran, ViZDoom's once
``vizdoom.gymnasium_wrapper`` was imported, MOSAIC MultiGrid's once
``mosaic_multigrid`` was, Jumanji's ``jumanji/<Env>`` once
``jumanji_envs.register_gymnasium`` ran. A worker's process calls

    registration.prepare_process()      # before importing the libraries: env variables they read
    registration.register_family_of(env_id)   # before gymnasium.make(env_id)

or, where an unmodified upstream script calls ``gymnasium.make`` itself (CleanRL),
``install_make_hook()`` from its sitecustomize: then every ``gymnasium.make(id)``
registers the family of ``id`` first (``jumanji/<Env>`` ids too: Jumanji's gym wrapper,
workers/sdk/jumanji_envs.py). Only the family a run asks for is
imported (numba, pulled in by mosaic_multigrid, takes seconds to import).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from workers.sdk import jumanji_envs
from workers.sdk.envs import ATARI, PACKAGE_FAMILIES, env_family

_registered: set[str] = set()


def cache_root(environ: dict[str, str] | None = None) -> str:
    """mosaic's own caches on this machine, outside any home: ``$XDG_CACHE_HOME/mosaic-tui``
    (``~/.cache/mosaic-tui``): the llama.cpp wheels, TextWorld's compiled games."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mosaic-tui")


def process_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Variables the env libraries read at import or first use:

    - ``MUJOCO_GL=egl``: MuJoCo renders headless through Mesa's libEGL (no display here);
    - ``NUMBA_CACHE_DIR`` under the mosaic home: mosaic_multigrid's numba functions compile
      once (~19 s) and later runs load them from this cache;
    - ``MPLCONFIGDIR`` under the mosaic home: matplotlib (Jumanji's viewers, the libraries that
      import it) keeps its config and its font cache there, not in ``~/.config`` and ``~/.cache``;
    - ``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR`` under the mosaic home: torch.compile's
      kernels outlive the run (the temp dir is the run's own) and stay out of ``~/.triton``;
    - ``JAX_COMPILATION_CACHE_DIR`` under the mosaic home (at most
      ``JAX_COMPILATION_CACHE_MAX_SIZE``, 2 GiB, least recently used entries go first): XLA
      programs that took over a second to compile (a Jumanji epoch function: 1 to 12 minutes on
      2 cores) are kept, so a resumed run, an evaluation or the next run of the same settings
      loads them; ``JAX_ENABLE_COMPILATION_CACHE=false`` turns it off;
    - ``PYGAME_HIDE_SUPPORT_PROMPT``, ``SDL_AUDIODRIVER=dummy``: pygame (MultiGrid, Box2D
      rendering) prints nothing and opens no sound card.
    A value the user set already is kept. Read before the libraries are imported: jax reads its
    variables once, at import. A worker run by hand, without ``MOSAIC_HOME``, keeps them in
    ``cache_root()``."""
    environ = os.environ if environ is None else environ
    home = environ.get("MOSAIC_HOME") or cache_root(environ)
    wanted = {
        "MUJOCO_GL": "egl",
        "NUMBA_CACHE_DIR": os.path.join(home, "cache", "numba"),
        "MPLCONFIGDIR": os.path.join(home, "cache", "matplotlib"),
        # torch.compile's caches: by default in the temp dir (the run's own, removed with it) and ~/.triton
        "TORCHINDUCTOR_CACHE_DIR": os.path.join(home, "cache", "torchinductor"),
        "TRITON_CACHE_DIR": os.path.join(home, "cache", "triton"),
        "JAX_COMPILATION_CACHE_DIR": os.path.join(home, "cache", "jax"),
        "PYGAME_HIDE_SUPPORT_PROMPT": "1",
        "SDL_AUDIODRIVER": "dummy",
    }
    if importlib.util.find_spec("filelock") is not None:  # jax evicts under a file lock (torch brings filelock)
        wanted["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(2 << 30)
    return {key: value for key, value in wanted.items() if key not in environ}


def prepare_process() -> None:
    """Set this process's environment for the libraries a worker imports (``process_environment``), before it imports them."""
    os.environ.update(process_environment())


def register_family(family: str) -> None:
    """Import the package that registers ``family``'s ids with gymnasium (once a process)."""
    if family in _registered or family not in PACKAGE_FAMILIES:
        return
    prepare_process()
    module = importlib.import_module(PACKAGE_FAMILIES[family])
    if family == ATARI:
        import gymnasium

        gymnasium.register_envs(module)
    _registered.add(family)


def register_family_of(env_id: str) -> str | None:
    """Register the family of ``env_id`` if it needs it; return the family (None: unknown id).
    ``jumanji/<Env>`` ids: Jumanji's gym wrapper (workers/sdk/jumanji_envs.py)."""
    if env_id.startswith(f"{jumanji_envs.NAMESPACE}/"):
        prepare_process()  # the JAX compilation cache, before jax is imported
        jumanji_envs.register_for(env_id)
        return "jumanji"
    family = env_family(env_id)
    if family is not None:
        register_family(family)
    return family


def _make_registering_first(module: Any) -> None:
    original_make = module.make
    if getattr(original_make, "_mosaic_registers", False):
        return

    def make(id, *args, **kwargs):
        if isinstance(id, str):
            register_family_of(id)
        return original_make(id, *args, **kwargs)

    make._mosaic_registers = True
    module.make = make
    gymnasium = sys.modules.get("gymnasium")
    if gymnasium is not None and getattr(gymnasium, "make", None) is original_make:
        gymnasium.make = make


def install_make_hook() -> None:
    """From now on (or once gymnasium is imported), ``gymnasium.make(id)`` registers
    the family of ``id`` first."""
    from workers.sdk.postimport import when_imported

    when_imported("gymnasium", lambda gymnasium: _make_registering_first(sys.modules["gymnasium.envs.registration"]))
