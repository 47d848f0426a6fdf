"""A real single-node Slurm cluster for the tests: MUNGE, slurmctld and slurmd started in the
foreground from a slurm.conf written into a temp dir, on 127.0.0.1 and free ports.

Nothing outside the temp dir is read or written: every Slurm command gets the generated config
through SLURM_CONF (`SlurmCluster.env`, `SlurmCluster.run`), munged runs with its own key, socket,
pid and seed files, and slurm.conf names that socket (AuthInfo=socket=...; auth/munge and
cred/munge both read it). /etc/slurm and /etc/munge are not used. Stopping cancels the cluster's
jobs, ends the daemons it started by pid, then ends whatever process still carries this cluster's
marker in its environment (slurmstepd and job processes inherit it), and removes the temp dir.
Other clusters on the host (another xdist worker's, a system one) are left alone.

No accounting: sacct needs slurmdbd and a database (AccountingStorageType=accounting_storage/none);
a job's state comes from squeue/scontrol, which remember it for MinJobAge (300 s) after it ended.
Memory is a consumable resource (CR_CPU_Memory; a job that asks none gets its CPUs' share of the
node, DefMemPerCPU) and --mem is enforced without cgroups: jobacct_gather/linux reads the job's
processes every second and OverMemoryKill kills a step above its request, as slurmstepd says in
the job's output ("Exceeded job memory limit").

Use the session fixture `slurm_cluster` (skipped when Slurm is not installed: `make system-deps`
installs it, from .ci/apt-packages.txt). A test module gets it with `pytest_plugins = ["tests.plugins.slurm_cluster"]`, or conftest.py
imports it. Under pytest-xdist each worker process that runs such a test starts its own cluster;
mark the module `pytest.mark.xdist_group("slurm")` to keep them in one process (one cluster).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import start_daemon, stop_daemon
from tests.plugins.base import ClusterError, LocalCluster, free_port, tail

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
# a job's states once it ended (scontrol's JobState)
TERMINAL_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                             "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", "REVOKED", "SPECIAL_EXIT"})
# the caller's Slurm settings (inside a Slurm job, or a user's SBATCH_PARTITION) would leak into the
# commands run against this cluster
_FOREIGN_ENV = re.compile(r"^(SLURM_|SBATCH_|SALLOC_|SRUN_|SQUEUE_|SINFO_|SCONTROL_|SCANCEL_|SACCT_|MUNGE)")
MARKER = "MOSAIC_SLURM_CLUSTER"   # in the environment of every process of a cluster: its temp root


def which(name: str) -> str | None:
    # the daemons live in /usr/sbin, not always on a non-root PATH
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/local/sbin")


def missing_reason() -> str | None:
    """Why a cluster cannot start here, or None."""
    missing = [name for name in DAEMONS + CLIENTS if which(name) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} not found): "
                "`make system-deps` installs slurm-wlm and munge (as root, with apt-get)")
    if os.geteuid() != 0:
        # slurmd runs jobs as their user and must be root for that (SlurmdUser=root)
        return "the Slurm test cluster needs root (slurmd starts jobs as their user)"
    return None


def _machine_memory_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    return 1024


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class SlurmError(ClusterError):
    pass


class SlurmCluster(LocalCluster):
    """One private Slurm cluster: one node (this machine, 127.0.0.1), one default partition."""

    MARKER = MARKER
    error = SlurmError
    prefix = "slurm-"
    start_attempts = 3

    def __init__(self, partition: str = "debug", cpus: int | None = None, memory_mb: int | None = None,
                 start_timeout: float = 30.0, parent_dir: str = "/tmp"):
        super().__init__(start_timeout, parent_dir)
        self.partition = partition
        self.cpus = cpus or _cpu_count()
        self.memory_mb = memory_mb or _machine_memory_mb()
        # the node's name is this host's (a job's `hostname` says it); it is reached at 127.0.0.1
        self.node = socket.gethostname().split(".")[0]
        self.cluster_name = ""
        self.started_pids: set[int] = set()   # every pid this cluster ended on stop, daemons or leftovers
        self.last_sinfo = ""

    # -- paths ---------------------------------------------------------------------------
    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.root / "munge" / "munge.socket"

    def log(self, name: str) -> Path:
        """slurmctld.log, slurmd.log, munged.log, or <daemon>.out (its stdout and stderr)."""
        return self.root / "log" / name

    def log_path(self, name: str) -> Path:
        return self.log(f"{name}.out")

    # -- start ---------------------------------------------------------------------------
    def missing_reason(self) -> str | None:
        return missing_reason()

    def foreign(self, name: str) -> bool:
        return bool(_FOREIGN_ENV.match(name))

    def _retry(self, error: SlurmError) -> bool:
        return "Address already in use" in str(error)

    def describe(self) -> str:
        return f"cluster {self.cluster_name}, conf {self.conf}"

    def _prepare_root(self) -> None:
        # munged wants its socket's directory searchable by all (and not writable by them)
        self.root.chmod(0o755)
        for sub in ("munge", "state", "spool", "log", "run"):
            (self.root / sub).mkdir()
            (self.root / sub).chmod(0o755 if sub == "munge" else 0o700)
        self.cluster_name = "mosaic" + secrets.token_hex(4)
        self.ctld_port, self.slurmd_port = free_port(), free_port()
        while self.slurmd_port == self.ctld_port:
            self.slurmd_port = free_port()
        key = self.root / "munge" / "munge.key"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(1024))
        (self.root / "plugstack.conf").write_text("")   # not /etc/slurm/plugstack.conf
        self.conf.write_text(self.slurm_conf())
        self.env["SLURM_CONF"] = str(self.conf)

    def slurm_conf(self) -> str:
        r = self.root
        host = socket.gethostname().split(".")[0]
        return f"""\
