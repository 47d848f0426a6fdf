"""Submitting a run: its config validated and resolved (worker, seed, checkpoint, dataset,
placement), its scheduler asked where it is a cluster's, its directory and record made.

``Submission`` is the part of ``RunManager`` (daemon/runs.py) that takes new runs; a queued
run is started by ``RunManager.schedule``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from typing import Any, Callable

from daemon import protocol as P
from daemon.discovery import resolve_worker
from daemon.home import CHECKPOINTS_DIR, CONFIG_FILE, EVENTS_FILE, TENSORBOARD_DIR, Home
from daemon.placement import PlacementError, ray_relay
from daemon.placement import backend_for as placement_backend
from daemon.record import RunRecord, backend_of
from daemon.store import Store, StoreError, new_ulid
from workers.sdk.config import ConfigError, draw_seed
from workers.sdk.descriptor import WorkerDescriptor


def on_cluster(run: RunRecord) -> bool:
    """The run's placement is a cluster's scheduler (Slurm, Ray), not this machine."""
    return backend_of(run) != "local"


class Submission:
    """Validating and submitting runs; the RunManager it is part of gives it what is declared here."""
    home: Home
    store: Store
    workers: dict[str, WorkerDescriptor]
    default_placement: dict[str, Any]
    stop_grace_seconds: float
    on_run: Callable[..., None]

    def schedule(self) -> None:   # RunManager's
        raise NotImplementedError

    def validate(self, config: dict[str, Any]) -> tuple[WorkerDescriptor, dict[str, Any]]:
        if not isinstance(config, dict):
            raise ConfigError("", "a run config must be a JSON object")
        name = config.get("worker")
        if not isinstance(name, str):
            raise ConfigError("worker", "is required")
        desc = resolve_worker(self.workers, name)
        config = {**config, "worker": desc.name}
        # the names users type (``sac``, ``ppo`` for PPO, learning_starts) made the
        # worker's own, so the run record stores what the worker runs
        config = desc.canonical_config(config)
        config = draw_seed(config)
        if isinstance(config.get("checkpoint"), str) and config["checkpoint"]:
            # resolved first, so every worker validates an absolute, existing path
            config = {**config, "checkpoint": self._checkpoint_path(config["checkpoint"])}
        if isinstance(config.get("dataset"), str) and config["dataset"]:
            config = {**config, "dataset": self._dataset_path(config["dataset"], config.get("env"))}
        return desc, desc.validate(config)

    def _dataset_path(self, ref: str, env: Any) -> str:
        """The absolute path of the dataset an offline run names: another run's recorded
        dataset.hdf5, by run name or id (``run:`` in front is allowed), recorded on the
        same env. An absolute path (a run already resolved, a clone) is taken as given."""
        if os.path.isabs(ref):
            if not os.path.isfile(ref):
                raise ConfigError("dataset", f"no such file: {ref}")
            return ref
        name = ref[4:] if ref.startswith("run:") else ref
        matches = self.store.resolve(name)
        if len(matches) != 1:
            raise ConfigError("dataset", f"{name!r} names {len(matches)} runs, not one")
        source = matches[0]
        dataset = (source["summary"] or {}).get("dataset")
        if not dataset and (source.get("config") or {}).get("record") and source["state"] not in P.FINAL_STATES:
            raise ConfigError("dataset", f"run {source['name']} records a dataset but has finished no episode "
                                         f"yet (each is saved as it ends)")
        if not dataset or not os.path.isfile(dataset.get("path") or ""):
            raise ConfigError("dataset", f"run {source['name']} has recorded no dataset "
                                         f"(a run records one with \"record\": {{\"episodes\": N}})")
        if not dataset.get("transitions"):
            raise ConfigError("dataset", f"run {source['name']}'s dataset holds no transitions (no episode "
                                         f"finished while it recorded)")
        if source["env"] != env:
            raise ConfigError("dataset", f"run {source['name']} recorded {source['env']}, not {env}")
        return dataset["path"]

    def datasets(self, env: str | None = None) -> list[dict[str, Any]]:
        """The runs that recorded a dataset (on ``env``), newest first: the form's choices."""
        found = []
        for run in reversed(self.store.list()):
            dataset = (run["summary"] or {}).get("dataset")
            if dataset and (env is None or run["env"] == env):
                found.append({"run": run["id"], "name": run["name"], "worker": run["worker"], "algo": run["algo"],
                              "env": run["env"], **dataset})
        return found

    def _checkpoint_path(self, ref: str) -> str:
        """Where a config's checkpoint is, as an absolute path.

        ``run:NAME`` (or ``run:ID-PREFIX``) is that run's latest checkpoint. A
        relative path is inside the home and may not climb out of it; an
        absolute path is the user's explicit choice and is taken as given.
        """
        if ref.startswith("run:"):
            matches = self.store.resolve(ref[4:])
            if len(matches) != 1:
                raise ConfigError("checkpoint", f"{ref[4:]!r} names {len(matches)} runs, not one")
            saved = (matches[0]["summary"] or {}).get("checkpoints") or []
            if not saved:
                raise ConfigError("checkpoint", f"run {matches[0]['name']} has saved no checkpoint")
            path = saved[-1]
            if not os.path.isabs(path):
                path = str(self.home.run_dir(matches[0]["id"]) / path)
            return path
        if os.path.isabs(ref):
            path = os.path.normpath(ref)
        else:
            path = os.path.normpath(os.path.join(self.home.root, ref))
            if os.path.commonpath([path, str(self.home.root)]) != str(self.home.root):
                raise ConfigError("checkpoint", "a relative path must stay inside the home; "
                                                "give an absolute path to use a file elsewhere")
        if not os.path.exists(path):
            raise ConfigError("checkpoint", f"no such file: {path}")
        return path

    def _unique_name(self, base: str) -> str:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", base).strip("._-")[:56] or "run"
        n = 1
        while self.store.name_taken(f"{base}-{n}"):
            n += 1
        return f"{base}-{n}"

    def with_placement(self, config: dict[str, Any]) -> dict[str, Any]:
        """The config with the home's default placement (settings.json) where it names none."""
        if self.default_placement and isinstance(config, dict) and "placement" not in config:
            return {**config, "placement": self.default_placement}
        return config

    def placement_check(self, config: dict[str, Any]) -> Callable[[], None] | None:
        """For a cluster run, the question to its scheduler: a call that raises ConfigError (one line)
        unless it would take the job (an unknown partition, a request it refuses, no controller).
        It waits for the answer (seconds when a controller is down): the server calls it off the
        loop. What needs no scheduler (the config, a requeue its worker cannot honour) is said now."""
        desc, config = self.validate(self.with_placement(config))
        if not on_cluster({"config": config}):
            return None
        placement = config["placement"]
        refusal = placement.get("requeue") and desc.stop_refusal(config)
        if refusal:
            raise ConfigError("placement", f"requeue: {refusal}, so it cannot go on in a new job")
        refusal = ray_relay.refusal(config)   # a home the Ray nodes do not share: what cannot work
        if refusal:
            raise ConfigError("placement", refusal)
        try:
            backend = placement_backend(placement["backend"], placement)
        except PlacementError as exc:
            raise ConfigError("placement", str(exc)) from None

        def ask() -> None:
            try:
                backend.check("check", str(self.home.root), placement, [sys.executable, "-m", "daemon.shim"],
                              self.stop_grace_seconds)
            except PlacementError as exc:
                raise ConfigError("placement", str(exc)) from None
        return ask

    def submit(self, config: dict[str, Any], sweep: str | None = None, trial: int | None = None,
               checked: bool = False) -> dict[str, Any]:
        """A new run (queued, then started). ``checked``: placement_check's question was asked already."""
        config = self.with_placement(config)
        desc, config = self.validate(config)
        ask = None if checked else self.placement_check(config)
        if ask is not None:
            ask()
        if config.get("name"):
            if self.store.name_taken(config["name"]):
                raise ConfigError("name", f"a run named {config['name']!r} exists already")
            name = config["name"]
        else:
            name = self._unique_name(f"{config['algo']}-{config['env']}")
        run_id = new_ulid()
        # continue_from is the daemon's (mosaic continue): a submitted config is always a new run,
        # even one copied from a continued run's record (a checkpoint to start from is ``checkpoint``)
        config.update(run_id=run_id, name=name, continue_from=None, logged_until=None, logged_at_until=None)
        run_dir = self.home.run_dir(run_id)
        try:
            run_dir.mkdir(parents=True)
            (run_dir / CHECKPOINTS_DIR).mkdir()
            (run_dir / TENSORBOARD_DIR).mkdir()
            with open(run_dir / CONFIG_FILE, "w") as f:
                json.dump(config, f, indent=2)
            (run_dir / EVENTS_FILE).touch()
        except OSError as exc:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise StoreError(f"cannot create the run directory {run_dir}: {exc.strerror}") from None
        summary = {"total_steps": config.get("steps")}
        run = self.store.create_run({
            "id": run_id, "name": name, "worker": config["worker"], "algo": config["algo"],
            "env": config["env"], "config": config, "state": P.QUEUED, "created_at": time.time(),
            "summary": summary, "sweep": sweep, "trial": trial,
        })
        self.on_run(run, run_id, run["rev"])
        self.schedule()
        return self.store.get(run_id)
