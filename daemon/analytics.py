"""A run's analytics manifest, ``analytics.json`` in its directory: where its analytics live.

Written for every run, mirrored or not: the daemon (RunManager) lists the run's TensorBoard
directories and the checkpoints its events announce; the run's mirror process
(daemon/mirror_process.py) adds where W&B and MLflow keep it. Both write under the manifest's lock,
each merging its part into what the file holds. docs/mirrors.md describes the format.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from typing import Any

from daemon.home import CHECKPOINTS_DIR, TENSORBOARD_DIR
from daemon.shim import write_json_atomic

log = logging.getLogger("mosaic.analytics")

ANALYTICS_FILE = "analytics.json"


def update_analytics(run_dir: str, checkpoints: list[dict[str, Any]] | None = None, **sections: Any) -> None:
    """Merge sections into the run's analytics.json (``artifacts.<name>``; None removes one) and add
    ``checkpoints`` ({path, step}, absolute paths) to its checkpoint list, under a lock: the daemon
    (checkpoints, TensorBoard) and the mirror (W&B, MLflow) both write it."""
    path = os.path.join(run_dir, ANALYTICS_FILE)
    try:
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                with open(path) as f:
                    manifest = json.load(f)
            except (FileNotFoundError, ValueError):
                manifest = {}
            write_json_atomic(path, merged(manifest, run_dir, checkpoints, sections, time.time()))
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


def merged(manifest: Any, run_dir: str, checkpoints: list[dict[str, Any]] | None,
           sections: dict[str, Any], now: float) -> dict[str, Any]:
    """The manifest with the sections and the checkpoints merged in (a manifest that is no object,
    an unreadable file's, is started again). Each checkpoint is listed once, by its absolute path."""
    if not isinstance(manifest, dict):
        manifest = {}
    manifest.setdefault("version", 1)
    manifest["run_id"] = os.path.basename(os.path.normpath(run_dir))
    artifacts = manifest.setdefault("artifacts", {})
    for name, value in sections.items():
        if value is None:
            artifacts.pop(name, None)
        else:
            artifacts[name] = value
    if checkpoints is not None:
        listed = artifacts.setdefault("checkpoints", {"directory": os.path.join(run_dir, CHECKPOINTS_DIR), "files": []})
        files = listed.setdefault("files", [])
        known = {f.get("path") for f in files}
        for point in checkpoints:
            saved = point.get("path") or ""
            saved = saved if os.path.isabs(saved) else os.path.join(run_dir, saved)
            if saved not in known:
                files.append({"path": saved, "step": point.get("step")})
                known.add(saved)
    manifest["updated_at"] = now
    return manifest


def new_checkpoints(saved: list[str], listed: int, last: dict[str, Any] | None,
                    stopped: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The checkpoints ({path, step}) a run's events announced since ``listed`` of its ``saved``
    paths were written down: a step is known for the last one saved (``last``, its event), and a
    stop's checkpoint (``stopped``, the run_stopped event) comes last."""
    new = [{"path": path, "step": last.get("step") if last and last.get("path") == path else None}
           for path in saved[listed:]]
    if stopped and stopped.get("checkpoint"):
        new.append({"path": stopped["checkpoint"], "step": stopped.get("step")})
    return new


def tensorboard_section(home_root: str, run_dir: str, name: str) -> dict[str, Any]:
    """analytics.json's TensorBoard part: ``mosaic tensorboard``'s export of the run, and the
    worker's own event files (its ``tensorboard/``) when it wrote some."""
    own = os.path.join(run_dir, TENSORBOARD_DIR)
    dirs = [{"kind": "export", "path": os.path.join(home_root, "tensorboard", name),
             "written_by": "mosaic tensorboard"}]
    try:
        if os.listdir(own):
            dirs.insert(0, {"kind": "worker", "path": own, "relative_path": TENSORBOARD_DIR})
    except OSError:
        pass
    return {"enabled": True, "log_dir": dirs[0]["path"], "dirs": dirs}
