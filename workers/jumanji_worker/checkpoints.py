"""A Jumanji worker checkpoint, for both trainers: a directory with the pickled training state
(``training_state.pkl``, written to a temporary name and renamed, so a crash mid-save never
leaves half a state) and ``mosaic_checkpoint.json`` saying what it was trained on."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

from workers.jumanji_worker import STATE_FILE, catalog
from workers.sdk.rundir import CHECKPOINT_META, checkpoint_dir


def save(path: Path, state: dict[str, Any], meta: dict[str, Any]) -> str:
    """Write ``state`` (picklable: numpy arrays, no device buffers) and ``meta``; the state file's path."""
    path.mkdir(parents=True, exist_ok=True)
    tmp = path / (STATE_FILE + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(state, f)
    os.replace(tmp, path / STATE_FILE)
    meta = {"worker": "jumanji", **meta, "mosaic_schema": catalog.SCHEMA_VERSION}
    (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=1))
    return str(path / STATE_FILE)


def load(checkpoint: str) -> dict[str, Any]:
    """The state saved in ``checkpoint`` (its directory, or the state file in it)."""
    with open(os.path.join(checkpoint_dir(checkpoint), STATE_FILE), "rb") as f:
        return pickle.load(f)
