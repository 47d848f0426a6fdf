"""The Slurm test cluster (tests/plugins/slurm_cluster.py) is a real one: sbatch runs a job on its node,
scancel ends one and its processes, the wall-time warning signal (--signal=B:USR1@50) reaches the
batch script, and stopping the cluster leaves none of its processes."""
from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.plugins.slurm_cluster import SlurmCluster

# the fixture `slurm_cluster` (imported by pytest as a plugin, so that its asserts are rewritten: an
# import here at the top would come first)
pytest_plugins = ["tests.plugins.slurm_cluster"]
# one process, one cluster (under pytest-xdist each process would start its own)
pytestmark = pytest.mark.xdist_group("slurm")


def _alive(pid: int) -> bool:
    """The process runs (a zombie left to a PID 1 that does not reap counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _wait_for(what: str, cond, timeout: float, cluster: SlurmCluster | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}\n"
                                 + (cluster.logs_tail(15) if cluster else ""))
        time.sleep(0.2)


def _squeue_state(cluster: SlurmCluster, job_id: str) -> str:
    proc = cluster.run("squeue", "--noheader", "--jobs", job_id, "--states=all", "--format=%T", check=False)
    return proc.stdout.strip()


def test_a_batch_job_runs_on_the_node_and_writes_its_file(slurm_cluster, tmp_path):
    out = tmp_path / "result.txt"
    script = f"""#!/bin/bash
echo "host=$(hostname)" > {out}.part
echo "node=$SLURMD_NODENAME" >> {out}.part
echo "partition=$SLURM_JOB_PARTITION" >> {out}.part
echo "job=$SLURM_JOB_ID" >> {out}.part
mv {out}.part {out}
"""
    job_id = slurm_cluster.sbatch("--job-name=write-file", f"--output={tmp_path}/slurm-%j.out",
                                  f"--chdir={tmp_path}", script=script)
    assert job_id.isdigit(), job_id
    # through squeue: pending or running, then gone from the active states
    _wait_for(f"job {job_id} to leave squeue's active states",
              lambda: _squeue_state(slurm_cluster, job_id) not in ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING"),
              60, slurm_cluster)
    # and scontrol, which remembers it for MinJobAge
    info = slurm_cluster.job_info(job_id)
    assert info.get("JobState") == "COMPLETED", info
    assert info.get("ExitCode") == "0:0", info
    assert info.get("Partition") == slurm_cluster.partition
    assert info.get("NodeList") == slurm_cluster.node
    fields = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert fields == {"host": socket.gethostname(), "node": slurm_cluster.node,
                      "partition": slurm_cluster.partition, "job": job_id}
    # the job's own stdout file, named by Slurm's pattern
    assert (tmp_path / f"slurm-{job_id}.out").exists()


def test_scancel_ends_a_long_job_and_its_processes(slurm_cluster, tmp_path):
    pid_file = tmp_path / "sleep.pid"
    script = f"""#!/bin/bash
sleep 300 &
echo $! > {pid_file}
wait
"""
    job_id = slurm_cluster.sbatch("--job-name=long", "--output=/dev/null", script=script)
    slurm_cluster.wait_job(job_id, {"RUNNING"}, timeout=60)
    _wait_for("the job's sleep pid", lambda: pid_file.exists() and pid_file.read_text().strip(), 30, slurm_cluster)
    sleep_pid = int(pid_file.read_text())
    with open(f"/proc/{sleep_pid}/cmdline", "rb") as f:
        assert f.read().split(b"\0")[:2] == [b"sleep", b"300"]
    assert _squeue_state(slurm_cluster, job_id) == "RUNNING"

    slurm_cluster.run("scancel", job_id)
    assert slurm_cluster.wait_job(job_id, timeout=30) == "CANCELLED"
    _wait_for(f"sleep (pid {sleep_pid}) to end", lambda: not _alive(sleep_pid), 15, slurm_cluster)
    # the node is free again
    _wait_for("node idle", lambda: slurm_cluster.node_state() == "idle", 15, slurm_cluster)


def _usr1_script(marker, started) -> str:
    # `wait` returns when a trapped signal arrives (a foreground `sleep` would hold the trap back)
    return f"""#!/bin/bash
