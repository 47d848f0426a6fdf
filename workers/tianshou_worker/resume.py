"""Stop and continue for the Tianshou worker, single-agent (runtime.py) and MultiGrid (multiagent.py) alike.

A checkpoint (``checkpoints.save_checkpoint``) holds the algorithm's ``state_dict``
(networks and optimizers) and the trainer's counters: epoch, env step, update
step. ``mosaic stop`` is taken at an epoch's end, where the trainer hands its
counters to the logger (``logger.TelemetryLogger.save_data``): the state saved
as ``checkpoints/stop_<epoch>.pt``, then ``Stopped``. ``continue_from`` (mosaic
continue) loads it, and the trainer, resumed from those counters
(``resume_from_log``), trains exactly the epochs left; ``checkpoint`` starts a
new run from one.
"""
from __future__ import annotations

import sys
from typing import Any

STOP_PREFIX = "stop_"


def source(config: dict[str, Any]) -> str | None:
    """The checkpoint the run starts from: its own stop's (continue_from), or another run's (checkpoint)."""
    return config.get("continue_from") or config.get("checkpoint")


def load_state(config: dict[str, Any]) -> dict[str, Any] | None:
    """The saved state of the run's source checkpoint (None: the run starts afresh)."""
    path = source(config)
    if not path:
        return None
    import torch

    state = torch.load(path, map_location="cpu", weights_only=False)
    sys.stderr.write(f"mosaic tianshou worker: loaded {path}\n")
    return state


def restored(state: dict[str, Any] | None) -> tuple[int, int, int]:
    """The trainer's counters (epoch, env step, update step) a run goes on from."""
    if state is None:
        return 0, 0, 0
    return int(state["epoch"]), int(state["env_step"]), int(state["update_step"])


def stop_name(epoch: int) -> str:
    """The stop's checkpoint name after ``epoch``: checkpoints/<name>.pt."""
    return f"{STOP_PREFIX}{epoch:04d}"
