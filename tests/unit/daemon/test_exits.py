"""daemon/exits.py: every way a run can end, from the facts RunManager._finish gathers."""
from __future__ import annotations

import signal

from daemon import protocol as P
from daemon.exits import NO_EXIT_RECORD, STOP_OVERDUE, classify_exit
from daemon.placement import JobStatus
from workers.sdk.stop import STOPPED_EXIT


def run(job: str = "", cancel: bool = False, reason: str | None = None, stop: bool = False,
        requeue: bool = False) -> dict:
    placement = {"backend": job.split(":", 1)[0], "requeue": requeue} if job else {}
    return {"name": "brave-otter", "resources": {"job": job} if job else {}, "cancel_requested": cancel,
            "reason": reason, "stop_requested": stop, "config": {"placement": placement}}


def exited(code: int | None = 0, sig: int | None = None, cancel: bool = False, **more) -> dict:
    return {"returncode": code, "signal": sig, "worker_pid": 42, "ended_at": 100.0,
            "cancel_requested": cancel, **more}


def ended(state: str = "FAILED", **more) -> JobStatus:
    return JobStatus(job_id="7", state=state, ended=True, **more)


# -- no exit record, the scheduler's word -------------------------------------------------------
def test_a_job_that_ended_without_a_record_and_was_cancelled_by_the_user_is_cancelled():
    e = classify_exit(run("slurm:7", cancel=True), None, ended("CANCELLED", ended_at=50.0))
    assert (e.state, e.reason, e.fields) == (P.CANCELLED, "cancelled by the user", {"ended_at": 50.0})
    e = classify_exit(run("slurm:7", cancel=True, reason="stopped: wall"), None, ended())
    assert (e.state, e.reason, e.fields) == (P.CANCELLED, "stopped: wall", {})


def test_a_job_that_ended_without_a_record_takes_the_schedulers_word():
    job = "slurm:7"
    e = classify_exit(run(job), None, ended("CANCELLED", cancelled=True, ending="cancelled by root"))
    assert (e.state, e.reason) == (P.CANCELLED, "job slurm:7: cancelled by root")
    e = classify_exit(run(job), None, ended("?", gone=True, ending="the scheduler forgot it"))
    assert (e.state, e.reason) == (P.LOST, "job slurm:7: the scheduler forgot it") and not e.orphans
    e = classify_exit(run(job), None, ended("NODE_FAIL", ending="its node failed"))
    assert (e.state, e.reason) == (P.FAILED, "job slurm:7: its node failed")


def test_the_schedulers_explanation_makes_a_cancelled_job_a_failure():
    e = classify_exit(run("slurm:7"), None, ended("CANCELLED", cancelled=True, ending="cancelled"),
                      job_cause="killed for exceeding its memory request")
    assert (e.state, e.reason) == (P.FAILED, "job slurm:7: killed for exceeding its memory request")


# -- no exit record, no scheduler ----------------------------------------------------------------
def test_a_supervisor_gone_without_a_record_is_lost_and_its_processes_are_looked_for():
    e = classify_exit(run(), None, None)
    assert (e.state, e.reason, e.orphans) == (P.LOST, NO_EXIT_RECORD, True)


def test_a_supervisor_gone_without_a_record_on_a_full_disk_failed():
    e = classify_exit(run(), None, None, disk_full="the home's disk is full")
    assert (e.state, e.reason, e.orphans) == (P.FAILED, f"{NO_EXIT_RECORD} (the home's disk is full)", False)


# -- the exit record -----------------------------------------------------------------------------
def test_a_clean_exit_succeeded_with_the_records_fields():
    e = classify_exit(run(), exited(0), None)
    assert (e.state, e.reason) == (P.SUCCEEDED, None)
    assert e.fields == {"exit_code": 0, "worker_pid": 42, "ended_at": 100.0} and not e.requeue


def test_a_stop_whose_save_outlasted_its_grace_failed():
    why = f"{STOP_OVERDUE} 30 s of the stop request"
    e = classify_exit(run(cancel=True, reason=why), exited(None, signal.SIGKILL, cancel=True), None)
    assert (e.state, e.reason, e.fields["exit_signal"]) == (P.FAILED, why, "SIGKILL")


def test_a_sigterm_from_the_scheduler_that_no_one_asked_for_is_a_failure():
    e = classify_exit(run("slurm:7"), exited(143, cancel=True), ended("TIMEOUT", ending="its wall time ran out"))
    assert (e.state, e.reason) == (P.FAILED, "job slurm:7: its wall time ran out")
    e = classify_exit(run("slurm:7"), exited(143, cancel=True), ended("TIMEOUT", ending="x"),
                      job_cause="the wall time")
    assert e.reason == "job slurm:7: the wall time"