# written by tests/plugins/slurm_cluster.py: a private single-node cluster, everything under {r}
ClusterName={self.cluster_name}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/run/slurmctld.pid
SlurmdPidFile={r}/run/slurmd.pid
SlurmctldLogFile={self.log("slurmctld.log")}
SlurmdLogFile={self.log("slurmd.log")}
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={r}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobContainerType=job_container/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU={self.memory_mb // self.cpus}
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
SchedulerType=sched/backfill
NodeName={self.node} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={self.cpus} RealMemory={self.memory_mb} State=UNKNOWN
PartitionName={self.partition} Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""

    def _start_processes(self) -> None:
        m = self.root / "munge"
        self.spawn("munged", [which("munged"), "--foreground", f"--socket={self.munge_socket}",
                              f"--key-file={m / 'munge.key'}", f"--pid-file={m / 'munged.pid'}",
                              f"--seed-file={m / 'munged.seed'}", f"--log-file={self.log('munged.log')}"])
        self.wait("munged's socket", lambda: self.munge_socket.exists(), 10)
        self.spawn("slurmctld", [which("slurmctld"), "-D", "-f", str(self.conf)])
        self.wait("slurmctld to answer", lambda: self.run("scontrol", "ping", check=False,
                                                           timeout=10).returncode == 0, 20)
        self.spawn("slurmd", [which("slurmd"), "-D", "-f", str(self.conf), "-N", self.node])
        self.wait(f"node {self.node} idle in sinfo", lambda: self.node_state() == "idle", self.start_timeout,
                  lambda: f"sinfo --Node said: {self.last_sinfo!r}")

    def stop_controller(self) -> None:
        """slurmctld goes away (as in a controller's restart or crash); slurmd and the jobs stay."""
        proc = self.procs.pop("slurmctld")
        proc.terminate()
        proc.wait(timeout=20)

    def start_controller(self, clear_state: bool = False) -> None:
        """slurmctld back; ``clear_state``: without the jobs it saved (-c), so it forgets them all."""
        self.spawn("slurmctld", [which("slurmctld"), "-D", *(["-c"] if clear_state else []), "-f", str(self.conf)])
        self.wait("slurmctld to answer", lambda: self.run("scontrol", "ping", check=False,
                                                           timeout=10).returncode == 0, 20)
        self.wait(f"node {self.node} back in sinfo", lambda: self.node_state() in ("idle", "mixed", "allocated"),
                  self.start_timeout, lambda: f"sinfo --Node said: {self.last_sinfo!r}")

    def logs_tail(self, lines: int = 30) -> str:
        """The end of slurmctld's and slurmd's logs, and what a daemon that exited wrote before its
        log was open (its stdout and stderr)."""
        if self.root is None:
            return ""
        parts = [tail(self.log(n), lines) for n in ("slurmctld.log", "slurmd.log")]
        parts += [tail(self.log_path(name), lines) for name, proc in self.procs.items() if proc.poll() is not None]
        return "\n".join(parts)

    # -- commands ------------------------------------------------------------------------
    def run(self, *argv: str, check: bool = True, timeout: float = 30,
            input: str | None = None, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
        """Run a Slurm command (sbatch, squeue, ...) against this cluster."""
        proc = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout,
                              input=input, cwd=cwd)
        if check and proc.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {proc.returncode}\nstdout: {proc.stdout.strip()}\n"
                             f"stderr: {proc.stderr.strip()}\n(cluster {self.cluster_name}, partition "
                             f"{self.partition}, node {self.node}, conf {self.conf})")
        return proc

    def node_state(self) -> str:
        """The node's state in sinfo (idle, mixed, allocated, down*, ...); "" when sinfo fails."""
        # all nodes, then ours: `--nodes NAME` for a name slurmctld does not know fills its log
        proc = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", check=False)
        states = dict(line.split(None, 1) for line in proc.stdout.splitlines() if " " in line.strip())
        self.last_sinfo = proc.stdout.strip() or proc.stderr.strip()
        return states.get(self.node, "").strip() if proc.returncode == 0 else ""

    def sbatch(self, *args: str, script: str | None = None, cwd: str | os.PathLike | None = None) -> str:
        """Submit a job (`script` on stdin, or a script path among args); returns its id."""
        proc = self.run("sbatch", "--parsable", *args, input=script, cwd=cwd)
        return proc.stdout.strip().split(";")[0]

    def job_info(self, job_id: str) -> dict[str, str]:
        """scontrol show job as a dict; {} when the controller no longer knows the job."""
        proc = self.run("scontrol", "show", "job", "--oneliner", str(job_id), check=False)
        if proc.returncode != 0:
            return {}
        info = {}
        for field in proc.stdout.split():
            key, sep, value = field.partition("=")
            if sep:
                info.setdefault(key, value)
        return info

    def job_state(self, job_id: str) -> str | None:
        return self.job_info(job_id).get("JobState")

    def wait_job(self, job_id: str, states=TERMINAL_STATES, timeout: float = 60) -> str:
        """Wait until the job's state is one of `states` (by default: ended); returns it."""
        deadline = time.monotonic() + timeout
        state = None
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state in states:
                return state
            time.sleep(0.2)
        raise SlurmError(f"job {job_id} still {state} after {timeout:.0f}s (waiting for {sorted(states)})\n"
                         + self.run("scontrol", "show", "job", str(job_id), check=False).stdout
                         + self.logs_tail(15))

    # -- stop ----------------------------------------------------------------------------
    def stop(self) -> None:
        if self.root is None:
            return
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None:
            # jobs first, while slurmctld and slurmd can still end them the normal way
            try:
                self.run("scancel", "--full", "--partition", self.partition, check=False, timeout=10)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    q = self.run("squeue", "--noheader", "--format=%i", check=False, timeout=10)
                    if q.returncode != 0 or not q.stdout.strip():
                        break
                    time.sleep(0.2)
            except subprocess.TimeoutExpired:
                pass
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.procs.get(name)
            if proc is None:
                continue
            self.started_pids.add(proc.pid)
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        # slurmstepd and job processes left behind (they outlive slurmd): SIGKILL, by pid
        self.started_pids |= self._forget(rounds=3)


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running single-node Slurm cluster for the session (skipped when Slurm is missing)."""
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster().start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def slurm_daemon(slurm_cluster, home, monkeypatch):
    """A daemon of the test's home whose Slurm commands talk to the session's cluster (SLURM_CONF),
    polling it every 0.5 s; yields the cluster."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    monkeypatch.setenv(MARKER, slurm_cluster.env[MARKER])   # the cluster's stop finds what it ran
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"cluster_poll_seconds": 0.5}))
    start_daemon(home)
    yield slurm_cluster
    stop_daemon(home)
