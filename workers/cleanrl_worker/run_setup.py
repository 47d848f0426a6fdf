"""What both modes of the CleanRL worker process share (training in ``cli``,
eval in ``evaluate``): where a run's files go, the algorithm's short name, the
and the frames request, in one module both import.
"""
from __future__ import annotations

import os

from workers.cleanrl_worker import catalog
from workers.sdk.frames import frames_request  # noqa: F401  (cli and evaluate import it from here)
from workers.sdk.rundir import CHECKPOINT_DIR, TENSORBOARD_DIR  # noqa: F401  (cli and evaluate import them from here)


def algo_name(algo: str) -> str:
    """Short name of the algorithm: the script's file name without .py."""
    return os.path.basename(algo)[:-3] if catalog.is_script_path(algo) else algo
