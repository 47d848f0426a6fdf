"""Runs as Ray jobs, through the Jobs API of the cluster's dashboard (its HTTP interface: the
daemon never imports ray). A run is one job whose entrypoint is its supervisor,
``cd RUN_DIR && exec python -m daemon.shim RUN_DIR ... -- worker...``, so Ray's stop reaches the
supervisor and exit records, cancel and stop work as for a local run.

- The address: ``placement.address``, else the daemon's ``RAY_ADDRESS``: the dashboard,
  ``http://head:8265`` (``ray://`` is Ray Client's port, not the Jobs API: refused in one line).
- The token (Ray's token authentication, on by default since 2.60): ``RAY_AUTH_TOKEN``, else the
  file ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token``, as Ray's own clients look for
  it; sent as ``Authorization: Bearer``, never written anywhere.
- Submission ids: ``mosaic-<run id>-<suffix>``, a new suffix per start (a continued run is
  submitted again and Ray refuses a submission id it has seen); ``find`` takes the live job
  whose id starts with ``mosaic-<run id>``.
- Cancel: the Jobs API's stop, which sends SIGTERM to the entrypoint and every process under it
  and SIGKILLs them ``RAY_JOB_STOP_WAIT_TIME_S`` later (Ray's default: 3 s). Each job is
  submitted with that wait set to the supervisor's grace and a margin (an env var of the job's
  runtime_env, read by its JobSupervisor), so the supervisor ends the worker tree and writes
  its exit record first.
- Stop (``mosaic stop``): the Jobs API sends no signal but its stop's. The job's supervisor runs
  with ``--signal-file``: it looks for that file in the run directory once a second and acts on
  the signal named in it as if it had come (daemon/shim.py), so it needs the home on a
  filesystem the Ray nodes share, as the run's events do.
- A home the nodes do not share (``placement.shared_home: false``): the entrypoint is
  ``daemon.event_echo``, which runs the supervisor in a directory of the node's own and writes the
  run's events into the job's log; the daemon reads them back from there (``node_log``,
  daemon/placement/ray_relay.py). The run's config goes with the job (``MOSAIC_RUN_CONFIG_B64``
  in its env_vars, base64: a config holds no secrets).

Standard library only: urllib and json.
"""
from __future__ import annotations

import base64
import copy
import http.client
import json
import math
import os
import secrets
import shlex
import signal as signals
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from daemon.event_echo import CONFIG_ENV
from daemon.placement import JobStatus, PlacementError, job_name

HTTP_SECONDS = 10.0             # a request the dashboard does not answer in this time has failed
SIGNAL_FILE = "signal.request"  # in the run directory: a signal for the supervisor (daemon/shim.py)
SUPERVISOR_LOG = "supervisor.log"   # the entrypoint's own output, as a local run's supervisor log
# what Ray waits after its stop's SIGTERM before SIGKILL: the supervisor's grace, its tree's
# SIGKILL and reaping, and its exit record
STOP_MARGIN_SECONDS = 15
DEFAULT_CPUS = 1                # a job that asks for no CPU would run on the head node, reserving none
RAY_PENDING = frozenset({"PENDING"})
RAY_ENDED = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})
# the run's environment a job is given (runtime_env.env_vars): the daemon's variables for the run,
# not the daemon's whole environment (the node has its own)
PASSED_ENV = ("PYTHONUNBUFFERED", "OMP_NUM_THREADS", "PYTHONPATH", "VIRTUAL_ENV")
PASSED_PREFIXES = ("MOSAIC_",)
MEMORY_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def dashboard_address(address: str | None) -> str:
    """The Jobs API's base URL from a placement's address or RAY_ADDRESS: http(s)://host:port."""
    given = (address or os.environ.get("RAY_ADDRESS") or "").strip()
    if not given:
        raise PlacementError("no Ray cluster to submit to: set placement.address (the dashboard, "
                             "http://head:8265) or RAY_ADDRESS in the daemon's environment")
    if given.startswith("ray://"):
        raise PlacementError(f"{given} is Ray Client's address; mosaic uses the Jobs API of the cluster's "
                             f"dashboard: http://<head>:8265")
    if "://" not in given:
        given = "http://" + given
    url = urllib.parse.urlsplit(given)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise PlacementError(f"{given!r} is not a Ray dashboard's address: http://<head>:8265")
    return given.rstrip("/")


def auth_token() -> str | None:
    """The cluster's token, where Ray's own clients find it (none: a cluster without token auth)."""
    token = os.environ.get("RAY_AUTH_TOKEN", "").strip()
    if token:
        return token
    path = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
    try:
        with open(os.path.expanduser(path)) as f:
            return f.read().strip() or None
    except OSError:
        return None


