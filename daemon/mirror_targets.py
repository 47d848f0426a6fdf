"""Where a mirror process (daemon/mirror_process.py) writes a run: W&B and MLflow, one Target each.

A target is opened (W&B's run resumed or made; MLflow's found by its ``mosaic.run_id`` tag or
made), written the points of the run's events, told its tags and note, given its final checkpoint
and closed; ``state`` is its part of the run's mirror.json, kept by the mirror. W&B and MLflow are
imported in ``open`` and the methods after it, in the mirror process only: never by the daemon or
the app. Secrets (W&B's key, MLflow's credentials) are read from the environment by the libraries
themselves; a tracking URI is written down without its user:password part (``public_uri``).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import urllib.parse
from typing import TYPE_CHECKING, Any

from daemon.mirror import mirror_root
from workers.sdk.modes import run_mode

if TYPE_CHECKING:
    from daemon.mirror_process import Mirror

RETRY_FIRST_SECONDS = 60.0          # a failed target is tried again after this, doubling...
RETRY_MAX_SECONDS = 900.0           # ...up to this
WANDB_STEP_METRIC = "mosaic/step"   # W&B's x axis: each point keeps its own step (define_metric)
ROW_SECONDS = 0.01                  # points of one step this close in time share one W&B row
MLFLOW_BATCH = 1000                 # MLflow's log_batch takes at most 1000 metrics
MLFLOW_EXPERIMENT = "mosaic"
# config keys the daemon changes during a run's life: not parameters (MLflow's are immutable)
_BOOKKEEPING = ("run_id", "continue_from", "logged_until", "logged_at_until")
_MLFLOW_KEY = re.compile(r"[^\w\-. :/]")


def public_uri(uri: str) -> str:
    """A tracking URI without its user:password (what may be written down)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))



class Target:
    name = ""

    def __init__(self, ctx: Mirror, settings: dict[str, Any], state: dict[str, Any]):
        self.ctx = ctx
        self.settings = settings
        self.state = state     # this target's part of mirror.json (offset, run id, where)
        self.opened = False
        self.retry_at = 0.0
        self.backoff = RETRY_FIRST_SECONDS

    @property
    def offset(self) -> int:
        return int(self.state.get("offset") or 0)

    def open(self) -> None: ...
    def write(self, points: list[tuple[str, int, float, float]]) -> None: ...
    def meta(self, tags: list[str], note: str) -> None: ...
    def checkpoint(self, path: str, step: Any) -> None: ...
    def close(self, state: str | None) -> None: ...
    def where(self) -> str:
        return ""


