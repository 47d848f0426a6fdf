"""Runs as Slurm batch jobs, through Slurm's own commands only (sbatch, squeue, scontrol,
scancel, sacct where accounting is kept): the job script ``exec``s the supervisor, so the batch
step's signals (scancel, the wall-time warning of ``--signal``) reach it. Submitted with
``--no-requeue``: a job Slurm reran by itself would start the run's worker again from its first
step; a run that stopped at its wall time is continued by the daemon as a new job of the same
run (daemon/runs.py, ``placement.requeue``)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from typing import Any

from daemon.placement import JOB_SCRIPT, JobStatus, PlacementError, job_name

SLURM_OUTPUT = "supervisor.log"  # the job's own output, as a local run's supervisor log
COMMAND_SECONDS = 30.0          # a scheduler command that takes longer is taken as failed
# a run's placement fields as sbatch options (docs/cluster.md has the table)
SBATCH_FLAGS = {"partition": "--partition={}", "account": "--account={}", "cpus": "--cpus-per-task={}",
                "mem": "--mem={}", "gpus": "--gres=gpu:{}", "time": "--time={}"}


SLURM_PENDING = frozenset({"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "RESV_DEL_HOLD"})
SLURM_ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                         "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"})
# How a job the scheduler ended says why, for a run that left no exit record
SLURM_REASONS = {
    "CANCELLED": "the job was cancelled through Slurm (scancel) before its supervisor could record an exit",
    "TIMEOUT": "the job reached its wall time (placement.time) and Slurm killed it",
    "OUT_OF_MEMORY": "the job used more memory than it asked for (placement.mem) and Slurm killed it",
    "NODE_FAIL": "the job's node failed",
    "PREEMPTED": "the job was preempted by Slurm",
    "BOOT_FAIL": "the job's node could not boot",
    "DEADLINE": "the job missed its deadline",
    "FAILED": "the job failed before its supervisor could record an exit",
}


# What slurmstepd writes into a job's output when it ends the job, and what that means; the
# job's output is the run's supervisor.log (sbatch --output)
STEPD_SAYS = (
    (re.compile(r"Exceeded job memory limit|Exceeded step memory limit|oom[_-]kill event|oom-kill"),
     SLURM_REASONS["OUT_OF_MEMORY"]),
    (re.compile(r"CANCELLED AT \S+ DUE TO TIME LIMIT"), SLURM_REASONS["TIMEOUT"]),
    (re.compile(r"CANCELLED AT \S+ DUE TO PREEMPTION"), SLURM_REASONS["PREEMPTED"]),
    (re.compile(r"CANCELLED AT \S+ DUE TO NODE FAILURE"), SLURM_REASONS["NODE_FAIL"]),
)
OUTPUT_TAIL_BYTES = 64 * 1024


def seconds_of(slurm_time: str) -> int | None:
    """Slurm's [D-]HH:MM:SS / MM:SS as seconds; None for UNLIMITED, INVALID, NOT_SET."""
    days, _, clock = slurm_time.strip().rpartition("-")
    parts = clock.split(":")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3 or (days and not days.isdigit()):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + int(days or 0) * 86400


