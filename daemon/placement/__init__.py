"""Where a run's supervisor runs: here, or as a job of a cluster's own scheduler.

Every placement starts the same command, ``python -m daemon.shim RUN_DIR -- worker...``:
the supervisor writes the run's events, stderr and exit record into the run directory
wherever it runs, so exit records, tree kills, cancel and stop work the same everywhere.
``local`` is the daemon's own child (daemon/runs.py starts it). A cluster backend is one
module here with a small surface, after submitit's executors:

- ``check(run_id, run_dir, placement, shim_argv, stop_seconds)``: would the engine take it
  (PlacementError, one line, if not): said at submit, before a run is made;
- ``submit(...)``: the job id; ``find(run_id)``: the live job of a run, by the name derived
  from its id (a daemon that died between submit and its store finds it);
- ``poll(job_ids)``: each job's JobStatus; ``cancel``, ``kill``, ``signal``;
- ``explain(run_dir)``: why the engine ended the job, in words, from what it left in the run
  directory (Slurm's job output), or None.

The daemon never imports a scheduler's library: Slurm through its commands (slurm.py), Ray
through its Jobs API's HTTP interface (ray_jobs.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# the engines' words for a job held before it runs: on the wire (a run's resources.queue), so the
# protocol defines it for the app too
from daemon.protocol import PENDING_QUEUES  # noqa: F401

JOB_PREFIX = "mosaic-"          # a run's job name / submission id: mosaic-<run id>
JOB_SCRIPT = "job.sh"           # in the run directory: what was submitted, kept for the user
BACKENDS = ("slurm", "ray")
# how a user cancels a job outside mosaic, per engine: said in the run's reason when one did
OUTSIDE_CANCEL = {"slurm": "scancel", "ray": "ray job stop"}


class PlacementError(Exception):
    """The scheduler refused or could not be asked: one line, naming the problem."""


@dataclass
class JobStatus:
    """A job as its engine sees it, in the words every backend gives.

    ``state``: the engine's own word (Slurm: PENDING, RUNNING, TIMEOUT...; Ray: PENDING,
    RUNNING, STOPPED...), shown as it is; ``pending``: waiting for resources (``reason``: the
    engine's why, e.g. Slurm's Priority); ``ended``: the engine will not run it any more;
    ``ending``: why it ended, in words, for a run whose supervisor left no exit record;
    ``cancelled``: it was cancelled through the engine; ``gone``: the engine forgot it;
    ``ends_at``: when its wall time runs out (epoch seconds); ``message``: the engine's own
    words about a pending job, whole (``reason`` is the short form a state column shows);
    ``no_record``: the engine's record of an ended job shows that its supervisor cannot have
    written an exit record (it never started, or died of a signal or an error), so none is
    waited for; ``ended_at``: when the engine says the job ended (epoch seconds)."""
    job_id: str
    state: str
    pending: bool = False
    ended: bool = False
    cancelled: bool = False
    gone: bool = False
    node: str = ""
    reason: str = ""
    ending: str = ""
    exit_code: str = ""
    ends_at: float | None = None
    message: str = ""
    no_record: bool = False
    ended_at: float | None = None


def job_name(run_id: str) -> str:
    return JOB_PREFIX + run_id


def backend_for(name: str, placement: dict[str, Any] | None = None):
    """The backend of a placement (``placement``: the run's, for the engine's address)."""
    if name == "slurm":
        from daemon.placement.slurm import SlurmBackend
        return SlurmBackend()
    if name == "ray":
        from daemon.placement.ray_jobs import RayBackend
        return RayBackend((placement or {}).get("address"))
    raise PlacementError(f"placement backend {name!r} is not one of {', '.join(BACKENDS)}")