class WandbTarget(Target):
    name = "wandb"

    def open(self) -> None:
        root = os.path.join(mirror_root(self.ctx.home_root), "wandb")
        # every file W&B writes stays under the home (its cache, config and staging too)
        for var, sub in (("WANDB_DIR", ""), ("WANDB_CACHE_DIR", "cache"), ("WANDB_CONFIG_DIR", "config"),
                         ("WANDB_DATA_DIR", "data"), ("WANDB_ARTIFACT_DIR", "artifacts")):
            os.environ[var] = os.path.join(root, sub)
            os.makedirs(os.environ[var], exist_ok=True)
        import wandb
        mode = self.settings.get("mode") or "auto"
        if mode == "auto":
            mode = "online" if os.environ.get("WANDB_API_KEY") and _reachable(
                os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai") else "offline"
        ctx = self.ctx
        record = ctx.record.read() or {}
        run_id = self.state.get("run_id") or ctx.run_id.lower()
        self.run = wandb.init(
            project=self.settings.get("project") or "mosaic", entity=self.settings.get("entity") or None,
            id=run_id, name=ctx.name, resume="allow", mode=mode, dir=root,
            config=_config_of(ctx.config), tags=list(record.get("tags") or []) or None,
            notes=record.get("note") or None, job_type=run_mode(ctx.config),
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True,
                                    save_code=False, x_disable_meta=True, x_disable_machine_info=True))
        self.run.define_metric(WANDB_STEP_METRIC, hidden=True)
        self.run.define_metric("*", step_metric=WANDB_STEP_METRIC)
        self.state.update(run_id=run_id, project=self.run.project, entity=self.run.entity or None, mode=mode,
                          dir=os.path.dirname(self.run.dir))
        self._meta = (list(record.get("tags") or []), record.get("note") or "")

    def write(self, points):
        for row in wandb_rows(points):
            self.run.log(row)

    def meta(self, tags, note):
        if (tags, note) != self._meta:
            self.run.tags = tuple(tags)
            self.run.notes = note
            self._meta = (tags, note)

    def checkpoint(self, path, step):
        import wandb
        artifact = wandb.Artifact(f"{self.ctx.name}-checkpoint", type="model", metadata={"step": step})
        if _size_mb(path) <= self.ctx.artifact_max_mb:
            (artifact.add_dir if os.path.isdir(path) else artifact.add_file)(path)
        else:   # too big to copy: a reference to where it lies
            artifact.add_reference(f"file://{os.path.abspath(path)}", checksum=False)
        self.run.log_artifact(artifact)

    def close(self, state):
        self.run.finish(exit_code=0 if state in (None, "succeeded", "stopped") else 1)

    def where(self):
        s = self.state
        if s.get("mode") == "offline":
            return f"W&B offline run {s['run_id']} in {s['dir']} (upload it with: wandb sync {s['dir']})"
        return f"W&B run {s.get('entity') or ''}/{s['project']}/{s['run_id']}".replace("run /", "run ")

    def analytics(self) -> dict[str, Any]:
        s = self.state
        return {"enabled": True, "run_id": s.get("run_id"), "project": s.get("project"), "entity": s.get("entity"),
                "mode": s.get("mode"), "dir": s.get("dir"),
                "run_path": "/".join(x for x in (s.get("entity"), s.get("project"), s.get("run_id")) if x)}


