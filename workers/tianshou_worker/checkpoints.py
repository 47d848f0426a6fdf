"""The Tianshou worker's checkpoints, single-agent (runtime.py) and MultiGrid (multiagent.py) alike:
``checkpoints/<name>.pt`` holds the algorithm's ``state_dict`` (networks and optimizers) and the
trainer's counters, written to a temporary name and renamed (a process killed mid-save leaves no
torn checkpoint); ``mosaic_checkpoint.json`` beside it says what it was trained on. resume.py reads
them back.
"""
from __future__ import annotations

import json
import os
from typing import Any

from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, periodic_checkpoint_saved
from workers.sdk.telemetry import Emitter
from workers.tianshou_worker import catalog


def save_checkpoint(algorithm, config: dict[str, Any], name: str, epoch: int, env_step: int,
                    update_step: int, emitter: Emitter, agents: int = 1, periodic: bool = False) -> str:
    """checkpoints/<name>.pt: the algorithm's state_dict (networks and optimizers) and the
    trainer's counters; mosaic_checkpoint.json beside it says what it was trained on.
    ``agents``: a MultiGrid run's Tianshou counts one env step per agent (its events, game steps).
    ``periodic``: one on the way ("epoch_..."): its manifest, and the home's keep_checkpoints."""
    import torch

    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    path = os.path.abspath(os.path.join(CHECKPOINT_DIR, f"{name}.pt"))
    # a temporary name, then renamed: a process killed mid-save leaves no torn checkpoint
    torch.save({"algorithm": algorithm.state_dict(), "epoch": epoch, "env_step": env_step,
                "update_step": update_step}, path + ".partial")
    os.replace(path + ".partial", path)
    meta = {"worker": "tianshou", "algo": config["algo"], "env": config["env"],
            "hidden_sizes": config["params"]["hidden_sizes"], "epoch": epoch, "env_step": env_step,
            "update_step": update_step}
    with open(os.path.join(CHECKPOINT_DIR, CHECKPOINT_META), "w") as f:
        json.dump(meta, f, indent=1)
    step = env_step // agents if config["algo"] not in _offline() else update_step
    emitter.checkpoint_saved(path, step)
    if periodic:
        periodic_checkpoint_saved(path, step, "epoch_")
    return path


def _offline() -> list[str]:
    return [a for a, i in catalog.ALGORITHMS.items() if i["kind"] == catalog.OFFLINE]
