"""Where a worker puts its files in the run directory (its cwd): one set of names
for every worker and for the daemon (daemon/home.py imports them), so `mosaic eval`,
`run:NAME` checkpoint references and the docs find the same places. And what a
descriptor does with a checkpoint before a run loads it (eval, resume, a checkpoint
seat): ``read_checkpoint_meta`` and ``check_trained_on``, the same in every worker.
"""
from __future__ import annotations

import json
import os
from typing import Any

CHECKPOINT_DIR = "checkpoints"    # models the worker saves; it announces each with checkpoint_saved
TENSORBOARD_DIR = "tensorboard"   # the library's own TensorBoard files, if it writes any
# Beside a checkpoint: what it was trained with (env, algo, agents, policy ...),
# read before loading it, so a mismatch is refused by name instead of by a shape error.
CHECKPOINT_META = "mosaic_checkpoint.json"
# A recorded offline dataset (workers/sdk/dataset.py): Tianshou's ReplayBuffer HDF5, and what it holds.
DATASET_FILE = "dataset.hdf5"
DATASET_META = "dataset.json"


def checkpoint_dir(path: str) -> str:
    """A checkpoint's directory: the path itself, or the directory of the file users pointed at inside it."""
    path = os.path.expanduser(path)
    return os.path.dirname(path) if os.path.isfile(path) else path


def read_checkpoint_meta(path: str) -> dict[str, Any] | None:
    """What mosaic wrote beside a checkpoint (CHECKPOINT_META in its directory), or None: none there,
    not a JSON object, or a path not absolute yet ("run:NAME" before the daemon resolved it)."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        return None
    try:
        with open(os.path.join(checkpoint_dir(path), CHECKPOINT_META), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def check_trained_on(meta: dict[str, Any], env: str, algo: str | None = None, field: str = "checkpoint") -> None:
    """ConfigError(field) when the checkpoint was trained on another env or, given ``algo``, by another
    algorithm: refused by name at submit, not by a shape error once the run has started."""
    from workers.sdk.config import ConfigError  # here: the names above are imported where pydantic is not
    if meta.get("env") != env:
        raise ConfigError(field, f"was trained on {meta.get('env') or 'an unknown env'}, not {env}")
    if algo is not None and meta.get("algo") != algo:
        raise ConfigError(field, f"is a {meta.get('algo')} checkpoint, not {algo}")


class CheckpointSchedule:
    """When a worker that trains in whole units (iterations, epochs, chunks) saves: after
    every ``every``-th unit on the way (0: never on the way), and once more at the end unless
    the last unit was just saved -- so a run always ends with a checkpoint and never saves
    the same state twice. A resumed run counts from its checkpoint's unit (``start``): one
    that had nothing left to train saves nothing new."""

    def __init__(self, every: int, start: int = 0):
        self.every = every
        self.start = start
        self.last_saved: int | None = None

    def due(self, done: int, finished: bool) -> bool:
        """After ``done`` units: save on the way now? (``finished``: this was the last unit)"""
        return bool(self.every) and done % self.every == 0 and not finished

    def saved(self, done: int) -> None:
        self.last_saved = done

    def final_due(self, done: int) -> bool:
        """At the end, after ``done`` units: save the final state?"""
        return self.last_saved != done and done > self.start
