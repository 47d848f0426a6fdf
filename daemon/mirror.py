"""A run mirrored to W&B and MLflow, from the daemon's side: ``python -m daemon.mirror RUN_DIR``.

One process a mirrored run, started by the daemon (RunManager) at nice 19 when the run starts and
again when a restarted daemon adopts it; the worker is never touched. It follows the run's
``events.jsonl`` (the file the daemon ingests) from the byte offset each target has mirrored,
kept in the run's ``mirror.json``, and hands the points to each target: every scalar and every
episode (as ``episode/return``, ``episode/length``, ``episode/return/<agent>``: the points of
``mosaic metrics``), the run's config, tags and note, and at the end its last checkpoint. It ends
once the store records the run as ended and everything is mirrored. It takes ``mirror.lock``: a
second mirror of the run (a daemon SIGKILLed and restarted while the first one lives on) finds
it held and leaves, so no point is mirrored twice. ``--once`` mirrors a finished run and stops
(``mosaic export RUN --wandb|--mlflow``): the same code.

A target that fails (no network, a bad URI, an exception) is kept once in mirror.json, which the
daemon says on the run (a ``warning`` event and the run's summary: RunManager._mirror_warnings),
its offset kept, and tried again only after a back-off (60 s, doubling, at
most 15 min): the run is never slowed or stopped by it. Secrets (W&B's key, MLflow's
credentials) are read from the environment by the libraries themselves and never written
anywhere by this module (tracking URIs are written without their user:password part).

W&B and MLflow are imported in this process only, never by the daemon or the app: the module's
top level is light, and the daemon imports it for ``spawn``, ``run_targets`` and the analytics
manifest (``update_analytics``).
"""
from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Any

from daemon import protocol as P
from daemon.home import CHECKPOINTS_DIR, CONFIG_FILE, EVENTS_FILE, TENSORBOARD_DIR, Home
from daemon.ingest import split_events
from daemon.shim import write_json_atomic
from daemon.store import read_run
from workers.sdk import telemetry as tm

log = logging.getLogger("mosaic.mirror")

TARGETS = P.MIRROR_TARGETS
STATE_FILE = "mirror.json"          # per target: the byte offset mirrored, its run id, where it went
LOCK_FILE = "mirror.lock"           # held by the run's one mirror process
LOG_FILE = "mirror.log"             # the mirror process's own output
ANALYTICS_FILE = "analytics.json"   # the run's analytics manifest (update_analytics)
PAGE_BYTES = 4 * 1024 * 1024
POLL_SECONDS = 1.0
META_SECONDS = 5.0                  # tags and note read again from the store this often
RETRY_FIRST_SECONDS = 60.0          # a failed target is tried again after this, doubling...
RETRY_MAX_SECONDS = 900.0           # ...up to this
ARTIFACT_MAX_MB = 512               # a final checkpoint bigger than this is recorded by path, not copied
WANDB_STEP_METRIC = "mosaic/step"   # W&B's x axis: each point keeps its own step (define_metric)
ROW_SECONDS = 0.01                  # points of one step this close in time share one W&B row
MLFLOW_BATCH = 1000                 # MLflow's log_batch takes at most 1000 metrics
MLFLOW_EXPERIMENT = "mosaic"
# config keys the daemon changes during a run's life: not parameters (MLflow's are immutable)
_BOOKKEEPING = ("run_id", "continue_from", "logged_until", "logged_at_until")
_MLFLOW_KEY = re.compile(r"[^\w\-. :/]")


# -- settings ----------------------------------------------------------------------------------
def check_settings(value: Any) -> str | None:
    """What is wrong with settings.json's ``mirrors`` (None: nothing)."""
    if not isinstance(value, dict):
        return "mirrors must be an object: {\"wandb\": {...}, \"mlflow\": {...}}"
    known = {"wandb": ("enabled", "project", "entity", "mode"),
             "mlflow": ("enabled", "tracking_uri", "experiment"), "artifact_max_mb": ()}
    for target, section in value.items():
        if target not in known:
            return f"mirrors: unknown key {target!r} (known: {', '.join(known)})"
        if target == "artifact_max_mb":
            if not isinstance(section, (int, float)) or isinstance(section, bool) or section < 0:
                return "mirrors.artifact_max_mb must be a number >= 0"
            continue
        if not isinstance(section, dict):
            return f"mirrors.{target} must be an object"
        for key, item in section.items():
            if key not in known[target]:
                return f"mirrors.{target}: unknown key {key!r} (known: {', '.join(known[target])})"
            if key == "enabled" and not isinstance(item, bool):
                return f"mirrors.{target}.enabled must be true or false"
            if key == "mode" and item not in ("auto", "online", "offline"):
                return f"mirrors.{target}.mode must be auto, online or offline"
            if key != "enabled" and item is not None and not isinstance(item, str):
                return f"mirrors.{target}.{key} must be a string or null"
    return None


