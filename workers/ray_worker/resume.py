"""Stop and continue for the RLlib worker.

A checkpoint (``rllib.save_checkpoint``) is RLlib's own: the algorithm's whole
state (learner, RLModules, optimizers, the env runners' connector states) in
``algo.save_to_path``'s layout, with mosaic's metadata beside it. ``mosaic stop``
is taken between two ``algo.train()`` iterations: that state saved as
``checkpoints/stop_<iteration>``, then ``Stopped``. ``continue_from`` (mosaic
continue) restores it into the freshly built algorithm (``algo.restore_from_path``),
which goes on counting iterations and env steps from there; ``checkpoint`` starts a
new run from one.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from workers.sdk.stop import Stopped

STOP_PREFIX = "stop_"


def source(config: dict[str, Any]) -> str | None:
    """The checkpoint the run starts from: its own stop's (continue_from), or another run's (checkpoint)."""
    return config.get("continue_from") or config.get("checkpoint")


def restore(algo, config: dict[str, Any]) -> Path | None:
    """Restore the run's source checkpoint, if any, into the built algorithm; its folder (None: none)."""
    path = source(config)
    if not path:
        return None
    from workers.ray_worker import rllib

    root = rllib.checkpoint_root(path)
    algo.restore_from_path(str(root))
    sys.stderr.write(f"mosaic ray worker: resumed from {root}\n")
    return root


def stop(algo, setup, checkpoints: Path, iteration: int, steps: int) -> Stopped:
    """The stop after ``iteration``: the algorithm's state saved as checkpoints/stop_<iteration> (raise it)."""
    from workers.ray_worker import rllib

    path = checkpoints / f"{STOP_PREFIX}{iteration:06d}"
    return Stopped.after(lambda: rllib.save_checkpoint(algo, setup, path, iteration, steps), steps)
