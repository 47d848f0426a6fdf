"""How a cluster job's state reads: the scheduler's record of an ended job decides whether its
supervisor's exit record is waited for and when the run ended (daemon/placement/slurm.py,
ray_jobs.py), and a pending job's state stays short where runs are listed (mosaic_tui/fmt.py).
The scheduler's lines here are what the tests' real Slurm (tests/plugins/slurm_cluster.py) printed."""
from __future__ import annotations

import time

from daemon.placement import ray_jobs, slurm
from mosaic_tui import fmt

# scontrol show job -o, trimmed to the fields read (the rest of the line is as Slurm prints it)
CANCELLED_PENDING = ("JobId=1 JobName=mosaic-01J JobState=CANCELLED Reason=JobHeldUser ExitCode=0:0 "
                     "RunTime=00:00:00 SubmitTime=2026-11-28T07:01:18 StartTime=2026-11-28T07:01:19 "
                     "EndTime=2026-11-28T07:01:19 Partition=debug NodeList= NumNodes=1 WorkDir=/tmp/x")
KILLED = ("JobId=2 JobName=mosaic-01J JobState=FAILED Reason=JobLaunchFailure ExitCode=0:9 RunTime=00:00:01 "
          "StartTime=2026-11-28T07:01:26 EndTime=2026-11-28T07:01:27 NodeList=vm BatchHost=vm NumNodes=1")
RECORDED = ("JobId=3 JobName=mosaic-01J JobState=COMPLETED Reason=None ExitCode=0:0 RunTime=00:00:09 "
            "StartTime=2026-11-28T07:02:00 EndTime=2026-11-28T07:02:09 NodeList=vm BatchHost=vm NumNodes=1")
FAILED_TO_START = ("JobId=4 JobState=FAILED Reason=NonZeroExitCode ExitCode=127:0 RunTime=00:00:00 "
                   "StartTime=2026-11-28T07:01:23 EndTime=2026-11-28T07:01:23 NodeList=vm BatchHost=vm")
RUNNING = ("JobId=5 JobState=RUNNING Reason=None ExitCode=0:0 RunTime=00:00:04 StartTime=2026-11-28T07:03:00 "
           "EndTime=2026-11-28T08:03:00 NodeList=vm BatchHost=vm")


def epoch(text: str) -> float:
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def test_a_slurm_job_that_never_ran_or_whose_supervisor_died_waits_for_no_exit_record():
    never_ran = slurm.scontrol_status("1", CANCELLED_PENDING)
    assert never_ran.ended and never_ran.cancelled and never_ran.no_record
    assert never_ran.ended_at == epoch("2026-11-28T07:01:19")     # the scheduler's end, not when it was seen
    killed = slurm.scontrol_status("2", KILLED)                      # the batch process (the supervisor) SIGKILLed
    assert killed.ended and killed.no_record and killed.ended_at == epoch("2026-11-28T07:01:27")
    assert slurm.scontrol_status("4", FAILED_TO_START).no_record      # the supervisor failed before it could record
    # a supervisor that ended by itself (exit 0) wrote its record: a shared filesystem may show it late
    recorded = slurm.scontrol_status("3", RECORDED)
    assert recorded.ended and not recorded.no_record and recorded.ended_at == epoch("2026-11-28T07:02:09")
    running = slurm.scontrol_status("5", RUNNING)
    assert not running.ended and not running.no_record and running.ended_at is None


def test_the_exit_code_rule_of_slurm_jobs():
    assert not slurm.supervisor_silent("0:0", True)
    assert slurm.supervisor_silent("0:0", False)          # never on a node
    assert slurm.supervisor_silent("0:15", True) and slurm.supervisor_silent("1:0", None)
    assert not slurm.supervisor_silent("", None)           # not said: the record is waited for
    assert slurm.epoch_of("Unknown") is None and slurm.epoch_of("None") is None


def test_a_ray_job_pending_on_resources_says_so_short_and_keeps_rays_words():
    message = ("Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom "
               "resources) to become available. It may be waiting for the runtime environment to be set up.")
    pending = ray_jobs.status("mosaic-01J-abc", {"status": "PENDING", "message": message, "start_time": 1})
    assert pending.pending and pending.reason == "resources" and pending.message == message
    # a job stopped before its supervisor actor had a node never ran the supervisor
    stopped = ray_jobs.status("mosaic-01J-abc", {"status": "STOPPED", "end_time": 1795000000500})
    assert stopped.ended and stopped.no_record and stopped.ended_at == 1795000000.5
    ran = ray_jobs.status("mosaic-01J-abc", {"status": "STOPPED", "driver_node_id": "6f4659e8aa",
                                             "end_time": 1795000000500, "driver_exit_code": 0})
    assert ran.ended and not ran.no_record


def cluster_run(queue: str, **resources) -> dict:
    return {"name": "r", "state": "starting", "config": {"placement": {"backend": "ray"}},
            "resources": {"job": "ray:mosaic-01J-abc", "queue": queue, **resources}}


def test_a_pending_cluster_runs_state_is_short_and_the_schedulers_words_are_kept_whole():
    message = "Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources)"
    run = cluster_run("PENDING", queue_reason="resources", queue_message=message)
    assert fmt.state_label(run) == "pending (resources)"
    assert fmt.queue_message(run) == message
    # a scheduler's reason that is long anyway is cut for the state, and whole in queue_message
    long_reason = "ReqNodeNotAvail,_UnavailableNodes:gpu[01-64],_Reserved_for_maintenance"
    run = cluster_run("PENDING", queue_reason=long_reason)
    assert len(fmt.state_label(run)) <= len("pending ()") + fmt.QUEUE_REASON_CHARS
    assert fmt.queue_message(run) == long_reason
    assert fmt.queue_message(cluster_run("PENDING", queue_reason="Priority")) is None
    assert fmt.state_label(cluster_run("PENDING", queue_reason="Priority")) == "pending (Priority)"


def test_a_cancelled_cluster_run_whose_job_ended_does_not_read_as_mosaics_stopped():
    """Ray lists a job it stopped STOPPED: the run being cancelled is starting*, never stopped*
    (mosaic's own continuable state)."""
    run = {**cluster_run("STOPPED"), "cancel_requested": True}
    assert fmt.state_label(run) == "starting*"
    assert fmt.state_label({**cluster_run("CANCELLED"), "state": "running", "cancel_requested": True}) == "running*"
    assert fmt.queue_message(run) is None