def home_settings(home: Home) -> dict[str, Any]:
    """settings.json's ``mirrors`` ({} when it has none or cannot be read: the daemon checked it at start)."""
    try:
        with open(home.settings_file) as f:
            value = json.load(f).get("mirrors") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return value if isinstance(value, dict) else {}


def run_targets(config: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Where a run is mirrored: its config's ``mirror`` list, else the targets the home enables."""
    asked = config.get("mirror")
    if asked is not None:
        return [t for t in TARGETS if t in asked]
    return [t for t in TARGETS if isinstance(settings.get(t), dict) and settings[t].get("enabled")]


def mirror_root(home_root: str) -> str:
    return os.path.join(home_root, "mirrors")


def public_uri(uri: str) -> str:
    """A tracking URI without its user:password (what may be written down)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# -- the daemon's side -------------------------------------------------------------------------
# the mirror's niceness: the lowest priority, so it takes only CPU the run leaves (its points wait;
# on 2 cores at the workers' nice 10 it cost CleanRL PPO a fifth of its steps/s)
MIRROR_NICE = 19


def spawn(home: Home, run_dir: str, nice: int = MIRROR_NICE, once: bool = False) -> subprocess.Popen | None:
    """Start the run's mirror process (it waits while another one holds the run's lock)."""
    command = [sys.executable, "-m", "daemon.mirror", run_dir, "--home", str(home.root)]
    if once:
        command.append("--once")
    try:
        with open(os.path.join(run_dir, LOG_FILE), "ab") as out:
            return subprocess.Popen(command, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                    preexec_fn=(lambda: os.nice(nice)) if nice else None)
    except OSError as exc:
        log.warning("cannot start the mirror of %s: %s", run_dir, exc)
        return None


def warnings(run_dir: str) -> list[tuple[str, str]]:
    """(target, message): what the run's targets failed with, as kept in its mirror.json; the
    daemon says each on the run (RunManager._mirror_warnings)."""
    try:
        with open(os.path.join(run_dir, STATE_FILE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return []
    return [(target, section["warned"]) for target, section in state.items()
            if isinstance(section, dict) and isinstance(section.get("warned"), str)]


def unfinished(runs_dir: str) -> list[str]:
    """The runs whose mirror.json has a target not closed at the end of the run's events: a mirror
    that was killed (with its daemon, its machine) after its run ended. Cheap: one small file a run
    that was ever mirrored, a stat of the others."""
    found = []
    try:
        entries = list(os.scandir(runs_dir))
    except OSError:
        return found
    for entry in entries:
        try:
            with open(os.path.join(entry.path, STATE_FILE)) as f:
                state = json.load(f)
            size = os.path.getsize(os.path.join(entry.path, EVENTS_FILE))
        except (OSError, ValueError):
            continue
        if any(isinstance(t, dict) and t.get("closed_offset") != size for t in state.values()):
            found.append(entry.name)
    return found


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
                listed = artifacts.setdefault("checkpoints", {
                    "directory": os.path.join(run_dir, CHECKPOINTS_DIR), "files": []})
                files = listed.setdefault("files", [])
                known = {f.get("path") for f in files}
                for point in checkpoints:
                    saved = point.get("path") or ""
                    saved = saved if os.path.isabs(saved) else os.path.join(run_dir, saved)
                    if saved not in known:
                        files.append({"path": saved, "step": point.get("step")})
                        known.add(saved)
            manifest["updated_at"] = time.time()
            write_json_atomic(path, manifest)
    except OSError as exc:
        log.warning("cannot write %s: %s", path, exc)


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


# -- reading the run ---------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    """A point's value as the daemon's history and the exports read it (telemetry.float_of); None
    for what is no number at all (a missing value, a stray string): not mirrored."""
    if value is None or (isinstance(value, str) and value not in tm.NONFINITE):
        return None
    return tm.float_of(value)


def read_page(path: str, offset: int) -> tuple[int, list[dict[str, Any]]]:
    """The complete lines from ``offset`` (a page), parsed as the daemon's ingest parses them;
    returns the offset after them. A line still being written is left for the next read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return offset, []
    try:
        data = os.pread(fd, PAGE_BYTES, offset)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            if len(data) < PAGE_BYTES:
                return offset, []
            # one line longer than a page (the ingest refuses it as over-long): step over it
            skip = offset + len(data)
            while True:
                more = os.pread(fd, PAGE_BYTES, skip)
                if not more:
                    return offset, []
                nl = more.find(b"\n")
                if nl >= 0:
                    return skip + nl + 1, []
                skip += len(more)
    finally:
        os.close(fd)
    _raws, parsed, used, _long = split_events(data[:cut])
    return offset + (used or cut), parsed


