"""Run supervision: submit, start, watch, pause, cancel, finish, re-adopt.

Each run is started through its own supervisor process (``daemon.shim``) in a
session of its own; the daemon watches the supervisor with a pidfd, which also
works for supervisors it did not start (re-adopted after a daemon restart), and
follows the run's events.jsonl with inotify. How a run ended is read from the
``exit.json`` the supervisor writes, so it is known even if the run ended while
no daemon was running.

State machine:

    queued -> starting -> running <-> paused -> succeeded | failed | cancelled | stopped
                                              \\-> lost (vanished without an exit record)
    stopped | failed | cancelled | lost -> queued   (mosaic continue: the same run, from its checkpoint)
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Callable

from daemon import analytics, frame_spill, mirror, proctree
from daemon import protocol as P
from daemon.exits import CRASH_DUMP_LINES, STDERR_TAIL_LINES, STOP_OVERDUE, classify_exit
from daemon.home import CHECKPOINTS_DIR, CONFIG_FILE, EVENTS_FILE, EXIT_FILE, STDERR_FILE, SUPERVISOR_FILE, Home
from daemon.ingest import RunTail, points_at_step
from daemon.inotify import Inotify
from daemon.model_server import ModelServers
from daemon.placement import PlacementError, ray_relay
from daemon.placement import backend_for as placement_backend
from daemon.placement.jobs import CLUSTER_GONE_SECONDS, ClusterRuns
from daemon.record import Job, job_of, placement_of, resources_of
from daemon.resources import ResourceSampler
from daemon.shim import understands, write_json_atomic
from daemon.stalls import STALLS
from daemon.store import Store, StoreError
from daemon.submission import Submission, on_cluster
from workers.fastlane import layout as fastlane_layout
from workers.sdk import telemetry as tm
from workers.sdk.descriptor import WorkerDescriptor
from workers.sdk.llm import served
from workers.sdk.rundir import (
    CHECKPOINT_MINUTES_DEFAULT,
    CHECKPOINT_MINUTES_ENV,
    KEEP_CHECKPOINTS_DEFAULT,
    KEEP_CHECKPOINTS_ENV,
    MANIFEST_SUFFIX,
    check_manifest,
)
from workers.sdk.stop import STOP_SIGNAL
from workers.sdk.telemetry import EPISODE_LENGTH_TAG, EPISODE_RETURN_TAG

log = logging.getLogger("mosaic.daemon.runs")

SUMMARY_FLUSH_SECONDS = 0.5   # summaries reach clients and the store at most this often
SAFETY_SCAN_SECONDS = 5.0     # re-read active runs in case an inotify event was lost
STORE_RETRY_SECONDS = 2.0     # a final state the store refused (disk full) is retried this often
HISTORY_SAVE_SECONDS = 30.0   # a live run's scalar history (daemon.history) is saved at most this often
# a lost run whose processes run on (its supervisor died, they did not): how often they are looked
# at, and what its reason says of them meanwhile
ORPHAN_POLL_SECONDS = 1.0
ORPHANS_NOTE = "; its processes run on without it"


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, ValueError):
        return None


def stderr_tail(run_dir: str, lines: int = STDERR_TAIL_LINES) -> str:
    try:
        with open(os.path.join(run_dir, STDERR_FILE), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            data = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def disk_full_note(path: str) -> str | None:
    """Why a run could not write, if its filesystem is full or read-only."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return "the home's filesystem is read-only"
    if st.f_bavail * st.f_frsize < 64 * 1024:
        return "the home's disk is full"
    return None


class ActiveRun:
    """What the daemon holds for a run whose supervisor is alive."""

    def __init__(self, run_id: str, run_dir: str, tail: RunTail, shim_pid: int,
                 popen: subprocess.Popen | None, job: Job | None = None):
        self.run_id = run_id
        self.run_dir = run_dir
        self.tail = tail
        self.shim_pid = shim_pid    # 0 for a cluster run: its supervisor runs on a node
        self.popen = popen      # set when this daemon started it (reaping)
        self.pidfd: int | None = None
        self.wd: int | None = None
        self.job = job              # the cluster job running its supervisor (None: it runs here)
        self.placement: dict[str, Any] = {}   # the run's placement (a Ray job's address)
        self.gone_polls = 0         # polls since the job ended without an exit record to read
        self.adopted = False        # re-adopted from an earlier daemon: its supervisor may be older
        # the events file's size when it was watched: a continued run's file holds its earlier
        # processes' lines and the seam; only a line past it says this process runs (its stop handler in place)
        self.own_from = 0


