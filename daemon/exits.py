"""How a run ended: its final state, reason and fields, from what was left of it.

``classify_exit`` is pure: ``RunManager._finish`` gathers the facts (the supervisor's exit
record, the scheduler's word on the run's job, the end of stderr, the scheduler's explanation,
whether the disk is full) and applies the answer, so each way a run can end is testable without
a run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from daemon import protocol as P
from daemon.crash import crash_excerpt, crash_reason
from daemon.placement import OUTSIDE_CANCEL, JobStatus
from daemon.proctree import signal_name
from daemon.record import RunRecord, job_of, placement_of
from workers.sdk.stop import STOPPED_EXIT

STDERR_TAIL_LINES = 20
CRASH_DUMP_LINES = 400  # faulthandler's dump lists every Python thread: the crashing one may be far up
STOP_OVERDUE = "did not stop within"   # the reason of a stop whose save outlasted stop_grace_seconds
NO_EXIT_RECORD = "supervisor ended without an exit record"


@dataclass
class Ending:
    """A run's outcome. ``fields``: more of its record (exit code, signal, stderr tail, end time);
    ``requeue``: the scheduler stopped it and its placement asks for it to be queued again;
    ``orphans``: its supervisor vanished, so its processes may run on and are to be looked for."""
    state: str
    reason: str | None
    fields: dict[str, Any] = field(default_factory=dict)
    requeue: bool = False
    orphans: bool = False


def _last_lines(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


def classify_exit(run: RunRecord, record: dict[str, Any] | None, job_ended: JobStatus | None, *,
                  stopped: dict[str, Any] | None = None, failed_reason: str | None = None,
                  stderr: str = "", job_cause: str | None = None, disk_full: str | None = None) -> Ending:
    """The outcome of ``run`` (its store record).

    ``record``: the supervisor's exit.json, None if it left none; ``job_ended``: the scheduler's
    status of the run's ended job, None for a local run or one whose job was not seen to end;
    ``stopped``/``failed_reason``: what the run's events said (a stop's checkpoint, the worker's
    own failure); ``stderr``: the end of its stderr.log (at least ``CRASH_DUMP_LINES`` lines);
    ``job_cause``: the scheduler's explanation of why it ended the job (e.g. its memory limit);
    ``disk_full``: a note when the run's filesystem is full or read-only."""
    job = job_of(run)   # None for a local run
    if record is None and job_ended is not None:   # the job ended before or without its supervisor
        # when the scheduler says the job ended, not when this daemon saw it
        at = {"ended_at": job_ended.ended_at} if job_ended.ended_at else {}
        if run["cancel_requested"]:
            return Ending(P.CANCELLED, run["reason"] or "cancelled by the user", at)
        state = P.FAILED if job_cause else P.CANCELLED if job_ended.cancelled else \
            P.LOST if job_ended.gone else P.FAILED
        return Ending(state, f"job {job}: {job_cause or job_ended.ending}", at)
    if record is None:
        if disk_full:
            return Ending(P.FAILED, f"{NO_EXIT_RECORD} ({disk_full})")
        return Ending(P.LOST, NO_EXIT_RECORD, orphans=True)
    code, sig = record.get("returncode"), record.get("signal")
    fields: dict[str, Any] = {"exit_code": code, "worker_pid": record.get("worker_pid"),
                              "ended_at": record.get("ended_at")}
    if sig:
        fields["exit_signal"] = record.get("signal_name") or signal_name(sig)
    if run["cancel_requested"] and (run["reason"] or "").startswith(STOP_OVERDUE):
        return Ending(P.FAILED, run["reason"], fields)   # the stop's save did not fit its grace period
    if not run["cancel_requested"] and record.get("cancel_requested") and job_ended is not None \
            and job_ended.state and not job_ended.cancelled:
        # the scheduler ended the job (its node failed, its wall time, a preemption): the supervisor
        # took the SIGTERM for a cancel, but no one cancelled it
        return Ending(P.FAILED, f"job {job}: {job_cause or job_ended.ending}", fields)
    if run["cancel_requested"] or record.get("cancel_requested"):
        reason = run["reason"] or "cancelled by the user"
        if not run["cancel_requested"] and job_ended is not None:
            reason = (f"job {job} was cancelled outside mosaic "
                      f"({OUTSIDE_CANCEL.get(job.engine if job else '', 'through its scheduler')})")
        return Ending(P.CANCELLED, reason, fields)
    if code == STOPPED_EXIT and stopped:
        reason = f"stopped at step {stopped['step']}: mosaic continue {run['name']} goes on from there"
        if job is not None and not run["stop_requested"]:   # the scheduler's signal, not mosaic stop
            reason = (f"stopped at step {stopped['step']} by job {job}'s warning before its wall time "
                      f"(or a preemption)")
            if placement_of(run).get("requeue"):
                return Ending(P.STOPPED, reason + ": requeued", fields, requeue=True)
            reason += f": mosaic continue {run['name']} goes on from there"
        return Ending(P.STOPPED, reason, fields)
    if code == 0:
        return Ending(P.SUCCEEDED, None, fields)
    fields["stderr_tail"] = _last_lines(stderr, STDERR_TAIL_LINES)
    if sig:
        # a native crash names its library (faulthandler's frames on stderr, daemon/crash.py)
        dump = _last_lines(stderr, CRASH_DUMP_LINES)
        reason = crash_reason(fields["exit_signal"], dump) or f"worker killed by {fields['exit_signal']}"
        fields["stderr_tail"] = crash_excerpt(dump) or fields["stderr_tail"]
    else:
        reason = f"worker exited with code {code}"
    cause = job_cause if job is not None else None
    if cause:   # the scheduler killed the worker (its memory request), the supervisor lived on
        reason = f"job {job}: {cause} ({reason})"
    if failed_reason:
        reason += f": {failed_reason.splitlines()[0][:300]}"
    if disk_full:
        reason += f" ({disk_full})"
    return Ending(P.FAILED, reason, fields)