def points_of(events: list[dict[str, Any]]) -> tuple[list[tuple[str, int, float, float]], list[dict[str, Any]]]:
    """(tag, step, value, t) of every scalar and episode tag, as the daemon's metrics method gives
    them, and the checkpoints the events announce ({path, step}) with the seams of a continued run
    among them ({"restarted": step}: what came before was an earlier process's)."""
    points = []
    checkpoints = []
    for ev in events:
        kind = ev.get("type")
        if kind == tm.SCALAR:
            value = _number(ev.get("value"))
            if value is not None:
                points.append((ev["tag"], ev.get("step"), value, ev.get("t")))
        elif kind == tm.EPISODE:
            for tag, raw in tm.episode_scalars(ev):
                value = _number(raw)
                if value is not None:
                    points.append((tag, ev.get("step"), value, ev.get("t")))
        elif kind == tm.CHECKPOINT_SAVED:
            checkpoints.append({"path": ev.get("path"), "step": ev.get("step")})
        elif kind == tm.RUN_STOPPED and ev.get("checkpoint"):
            checkpoints.append({"path": ev["checkpoint"], "step": ev.get("step")})
        elif kind == tm.RESTARTED:
            checkpoints.append({"restarted": ev.get("step")})
    return points, checkpoints


class RunRecord:
    """The run's row in the store (state, tags, note), read-only, beside the daemon."""

    def __init__(self, home: Home, run_id: str):
        self.home = home
        self.run_id = run_id

    def read(self) -> dict[str, Any] | None:
        """The run's state, tags and note; None once the run (or its whole home) is gone."""
        if not os.path.exists(self.home.db) or not os.path.isdir(self.home.run_dir(self.run_id)):
            return None
        try:
            row = read_run(self.home.db, self.run_id, ("state", "tags", "note", "name"))
        except sqlite3.Error:
            return {}   # busy or unreadable this time: nothing known, nothing decided
        return None if row is None else {**row, "note": row["note"] or ""}


# -- targets -----------------------------------------------------------------------------------
class Target:
    name = ""

    def __init__(self, ctx: "Mirror", settings: dict[str, Any], state: dict[str, Any]):
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
            notes=record.get("note") or None, job_type=ctx.config.get("mode") or "train",
            settings=wandb.Settings(silent=True, console="off", x_disable_stats=True, disable_git=True,
                                    save_code=False, x_disable_meta=True, x_disable_machine_info=True))
        self.run.define_metric(WANDB_STEP_METRIC, hidden=True)
        self.run.define_metric("*", step_metric=WANDB_STEP_METRIC)
        self.state.update(run_id=run_id, project=self.run.project, entity=self.run.entity or None, mode=mode,
                          dir=os.path.dirname(self.run.dir))
        self._meta = (list(record.get("tags") or []), record.get("note") or "")

    def write(self, points):
        row: dict[str, Any] = {}
        first_t = None
        step = None
        for tag, point_step, value, t in points:
            if row and (point_step != step or tag in row or abs(t - first_t) > ROW_SECONDS):
                self.run.log(row)
                row = {}
            if not row:
                step, first_t = point_step, t
                row = {WANDB_STEP_METRIC: step, "_timestamp": t}
            row[tag] = value
        if row:
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