class RunManager(Submission):
    """Every run of the home from submit to its end: the queue and its local slots (GPUs, CPU sets),
    the supervisors it starts or re-adopts, the cluster jobs it polls (``ClusterRuns``), the control
    of a run (pause, resume, stop, continue, cancel), and how each ended (``classify_exit``), told to
    the server's clients through ``on_run``. Submission (daemon/submission.py) takes the new runs."""

    def __init__(self, home: Home, store: Store, workers: dict[str, WorkerDescriptor],
                 max_concurrent: int, grace_seconds: float = 10.0, gpus: list[str] | None = None,
                 cpu_sets: list[list[int]] | None = None, worker_nice: int = 10,
                 resource_seconds: float = 5.0, stop_grace_seconds: float = 120.0,
                 checkpoint_minutes: float = CHECKPOINT_MINUTES_DEFAULT,
                 keep_checkpoints: int = KEEP_CHECKPOINTS_DEFAULT, cluster_poll_seconds: float = 2.0,
                 default_placement: dict[str, Any] | None = None,
                 cluster_gone_seconds: float = CLUSTER_GONE_SECONDS):
        self.home = home
        self.store = store
        self.workers = workers
        self.max_concurrent = max_concurrent
        self.grace_seconds = grace_seconds
        # how long a stopped run may take to save its checkpoint and end, after the stop request
        self.stop_grace_seconds = stop_grace_seconds
        # for the workers that save resume checkpoints on a clock (CleanRL's scripts): how often, and
        # how many a run keeps; passed in their environment (workers/sdk/rundir.py names the variables)
        self.checkpoint_minutes = checkpoint_minutes
        self.keep_checkpoints = keep_checkpoints
        # runs on a cluster: how often the scheduler and their files are read (daemon/placement/),
        # and what a run leaves out of its placement (settings.json's "placement")
        self.cluster_poll_seconds = cluster_poll_seconds
        self.default_placement = dict(default_placement or {})
        # a scheduler that has not answered for this long, for a run whose files have not changed
        # for as long, has lost the run's job (a Ray cluster that went away takes its jobs with it)
        self.cluster_gone_seconds = cluster_gone_seconds
        self.cluster = ClusterRuns(self)   # the runs a scheduler places: their jobs
        # Workers run this much nicer than the daemon (through their supervisor's
        # --nice): a flooding or compute-bound run cannot starve the daemon or the app.
        self.worker_nice = worker_nice
        # the local LLM served once for the runs that ask (served: shared), as nice as the runs
        self.model_servers = ModelServers(str(home.root), nice=worker_nice)
        # Resource slots: each GPU id goes to one run at a time (as CUDA_VISIBLE_DEVICES),
        # each CPU set likewise (as the worker's affinity).
        self.gpus = [str(g) for g in (gpus or [])]
        self.cpu_sets = [list(c) for c in (cpu_sets or [])]
        self.active: dict[str, ActiveRun] = {}
        # one sampler for every running run's process tree (system/* scalars)
        self.resources = ResourceSampler(resource_seconds, self._running_trees) if resource_seconds > 0 else None
        self._limit_timers: dict[str, asyncio.TimerHandle] = {}
        self._stop_timers: dict[str, asyncio.TimerHandle] = {}   # a stop's save must end by then
        self._unrecorded: dict[str, tuple[str, str | None, dict[str, Any]]] = {}
        self._orphan_runs: dict[str, list[list[int]]] = {}   # lost run -> its live processes [pid, start]
        self.inotify: Inotify | None = None
        self._wd_to_run: dict[int, str] = {}
        self._dirty: set[str] = set()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._more_pending: set[str] = set()
        self._history_saved: dict[str, float] = {}   # run id -> when its history was last saved (monotonic)
        self._mirrors: dict[str, subprocess.Popen] = {}   # run id -> its W&B/MLflow mirror (daemon/mirror.py)
        self._checkpoints_listed: dict[str, int] = {}   # run id -> checkpoints in its analytics.json
        self._loop: asyncio.AbstractEventLoop | None = None
        # set by the server: called with (run_id, from, to, raw_events) and with run records
        self.on_events: Callable[[str, int, int, list[bytes]], None] = lambda *a: None
        self.on_run: Callable[[dict[str, Any] | None, str, int], None] = lambda *a: None
        self.on_run_final: Callable[[str], None] = lambda run_id: None

    # -- startup -----------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        try:
            self.inotify = Inotify()
            loop.add_reader(self.inotify.fd, self._on_inotify)
        except OSError as exc:  # no inotify: the safety scan alone still delivers, slower
            log.warning("inotify unavailable (%s); falling back to %ss scans", exc, SAFETY_SCAN_SECONDS)
            self.inotify = None
        self.adopt_all()
        self.model_servers.sweep(set(self.active))   # the servers the last daemon left, with their runs
        loop.call_later(SAFETY_SCAN_SECONDS, self._safety_scan)
        loop.call_later(self.cluster_poll_seconds, self.cluster.poll)
        if self.resources is not None:
            loop.call_later(self.resources.interval, self._sample_resources)
        self.schedule()

    def adopt_all(self) -> None:
        """Take back the runs a previous daemon left: alive, finished, or lost."""
        for run in self.store.list(P.ACTIVE_STATES):
            run_dir = str(self.home.run_dir(run["id"]))
            job = job_of(run)
            if job is not None:   # its supervisor runs on a cluster: the next poll says how it is
                log.info("re-adopting run %s (%s)", run["id"], job)
                self._watch(run, run_dir, 0, None, job=job)
                self.active[run["id"]].adopted = True
                continue
            if on_cluster(run):   # the last daemon died while submitting it: its job, by name, or a new one
                log.info("run %s: finding or submitting its job again", run["id"])
                self._start(run, {})
                continue
            pid, pid_start = run["pid"], run["pid_start"]
            if pid and proctree.is_alive(pid, pid_start):
                log.info("re-adopting run %s (supervisor pid %s)", run["id"], pid)
                self._watch(run, run_dir, pid, None)
                self.active[run["id"]].adopted = True
                continue
            tail = RunTail(run["id"], os.path.join(run_dir, EVENTS_FILE), run["ingest_offset"], run["summary"])
            self._start_mirror(run, run_dir)   # it mirrors what the run left, then sees it ended
            if os.path.exists(os.path.join(run_dir, EXIT_FILE)):
                log.info("run %s ended while no daemon ran; recording its exit", run["id"])
                self._finish(run["id"], run_dir, tail)
            else:
                reason = ("supervisor process is gone (pid reused by another program)"
                          if pid and proctree.is_alive(pid) else "supervisor process vanished without an exit record")
                self._drain(run["id"], tail)
                self._set_lost(run, run_dir, tail, reason)
        for run in self.store.list([P.LOST]):   # lost before, its processes running on then
            if resources_of(run).get("orphans"):
                self._watch_orphans(run)
        self._resume_mirrors()

    def _resume_mirrors(self) -> None:
        """Mirrors the last daemon's end left unfinished (SIGKILLed with it after their run ended):
        started again, they go on from the offsets they kept (daemon/mirror.py)."""
        for run_id in mirror.unfinished(str(self.home.runs_dir)):
            run = self.store.get(run_id)
            if run is not None and run_id not in self.active and run_id not in self._mirrors:
                self._start_mirror(run, str(self.home.run_dir(run_id)))

    # -- scheduling --------------------------------------------------------
    def schedule(self) -> None:
        """Start queued runs while slots are free (oldest first; a run waiting
        for a GPU does not hold back a CPU run behind it)."""
        queued = self.store.list([P.QUEUED])
        for run in queued:
            if on_cluster(run):   # the cluster's scheduler queues it: no local slot
                self._start(run, {})
                continue
            if self.local_active() >= self.max_concurrent:
                continue
            resources = self._allocate(run)
            if resources is None:
                continue
            self._start(run, resources)

    def local_active(self) -> int:
        """Runs that hold one of this machine's slots (max_concurrent): a cluster run holds none,
        its scheduler queues it."""
        return sum(1 for a in self.active.values() if a.job is None)

    def _in_use(self, key: str) -> list:
        used = []
        for run_id in self.active:
            run = self.store.get(run_id)
            if run and key in resources_of(run):
                used.append(resources_of(run)[key])
        return used

    def _allocate(self, run: dict[str, Any]) -> dict[str, Any] | None:
        resources: dict[str, Any] = {}
        if self.gpus and str(run["config"].get("device", "cpu")).startswith("cuda"):
            free = [g for g in self.gpus if g not in self._in_use("gpu")]
            if not free:
                return None  # stays queued until a GPU frees
            resources["gpu"] = free[0]
        if self.cpu_sets:
            used = self._in_use("cpus")
            free_sets = [c for c in self.cpu_sets if c not in used]
            resources["cpus"] = free_sets[0] if free_sets else self.cpu_sets[len(self.active) % len(self.cpu_sets)]
        return resources

    def _start(self, run: dict[str, Any], resources: dict[str, Any]) -> None:
        run_id = run["id"]
        run_dir = str(self.home.run_dir(run_id))
        desc = self.workers.get(run["worker"])
        if desc is None:
            self._set_final(run_id, P.FAILED, None, reason=f"worker {run['worker']!r} is no longer installed")
            return
        refusal = self._shared_model_refusal(run)
        if refusal is not None:
            self._set_final(run_id, P.FAILED, None, reason=refusal)
            return
        command = desc.command(run["config"])
        env = dict(os.environ)
        env.update(MOSAIC_RUN_ID=run_id, MOSAIC_RUN_DIR=run_dir, MOSAIC_HOME=str(self.home.root),
                   PYTHONUNBUFFERED="1")
        env[CHECKPOINT_MINUTES_ENV] = f"{self.checkpoint_minutes:g}"
        if run["config"].get("logged_until") is not None:   # continued from an older checkpoint
            env[tm.LOGGED_UNTIL_ENV] = str(run["config"]["logged_until"])
            if run["config"].get("logged_at_until") is not None:
                env[tm.LOGGED_AT_UNTIL_ENV] = json.dumps(run["config"]["logged_at_until"])
        env[KEEP_CHECKPOINTS_ENV] = str(self.keep_checkpoints)
        if "gpu" in resources:
            env["CUDA_VISIBLE_DEVICES"] = resources["gpu"]
        elif not str(run["config"].get("device", "cpu")).startswith("cuda"):
            env["CUDA_VISIBLE_DEVICES"] = ""
        if "OMP_NUM_THREADS" not in os.environ:
            # torch and numpy start a thread per core in every run; with several
            # runs on few cores those threads fight (7x slower off-policy
            # CleanRL seen here). Each run gets its share of the cores.
            cores = len(resources["cpus"]) if resources.get("cpus") else os.cpu_count() or 1
            env["OMP_NUM_THREADS"] = str(max(1, cores // max(1, self.max_concurrent)))
        placement = placement_of(run)
        if on_cluster(run):
            if placement.get("cpus"):   # the threads of the cores the job asked for
                env["OMP_NUM_THREADS"] = str(placement["cpus"])
            shim = [sys.executable, "-m", "daemon.shim", run_dir, "--grace", str(self.grace_seconds),
                    "--", *command]
            frames = run["config"].get("frames") or {}
            if frames.get("enabled"):   # the node's frames reach this machine through the run directory
                shim = frame_spill.with_spiller(frame_spill.spill_command(
                    sys.executable, run_dir, frames.get("fps", frame_spill.SPILL_FPS), frames.get("max_dim", 320)),
                    shim)
            self.cluster.start(run, run_dir, shim, env, placement)
            return
        # a run a person plays (capability "human") waits on them, not on the CPU: it is not made
        # nicer, or a busy machine's training runs would stand between a key and its frame
        interactive = bool(self._capabilities(run["worker"]).get("human"))
        shim = [sys.executable, "-m", "daemon.shim", run_dir, "--grace", str(self.grace_seconds),
                "--nice", "0" if interactive else str(self.worker_nice)]
        if resources.get("cpus"):
            shim += ["--cpus", ",".join(str(c) for c in resources["cpus"])]
        limits = run["config"].get("limits") or {}
        if limits.get("memory_mb"):
            shim += ["--memory-mb", str(limits["memory_mb"])]
        try:
            with open(os.path.join(run_dir, "supervisor.log"), "ab") as out:
                popen = subprocess.Popen(
                    [*shim, "--", *command],
                    cwd=run_dir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True, close_fds=True)
        except OSError as exc:
            self._set_final(run_id, P.FAILED, None, reason=f"cannot start the supervisor: {exc}")
            return
        # a continued run keeps its first start (its time stopped counts as paused)
        updated = self.store.update_run(run_id, state=P.STARTING, started_at=run.get("started_at") or time.time(),
                                        pid=popen.pid,
                                        pid_start=proctree.start_time(popen.pid), resources=resources)
        self.on_run(updated, run_id, updated["rev"])
        self._watch(updated, run_dir, popen.pid, popen)

    def _shared_model_refusal(self, run: dict[str, Any]) -> str | None:
        """The shared model servers a run asks for (served: shared), started or found, the run among
        their users; or why it cannot have them."""
        params = run["config"].get("params") or {}
        if not served.servers_for(params):
            return None
        if on_cluster(run):
            return "served: shared serves the model on this machine; a run on a cluster loads its own (served: worker)"
        return self.model_servers.use(run["id"], params)

    def _watch(self, run: dict[str, Any], run_dir: str, shim_pid: int, popen: subprocess.Popen | None,
               job: Job | None = None) -> None:
        tail = RunTail(run["id"], os.path.join(run_dir, EVENTS_FILE), run["ingest_offset"], run["summary"])
        self._attach_history(tail, run_dir)
        active = ActiveRun(run["id"], run_dir, tail, shim_pid, popen, job)
        active.placement = placement_of(run)
        try:
            active.own_from = os.path.getsize(tail.path)
        except OSError:
            pass
        self.active[run["id"]] = active
        self._start_mirror(run, run_dir)
        if self.inotify is not None:
            try:
                active.wd = self.inotify.add_watch(tail.path)
                self._wd_to_run[active.wd] = run["id"]
            except OSError as exc:
                log.warning("cannot watch %s: %s", tail.path, exc)
        if job is not None:   # no process here to wait for: the scheduler is polled (ClusterRuns.poll, daemon/placement/jobs.py)
            self._ingest(run["id"])
            return
        try:
            active.pidfd = os.pidfd_open(shim_pid)
            self._loop.add_reader(active.pidfd, self._on_exit, run["id"])
        except ProcessLookupError:
            self._loop.call_soon(self._on_exit, run["id"])
        wall = ((run["config"].get("limits") or {}).get("wall_seconds"))
        if wall:
            left = wall - (time.time() - (run["started_at"] or time.time()))
            self._limit_timers[run["id"]] = self._loop.call_later(
                max(0.0, left), self._stop_at_limit, run["id"], f"wall-time limit of {wall:g}s reached")
        self._ingest(run["id"])  # whatever was written while nobody watched

    def _attach_history(self, tail: RunTail, run_dir: str) -> None:
        """Give a live run's tail its scalar history: new from the first byte, or the saved one
        when it reaches exactly where the ingest resumes (else a client's request catches it up)."""
        from daemon.history import HISTORY_FILE, RunHistory
        if tail.offset == 0:
            tail.history = RunHistory()
        else:
            saved = RunHistory.load(os.path.join(run_dir, HISTORY_FILE))
            if saved is not None and saved.covered == tail.offset:
                tail.history = saved
        self._history_saved[tail.run_id] = time.monotonic()

    def _save_history(self, tail: RunTail, run_dir: str) -> None:
        from daemon.history import HISTORY_FILE
        history = tail.history
        if history is None or history.saved_at == history.covered:
            return
        try:
            history.save(os.path.join(run_dir, HISTORY_FILE))
        except OSError as exc:   # a full disk: the events file is the truth, a client's request rebuilds it
            log.warning("cannot save the history of %s: %s", tail.run_id, exc)
        self._history_saved[tail.run_id] = time.monotonic()

    # -- telemetry ---------------------------------------------------------
    def _on_inotify(self) -> None:
        fired, overflow = self.inotify.read()
        runs = list(self.active) if overflow else [self._wd_to_run[wd] for wd in fired if wd in self._wd_to_run]
        for run_id in runs:
            with STALLS.timed("ingest (a run's new lines, their history and their delivery)"):
                self._ingest(run_id)

    def _start_mirror(self, run: dict[str, Any], run_dir: str) -> None:
        """The run's W&B/MLflow mirror when its config or the home asks for one: a process of its own
        (daemon/mirror_process.py; W&B and MLflow are never imported here), at nice 19 (mirror.MIRROR_NICE). One
        started while another mirror of the run still lives (the run stopped and is continued at once, its
        mirror still closing; a mirror that outlived a SIGKILLed daemon) waits on the run's mirror.lock
        until that one has ended, then goes on from the offsets it left."""
        try:
            self._write_analytics(run, run_dir, tail=None)   # every run's, mirrored or not
            if not mirror.run_targets(run["config"], mirror.home_settings(self.home)):
                return
        except Exception:  # noqa: BLE001 -- a mirror's setup must never cost the run its start
            log.exception("run %s: cannot set up its mirror", run["id"])
            return
        # a mirror of the run's earlier process still closing is left to end (and be reaped by subprocess):
        # had no new one started, the continued run would have none
        popen = mirror.spawn(self.home, run_dir)
        if popen is not None:
            self._mirrors[run["id"]] = popen

    def _write_analytics(self, run: dict[str, Any], run_dir: str, tail: RunTail | None) -> None:
        """The run's analytics.json (daemon/analytics.py), mirrored or not: its TensorBoard directories
        and the checkpoints its events announced since the last write (the mirror adds W&B's and MLflow's parts)."""
        saved = list(tail.checkpoints) if tail is not None else []
        new = analytics.new_checkpoints(saved, self._checkpoints_listed.get(run["id"], 0),
                                        tail.last_checkpoint if tail is not None else None,
                                        tail.stopped if tail is not None else None)
        analytics.update_analytics(run_dir, checkpoints=new,
                                   tensorboard=analytics.tensorboard_section(str(self.home.root), run_dir, run["name"]))
        self._checkpoints_listed[run["id"]] = len(saved)

    def _safety_scan(self) -> None:
        for run_id, popen in list(self._mirrors.items()):
            self._mirror_warnings(run_id)
            if popen.poll() is not None:   # reaped
                del self._mirrors[run_id]
        for run_id in list(self.active):
            self._ingest(run_id)
        self.model_servers.sweep(set(self.active))
        self._loop.call_later(SAFETY_SCAN_SECONDS, self._safety_scan)

    def _mirror_warnings(self, run_id: str, finishing: bool = False) -> None:
        """What the run's mirror failed with (its mirror.json: daemon/mirror.py), said on the run once:
        a warning event in a local run's events file, appended as the resource sampler appends (a
        cluster run's file is the node's: a line of ours could interleave with its writes over a
        shared file system, or shift the Ray relay's cursor), and in the run's summary; a run that
        has ended gets it in its stored summary."""
        active = self.active.get(run_id)
        run_dir = active.run_dir if active is not None else str(self.home.run_dir(run_id))
        messages = mirror.warnings(run_dir)
        if not messages:
            return
        if active is None:
            run = self.store.get(run_id)
            if run is None or run["state"] not in P.FINAL_STATES:
                return
            summary = run["summary"] or {}
            new = [m for _, m in messages if m not in (summary.get("warnings") or [])]
            if new:
                self.update_record(run_id, summary={**summary, "warnings": (summary.get("warnings") or []) + new})
            return
        for target, message in messages:
            if message in active.tail.warnings:
                continue
            active.tail.warnings.append(message)
            self._mark_dirty(run_id)
            if active.job is None and not finishing:
                line = tm.encode(tm.make_event(tm.WARNING, message=message, source=f"mirror/{target}"))
                try:
                    fd = os.open(os.path.join(run_dir, EVENTS_FILE), os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
                    try:
                        os.write(fd, line)
                    finally:
                        os.close(fd)
                except OSError as exc:
                    log.warning("run %s: cannot write the mirror's warning: %s", run_id, exc)

    def _running_trees(self) -> list[tuple[str, int, str, int]]:
        """What the resource sampler measures: runs that run (not paused, not starting), until their
        worker says it ended (stopped, completed, failed): what is left is its teardown, and a sample
        then would land after the run's last line (between a stop and the continue's seam)."""
        out = []
        for run_id, active in list(self.active.items()):
            if active.job is not None:   # on a node: not this machine's processes
                continue
            run = self.store.get(run_id)
            if run is None or run["state"] != P.RUNNING:
                continue
            self._ingest(run_id)   # the lines inotify has not brought in yet: an end among them
            tail = active.tail
            if not (tail.stopped or tail.completed or tail.failed_reason):
                out.append((run_id, active.shim_pid, tail.path, tail.steps))
        return out

    def _sample_resources(self) -> None:
        try:
            with STALLS.timed("resource sampling (every run's process tree)"):
                self.resources.sample_all()
        except Exception:  # a sampler bug must not stop the daemon's loop
            log.exception("resource sampling failed")
        self._loop.call_later(self.resources.interval, self._sample_resources)

    def _ingest(self, run_id: str, final: bool = False) -> bool:
        """Read one chunk of new lines of a run; True if it read anything."""
        active = self.active.get(run_id)
        if active is None:
            return False
        chunk = active.tail.read_new(final=final)
        if chunk is None:
            return False
        start, end, raws = chunk
        self.on_events(run_id, start, end, raws)
        self._mark_dirty(run_id)
        run = self.store.get(run_id)
        max_steps = ((run["config"].get("limits") or {}).get("max_steps")) if run else None
        if max_steps and active.tail.steps >= max_steps and not run["cancel_requested"]:
            self._stop_at_limit(run_id, f"step limit of {max_steps} reached")
            run = self.store.get(run_id)
        if run and run["state"] == P.STARTING and active.tail.lines and active.tail.offset > active.own_from:
            try:
                updated = self.store.update_run(run_id, state=P.RUNNING, summary=active.tail.summary(),
                                                ingest_offset=active.tail.offset)
                self.on_run(updated, run_id, updated["rev"])
            except StoreError as exc:
                log.warning("cannot store the state of %s: %s", run_id, exc)
            if run["stop_requested"]:  # asked while it started: its stop handler is in place now
                self._send_stop(run_id)
        if end - start >= 1024 * 1024 and not final:
            # a big backlog: continue on the next loop turn, let other runs and clients in
            if run_id not in self._more_pending:
                self._more_pending.add(run_id)
                self._loop.call_soon(self._ingest_more, run_id)
        return True

    def _ingest_more(self, run_id: str) -> None:
        self._more_pending.discard(run_id)
        self._ingest(run_id)

    def _mark_dirty(self, run_id: str) -> None:
        self._dirty.add(run_id)
        if self._flush_handle is None:
            self._flush_handle = self._loop.call_later(SUMMARY_FLUSH_SECONDS, self._flush_summaries)

    def _flush_summaries(self) -> None:
        with STALLS.timed("summary flush (the store's write, clients told, histories saved)"):
            self._flush_summaries_now()

    def _flush_summaries_now(self) -> None:
        self._flush_handle = None
        dirty, self._dirty = self._dirty, set()
        for run_id in dirty:
            active = self.active.get(run_id)
            if active is None:
                continue
            try:
                updated = self.store.update_run(run_id, summary=active.tail.summary(),
                                                ingest_offset=active.tail.offset)
            except StoreError as exc:  # disk full: keep it dirty, the next flush tries again
                log.warning("cannot store the summary of %s: %s", run_id, exc)
                self._mark_dirty(run_id)
                continue
            if updated:
                self.on_run(updated, run_id, updated["rev"])
            if time.monotonic() - self._history_saved.get(run_id, 0.0) >= HISTORY_SAVE_SECONDS:
                self._save_history(active.tail, active.run_dir)
            if updated and len(active.tail.checkpoints) != self._checkpoints_listed.get(run_id, 0):
                self._write_analytics(updated, active.run_dir, active.tail)

    def _drain(self, run_id: str, tail: RunTail) -> None:
        """Read a run's file to its end (final: a partial last line counts)."""
        while True:
            chunk = tail.read_new(final=True)
            if chunk is None:
                break
            self.on_events(run_id, *chunk)
        tail.close()

    # -- exit --------------------------------------------------------------
    def _on_exit(self, run_id: str) -> None:
        active = self.active.get(run_id)
        if active is None:
            return
        if active.pidfd is not None:
            self._loop.remove_reader(active.pidfd)
            os.close(active.pidfd)
            active.pidfd = None
        if active.popen is not None:
            active.popen.wait()  # reap our child
        if active.wd is not None and self.inotify is not None:
            self._wd_to_run.pop(active.wd, None)
            try:
                self.inotify.rm_watch(active.wd)
            except OSError:
                pass
        del self.active[run_id]
        for timers in (self._limit_timers, self._stop_timers):
            timer = timers.pop(run_id, None)
            if timer is not None:
                timer.cancel()
        self._finish(run_id, active.run_dir, active.tail)
        self.schedule()

    def _finish(self, run_id: str, run_dir: str, tail: RunTail) -> None:
        self._drain(run_id, tail)
        self._mirror_warnings(run_id, finishing=True)   # into the summary the run ends with
        run = self.store.get(run_id)
        record = _read_json(os.path.join(run_dir, EXIT_FILE))
        job_ended = self.cluster.job_endings.pop(run_id, None)
        job = job_of(run)
        # the files are read only where an outcome can use them: a run that did not end cleanly
        unclean = record is None or record.get("returncode") != 0
        failed = record is not None and record.get("returncode") != 0
        ending = classify_exit(
            run, record, job_ended, stopped=tail.stopped, failed_reason=tail.failed_reason,
            stderr=stderr_tail(run_dir, CRASH_DUMP_LINES) if failed else "",
            job_cause=self.cluster.job_cause(run, run_dir) if job_ended is not None or (job is not None and failed) else None,
            disk_full=disk_full_note(run_dir) if unclean else None)
        if ending.orphans:
            self._set_lost(run, run_dir, tail, ending.reason)
            return
        self._set_final(run_id, ending.state, tail, reason=ending.reason, **ending.fields)
        if ending.requeue:
            self._requeue(run_id)

    def _set_final(self, run_id: str, state: str, tail: RunTail | None, reason: str | None = None,
                   **fields: Any) -> None:
        self.model_servers.release(run_id)
        if tail is not None:
            fields.update(summary=tail.summary(), ingest_offset=tail.offset)
            self._save_history(tail, str(self.home.run_dir(run_id)))
            self._history_saved.pop(run_id, None)
        fields.setdefault("ended_at", time.time())
        try:
            updated = self.store.update_run(run_id, state=state, reason=reason, **fields)
        except StoreError as exc:
            # The disk is full or the home read-only: the outcome is known but
            # cannot be stored. Keep it and try again until the store takes it.
            log.error("run %s %s, but the store refused it (%s); retrying in %ss",
                      run_id, state, exc, STORE_RETRY_SECONDS)
            self._unrecorded[run_id] = (state, reason, fields)
            self._loop.call_later(STORE_RETRY_SECONDS, self._retry_final, run_id)
            return
        self._unrecorded.pop(run_id, None)
        self._dirty.discard(run_id)
        removed = fastlane_layout.cleanup(run_id)  # also after SIGKILL: the worker could not
        if removed:
            log.info("run %s: removed frame segments %s", run_id, ", ".join(removed))
        if updated:
            log.info("run %s %s%s", run_id, state, f" ({reason})" if reason else "")
            self.on_run(updated, run_id, updated["rev"])
        if updated and tail is not None:
            self._write_analytics(updated, str(self.home.run_dir(run_id)), tail)
            self._checkpoints_listed.pop(run_id, None)
        self.on_run_final(run_id)

    def _retry_final(self, run_id: str) -> None:
        pending = self._unrecorded.get(run_id)
        if pending is None:
            return
        state, reason, fields = pending
        self._set_final(run_id, state, None, reason=reason, **fields)

    # -- control -----------------------------------------------------------
    def _stop_at_limit(self, run_id: str, reason: str) -> None:
        self._limit_timers.pop(run_id, None)
        run = self.store.get(run_id)
        if run and run["state"] in P.ACTIVE_STATES and not run["cancel_requested"]:
            log.info("run %s: %s", run_id, reason)
            self.cancel(run, reason=f"stopped: {reason}")

    def cancel(self, run: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
        run_id = run["id"]
        if run["state"] == P.QUEUED:
            self._set_final(run_id, P.CANCELLED, None, reason="cancelled before it started")
            return self.store.get(run_id)
        if run["state"] == P.LOST and run_id in self._orphan_runs:
            return self._cancel_orphans(run)
        if run["state"] not in P.ACTIVE_STATES:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {run['state']}, not active")
        if run["cancel_requested"]:
            return run  # a second cancel: the first one is under way
        updated = self.store.update_run(run_id, cancel_requested=True, reason=reason)
        self.on_run(updated, run_id, updated["rev"])
        active = self.active.get(run_id)
        if active is not None and active.job is not None:
            self.cluster.cancel(updated, active)
        elif active is not None:
            # a stopped tree cannot act on SIGTERM: continue it first
            proctree.signal_tree(active.shim_pid, signal.SIGCONT)
            try:
                os.kill(active.shim_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        return updated

    def stop(self, run: dict[str, Any]) -> dict[str, Any]:
        """Ask a run to save a checkpoint at its next safe point and end "stopped" (mosaic stop);
        ``continue_run`` starts it again from there, as the same run."""
        run_id = run["id"]
        if run["state"] not in P.ACTIVE_STATES:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {run['state']}, not active")
        refusal = self._stop_refusal(run)
        if refusal is not None:
            raise P.RPCError(P.BAD_STATE, f"{refusal}: cancel it (mosaic cancel {run['name']}) or let it finish")
        refusal = self._supervisor_refusal(run, "stop")
        if refusal is not None:
            raise P.RPCError(P.BAD_STATE, refusal)
        if run["cancel_requested"]:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is being cancelled")
        if run["stop_requested"]:
            return run  # a second stop: the first one is under way
        if run["state"] == P.PAUSED:  # a stopped tree cannot save: it runs again first
            run = self.resume(run)
        updated = self.store.update_run(run_id, stop_requested=True)
        self.on_run(updated, run_id, updated["rev"])
        if updated["state"] == P.RUNNING:
            self._send_stop(run_id)   # else when it runs: its stop handler is not in place before
        if self._loop is not None:
            self._stop_timers[run_id] = self._loop.call_later(self.stop_grace_seconds, self._stop_overdue, run_id)
        return updated

    def stop_all_for_shutdown(self) -> list[str]:
        """The daemon's host shuts down (SIGTERM with stop_runs_on_shutdown): every run that can
        stop is asked to; their ids, written to the home for the next start. The others are left
        to their supervisors, as always."""
        ids = []
        for run_id in list(self.active):
            run = self.store.get(run_id)
            if run and self._can_stop(run) and not run["cancel_requested"]:
                try:
                    self.stop(run)
                except P.RPCError:
                    continue
                ids.append(run_id)
        if ids:
            write_json_atomic(str(self.home.shutdown_stops_file), {"runs": ids, "at": time.time()})
        return ids

    def continue_after_shutdown(self) -> list[str]:
        """At start (continue_after_shutdown): continue the runs the last daemon stopped on its way out."""
        record = _read_json(str(self.home.shutdown_stops_file)) or {}
        continued = []
        for run_id in record.get("runs", []):
            run = self.store.get(run_id)
            if run and run["state"] == P.STOPPED:
                try:
                    self.continue_run(run)
                    continued.append(run_id)
                except (P.RPCError, StoreError) as exc:
                    log.warning("cannot continue %s after the shutdown: %s", run_id, exc)
        try:
            os.unlink(self.home.shutdown_stops_file)
        except FileNotFoundError:
            pass
        if continued:
            log.info("continued %d run(s) stopped by the last shutdown", len(continued))
        return continued

    def _stop_refusal(self, run: dict[str, Any]) -> str | None:
        """Why the run cannot stop and continue (its worker says: WorkerDescriptor.stop_refusal); None if it can."""
        desc = self.workers.get(run["worker"])
        if desc is None:
            return f"worker {run['worker']!r} is no longer installed"
        if ray_relay.unshared(placement_of(run)):
            return (f"run {run['name']} runs on Ray in a directory of its node's own (placement.shared_home is "
                    f"false): its checkpoint would stay on the node, so it cannot stop and continue")
        try:
            return desc.stop_refusal(run["config"])
        except Exception as exc:  # noqa: BLE001 -- a worker's bug must not take the daemon's request down
            return f"the {run['worker']} worker cannot tell whether it can stop this run ({type(exc).__name__}: {exc})"

    def _can_stop(self, run: dict[str, Any]) -> bool:
        return self._stop_refusal(run) is None

    def _send_stop(self, run_id: str) -> None:
        active = self.active.get(run_id)
        if active is not None and active.job is not None:
            try:
                backend = placement_backend(active.job.engine, active.placement)
            except PlacementError as exc:
                log.warning("run %s: %s", run_id, exc)
                return
            job_id = active.job.id
            self.cluster.call(f"run {run_id}: stop {active.job}", lambda: backend.signal(job_id, "USR1"))
        elif active is not None:
            try:
                os.kill(active.shim_pid, STOP_SIGNAL)   # the supervisor passes it to the worker alone
            except ProcessLookupError:
                pass

    def _stop_overdue(self, run_id: str) -> None:
        self._stop_timers.pop(run_id, None)
        run = self.store.get(run_id)
        if run and run["state"] in P.ACTIVE_STATES and not run["cancel_requested"]:
            reason = (f"{STOP_OVERDUE} {self.stop_grace_seconds:g} s of the stop request: its checkpoint was not "
                      f"saved in time (stop_grace_seconds in settings.json); the run was ended, its last "
                      f"checkpoint left as it was")
            log.info("run %s: %s", run_id, reason)
            self.cancel(run, reason=reason)

    def _supervisor_refusal(self, run: dict[str, Any], capability: str) -> str | None:
        """Why the run's supervisor cannot take ``capability`` (daemon/shim.py's CAPABILITIES), or None.
        A run re-adopted after an upgrade may run under an older supervisor, which understands only
        what its supervisor.json lists: a SIGUSR1 it has no handler for would kill it, orphaning
        the worker. A supervisor this daemon started is of its own version."""
        active = self.active.get(run["id"])
        if active is None or not active.adopted:
            return None
        record = _read_json(os.path.join(active.run_dir, SUPERVISOR_FILE))
        if not isinstance(record, dict) or (active.job is None and record.get("supervisor_pid") != active.shim_pid):
            return None   # an earlier start's record: its own supervisor has not written one yet
        if understands(record, capability):
            return None
        name = run["name"]
        return (f"run {name}'s supervisor is from an older mosaic (it started before the upgrade) and cannot "
                f"take a {capability}: let it finish, or cancel it (mosaic cancel {name})")

    # -- a lost run whose processes run on: its supervisor died, they did not ---------------------
    def _orphans(self, run_id: str, run_dir: str) -> list[list[int]]:
        """The live processes of a run whose supervisor is gone, as [pid, start time], its worker
        first: the worker its supervisor.json names, the worker's tree, and every process that
        holds the run's id in its environment (what left the worker's tree too)."""
        pids = set(proctree.marked("MOSAIC_RUN_ID", run_id))
        record = _read_json(os.path.join(run_dir, SUPERVISOR_FILE))
        worker = record.get("worker_pid") if isinstance(record, dict) else None
        if worker and proctree.is_alive(worker, record.get("worker_start")):
            pids.add(worker)
            pids.update(proctree.descendants(worker))
        found = []
        for pid in sorted(pids, key=lambda p: (p != worker, p)):
            start = proctree.start_time(pid)
            if start is not None and proctree.is_alive(pid, start):
                found.append([pid, start])
        return found

    def _set_lost(self, run: dict[str, Any], run_dir: str, tail: RunTail | None, reason: str) -> None:
        """The run is lost (no exit record); its processes, if they run on, are named in its reason
        and in ``resources.orphans`` (`mosaic ls` says "lost, still running"), and watched: a cancel
        ends them, and the run's record says when they end."""
        orphans = [] if on_cluster(run) else self._orphans(run["id"], run_dir)
        if not orphans:
            self._set_final(run["id"], P.LOST, tail, reason=reason)
            return
        pids = ", ".join(str(pid) for pid, _ in orphans[:5]) + (", ..." if len(orphans) > 5 else "")
        log.warning("run %s is lost, but its processes run on: %s", run["id"], pids)
        self._set_final(run["id"], P.LOST, tail, resources={**resources_of(run), "orphans": orphans},
                        reason=f"{reason}{ORPHANS_NOTE} (pids {pids}): mosaic cancel {run['name']} ends them")
        updated = self.store.get(run["id"])
        if updated is not None and updated["state"] == P.LOST:
            self._watch_orphans(updated)

    def _watch_orphans(self, run: dict[str, Any]) -> None:
        if not self._orphan_runs and self._loop is not None:
            self._loop.call_later(ORPHAN_POLL_SECONDS, self._check_orphans)
        self._orphan_runs[run["id"]] = [list(o) for o in resources_of(run)["orphans"]]
        if run["cancel_requested"]:   # a cancel an earlier daemon began: its SIGKILL is due
            self._end_orphans(run["id"], signal.SIGKILL)

    def _check_orphans(self) -> None:
        for run_id, orphans in list(self._orphan_runs.items()):
            alive = [o for o in orphans if proctree.is_alive(*o)]
            if not alive:   # those listed ended: one they started since is found by the run's id
                alive = self._orphans(run_id, str(self.home.run_dir(run_id)))
            if alive:
                self._orphan_runs[run_id] = alive
            else:
                del self._orphan_runs[run_id]
                self._orphans_ended(run_id)
        if self._orphan_runs:
            self._loop.call_later(ORPHAN_POLL_SECONDS, self._check_orphans)

    def _orphans_ended(self, run_id: str) -> None:
        """A lost run's processes ended: what they wrote meanwhile is read, and the run is
        cancelled (if that was asked) or stays lost, saying so."""
        run = self.store.get(run_id)
        if run is None:
            return
        run_dir = str(self.home.run_dir(run_id))
        tail = RunTail(run_id, os.path.join(run_dir, EVENTS_FILE), run["ingest_offset"], run["summary"])
        self._drain(run_id, tail)
        resources = {k: v for k, v in resources_of(run).items() if k != "orphans"}
        lost = (run["reason"] or "").split(ORPHANS_NOTE)[0]
        if run["cancel_requested"]:
            self._set_final(run_id, P.CANCELLED, tail, resources=resources,
                            reason=f"cancelled by the user after it was lost ({lost})")
        else:
            self._set_final(run_id, P.LOST, tail, resources=resources,
                            reason=f"{lost}; its processes ran on without it until they ended")

    def _cancel_orphans(self, run: dict[str, Any]) -> dict[str, Any]:
        """Cancel a lost run whose processes run on: SIGTERM to each, SIGKILL after the grace period."""
        run_id = run["id"]
        if run["cancel_requested"]:
            return run
        updated = self.store.update_run(run_id, cancel_requested=True)
        self.on_run(updated, run_id, updated["rev"])
        self._end_orphans(run_id, signal.SIGTERM)
        if self._loop is not None:
            self._loop.call_later(self.grace_seconds, self._end_orphans, run_id, signal.SIGKILL)
        return updated

    def _end_orphans(self, run_id: str, sig: int) -> None:
        if run_id not in self._orphan_runs:
            return
        pids = {pid for pid, start in self._orphan_runs[run_id] if proctree.is_alive(pid, start)}
        pids.update(pid for pid, _ in self._orphans(run_id, str(self.home.run_dir(run_id))))
        for pid in pids:
            for s in (signal.SIGCONT, sig):   # a paused process cannot act on a SIGTERM
                try:
                    os.kill(pid, s)
                except (ProcessLookupError, PermissionError):
                    pass

    def continue_run(self, run: dict[str, Any], requeued: bool = False, point: dict[str, Any] | None = None,
                     params: dict[str, Any] | None = None, seam_fields: dict[str, Any] | None = None) -> dict[str, Any]:
        """Start a stopped run again as the same run (same id, name and directory) from its
        checkpoint: a ``restarted`` event marks the seam in its events, the worker goes on with
        the step counters of the checkpoint (``continue_from`` in its config).

        Population-based training (daemon/pbt.py) gives the ``point`` ({"path", "step"}: a copy of
        another member's checkpoint), the ``params`` that change with it, and what the seam says of it."""
        run_id, name = run["id"], run["name"]
        if run["state"] not in P.CONTINUABLE_STATES:
            raise P.RPCError(P.BAD_STATE, f"run {name} is {run['state']}: only a stopped run, or one that ended "
                                          f"after a checkpoint, continues")
        if run_id in self._orphan_runs:
            raise P.RPCError(P.BAD_STATE, f"run {name} is lost, but its processes still run: cancel them first "
                                          f"(mosaic cancel {name})")
        refusal = self._stop_refusal(run)
        if refusal is not None:
            raise P.RPCError(P.BAD_STATE, refusal)
        skipped: list[str] = []
        if point is None:
            point, skipped = self._continue_point(run)
        if point is None:
            raise P.RPCError(P.BAD_STATE, f"run {name} cannot continue: {'; '.join(skipped)}")
        for problem in skipped:
            log.warning("run %s: %s; continuing from %s instead", run_id, problem, point["path"])
        run_dir = self.home.run_dir(run_id)
        # A checkpoint older than the run's last logged step (a failed run's last periodic one): the
        # steps after it are trained again, but their scalars and episodes are not logged twice.
        logged = int((run.get("summary") or {}).get("steps") or 0)
        point_step = int(point.get("step") or 0)
        logged_until = logged if logged > point_step else None
        # what is there at that last step: the old process may have died between two of its lines
        logged_at_until = (points_at_step(str(run_dir / EVENTS_FILE), logged, point_step)
                           if logged_until is not None else None)
        config = {**run["config"], "continue_from": point["path"], "logged_until": logged_until,
                  "logged_at_until": logged_at_until}
        if params:
            config["params"] = {**(config.get("params") or {}), **params}
        restarts = (run.get("restarts") or 0) + 1
        try:
            write_json_atomic(str(run_dir / CONFIG_FILE), config)
            exit_file = run_dir / EXIT_FILE
            if exit_file.exists():  # kept beside: how each earlier process ended
                os.replace(exit_file, run_dir / f"exit-{restarts - 1}.json")
            seam = tm.encode(tm.make_event(tm.RESTARTED, step=point_step,
                                           checkpoint=str(point["path"]), restarts=restarts,
                                           **({"requeued": True} if requeued else {}),
                                           **({"skipped": skipped} if skipped else {}),
                                           **({"logged_until": logged_until} if logged_until else {}),
                                           **(seam_fields or {})))
            with open(run_dir / EVENTS_FILE, "ab") as f:   # no writer is left: the line is whole
                f.write(seam)
        except OSError as exc:
            raise StoreError(f"cannot continue {name}: {exc}") from None
        stopped_for = time.time() - run["ended_at"] if run.get("ended_at") else 0.0
        updated = self.store.update_run(
            run_id, state=P.QUEUED, config=config, restarts=restarts, stop_requested=False,
            cancel_requested=False, reason=None, exit_code=None, exit_signal=None, ended_at=None,
            paused_at=None, paused_seconds=(run.get("paused_seconds") or 0.0) + max(0.0, stopped_for))
        self.on_run(updated, run_id, updated["rev"])
        self.schedule()
        return self.store.get(run_id)

    def _capabilities(self, worker: str) -> dict[str, Any]:
        desc = self.workers.get(worker)
        try:
            return (desc.capabilities() or {}) if desc is not None else {}
        except Exception:  # noqa: BLE001 -- a descriptor's bug costs the answer, not the start
            return {}

    def _requeue(self, run_id: str) -> None:
        """Continue a run the scheduler stopped (placement.requeue) as a new job of the same run."""
        run = self.store.get(run_id)
        if run is None or run["state"] != P.STOPPED:
            return
        try:
            self.continue_run(run, requeued=True)
            log.info("run %s requeued after its job's wall-time warning", run_id)
        except (P.RPCError, StoreError) as exc:
            updated = self.store.update_run(run_id, reason=f"{run['reason'].removesuffix(': requeued')}; "
                                                          f"not requeued: {exc}")
            self.on_run(updated, run_id, updated["rev"])

    def _continue_point(self, run: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
        """The checkpoint a run continues from, and the newer ones passed over (why, in words): its
        stops' checkpoints (their manifests checked: whole, and this run's) and its last periodic
        one, the newest good one first."""
        summary = run.get("summary") or {}
        candidates: list[tuple[int, int, str]] = []   # (step, stop first, path)
        stopped = summary.get("stopped")
        if stopped and stopped.get("checkpoint"):
            candidates.append((int(stopped.get("step") or 0), 1, stopped["checkpoint"]))
        folder = self.home.run_dir(run["id"]) / CHECKPOINTS_DIR
        for manifest in folder.glob("*" + MANIFEST_SUFFIX) if folder.is_dir() else []:
            record = _read_json(str(manifest)) or {}
            if record.get("checkpoint") and isinstance(record.get("step"), int):
                candidates.append((record["step"], 1, record["checkpoint"]))
        last = summary.get("last_checkpoint")
        if last and last.get("path"):
            candidates.append((int(last.get("step") or 0), 0, last["path"]))
        skipped: list[str] = []
        seen: set[str] = set()
        for step, _, path in sorted(candidates, reverse=True):
            if path in seen:
                continue
            seen.add(path)
            if os.path.exists(path.rstrip(os.sep) + MANIFEST_SUFFIX):
                problem = check_manifest(path, run)
            else:   # a periodic checkpoint: the worker's own, no manifest to check it against
                problem = None if os.path.exists(path) else f"{path} is gone"
            if problem is None:
                return {"path": path, "step": step}, skipped
            skipped.append(problem)
        return None, skipped or ["it has no checkpoint to continue from"]

    def pause(self, run: dict[str, Any]) -> dict[str, Any]:
        if run["state"] != P.RUNNING and run["state"] != P.STARTING:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {run['state']}, not running")
        active = self.active[run["id"]]
        if active.job is not None:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} runs as {active.job}: pausing a cluster job is the "
                                          f"scheduler's (scontrol suspend, for its operators); stop it instead")
        # The whole tree but the supervisor, which must stay free to react to a cancel.
        proctree.stop_tree(active.shim_pid)
        # Recorded so that elapsed time (mosaic_tui.fmt.elapsed) leaves pauses out.
        updated = self.store.update_run(run["id"], state=P.PAUSED, paused_at=time.time())
        self.on_run(updated, run["id"], updated["rev"])
        return updated

    def resume(self, run: dict[str, Any]) -> dict[str, Any]:
        if run["state"] != P.PAUSED:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {run['state']}, not paused")
        active = self.active[run["id"]]
        proctree.signal_tree(active.shim_pid, signal.SIGCONT)
        paused = (run.get("paused_seconds") or 0.0) + (time.time() - run["paused_at"] if run.get("paused_at") else 0.0)
        updated = self.store.update_run(run["id"], state=P.RUNNING, paused_at=None, paused_seconds=paused)
        self.on_run(updated, run["id"], updated["rev"])
        return updated

    def delete(self, run: dict[str, Any]) -> int:
        if run["state"] in P.ACTIVE_STATES or run["id"] in self._orphan_runs:
            what = "lost, but its processes still run" if run["state"] == P.LOST else run["state"]
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {what}: cancel it first")
        shutil.rmtree(self.home.run_dir(run["id"]), ignore_errors=True)
        rev = self.store.delete_run(run["id"])
        self.on_run(None, run["id"], rev)
        return rev

    def update_record(self, run_id: str, **fields: Any) -> dict[str, Any]:
        """Change fields the user owns (tags, note) and tell the clients."""
        updated = self.store.update_run(run_id, **fields)
        self.on_run(updated, run_id, updated["rev"])
        return updated

    def ingested_offset(self, run: dict[str, Any]) -> int:
        """How far clients may be served from this run's file."""
        active = self.active.get(run["id"])
        return active.tail.offset if active is not None else run["ingest_offset"]

    def verbatim_until(self, run: dict[str, Any]) -> int:
        """Up to where this run's file holds only valid events, each its own line
        (served to clients as read, without parsing it again)."""
        active = self.active.get(run["id"])
        if active is not None:
            irregular = active.tail.irregular_from
            end = active.tail.offset
        else:
            summary = run.get("summary") or {}
            # a summary from before irregular_from was kept: unknown, so nothing is taken on trust
            irregular = summary.get("irregular_from", 0)
            end = run["ingest_offset"]
        return end if irregular is None else min(irregular, end)

    def tags_of(self, run: dict[str, Any]) -> set[str]:
        """The tags a run has so far; a live run's as ingested, ahead of its stored summary."""
        active = self.active.get(run["id"])
        summary = run.get("summary") or {}
        tags = set(active.tail.tags) if active is not None else set(summary.get("tags") or [])
        if summary.get("episodes") or (active is not None and active.tail.episodes):
            # summaries written before episodes were tags still have episodes
            tags.update((EPISODE_RETURN_TAG, EPISODE_LENGTH_TAG))
        return tags

    def close(self) -> None:
        self.cluster.close()
        self.model_servers.close(set(self.active))
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_summaries()
        for active in self.active.values():
            self._save_history(active.tail, active.run_dir)
            if active.pidfd is not None:
                self._loop.remove_reader(active.pidfd)
                os.close(active.pidfd)
            active.tail.close()
        if self.inotify is not None:
            self._loop.remove_reader(self.inotify.fd)
            self.inotify.close()
