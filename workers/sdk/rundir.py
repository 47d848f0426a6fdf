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


# Set by the daemon for every worker, from settings.json: how often a worker that saves on a clock
# (CleanRL's scripts) saves a resume checkpoint on the way, in minutes (0: only when stopped), and
# how many resume checkpoints a run keeps (the newest N, plus the best: prune_checkpoints).
CHECKPOINT_MINUTES_ENV = "MOSAIC_CHECKPOINT_MINUTES"
KEEP_CHECKPOINTS_ENV = "MOSAIC_KEEP_CHECKPOINTS"
CHECKPOINT_MINUTES_DEFAULT = 10.0
KEEP_CHECKPOINTS_DEFAULT = 3

# Beside a checkpoint a stop saved: its manifest (``<checkpoint>.manifest.json``): the run, the
# step, the bytes and their sha256, checked before the run continues from it (daemon/runs.py).
MANIFEST_SUFFIX = ".manifest.json"
# Beside a checkpoint another run still has to copy (a PBT donor's, daemon/pbt.py): ``<checkpoint>.pinned``;
# retention (``prune_checkpoints``) never deletes a pinned checkpoint, whatever its run does meanwhile.
PIN_SUFFIX = ".pinned"


def _files_of(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    return sorted(os.path.join(d, f) for d, _, files in os.walk(path) for f in files)


def _digest(path: str) -> tuple[str, int]:
    """sha256 over a checkpoint's files (names relative to it, then bytes) and their total size."""
    import hashlib
    digest, size = hashlib.sha256(), 0
    for name in _files_of(path):
        digest.update(os.path.relpath(name, path).encode() + b"\0")
        with open(name, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
    return digest.hexdigest(), size


def write_state(path: str, state: dict[str, Any]) -> str:
    """A stop's state as JSON at ``path`` (relative to the run directory), written to a temporary
    name and renamed (a crash mid-save leaves the old one); its absolute path."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(path + ".tmp", path)
    return os.path.abspath(path)


# the libraries whose versions a manifest records, when the process that saved has them loaded
LIBRARIES = {"torch": "torch", "jax": "jax", "ray": "ray", "tianshou": "tianshou", "xuance": "xuance",
             "cleanrl": "cleanrl", "jumanji": "jumanji", "gymnasium": "gymnasium", "gym": "gym", "numpy": "numpy",
             "stable_baselines3": "stable-baselines3", "balrog": "balrog"}


def loaded_versions() -> dict[str, str]:
    """The versions of the libraries this process has imported (what a checkpoint was made with)."""
    import sys
    from importlib import metadata
    versions = {}
    for module, dist in LIBRARIES.items():
        if module in sys.modules:
            try:
                versions[module] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
    return versions


def write_manifest(path: str, step: int, objective: float | None = None) -> str:
    """The manifest of a checkpoint (a file or a directory) just saved: which run and worker it is
    of (the run's config.json in the cwd), its step, its size and sha256, the versions of the
    libraries that made it, and the objective it is kept by (``prune_checkpoints``: the mean return
    when it was saved); written atomically."""
    path = os.path.abspath(path)
    try:
        with open("config.json", encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    digest, size = _digest(path)
    manifest = {"checkpoint": path, "step": int(step), "bytes": size, "sha256": digest,
                **{k: config.get(k) for k in ("run_id", "worker", "algo", "env")}, "versions": loaded_versions()}
    if objective is not None:
        manifest["objective"] = float(objective)
    target = path.rstrip(os.sep) + MANIFEST_SUFFIX
    with open(target + ".tmp", "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    os.replace(target + ".tmp", target)
    return target


def prune_checkpoints(folder: str, prefix: str, keep: int) -> list[str]:
    """Retention: of the checkpoints named ``prefix*`` in ``folder`` that have a manifest, keep the
    ``keep`` newest by step plus the best by objective, delete the others (manifest first, so a
    half-deleted one is never taken for whole), but never a pinned one (``PIN_SUFFIX``); the paths
    deleted. ``keep`` 0: keep all."""
    import shutil
    if keep <= 0:
        return []
    saved = []
    for name in os.listdir(folder):
        if name.startswith(prefix) and name.endswith(MANIFEST_SUFFIX):
            try:
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    manifest = json.load(f)
                saved.append((int(manifest["step"]), manifest.get("objective"), manifest["checkpoint"],
                              os.path.join(folder, name)))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    saved.sort()
    kept = {entry[2] for entry in saved[-keep:]}
    scored = [entry for entry in saved if isinstance(entry[1], (int, float))]
    if scored:
        kept.add(max(scored, key=lambda entry: (entry[1], entry[0]))[2])
    deleted = []
    for _, _, checkpoint, manifest in saved:
        if checkpoint not in kept and not os.path.exists(checkpoint.rstrip(os.sep) + PIN_SUFFIX):
            os.remove(manifest)
            if os.path.isdir(checkpoint):
                shutil.rmtree(checkpoint, ignore_errors=True)
            elif os.path.exists(checkpoint):
                os.remove(checkpoint)
            deleted.append(checkpoint)
    return deleted


def keep_checkpoints() -> int:
    """The home's keep_checkpoints, as the daemon passed it (KEEP_CHECKPOINTS_ENV)."""
    try:
        return int(os.environ.get(KEEP_CHECKPOINTS_ENV, KEEP_CHECKPOINTS_DEFAULT))
    except ValueError:
        return KEEP_CHECKPOINTS_DEFAULT


def periodic_checkpoint_saved(path: str, step: int, prefix: str, keep: int | None = None,
                              objective: float | None = None) -> None:
    """After a worker saved a checkpoint on the way (``prefix``: the name its periodic ones start
    with, "epoch_", "iter_"): its manifest, so that a run that fails later continues from it,
    checked; then retention (``keep``: default the home's keep_checkpoints)."""
    write_manifest(path, step, objective)
    prune_checkpoints(os.path.dirname(os.path.abspath(path).rstrip(os.sep)), prefix,
                      keep_checkpoints() if keep is None else keep)


def check_manifest(path: str, run: dict[str, Any]) -> str | None:
    """None when the checkpoint at ``path`` is whole and the run's own; else the problem, in words."""
    target = path.rstrip(os.sep) + MANIFEST_SUFFIX
    try:
        with open(target, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError:
        return f"{path} has no manifest ({os.path.basename(target)})"
    except (OSError, ValueError) as exc:
        return f"{os.path.basename(target)} cannot be read: {exc}"
    for key in ("run_id", "worker", "algo", "env"):
        if manifest.get(key) != run.get(key if key != "run_id" else "id"):
            return f"{path} is a checkpoint of another run ({key} {manifest.get(key)!r}, not {run.get(key if key != 'run_id' else 'id')!r})"
    if not os.path.exists(path):
        return f"{path} is gone"
    digest, size = _digest(path)
    if size != manifest.get("bytes") or digest != manifest.get("sha256"):
        return (f"{path} is torn: {size} bytes where {manifest.get('bytes')} were saved"
                if size != manifest.get("bytes") else f"{path} changed since it was saved (sha256 differs)")
    return None


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
        """A save was made after ``done`` units: the next is due from here."""
        self.last_saved = done

    def final_due(self, done: int) -> bool:
        """At the end, after ``done`` units: save the final state?"""
        return self.last_saved != done and done > self.start