# -- the process -------------------------------------------------------------------------------
class Mirror:
    def __init__(self, run_dir: str, home: Home, targets: list[str] | None, once: bool):
        self.run_dir = os.path.abspath(run_dir)
        self.home = home
        self.home_root = str(home.root)
        self.once = once
        with open(os.path.join(self.run_dir, CONFIG_FILE)) as f:
            self.config = json.load(f)
        self.run_id = self.config.get("run_id") or os.path.basename(self.run_dir)
        self.name = self.config.get("name") or self.run_id
        self.worker = self.config.get("worker") or ""
        self.events = os.path.join(self.run_dir, EVENTS_FILE)
        self.record = RunRecord(home, self.run_id)
        settings = home_settings(home)
        self.artifact_max_mb = float(settings.get("artifact_max_mb", ARTIFACT_MAX_MB))
        self.state_path = os.path.join(self.run_dir, STATE_FILE)
        self.settings = settings
        self.names = targets if targets is not None else run_targets(self.config, settings)
        self.saved: dict[str, Any] = {}
        self.targets: list[Target] = []
        self._meta_at = 0.0
        self.stopping = False   # SIGTERM: leave at the next page's end, W&B flushed, the offsets kept

    def load(self) -> None:
        """The targets, from where mirror.json says each one got to (read under the lock: a mirror
        that held it before moved the offsets on)."""
        try:
            with open(self.state_path) as f:
                self.saved = json.load(f)
        except (FileNotFoundError, ValueError):
            self.saved = {}
        kinds = {"wandb": WandbTarget, "mlflow": MlflowTarget}
        self.targets = [kinds[t](self, self.settings.get(t) or {}, self.saved.setdefault(t, {})) for t in self.names]

    def save(self) -> None:
        write_json_atomic(self.state_path, self.saved)

    def fail(self, target: Target, what: str, exc: BaseException) -> None:
        """A target failed: kept once in mirror.json (``warned``), which the daemon says on the run
        (a warning event, the summary), and tried again after a back-off."""
        message = f"{target.name} mirror: cannot {what}: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        log.warning("run %s: %s", self.run_id, message)
        target.opened = False
        target.retry_at = time.monotonic() + target.backoff
        target.backoff = min(RETRY_MAX_SECONDS, target.backoff * 2)
        if not target.state.get("warned"):
            target.state["warned"] = message
            self.save()
            if self.once:
                print(message, file=sys.stderr)

    def _open(self, target: Target) -> bool:
        if target.opened:
            return True
        if time.monotonic() < target.retry_at:
            return False
        try:
            target.open()
        except Exception as exc:  # noqa: BLE001 -- any library error is the target's failure, not the run's
            self.fail(target, "open", exc)
            return False
        target.opened = True
        log.info("run %s: mirrored to %s from byte %d", self.run_id, target.where(), target.offset)
        target.backoff = RETRY_FIRST_SECONDS
        self.save()
        update_analytics(self.run_dir, **{target.name: target.analytics()})
        return True

    def pump(self, target: Target) -> None:
        """Mirror what the events file holds past the target's offset."""
        if not self._open(target):
            return
        try:
            while True:
                offset = target.offset
                nxt, events = read_page(self.events, offset)
                if nxt == offset:
                    break
                points, checkpoints = points_of(events)
                if points:
                    target.write(points)
                if checkpoints:
                    self._note_checkpoints(target, checkpoints)
                target.state["offset"] = nxt
                self.save()
                if self.stopping:
                    break
        except Exception as exc:  # noqa: BLE001
            self.fail(target, "write", exc)

    def _note_checkpoints(self, target: Target, announced: list[dict[str, Any]]) -> None:
        """The checkpoints of the run's current process, in the order saved, each once by its
        absolute path (a stop announces its checkpoint twice: saved, then stopped at; relative and
        absolute). A seam (``restarted``) clears them: the earlier process's checkpoints, its stop's
        among them, are where the run went on from, not its model."""
        kept = target.state.setdefault("checkpoints", [])
        saved = []
        for point in announced:
            if "restarted" in point:
                kept.clear()
                continue
            path = point.get("path") or ""
            path = path if os.path.isabs(path) else os.path.join(self.run_dir, path)
            kept[:] = [p for p in kept if p.get("path") != path] + [{"path": path, "step": point.get("step")}]
            saved.append(kept[-1])
        del kept[:-20]
        if saved:
            update_analytics(self.run_dir, checkpoints=saved)

    def sync_meta(self, record: dict[str, Any]) -> None:
        for target in self.targets:
            if target.opened:
                try:
                    target.meta(list(record.get("tags") or []), record.get("note") or "")
                except Exception as exc:  # noqa: BLE001
                    self.fail(target, "set the tags and note", exc)

    def finish(self, state: str | None, record: dict[str, Any]) -> None:
        """The last pages, the tags and note as they are now, the last checkpoint; then close."""
        for target in self.targets:
            if not target.opened and target.state.get("closed_offset") == os.path.getsize(self.events):
                continue   # mirrored and closed already (by the mirror before this one, or an export)
            self.pump(target)
            if not target.opened:
                continue
            try:
                target.meta(list(record.get("tags") or []), record.get("note") or "")
                saved = target.state.get("checkpoints") or []
                # the model of a run is its final checkpoint: a stopped run's is where `mosaic continue`
                # goes on from, not a model (uploaded, it would stand as the model of a run that went on)
                last = saved[-1] if saved and state != P.STOPPED else None
                if last and last.get("path") and target.state.get("checkpoint_logged") != last["path"]:
                    path = last["path"] if os.path.isabs(last["path"]) else os.path.join(self.run_dir, last["path"])
                    if os.path.exists(path):
                        target.checkpoint(path, last.get("step"))
                    target.state["checkpoint_logged"] = last["path"]
                target.close(state)
                log.info("run %s: %s closed at byte %d (the run %s)", self.run_id, target.name, target.offset, state)
                target.opened = False
                target.state["closed_offset"] = target.offset
                self.save()
            except Exception as exc:  # noqa: BLE001
                self.fail(target, "finish", exc)

    def leave(self) -> None:
        """Stopped (SIGTERM) before the run ended: W&B's rows flushed to its files (its run.log is
        asynchronous: a SIGKILLed mirror loses what W&B had not written yet), the offsets kept; the
        daemon starts a mirror again when it adopts the run, which goes on from there."""
        for target in self.targets:
            if target.opened and isinstance(target, WandbTarget):
                try:
                    target.run.finish(exit_code=0)
                except Exception as exc:  # noqa: BLE001
                    log.warning("run %s: W&B's finish failed: %s", self.run_id, exc)
        self.save()
        log.info("run %s: mirror stopped; offsets kept", self.run_id)

    def run(self) -> int:
        if not self.names:
            return 0
        lock = open(os.path.join(self.run_dir, LOCK_FILE), "a")
        # Another mirror of the run holds it: one that outlived a SIGKILLed daemon (it finishes the
        # run, and this one then finds everything mirrored), or one still closing before a continue.
        fcntl.flock(lock, fcntl.LOCK_EX)
        log.info("run %s: mirror %d to %s", self.run_id, os.getpid(), ", ".join(self.names))
        self.load()
        self.save()
        if self.once:
            record = self.record.read() or {}
            for target in self.targets:
                if target.state.get("closed_offset") != os.path.getsize(self.events):
                    self._open(target)
            self.finish(record.get("state"), record)
            failed = [t for t in self.targets if t.state.get("offset", 0) < os.path.getsize(self.events)]
            for target in self.targets:
                print(json.dumps({"target": target.name, "where": target.where() if target.state.get("run_id") else None,
                                  **{k: v for k, v in target.state.items() if k not in ("checkpoints",)}}))
            return 1 if failed else 0
        while True:
            record = self.record.read()
            if record is None:   # the run was deleted
                return 0
            if record.get("state") in P.FINAL_STATES:
                # the daemon records the end after it read the whole file: this pass takes the rest
                self.finish(record["state"], record)
                return 0
            for target in self.targets:
                self.pump(target)
            if self.stopping:
                self.leave()
                return 0
            if record and time.monotonic() - self._meta_at >= META_SECONDS:
                self._meta_at = time.monotonic()
                self.sync_meta(record)
            time.sleep(POLL_SECONDS)