def epoch_of(slurm_time: str) -> float | None:
    """Slurm's 2026-11-28T07:01:27 (the controller's local time, as its commands print it) as
    epoch seconds; None for Unknown, None, N/A."""
    try:
        return time.mktime(time.strptime(slurm_time.strip(), "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None


def supervisor_silent(exit_code: str, started: bool | None) -> bool:
    """Whether an ended job's own record shows that its supervisor cannot have written an exit
    record: the job never started (it was cancelled or failed while pending), or its batch process
    (the supervisor, exec'd by the job script) ended other than with 0: killed by a signal (a
    memory kill, scancel --signal=KILL) or failed before it could record. A supervisor that records
    returns 0 afterwards, so only then is its record waited for (a shared filesystem may show it a
    moment after the job ended). ``exit_code``: Slurm's ExitCode, ``code:signal``."""
    if started is False:
        return True
    code, _, sig = exit_code.partition(":")
    if not code.isdigit() or not (sig or "0").isdigit():
        return False   # not said: wait for the record
    return int(code) != 0 or int(sig or 0) != 0


def status(job_id: str, state: str, node: str = "", reason: str = "", exit_code: str = "",
           time_left: str = "", end_time: str = "", started: bool | None = None) -> JobStatus:
    """A job's JobStatus from Slurm's words for it. ``end_time``: its EndTime; ``started``: whether
    it ever ran on a node (scontrol names a BatchHost), None where not said."""
    state = state.split()[0] if state else ""   # sacct says "CANCELLED by 0"
    left = seconds_of(time_left) if time_left and state == "RUNNING" else None
    ended = state in SLURM_ENDED
    reason = "" if reason in ("None", "(null)") else reason
    return JobStatus(job_id, state, pending=state in SLURM_PENDING, ended=ended,
                     cancelled=state == "CANCELLED", node="" if node in ("(null)", "None assigned") else node,
                     reason=reason, message=reason,
                     ending=SLURM_REASONS.get(state, f"the job ended ({state}) before its supervisor could "
                                                     f"record an exit"),
                     exit_code=exit_code, ends_at=time.time() + left if left is not None else None,
                     no_record=ended and supervisor_silent(exit_code, started),
                     ended_at=epoch_of(end_time) if ended and end_time else None)


def scontrol_status(job_id: str, out: str) -> JobStatus:
    """A job's JobStatus from ``scontrol show job -o``'s line: a job that never ran on a node has no
    BatchHost (cancelled while pending, its StartTime is its EndTime, its ExitCode 0:0)."""
    fields = dict(item.split("=", 1) for item in out.split() if "=" in item)
    return status(job_id, fields.get("JobState", ""), fields.get("NodeList", ""), fields.get("Reason", ""),
                  fields.get("ExitCode", ""), end_time=fields.get("EndTime", ""),
                  started=bool(fields.get("BatchHost")))


def _run(argv: list[str], env: dict[str, str] | None = None, input: str | None = None) -> str:
    """A scheduler command's stdout; PlacementError with its first line of complaint."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, input=input, env=env,
                              timeout=COMMAND_SECONDS, stdin=None if input is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise PlacementError(f"{argv[0]} not found: Slurm's commands are not installed on this machine "
                             f"(or not on the daemon's PATH)") from None
    except subprocess.TimeoutExpired:
        raise PlacementError(f"{argv[0]} did not answer in {COMMAND_SECONDS:g} s: is the Slurm controller up?") from None
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr or proc.stdout).splitlines() if line.strip()]
        # sbatch says "sbatch: error: ..." then a line with the controller's reason: both matter
        said = "; ".join(line.removeprefix(f"{os.path.basename(argv[0])}: ").removeprefix("error: ")
                         for line in lines[:2]) or f"exit status {proc.returncode}"
        raise PlacementError(f"{os.path.basename(argv[0])}: {said}")
    return proc.stdout


class SlurmBackend:
    """Runs as Slurm batch jobs, through sbatch, squeue, scontrol and scancel."""

    name = "slurm"

    def __init__(self, env: dict[str, str] | None = None):
        self.env = env   # the commands' environment (SLURM_CONF), the daemon's by default

    # -- what is submitted ------------------------------------------------------
    def sbatch_args(self, run_id: str, run_dir: str, placement: dict[str, Any], stop_seconds: float) -> list[str]:
        """sbatch's options for a run: its name (from the run id), its directory and output, the
        resources asked for, and, with a wall time, the warning signal that makes the run stop with
        a checkpoint ``stop_seconds`` before it (``--signal=B:USR1@S``: to the supervisor; Slurm
        sends it up to a minute early, so never less than 60 s)."""
        args = [f"--job-name={job_name(run_id)}", f"--chdir={run_dir}",
                f"--output={os.path.join(run_dir, SLURM_OUTPUT)}", "--open-mode=append", "--export=ALL",
                "--nodes=1", "--ntasks=1", "--no-requeue"]
        args += [flag.format(placement[key]) for key, flag in SBATCH_FLAGS.items() if placement.get(key)]
        if placement.get("time") and stop_seconds > 0:   # 0: the run cannot stop, the warning would kill it
            args.append(f"--signal=B:USR1@{max(60, int(stop_seconds))}")
        return args + list(placement.get("extra_args") or [])

    @staticmethod
    def job_script(shim_argv: list[str]) -> str:
        # exec: the supervisor is the batch step's process, so scancel's and --signal's signals reach it
        return "#!/bin/sh\n# written by mosaic: the run's supervisor, as its own Slurm job\nexec " + \
            " ".join(shlex.quote(a) for a in shim_argv) + "\n"

    def check(self, run_id: str, run_dir: str, placement: dict[str, Any], shim_argv: list[str],
              stop_seconds: float) -> None:
        """Ask the scheduler whether it would take the job (sbatch --test-only): an unknown
        partition or a request it refuses is said now, before a run is made."""
        try:
            _run(["sbatch", "--test-only", *self.sbatch_args(run_id, run_dir, placement, stop_seconds)],
                 env=self.env, input=self.job_script(shim_argv))
        except PlacementError as exc:
            # Slurm's words rarely name the request it could not meet ("Requested node configuration
            # is not available"): the requests go with them
            asked = [f"{key}={placement[key]}" for key in SBATCH_FLAGS if placement.get(key)]
            raise PlacementError(f"{exc} (asked: {', '.join(asked)})" if asked else str(exc)) from None

    def submit(self, run_id: str, run_dir: str, placement: dict[str, Any], shim_argv: list[str],
               env: dict[str, str], stop_seconds: float) -> str:
        """The job id. ``env``: the run's environment, exported to the job (--export=ALL)."""
        script = self.job_script(shim_argv)
        with open(os.path.join(run_dir, JOB_SCRIPT), "w", encoding="utf-8") as f:
            f.write(script)
        out = _run(["sbatch", "--parsable", *self.sbatch_args(run_id, run_dir, placement, stop_seconds)],
                   env={**env, **(self.env or {})}, input=script)
        job_id = out.strip().split(";")[0]
        if not job_id.isdigit():
            raise PlacementError(f"sbatch answered {out.strip()!r}, not a job id")
        return job_id

    # -- what it is doing -------------------------------------------------------
    def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """Each job's status; a job neither squeue nor scontrol knows is ``gone``."""
        if not job_ids:
            return {}
        try:
            out = _run(["squeue", "-h", "-t", "all", "-j", ",".join(job_ids), "-o", "%i|%T|%N|%r|%L"], env=self.env)
        except PlacementError as exc:
            if "Invalid job id" not in str(exc):   # squeue's answer when it knows none of them
                raise
            out = ""
        found: dict[str, JobStatus] = {}
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 5 and parts[0] in job_ids:
                found[parts[0]] = status(parts[0], parts[1], parts[2], parts[3], time_left=parts[4])
        for job_id in job_ids:
            if job_id not in found:
                found[job_id] = self.show(job_id)
            elif found[job_id].ended:
                # squeue gives no exit code: the job's own record says whether its supervisor can
                # have recorded an exit, and when the job ended
                try:
                    found[job_id] = self.show(job_id)
                except PlacementError:
                    pass
        return found

    def show(self, job_id: str) -> JobStatus:
        """scontrol's record of one job (it keeps ended jobs for MinJobAge), then the accounting's
        (sacct, where Slurm keeps one); ``gone`` if neither knows it."""
        try:
            out = _run(["scontrol", "show", "job", "-o", job_id], env=self.env)
        except PlacementError as exc:
            if "Invalid job id" in str(exc):
                return self.accounted(job_id)
            raise
        return scontrol_status(job_id, out)

    def accounted(self, job_id: str) -> JobStatus:
        """sacct's record of a job scontrol has forgotten; ``gone`` without accounting or record."""
        try:
            out = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State,NodeList,ExitCode,End"],
                       env=self.env)
        except PlacementError:   # "Slurm accounting storage is disabled", or no sacct at all
            return JobStatus(job_id, "", ended=True, gone=True, ending="Slurm has forgotten the job and keeps "
                                                                          "no accounting to ask")
        for line in out.splitlines():
            parts = line.strip().split("|")
            if len(parts) == 5 and parts[0] == job_id:
                return status(job_id, parts[1], parts[2], exit_code=parts[3], end_time=parts[4],
                              started=parts[2] not in ("", "None assigned"))
        return JobStatus(job_id, "", ended=True, gone=True, ending="neither Slurm nor its accounting knows the job")

    def find(self, run_id: str) -> str | None:
        """The live job of a run, by its name: a daemon that died between sbatch and the store finds
        it (a job of the run that ended, an earlier start of a continued run, is not it)."""
        out = _run(["squeue", "-h", "-t", "all", "-n", job_name(run_id), "-o", "%i|%T"], env=self.env)
        live = [parts[0] for parts in (line.strip().split("|") for line in out.splitlines())
                if len(parts) == 2 and parts[1] not in SLURM_ENDED]
        return live[-1] if live else None

    @staticmethod
    def explain(run_dir: str) -> str | None:
        """Why Slurm ended the job, from what slurmstepd wrote into its output (the memory limit, the
        wall time, a preemption, a node failure), for a run whose own record cannot say: the job's
        state is FAILED or CANCELLED after a kill for memory where no cgroup reports it."""
        try:
            with open(os.path.join(run_dir, SLURM_OUTPUT), "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - OUTPUT_TAIL_BYTES))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return None
        stepd = "\n".join(line for line in tail.splitlines() if line.startswith("slurmstepd"))
        for pattern, words in STEPD_SAYS:
            if pattern.search(stepd):
                return words
        return None

    # -- telling it -------------------------------------------------------------
    def cancel(self, job_id: str) -> None:
        """SIGTERM to the job's steps and the batch step (the supervisor), then SIGKILL after
        Slurm's KillWait: the supervisor's own grace does the rest."""
        _run(["scancel", "--signal=TERM", "--full", job_id], env=self.env)

    def kill(self, job_id: str) -> None:
        _run(["scancel", job_id], env=self.env)

    def signal(self, job_id: str, signame: str) -> None:
        """A signal to the supervisor (the batch step's process)."""
        _run(["scancel", f"--signal={signame}", "--batch", job_id], env=self.env)

