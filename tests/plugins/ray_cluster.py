"""A real two-node Ray cluster for the tests: a head (GCS, dashboard with its Jobs API, raylet)
and a second node, each a ``ray start --block`` of its own, on 127.0.0.1 and free ports.

Nothing outside the cluster's temp dir is read or written: each node gets its own ``--temp-dir``
under it, token authentication (on by default in Ray 2.60) uses a token file written there
(RAY_AUTH_MODE=token, RAY_AUTH_TOKEN_PATH), and the caller's RAY_* variables (RAY_ADDRESS, a
session token) are not passed on. The second node has a custom resource (``RayCluster.resource``)
so a job asking for it runs there. Stopping ends the two ``ray start`` processes by their process
groups, then whatever process still carries this cluster's marker in its environment (GCS,
raylets, dashboard, Ray's workers, jobs' entrypoints inherit it), and removes the temp dir.
``ray stop`` is never used: it stops every Ray on the host (another xdist worker's, a user's).

Use the session fixture `ray_cluster` (skipped when ray is not importable). A test module gets it
with ``pytest_plugins = ["tests.plugins.ray_cluster"]`` and marks itself ``pytest.mark.xdist_group("ray")``
(one cluster per xdist process: two Rays starting at once on 2 cores time out).
"""
from __future__ import annotations

import importlib.util
import json
import os
import secrets
import signal
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import start_daemon, stop_daemon
from tests.plugins.base import ClusterError, LocalCluster, free_ports

MARKER = "MOSAIC_RAY_CLUSTER"    # in the environment of every process of a cluster: its temp root
SECOND_NODE_RESOURCE = "mosaic_second_node"
STOP_SECONDS = 3.0               # how long a node has to end on SIGTERM before SIGKILL
# the caller's Ray settings (RAY_ADDRESS, the suite's RAY_AUTH_TOKEN_PATH) would point this cluster's
# processes elsewhere
_FOREIGN_ENV = ("RAY_", "MOSAIC_RAY_CLUSTER")


def missing_reason() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed in this environment (pip install 'ray[default]')"
    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.exists():
        return f"ray's command ({ray_cli}) is not installed beside {sys.executable}"
    if importlib.util.find_spec("aiohttp") is None:
        return "ray's dashboard (the Jobs API) needs ray[default]: aiohttp is not installed"
    return None


class RayError(ClusterError):
    pass