def memory_bytes(mem: str) -> int:
    """A placement's mem (8G, 512M: binary units, as Slurm's) in bytes: entrypoint_memory."""
    unit = mem[-1].upper()
    return int(mem[:-1]) * MEMORY_UNITS[unit] if unit in MEMORY_UNITS else int(mem) * MEMORY_UNITS["M"]


def _said(body: str) -> str:
    """The dashboard's reason in an error's body (often a Python traceback): its last line."""
    lines = [line.strip() for line in body.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def status(job_id: str, job: dict[str, Any]) -> JobStatus:
    """A job's JobStatus from the Jobs API's JobDetails."""
    state = str(job.get("status") or "")
    message = str(job.get("message") or "")
    node = ""
    if job.get("driver_node_id"):
        host = urllib.parse.urlsplit(job.get("driver_agent_http_address") or "").hostname or ""
        node = f"{host} ({job['driver_node_id'][:8]})" if host else job["driver_node_id"][:8]
    code = job.get("driver_exit_code")
    if state == "STOPPED":
        ending = "the job was stopped through Ray (ray job stop) before its supervisor could record an exit"
    elif state == "FAILED":
        ending = "the job failed before its supervisor could record an exit" + \
                 (f": {message.splitlines()[0][:300]}" if message else "")
    else:   # it ended as Ray sees it, and the supervisor's record is not in the run directory
        ending = (f"the job ended ({state}) but its supervisor's exit record is not in the run directory: "
                  f"is the home on a filesystem the Ray nodes share?")
    pending, ended = state in RAY_PENDING, state in RAY_ENDED
    end = job.get("end_time")
    return JobStatus(job_id, state, pending=pending, ended=ended,
                     cancelled=state == "STOPPED", node=node,
                     reason=pending_reason(message) if pending else "",
                     message=" ".join(message.split())[:1000] if pending else "",
                     ending=ending, exit_code="" if code is None else str(code),
                     # the supervisor actor names its node as it starts the entrypoint: a job that
                     # ended without one never ran the supervisor, whose record is not to be waited for
                     no_record=ended and not job.get("driver_node_id"),
                     ended_at=end / 1000 if ended and isinstance(end, (int, float)) and end > 0 else None)


def pending_reason(message: str) -> str:
    """A pending job's why, in a word or two for a state column, from the Jobs API's message ("Job
    has not started yet. It may be waiting for resources (CPUs, ...) to become available. It may be
    waiting for the runtime environment to be set up."): the whole message is kept beside it."""
    if "waiting for resources" in message:
        return "resources"
    if "runtime environment" in message:
        return "runtime env"
    return ""


class RayBackend:
    """Runs as Ray jobs, through the cluster's Jobs API (HTTP)."""

    name = "ray"

    def __init__(self, address: str | None = None):
        self.address = dashboard_address(address)

    # -- the Jobs API --------------------------------------------------------------------
    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, missing_ok: bool = False,
              raw: bool = False) -> Any:
        """The dashboard's JSON answer (``raw``: its bytes); None for a 404 when ``missing_ok``;
        PlacementError, one line."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        token = auth_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(self.address + path, method=method, headers=headers,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=HTTP_SECONDS) as response:
                data = response.read()
                if raw:
                    return data
                text = data.decode(errors="replace")
        except urllib.error.HTTPError as exc:
            said = _said(exc.read().decode(errors="replace"))
            if exc.code == 404 and missing_ok:
                return None
            if exc.code == 401:
                raise PlacementError(f"the Ray cluster at {self.address} asks for its token (Ray's token "
                                     f"authentication): give the daemon RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, "
                                     f"or put it in ~/.ray/auth_token") from None
            if exc.code == 403:
                raise PlacementError(f"the Ray cluster at {self.address} refused the token it was given "
                                     f"({said or 'forbidden'})") from None
            raise PlacementError(f"the Ray cluster at {self.address} answered {method} {path} with HTTP "
                                 f"{exc.code}: {said or exc.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise PlacementError(f"the Ray cluster at {self.address} does not answer: {reason}") from None
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError:
            raise PlacementError(f"the Ray cluster at {self.address} answered {method} {path} with "
                                 f"{text[:100]!r}, not JSON: is it a Ray dashboard?") from None

    # -- what is submitted ---------------------------------------------------------------
    @staticmethod
    def entrypoint(run_dir: str, shim_argv: list[str]) -> str:
        """The job's shell command: the supervisor, in the run directory, its own output in
        supervisor.log; ``exec``: Ray's stop signals it, not a shell. It polls the run's signal
        file (--signal-file), the way a stop reaches it."""
        argv = list(shim_argv)
        sep = argv.index("--") if "--" in argv else len(argv)
        argv[sep:sep] = ["--signal-file", os.path.join(run_dir, SIGNAL_FILE)]
        return (f"cd {shlex.quote(run_dir)} && exec {shlex.join(argv)} "
                f">> {shlex.quote(os.path.join(run_dir, SUPERVISOR_LOG))} 2>&1")

    @staticmethod
    def unshared_entrypoint(run_id: str, run_dir: str, shim_argv: list[str]) -> str:
        """The job's shell command for a home the nodes do not share: daemon.event_echo, which runs
        the supervisor in a run directory of the node's own and echoes its events into the job's
        log (its stdout); no signal file (a stop cannot reach it: refused)."""
        return f"exec {shlex.join([sys.executable, '-m', 'daemon.event_echo', run_id, run_dir, '--', *shim_argv])}"

    @staticmethod
    def grace_of(shim_argv: list[str]) -> float:
        try:
            return float(shim_argv[shim_argv.index("--grace") + 1])
        except (ValueError, IndexError):
            return 10.0

    def request(self, run_id: str, run_dir: str, placement: dict[str, Any], shim_argv: list[str],
                env: dict[str, str], submission_id: str | None = None) -> dict[str, Any]:
        """The JobSubmitRequest for a run (docs/cluster.md has the table)."""
        runtime_env = copy.deepcopy(placement.get("runtime_env") or {})
        env_vars = {str(k): str(v) for k, v in (runtime_env.get("env_vars") or {}).items()}
        for key, value in env.items():
            if key in PASSED_ENV or key.startswith(PASSED_PREFIXES):
                env_vars[key] = value
        if env.get("CUDA_VISIBLE_DEVICES") == "" and not placement.get("gpus"):
            env_vars["CUDA_VISIBLE_DEVICES"] = ""    # a CPU run sees no GPU; else Ray sets it for the GPUs asked
        # the daemon's python first, the node's own PATH after it (Ray expands ${PATH} on the node)
        env_vars["PATH"] = os.path.dirname(sys.executable) + os.pathsep + "${PATH}"
        # read by the job's JobSupervisor: its stop's signal, and how long before SIGKILL
        env_vars["RAY_JOB_STOP_SIGNAL"] = "SIGTERM"
        env_vars["RAY_JOB_STOP_WAIT_TIME_S"] = str(math.ceil(self.grace_of(shim_argv)) + STOP_MARGIN_SECONDS)
        shared = placement.get("shared_home") is not False
        if not shared:   # the node has no run directory of ours: the config goes with the job
            try:
                with open(os.path.join(run_dir, "config.json"), "rb") as f:
                    env_vars[CONFIG_ENV] = base64.b64encode(f.read()).decode()
            except OSError as exc:
                raise PlacementError(f"cannot read the run's config: {exc}") from None
        runtime_env["env_vars"] = env_vars
        body: dict[str, Any] = {
            "entrypoint": self.entrypoint(run_dir, shim_argv) if shared else
            self.unshared_entrypoint(run_id, run_dir, shim_argv),
            "submission_id": submission_id or f"{job_name(run_id)}-{secrets.token_hex(3)}",
            "runtime_env": runtime_env,
            "metadata": {"mosaic_run_id": run_id, "mosaic_run_dir": run_dir,
                         **({} if shared else {"mosaic_shared_home": "false"})},
            "entrypoint_num_cpus": placement.get("cpus") or DEFAULT_CPUS,
        }
        if placement.get("gpus"):
            body["entrypoint_num_gpus"] = placement["gpus"]
        if placement.get("mem"):
            body["entrypoint_memory"] = memory_bytes(placement["mem"])
        if placement.get("resources"):
            body["entrypoint_resources"] = {str(k): float(v) for k, v in placement["resources"].items()}
        return body

    def check(self, run_id: str, run_dir: str, placement: dict[str, Any], shim_argv: list[str],
              stop_seconds: float) -> None:
        """The dashboard answers, and takes the token: said at submit, before a run is made."""
        version = self._call("GET", "/api/version")
        if not isinstance(version, dict) or "ray_version" not in version:
            raise PlacementError(f"the Ray cluster at {self.address} answered /api/version with "
                                 f"{str(version)[:100]!r}: is it a Ray dashboard?")

    def submit(self, run_id: str, run_dir: str, placement: dict[str, Any], shim_argv: list[str],
               env: dict[str, str], stop_seconds: float) -> str:
        """The job's submission id."""
        try:   # a request of an earlier start, which its supervisor did not take
            os.unlink(os.path.join(run_dir, SIGNAL_FILE))
        except FileNotFoundError:
            pass
        body = self.request(run_id, run_dir, placement, shim_argv, env)
        answer = self._call("POST", "/api/jobs/", body)
        job_id = answer.get("submission_id") if isinstance(answer, dict) else None
        if job_id != body["submission_id"]:
            raise PlacementError(f"the Ray cluster at {self.address} answered {str(answer)[:100]!r}, "
                                 f"not the job's submission id")
        return job_id

    # -- what it is doing ----------------------------------------------------------------
    def job(self, job_id: str) -> dict[str, Any] | None:
        return self._call("GET", f"/api/jobs/{urllib.parse.quote(job_id, safe='')}", missing_ok=True)

    def node_log(self, node_id: str, filename: str, lines: int) -> bytes:
        """The last ``lines`` lines (-1: all) of a log file of a node (Ray's logs directory there),
        as bytes: the state API's log endpoint, which asks that node's agent."""
        query = urllib.parse.urlencode({"node_id": node_id, "filename": filename, "lines": lines})
        return self._call("GET", f"/api/v0/logs/file?{query}", raw=True)

    def poll(self, job_ids: list[str]) -> dict[str, JobStatus]:
        """Each job's status (one list of the cluster's jobs for several); a job Ray does not
        know is ``gone``."""
        if not job_ids:
            return {}
        if len(job_ids) == 1:
            one = self.job(job_ids[0])
            known = {job_ids[0]: one} if one is not None else {}
        else:
            listed = self._call("GET", "/api/jobs/")
            known = {j.get("submission_id"): j for j in listed if isinstance(j, dict)} \
                if isinstance(listed, list) else {}
        found: dict[str, JobStatus] = {}
        for job_id in job_ids:
            job = known.get(job_id)
            if job is None and len(job_ids) > 1:
                job = self.job(job_id)
            found[job_id] = status(job_id, job) if job is not None else JobStatus(
                job_id, "", ended=True, gone=True,
                ending=f"the Ray cluster at {self.address} does not know the job (was the cluster restarted?)")
        return found

    def find(self, run_id: str) -> str | None:
        """The live job of a run, by its submission id: a daemon that died between the submit and
        its store finds it (an ended job, an earlier start of a continued run, is not it)."""
        listed = self._call("GET", "/api/jobs/")
        prefix = job_name(run_id)
        live = [j for j in listed if isinstance(j, dict)
                and str(j.get("submission_id") or "").startswith(prefix)
                and j.get("status") not in RAY_ENDED] if isinstance(listed, list) else []
        live.sort(key=lambda j: j.get("start_time") or 0)
        return live[-1]["submission_id"] if live else None

    # -- telling it ----------------------------------------------------------------------
    def cancel(self, job_id: str) -> None:
        """The Jobs API's stop: SIGTERM to the supervisor and the processes under it, SIGKILL after
        the job's RAY_JOB_STOP_WAIT_TIME_S (its grace and a margin): the supervisor's grace does the rest."""
        if self._call("POST", f"/api/jobs/{urllib.parse.quote(job_id, safe='')}/stop", missing_ok=True) is None:
            raise PlacementError(f"the Ray cluster at {self.address} does not know job {job_id}")

    def kill(self, job_id: str) -> None:
        """The Jobs API has no harder stop than its stop (SIGKILL follows it)."""
        self.cancel(job_id)

    def signal(self, job_id: str, signame: str) -> None:
        """A signal to the supervisor: written as a request into its run directory, which it reads
        once a second (``--signal-file``); the run directory is in the job's metadata."""
        if not hasattr(signals, "SIG" + signame):
            raise PlacementError(f"{signame} is not a signal")
        job = self.job(job_id)
        if job is None:
            raise PlacementError(f"the Ray cluster at {self.address} does not know job {job_id}")
        run_dir = (job.get("metadata") or {}).get("mosaic_run_dir")
        if (job.get("metadata") or {}).get("mosaic_shared_home") == "false":
            raise PlacementError(f"job {job_id} runs in a directory of its node's own (placement.shared_home "
                                 f"is false): no signal reaches its supervisor but Ray's stop")
        if not run_dir:
            raise PlacementError(f"job {job_id} was not submitted by mosaic: its metadata names no run directory")
        path = os.path.join(run_dir, SIGNAL_FILE)
        try:
            tmp = f"{path}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                f.write(signame + "\n")
            os.replace(tmp, path)
        except OSError as exc:
            raise PlacementError(f"cannot write {path}: {exc.strerror}") from None