class MlflowTarget(Target):
    name = "mlflow"

    def open(self) -> None:
        root = os.path.join(mirror_root(self.ctx.home_root), "mlflow")
        os.makedirs(root, exist_ok=True)
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
        # an unreachable server: a second of retries, not MLflow's minutes (this mirror tries again
        # after its own back-off, RETRY_FIRST_SECONDS)
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
        from mlflow.entities import Param, RunTag
        from mlflow.tracking import MlflowClient
        uri = self.settings.get("tracking_uri") or f"sqlite:///{os.path.join(root, 'mlflow.db')}"
        self.client = MlflowClient(uri)
        name = self.settings.get("experiment") or MLFLOW_EXPERIMENT
        with open(os.path.join(root, ".lock"), "a") as lock:
            # two mirrors making a fresh sqlite store's tables at once trip on each other
            fcntl.flock(lock, fcntl.LOCK_EX)
            experiment = self.client.get_experiment_by_name(name)
            if experiment is None:
                local = uri.startswith(("sqlite:", "file:", "/")) or "://" not in uri
                experiment_id = self.client.create_experiment(
                    name, artifact_location=f"file://{os.path.join(root, 'artifacts')}" if local else None)
            else:
                experiment_id = experiment.experiment_id
        run_id = self.state.get("run_id")
        if run_id is None:   # the run's mirror.json is gone (or this is its first): find it by its tag
            found = self.client.search_runs([experiment_id], f"tags.`mosaic.run_id` = '{self.ctx.run_id}'",
                                            max_results=1)
            run_id = found[0].info.run_id if found else None
        if run_id is None:
            run = self.client.create_run(experiment_id, run_name=self.ctx.name,
                                         tags={"mosaic.run_id": self.ctx.run_id, "mosaic.worker": self.ctx.worker})
            run_id = run.info.run_id
            params = [Param(k, v) for k, v in _flat_params(self.ctx.config).items()]
            for start in range(0, len(params), 100):
                self.client.log_batch(run_id, params=params[start:start + 100])
        self.RunTag = RunTag
        self.run_id = run_id
        self.state.update(run_id=run_id, experiment=name, experiment_id=experiment_id, tracking_uri=public_uri(uri))
        self._meta = None

    def write(self, points):
        from mlflow.entities import Metric
        metrics = [Metric(_MLFLOW_KEY.sub("_", tag), value, int(round(t * 1000)), int(step or 0))
                   for tag, step, value, t in points]
        for start in range(0, len(metrics), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + MLFLOW_BATCH])

    def meta(self, tags, note):
        if (tags, note) != self._meta:
            self.client.log_batch(self.run_id, tags=[
                self.RunTag("mosaic.tags", ",".join(tags)), self.RunTag("mosaic.note", note),
                self.RunTag("mlflow.note.content", note)] + [self.RunTag(f"mosaic.tag.{t}", "true") for t in tags])
            self._meta = (tags, note)

    def checkpoint(self, path, step):
        if _size_mb(path) > self.ctx.artifact_max_mb:
            self.client.set_tag(self.run_id, "mosaic.checkpoint", os.path.abspath(path))
        elif os.path.isdir(path):
            self.client.log_artifacts(self.run_id, path, f"checkpoints/{os.path.basename(path.rstrip(os.sep))}")
        else:
            self.client.log_artifact(self.run_id, path, "checkpoints")
        self.client.set_tag(self.run_id, "mosaic.checkpoint_step", str(step))

    def close(self, state):
        status = {"succeeded": "FINISHED", "stopped": "FINISHED", "cancelled": "KILLED", None: "FINISHED"}
        self.client.set_terminated(self.run_id, status.get(state, "FAILED"))

    def where(self):
        s = self.state
        return f"MLflow run {s['run_id']} in experiment {s['experiment']} at {s['tracking_uri']}"

    def analytics(self) -> dict[str, Any]:
        s = self.state
        return {"enabled": True, "run_id": s.get("run_id"), "experiment": s.get("experiment"),
                "experiment_id": s.get("experiment_id"), "tracking_uri": s.get("tracking_uri")}


def wandb_rows(points: list[tuple[str, int, float, float]]) -> list[dict[str, Any]]:
    """The points as W&B rows, in order: the points of one step written within ROW_SECONDS of the
    row's first share it, each tag once; every row keeps its step (WANDB_STEP_METRIC) and time."""
    rows: list[dict[str, Any]] = []
    row: dict[str, Any] = {}
    first_t = 0.0
    step = None
    for tag, point_step, value, t in points:
        if row and (point_step != step or tag in row or abs(t - first_t) > ROW_SECONDS):
            rows.append(row)
            row = {}
        if not row:
            step, first_t = point_step, t
            row = {WANDB_STEP_METRIC: step, "_timestamp": t}
        row[tag] = value
    if row:
        rows.append(row)
    return rows


def _reachable(url: str, timeout: float = 3.0) -> bool:
    import socket
    parts = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)),
                                      timeout=timeout):
            return True
    except OSError:
        return False


def _config_of(config: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in _BOOKKEEPING}


def _flat_params(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in _config_of(config).items() if not prefix else config.items():
        name = _MLFLOW_KEY.sub("_", f"{prefix}{key}")
        if isinstance(value, dict) and value:
            out.update(_flat_params(value, name + "."))
        else:
            out[name] = json.dumps(value)[:6000] if not isinstance(value, str) else value[:6000]
    return out


def _size_mb(path: str) -> float:
    if os.path.isdir(path):
        total = 0
        for folder, _dirs, files in os.walk(path):
            total += sum(os.path.getsize(os.path.join(folder, f)) for f in files)
        return total / 1e6
    return os.path.getsize(path) / 1e6