def test_a_cancel_is_cancelled_and_one_through_the_scheduler_says_so():
    e = classify_exit(run(cancel=True), exited(None, signal.SIGTERM), None)
    assert (e.state, e.reason, e.fields["exit_signal"]) == (P.CANCELLED, "cancelled by the user", "SIGTERM")
    e = classify_exit(run(), exited(143, cancel=True), None)     # the supervisor took a SIGTERM as a cancel
    assert (e.state, e.reason) == (P.CANCELLED, "cancelled by the user")
    e = classify_exit(run("slurm:7"), exited(143, cancel=True), ended("CANCELLED", cancelled=True))
    assert (e.state, e.reason) == (P.CANCELLED, "job slurm:7 was cancelled outside mosaic (scancel)")
    e = classify_exit(run("pbs:7"), exited(143, cancel=True), ended("", cancelled=False))
    assert e.reason == "job pbs:7 was cancelled outside mosaic (through its scheduler)"


def test_a_stop_is_stopped_at_its_checkpoints_step():
    e = classify_exit(run(stop=True), exited(STOPPED_EXIT), None, stopped={"step": 500})
    assert (e.state, e.reason) == (P.STOPPED, "stopped at step 500: mosaic continue brave-otter goes on from there")
    e = classify_exit(run("slurm:7", stop=True), exited(STOPPED_EXIT), None, stopped={"step": 500})
    assert e.state == P.STOPPED and "warning" not in e.reason


def test_a_stop_by_the_schedulers_warning_says_so_and_requeues_when_asked():
    e = classify_exit(run("slurm:7"), exited(STOPPED_EXIT), None, stopped={"step": 500})
    assert (e.state, e.requeue) == (P.STOPPED, False)
    assert e.reason == ("stopped at step 500 by job slurm:7's warning before its wall time (or a preemption): "
                        "mosaic continue brave-otter goes on from there")
    e = classify_exit(run("slurm:7", requeue=True), exited(STOPPED_EXIT), None, stopped={"step": 500})
    assert (e.state, e.requeue) == (P.STOPPED, True)
    assert e.reason == "stopped at step 500 by job slurm:7's warning before its wall time (or a preemption): requeued"


def test_the_stop_exit_code_without_a_checkpoint_is_a_failure():
    e = classify_exit(run(), exited(STOPPED_EXIT), None, stderr="boom")
    assert (e.state, e.reason, e.fields["stderr_tail"]) == (P.FAILED, f"worker exited with code {STOPPED_EXIT}", "boom")


def test_a_failure_names_its_code_the_workers_words_and_a_full_disk():
    stderr = "\n".join(f"line {i}" for i in range(100))
    e = classify_exit(run(), exited(1), None, stderr=stderr, failed_reason="the env broke\nmore",
                      disk_full="the home's disk is full")
    assert e.state == P.FAILED
    assert e.reason == "worker exited with code 1: the env broke (the home's disk is full)"
    assert e.fields["stderr_tail"].splitlines() == [f"line {i}" for i in range(80, 100)]
    assert "exit_signal" not in e.fields
    e = classify_exit(run(), exited(1), None, failed_reason="x" * 500)
    assert e.reason == "worker exited with code 1: " + "x" * 300


def test_a_failure_the_scheduler_explains_names_the_job_only_for_a_run_with_one():
    e = classify_exit(run("slurm:7"), exited(137), None, job_cause="killed for its memory request")
    assert e.reason == "job slurm:7: killed for its memory request (worker exited with code 137)"
    e = classify_exit(run(), exited(137), None, job_cause="killed for its memory request")
    assert e.reason == "worker exited with code 137"


def test_a_signal_names_the_signal_or_the_crashing_library():
    e = classify_exit(run(), exited(None, signal.SIGKILL), None, stderr="Killed")
    assert (e.state, e.reason, e.fields["exit_signal"]) == (P.FAILED, "worker killed by SIGKILL", "SIGKILL")
    e = classify_exit(run(), exited(None, 77, signal_name="SIGWEIRD"), None)
    assert e.reason == "worker killed by SIGWEIRD"
    dump = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
            '  File "/site-packages/llama_cpp/llama.py", line 10 in eval\n'
            '  File "/w/run.py", line 3 in main\n')
    after = "\n".join(f"noise {i}" for i in range(30))   # the plain tail would show only this
    e = classify_exit(run(), exited(None, signal.SIGSEGV), None, stderr=dump + after)
    assert e.fields["exit_signal"] == "SIGSEGV" and "llama_cpp" in e.reason, e.reason
    assert e.fields["stderr_tail"].startswith("Fatal Python error")
