"""A run's record: the store's row of a run (daemon/store.py) as the daemon reads it, and the
accessors of the parts a record may lack.

A TypedDict, not a class of its own: a record stays the plain dict the store returns and the
protocol sends, so the records every earlier daemon wrote, and clients of every version, read it
as before. A record from before placements (no ``placement`` in its config), one whose run never
had resources (``{}``), one of a local run (no ``job``): the accessors give the same empty answers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict


class RunRecord(TypedDict, total=False):
    """One run's row (the store's columns; JSON columns parsed)."""
    id: str
    name: str
    worker: str
    algo: str
    env: str
    config: dict[str, Any]       # what the run was asked with (validated): placement, mirror, ...
    state: str                   # protocol's run states
    created_at: float
    started_at: float | None
    ended_at: float | None
    pid: int | None              # its supervisor (daemon/shim.py); None for a cluster run
    pid_start: int | None
    worker_pid: int | None
    exit_code: int | None
    exit_signal: str | None
    reason: str | None
    stderr_tail: str | None
    cancel_requested: bool
    resources: dict[str, Any]    # {"gpu", "cpus"} here; {"job", "queue", "node", ...} on a cluster; "orphans"
    summary: dict[str, Any]
    ingest_offset: int
    rev: int
    paused_at: float | None
    paused_seconds: float
    tags: list[str]
    note: str
    sweep: str | None
    trial: int | None
    stop_requested: bool
    restarts: int


@dataclass(frozen=True)
class Job:
    """The cluster job that runs a run's supervisor: its engine (a placement backend's name:
    ``slurm``, ``ray``) and the engine's id of it. Stored as ``"<engine>:<id>"`` (``str(job)``) in
    the record's ``resources.job``."""
    engine: str
    id: str

    @classmethod
    def parse(cls, text: Any) -> Job | None:
        """The job a stored ``resources.job`` names; None for none (a local run), or for text that
        names no engine and id."""
        if not isinstance(text, str):
            return None
        engine, sep, job_id = text.partition(":")
        if not (engine and sep and job_id):
            return None
        return cls(engine, job_id)

    def __str__(self) -> str:
        return f"{self.engine}:{self.id}"


def placement_of(run: RunRecord) -> dict[str, Any]:
    """The run's placement ({} for this machine, as a record from before placements has it)."""
    placement = (run.get("config") or {}).get("placement")
    return placement if isinstance(placement, dict) else {}


def backend_of(run: RunRecord) -> str:
    """The placement backend that runs it: ``local``, or a cluster's (``slurm``, ``ray``)."""
    return placement_of(run).get("backend") or "local"


def resources_of(run: RunRecord) -> dict[str, Any]:
    """What the run was handed or where it runs ({} for none)."""
    resources = run.get("resources")
    return resources if isinstance(resources, dict) else {}


def job_of(run: RunRecord) -> Job | None:
    """The cluster job running the run's supervisor (None: it runs here, or was not submitted yet)."""
    return Job.parse(resources_of(run).get("job"))