class RayCluster(LocalCluster):
    """A head (``head_cpus``) and a second node (``node_cpus`` and one ``resource``), on this machine."""

    MARKER = MARKER
    error = RayError
    prefix = "ray-"
    wait_interval = 0.25

    def __init__(self, head_cpus: int = 2, node_cpus: int = 2, resource: str = SECOND_NODE_RESOURCE,
                 start_timeout: float = 90.0, parent_dir: str = "/tmp"):
        super().__init__(start_timeout, parent_dir)
        self.head_cpus = head_cpus
        self.node_cpus = node_cpus
        self.resource = resource
        self.address = ""              # the dashboard: http://127.0.0.1:PORT (the Jobs API)
        self.gcs_address = ""
        self.node_ids: dict[str, str] = {}   # "head", "second": each node's id (hex)
        self.killed_pids: set[int] = set()

    @property
    def token_file(self) -> Path:
        return self.root / "auth_token"

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip()

    def log(self, name: str) -> Path:
        return self.log_path(name)

    # -- start ---------------------------------------------------------------------------
    def missing_reason(self) -> str | None:
        return missing_reason()

    def foreign(self, name: str) -> bool:
        return name.startswith(_FOREIGN_ENV)

    def label(self, name: str) -> str:
        return f"ray start ({name})"

    def describe(self) -> str:
        return self.address

    def _prepare_root(self) -> None:
        fd = os.open(self.token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        self.env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(self.token_file), RAY_USAGE_STATS_ENABLED="0")

    def _node_args(self, name: str, ports: list[int]) -> list[str]:
        return [f"--temp-dir={self.root / name}", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
                f"--node-manager-port={ports[0]}", f"--object-manager-port={ports[1]}",
                f"--dashboard-agent-listen-port={ports[2]}", f"--dashboard-agent-grpc-port={ports[3]}",
                f"--metrics-export-port={ports[4]}", f"--runtime-env-agent-port={ports[5]}",
                "--object-store-memory=80000000", "--num-gpus=0", "--include-log-monitor=false", "--block"]

    def _start_processes(self) -> None:
        ports = free_ports(16)
        gcs, dashboard, client = ports[0], ports[1], ports[2]
        self.gcs_address = f"127.0.0.1:{gcs}"
        self.address = f"http://127.0.0.1:{dashboard}"
        ray = str(Path(sys.executable).with_name("ray"))
        self.spawn("head", [ray, "start", "--head", f"--port={gcs}", "--dashboard-host=127.0.0.1",
                            f"--dashboard-port={dashboard}", f"--ray-client-server-port={client}",
                            f"--num-cpus={self.head_cpus}", "--include-dashboard=true",
                            *self._node_args("head", ports[3:9])])
        # the second node only once the head is in the GCS: started together on a loaded machine, the
        # second gives up ("No node info found for head node in GCS")
        self.wait("the head alive and the Jobs API answering", lambda: self._alive_nodes() >= 1, self.start_timeout)
        self.spawn("second", [ray, "start", f"--address={self.gcs_address}", f"--num-cpus={self.node_cpus}",
                              f"--resources={json.dumps({self.resource: 1})}",
                              *self._node_args("second", ports[9:15])])
        self.wait("both nodes alive and the Jobs API answering", self._ready, self.start_timeout)

    def _alive_nodes(self) -> int:
        try:
            self.request("GET", "/api/jobs/")
            return sum(1 for n in self.nodes() if n.get("state") == "ALIVE")
        except (OSError, RayError, ValueError):
            return 0

    def _ready(self) -> bool:
        try:
            self.request("GET", "/api/jobs/")
            nodes = self.nodes()
        except (OSError, RayError, ValueError):
            return False
        alive = [n for n in nodes if n.get("state") == "ALIVE"]
        if len(alive) < 2:
            return False
        for node in alive:
            which = "second" if self.resource in (node.get("resources_total") or {}) else "head"
            self.node_ids[which] = node["node_id"]
        return set(self.node_ids) == {"head", "second"}

    # -- the dashboard's HTTP API, with the cluster's token ----------------------------------
    def request(self, method: str, path: str, body: dict | None = None, timeout: float = 10.0):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.address + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise RayError(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:500]}") from None
        return json.loads(text) if text else None

    def nodes(self) -> list[dict]:
        """The state API's nodes: node_id, state, resources_total, ..."""
        answer = self.request("GET", "/api/v0/nodes?limit=100&detail=true")
        return answer["data"]["result"]["result"]

    def job(self, submission_id: str) -> dict:
        return self.request("GET", f"/api/jobs/{submission_id}")

    def job_actor(self, submission_id: str) -> dict | None:
        """The state API's record of a job's JobSupervisor actor (required_resources, node_id, state):
        what the job asked for (JobDetails does not say)."""
        answer = self.request("GET", "/api/v0/actors?detail=true&limit=1000")
        name = f"_ray_internal_job_actor_{submission_id}"
        return next((a for a in answer["data"]["result"]["result"] if a.get("name") == name), None)

    def job_logs(self, submission_id: str) -> str:
        """What the job's entrypoint has written so far (its driver log)."""
        return self.request("GET", f"/api/jobs/{submission_id}/logs")["logs"]

    def stop_job(self, submission_id: str) -> None:
        """What `ray job stop` does: the Jobs API's stop."""
        self.request("POST", f"/api/jobs/{submission_id}/stop")

    def wait_job(self, submission_id: str, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(submission_id)
            if job["status"] in ("STOPPED", "SUCCEEDED", "FAILED"):
                return job
            if time.monotonic() > deadline:
                raise RayError(f"job {submission_id} still {job['status']} after {timeout:.0f}s")
            time.sleep(0.2)

    # -- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        if self.root is None:
            return
        # SIGTERM to each `ray start`'s process group (it, its raylet, the head's GCS and dashboard),
        # a moment for them to go, then SIGKILL: a test cluster keeps no state worth a slow shutdown
        # (`ray start --block` can sit 15 s and more on a SIGTERM)
        live = [p for p in self.procs.values() if p.poll() is None]
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in live:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + STOP_SECONDS
            while any(p.poll() is None for p in live) and time.monotonic() < deadline:
                time.sleep(0.1)
            live = [p for p in live if p.poll() is None]
            if not live:
                break
        # what outlived them (GCS, raylets, workers, a job's entrypoint): SIGKILL, by pid
        self.killed_pids |= self._forget(rounds=5)


@pytest.fixture(scope="session")
def ray_cluster():
    """A running two-node Ray cluster for the session (skipped when ray is missing)."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = RayCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def ray_daemon(ray_cluster, home, monkeypatch):
    """A daemon of the test's home whose Ray placements go to the session's cluster (RAY_ADDRESS,
    its token file), polling it every 0.5 s; yields the cluster."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(ray_cluster.token_file))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"cluster_poll_seconds": 0.5}))
    start_daemon(home)
    yield ray_cluster
    stop_daemon(home)