def _remove_dead_scratch(parent: str) -> None:
    """The temporary directories of mirrors that were killed (named RUN-PID): gone with their process."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name.rpartition("-")[2]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.mirror")
    parser.add_argument("run_dir")
    parser.add_argument("--home", required=True)
    parser.add_argument("--targets", help="comma-separated: wandb,mlflow (default: the run's own)")
    parser.add_argument("--once", action="store_true", help="mirror what the run holds and stop (mosaic export)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr)
    # MLflow keeps an installation id under XDG_CONFIG_HOME (~/.config): under the home instead
    os.environ["XDG_CONFIG_HOME"] = os.path.join(mirror_root(args.home), "config")
    targets = [t for t in args.targets.split(",") if t] if args.targets else None
    mirror_holder: list[Mirror] = []
    signal.signal(signal.SIGTERM, lambda *_: [setattr(m, "stopping", True) for m in mirror_holder])
    if targets is not None and any(t not in TARGETS for t in targets):
        print(f"unknown mirror target in {args.targets!r} (known: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    # W&B makes temporary directories at import (wandb-media, wandb-artifacts): in the home, this
    # mirror's own, removed when it ends, so none is left in the machine's /tmp
    scratch = os.path.join(mirror_root(args.home), "tmp", f"{os.path.basename(os.path.normpath(args.run_dir))}"
                                                           f"-{os.getpid()}")
    _remove_dead_scratch(os.path.dirname(scratch))
    os.makedirs(scratch, exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = scratch
    try:
        mirror = Mirror(args.run_dir, Home.resolve(args.home), targets, args.once)
        mirror_holder.append(mirror)
        return mirror.run()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
