"""Stop and continue for the Jumanji worker, either trainer (a2c or ppo).

A trainer's checkpoint is its whole training state (``checkpoints.py``: parameters,
optimizer state, env states, the random key, the unit and step reached), so a
stopped run goes on exactly where it was. ``mosaic stop`` is taken between two
units (epochs or chunks): the state saved as ``checkpoints/stop_<unit>`` and the
run ends with ``Stopped``. ``continue_from`` (mosaic continue) loads it and the
same run trains the units left; ``checkpoint`` starts a new run from one.
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


def restore(tr, config: dict[str, Any], unit_name: str) -> int:
    """Load the run's source checkpoint, if any, into the trainer; the unit it goes on from (0: none)."""
    path = source(config)
    if not path:
        return 0
    start = tr.load(path)
    sys.stderr.write(f"mosaic jumanji worker: resumed from {path} at {unit_name} {start}\n")
    return start


def stop(tr, checkpoints: Path, done: int, config: dict[str, Any], steps: int) -> Stopped:
    """The stop after ``done`` units: the training state saved as checkpoints/stop_<done> (raise it)."""
    return Stopped.after(lambda: tr.save(checkpoints / f"{STOP_PREFIX}{done:06d}", done, config), steps)
