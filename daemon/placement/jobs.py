"""The runs a cluster's scheduler places (Slurm, Ray): submitting their supervisors as jobs, polling
the jobs, cancelling them, and what a scheduler says of a job that ended.

``ClusterRuns`` belongs to the ``RunManager`` (daemon/runs.py), which hands it its cluster runs
and ends them with what it found (``job_endings``, read by ``RunManager._finish``). Every
scheduler command runs off the event loop, one at a time (``ClusterRuns.call``).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable

from daemon import protocol as P
from daemon.home import EVENTS_FILE, EXIT_FILE, STDERR_FILE
from daemon.placement import PENDING_QUEUES, JobStatus, PlacementError, ray_relay
from daemon.placement import backend_for as placement_backend
from daemon.record import Job, placement_of, resources_of

if TYPE_CHECKING:
    from daemon.runs import ActiveRun, RunManager

log = logging.getLogger("mosaic.daemon.runs")

# a cluster job that ended: polls to wait for its exit record to show on a shared filesystem
JOB_END_POLLS = 5
# a cancelled cluster run whose job has not ended this long after its supervisor's grace is ended in
# mosaic's record all the same (a Ray job stopped while pending stays PENDING until it is placed)
CANCEL_MARGIN_SECONDS = 30.0
CLUSTER_GONE_SECONDS = 600.0   # a scheduler unanswered this long, a run quiet as long: its job is lost


class ClusterRuns:
    """The cluster side of a RunManager: its runs' jobs, as their schedulers see them."""

    def __init__(self, runs: RunManager):
        self.runs = runs
        self.engine_down: dict[tuple[str, str], float] = {}   # (backend, address): unanswered since (monotonic)
        self.job_endings: dict[str, JobStatus] = {}   # a job that ended: its status, for RunManager._finish
        self.cancel_untold: dict[str, str] = {}   # a cancelled job the engine could not be told of: why
        self.relays: dict[str, ray_relay.LogRelay] = {}   # unshared Ray runs: their job's log (cluster thread)
        self.pool: ThreadPoolExecutor | None = None   # the schedulers' commands (call)

    def call(self, what: str, call: Callable[[], Any],
             then: Callable[[Any], None] | None = None,
             failed: Callable[[PlacementError], None] | None = None) -> None:
        """A scheduler's command (sbatch, squeue, an HTTP call to Ray) off the event loop: a controller
        that is down makes them wait for many seconds, and no client may wait with them. ``then``
        (with the answer) or ``failed`` run back on the loop; one command at a time, in order."""
        def done(future: asyncio.Future) -> None:
            try:
                value = future.result()
            except PlacementError as exc:
                if failed is not None:
                    failed(exc)
                else:
                    log.warning("%s: %s", what, exc)
                return
            except Exception:  # noqa: BLE001 -- a backend's bug must not take the daemon down
                log.exception("%s failed", what)
                return
            if then is not None:
                then(value)
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="cluster")
        self.runs._loop.run_in_executor(self.pool, call).add_done_callback(done)

    def start(self, run: dict[str, Any], run_dir: str, shim: list[str], env: dict[str, str],
              placement: dict[str, Any]) -> None:
        """Submit the run's supervisor as a job of its scheduler; a job of this run that is there
        already (a daemon that died between sbatch and the store) is taken instead."""
        run_id = run["id"]
        try:
            backend = placement_backend(placement["backend"], placement)
        except PlacementError as exc:
            self.runs._set_final(run_id, P.FAILED, None, reason=f"cannot submit to {placement['backend']}: {exc}")
            return
        # a run that can stop asks for a warning before its wall time (one that cannot would die of it)
        warning = self.runs.stop_grace_seconds if self.runs._can_stop(run) else 0
        updated = self.runs.store.update_run(run_id, state=P.STARTING, started_at=run.get("started_at") or time.time(),
                                        pid=None, pid_start=None, resources={"queue": "SUBMITTING"})
        self.runs.on_run(updated, run_id, updated["rev"])

        def submitted(job_id: str) -> None:
            job = Job(backend.name, job_id)
            now = self.runs.store.get(run_id)
            if now is None or now["cancel_requested"]:   # cancelled while it was being submitted
                self.call(f"run {run_id}: cancel {job}", lambda: backend.kill(job_id))
                if now is not None:
                    self.runs._set_final(run_id, P.CANCELLED, None, reason=now["reason"] or "cancelled by the user")
                return
            updated = self.runs.store.update_run(run_id, resources={"job": str(job), "queue": "PENDING"})
            self.runs.on_run(updated, run_id, updated["rev"])
            self.runs._watch(updated, run_dir, 0, None, job=job)
            log.info("run %s submitted to %s as job %s", run_id, backend.name, job_id)

        def refused(exc: PlacementError) -> None:
            now = self.runs.store.get(run_id)
            if now is not None and now["cancel_requested"]:
                self.runs._set_final(run_id, P.CANCELLED, None, reason=now["reason"] or "cancelled by the user")
            else:
                self.runs._set_final(run_id, P.FAILED, None, reason=f"cannot submit to {backend.name}: {exc}")

        self.call(f"run {run_id}: submit", lambda: backend.find(run_id) or backend.submit(
            run_id, run_dir, placement, shim, env, warning), then=submitted, failed=refused)

    def poll(self) -> None:
        """Every cluster_poll_seconds: the scheduler's view of the cluster runs (pending, running on
        which node, ended), and their files, which inotify does not see when a node writes them."""
        by_engine: dict[tuple[str, str], list[ActiveRun]] = {}   # (backend, address): one ask each
        for active in self.runs.active.values():
            if active.job is not None:
                engine = (active.job.engine, active.placement.get("address") or "")
                by_engine.setdefault(engine, []).append(active)
        for engine in set(self.engine_down) - set(by_engine):   # no run there any more: an outage forgotten
            del self.engine_down[engine]
        if not by_engine:
            self.runs._loop.call_later(self.runs.cluster_poll_seconds, self.poll)
            return

        def ask() -> dict[tuple[str, str], dict[str, JobStatus] | PlacementError]:
            answers: dict[tuple[str, str], dict[str, JobStatus] | PlacementError] = {}
            for engine, runs in by_engine.items():
                try:
                    backend = placement_backend(engine[0], runs[0].placement)
                    answers[engine] = backend.poll([a.job.id for a in runs])
                except PlacementError as exc:
                    answers[engine] = exc
                    continue
                # unshared Ray runs: their events and exit record from the job's log (after its status)
                ray_relay.relay_all(backend, runs, answers[engine], self.relays)
            return answers

        def answered(answers: dict[tuple[str, str], dict[str, JobStatus] | PlacementError]) -> None:
            try:
                for engine, statuses in answers.items():
                    down = isinstance(statuses, PlacementError)
                    if down and engine not in self.engine_down:   # the controller is down: the runs go on
                        self.engine_down[engine] = time.monotonic()
                        log.warning("cannot poll %s: %s (said once until it answers again)", engine[0], statuses)
                    elif not down and self.engine_down.pop(engine, None) is not None:
                        log.info("%s answers again", engine[0])
                    for active in by_engine[engine]:
                        if self.runs.active.get(active.run_id) is not active:
                            continue   # ended meanwhile
                        self.runs._ingest(active.run_id)
                        if not down:
                            self.job_status(active, statuses.get(active.job.id))
                        else:
                            self.engine_unanswered(active, engine, statuses)
            finally:
                self.runs._loop.call_later(self.runs.cluster_poll_seconds, self.poll)

        def failed(exc: PlacementError) -> None:   # not raised by ask(); kept for the contract
            self.runs._loop.call_later(self.runs.cluster_poll_seconds, self.poll)

        self.call("poll the cluster jobs", ask, then=answered, failed=failed)

    def job_status(self, active: ActiveRun, status: JobStatus | None) -> None:
        run = self.runs.store.get(active.run_id)
        if run is None or status is None:
            return
        resources = dict(resources_of(run))
        # the reason short (a state column's "pending (resources)"), the engine's words whole beside it
        shown = {"queue": status.state or resources.get("queue"), "node": status.node or resources.get("node"),
                 "queue_reason": status.reason if status.pending else None,
                 "queue_message": status.message if status.pending and status.message != status.reason else None}
        if status.ends_at is not None and abs(status.ends_at - (resources.get("ends_at") or 0)) > 2:
            shown["ends_at"] = round(status.ends_at)   # squeue's time left, read again each poll
        if any(resources.get(k) != v for k, v in shown.items()):
            updated = self.runs.store.update_run(active.run_id, resources={**resources, **shown})
            self.runs.on_run(updated, active.run_id, updated["rev"])
        if not status.ended:
            return
        exit_file = os.path.join(active.run_dir, EXIT_FILE)
        # a shared filesystem may show the exit record a moment after the job ended; a job whose
        # scheduler says its supervisor never recorded one (it never ran, or was killed) ends now
        if os.path.exists(exit_file) or status.no_record or active.gone_polls >= JOB_END_POLLS:
            self.job_endings[active.run_id] = status
            self.runs._on_exit(active.run_id)
        else:
            active.gone_polls += 1

    def engine_unanswered(self, active: ActiveRun, engine: tuple[str, str], exc: PlacementError) -> None:
        """A poll the run's scheduler did not answer. The run's own record, where its supervisor
        wrote one, says how it ended; a run whose scheduler has not answered for cluster_gone_seconds
        and whose files have not changed for as long is lost, saying why (its engine is gone: it
        would otherwise stay pending or running for ever, and could not be deleted)."""
        if os.path.exists(os.path.join(active.run_dir, EXIT_FILE)):
            self.runs._on_exit(active.run_id)
            return
        unanswered = time.monotonic() - self.engine_down.get(engine, time.monotonic())
        if unanswered < self.runs.cluster_gone_seconds:
            return
        newest = 0.0
        for name in (EVENTS_FILE, STDERR_FILE, "supervisor.json"):
            try:
                newest = max(newest, os.stat(os.path.join(active.run_dir, name)).st_mtime)
            except OSError:
                pass
        if time.time() - newest < self.runs.cluster_gone_seconds:
            return   # its supervisor still writes: the scheduler is away, the job is not
        self.job_endings[active.run_id] = JobStatus(
            active.job.id if active.job else "", "", ended=True, gone=True,
            ending=f"{engine[0]} has not answered for {unanswered:.0f} s ({exc}), and the run has written "
                   f"nothing for as long: its job is taken as gone (cluster_gone_seconds in settings.json)")
        self.runs._on_exit(active.run_id)

    def cancel(self, run: dict[str, Any], active: ActiveRun) -> None:
        """A cluster run's cancel. The engine is told (a job that has not started is removed; a
        running one's supervisor gets SIGTERM and records its end), then asked once how the job is.
        The run ends in mosaic's record whatever the engine does: at once where no supervisor runs
        (the job never started) or the engine could not be told about a job that had not started,
        else when its supervisor records its end, or CANCEL_MARGIN_SECONDS after its grace at the
        latest; the reason says what the engine confirmed."""
        run_id, job = run["id"], active.job
        waiting = str(resources_of(run).get("queue")) in PENDING_QUEUES
        try:
            backend = placement_backend(job.engine, active.placement)
        except PlacementError as exc:
            self.end_cancelled(run_id, active, None, f"{job.engine} was not told ({exc})")
            return
        end = backend.kill if waiting else backend.cancel   # nothing runs yet: the job goes

        def tell() -> tuple[str | None, JobStatus | None]:
            try:
                end(job.id)
                told = None
            except PlacementError as exc:
                told = str(exc)
            try:
                status = backend.poll([job.id]).get(job.id)
            except PlacementError:
                status = None
            return told, status

        def answered(answer: tuple[str | None, JobStatus | None]) -> None:
            told, status = answer
            if self.runs.active.get(run_id) is not active:
                return   # ended meanwhile
            if told is not None:
                self.cancel_untold[run_id] = told
            if status is not None and status.ended and status.no_record \
                    and not os.path.exists(os.path.join(active.run_dir, EXIT_FILE)):
                self.end_cancelled(run_id, active, status, f"{backend.name} confirmed that job {job} ended "
                                                            f"({status.state})")
                return
            if status is not None:
                self.job_status(active, status)   # an ended job whose record is there ends the run now
                if self.runs.active.get(run_id) is not active:
                    return
            never_ran = status.pending if status is not None else waiting
            if status is not None and status.gone:
                self.end_cancelled(run_id, active, status, f"{backend.name} no longer knows job {job}")
            elif never_ran and told is None:
                self.end_cancelled(run_id, active, status, f"{backend.name} took the cancel of job {job}, which "
                                    f"never started" + (f" (it still lists it {status.state} until it places or "
                                                        f"drops it)" if status and status.pending else ""))
            elif never_ran:
                self.end_cancelled(run_id, active, status, f"{backend.name} was not told ({told}): job {job}, "
                                                            f"which never started, may still be queued there")

        self.call(f"run {run_id}: cancel {job}", tell, then=answered)
        wait = self.runs.grace_seconds + CANCEL_MARGIN_SECONDS + JOB_END_POLLS * self.runs.cluster_poll_seconds
        self.runs._loop.call_later(wait, self.cancel_overdue, run_id, active, wait)

    def cancel_overdue(self, run_id: str, active: ActiveRun, waited: float) -> None:
        if self.runs.active.get(run_id) is not active:
            self.cancel_untold.pop(run_id, None)
            return   # it ended
        run = self.runs.store.get(run_id)
        queue = resources_of(run).get("queue") if run else None
        told = self.cancel_untold.get(run_id)
        engine = active.job.engine if active.job else None
        said = f"{engine} was not told ({told})" if told else f"{engine} last said {queue or 'nothing'}"
        self.end_cancelled(run_id, active, None, f"job {active.job} had not ended {waited:.0f} s after the cancel "
                                                  f"({said}): its end is not confirmed")

    def end_cancelled(self, run_id: str, active: ActiveRun, status: JobStatus | None, confirmed: str) -> None:
        """End a cancelled cluster run in mosaic's record, with what its engine confirmed."""
        self.cancel_untold.pop(run_id, None)
        run = self.runs.store.get(run_id)
        if run is None or self.runs.active.get(run_id) is not active:
            return
        updated = self.runs.store.update_run(run_id, reason=f"{run['reason'] or 'cancelled by the user'}; {confirmed}")
        self.runs.on_run(updated, run_id, updated["rev"])
        self.job_endings[run_id] = status if status is not None and status.ended else \
            JobStatus(active.job.id if active.job else "", status.state if status else "", ended=True)
        self.runs._on_exit(run_id)

    def job_cause(self, run: dict[str, Any], run_dir: str) -> str | None:
        """Why the run's scheduler ended its job, from what it left in the run directory."""
        placement = placement_of(run)
        try:
            explain = getattr(placement_backend(placement.get("backend"), placement), "explain", None)
            return explain(run_dir) if explain is not None else None
        except PlacementError:
            return None

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