trap 'echo "USR1 at $(date +%s)" > {marker}; exit 0' USR1
date +%s > {started}
sleep 300 &
wait $!
"""


def test_wall_time_warning_signal_reaches_the_batch_script(slurm_cluster, tmp_path):
    """--time=1 with --signal=B:USR1@50: USR1 reaches the batch shell before the wall time ends.
    slurmctld checks time limits every 30 s (PERIODIC_TIMEOUT, fixed in the source), so the
    signal comes within 30 s of the job's start (Slurm may send it up to 60 s early)."""
    marker, started = tmp_path / "usr1", tmp_path / "started"
    job_id = slurm_cluster.sbatch("--job-name=warn", "--time=1", "--signal=B:USR1@50", "--output=/dev/null",
                                  script=_usr1_script(marker, started))
    assert slurm_cluster.job_info(job_id).get("TimeLimit") == "00:01:00"
    _wait_for("the job to start", started.exists, 60, slurm_cluster)
    _wait_for("USR1 in the batch script", marker.exists, 55, slurm_cluster)
    assert marker.read_text().startswith("USR1 at ")
    # the trap exits 0: the job completes before its time limit
    assert slurm_cluster.wait_job(job_id, timeout=30) == "COMPLETED"


def test_scancel_signal_reaches_the_batch_script(slurm_cluster, tmp_path):
    """The same trap, signalled at once (scancel --signal=USR1 --batch)."""
    marker, started = tmp_path / "usr1", tmp_path / "started"
    job_id = slurm_cluster.sbatch("--job-name=signal", "--output=/dev/null", script=_usr1_script(marker, started))
    _wait_for("the job to start", started.exists, 60, slurm_cluster)
    time.sleep(0.2)   # the trap is set before `started` is written; `wait` is reached just after
    slurm_cluster.run("scancel", "--signal=USR1", "--batch", job_id)
    _wait_for("USR1 in the batch script", marker.exists, 20, slurm_cluster)
    assert slurm_cluster.wait_job(job_id, timeout=30) == "COMPLETED"


def test_stop_leaves_no_process_of_its_own(slurm_cluster, tmp_path):
    """A second cluster beside the session's: stopping it (with a job still running) ends munged,
    slurmctld, slurmd, slurmstepd and the job's processes, removes its temp dir, and leaves the
    other cluster running."""
    from tests.plugins.slurm_cluster import SlurmCluster
    cluster = SlurmCluster(partition="second").start()
    try:
        assert cluster.cluster_name != slurm_cluster.cluster_name
        assert {cluster.ctld_port, cluster.slurmd_port}.isdisjoint({slurm_cluster.ctld_port,
                                                                   slurm_cluster.slurmd_port})
        pid_file = tmp_path / "sleep.pid"
        job_id = cluster.sbatch("--output=/dev/null", script=f"#!/bin/bash\nsleep 300 &\necho $! > {pid_file}\nwait\n")
        cluster.wait_job(job_id, {"RUNNING"}, timeout=60)
        _wait_for("the job's sleep pid", lambda: pid_file.exists() and pid_file.read_text().strip(), 30, cluster)
        sleep_pid = int(pid_file.read_text())
        daemons = {name: proc.pid for name, proc in cluster.procs.items()}
        assert set(daemons) == {"munged", "slurmctld", "slurmd"}
        before = cluster.own_pids()
        assert set(daemons.values()) | {sleep_pid} <= before
        root = cluster.root
    finally:
        cluster.stop()
    left = {pid for pid in before | cluster.started_pids if _alive(pid)}
    assert not left, f"processes of the stopped cluster still running: {sorted(left)}"
    assert not _alive(sleep_pid)
    assert not root.exists()
    # the session's cluster did not notice
    assert slurm_cluster.node_state() == "idle"
    assert slurm_cluster.run("scontrol", "ping").returncode == 0
    # and the environment of each process was checked: nothing carries the stopped cluster's marker
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    assert f"={root}\0".encode() not in f.read() + b"\0", f"pid {entry} carries {root}"
            except OSError:
                pass
