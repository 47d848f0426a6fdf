"""Resource slots and per-run limits enforced by the daemon."""
from __future__ import annotations

import json

from daemon import proctree
from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state


def _started(home, run_id: str) -> dict:
    first = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()[0]
    return json.loads(first)


def _restart_with(mosaic, home, settings: dict) -> None:
    home.ensure()
    home.settings_file.write_text(json.dumps(settings))
    mosaic.run("daemon", "stop")
    mosaic.run("daemon", "start", check=True)


def test_gpu_slots_are_handed_out_one_run_each(home, mosaic):
    _restart_with(mosaic, home, {"gpus": ["0", "1"], "max_concurrent_runs": 8})
    cuda = [mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000",
                          "--set", "rate=200", "--device", "cuda") for _ in range(3)]
    cpu = mosaic.synthetic(50, "rate=0")
    for run_id in cuda[:2]:
        wait_state(home, run_id, P.RUNNING)
    assert mosaic.show(cuda[2])["state"] == P.QUEUED  # no GPU free
    assert mosaic.run("wait", cpu, "--timeout", "60").returncode == 0  # the CPU run was not held back
    assert _started(home, cpu)["cuda_visible_devices"] == ""
    gpus = {_started(home, r)["cuda_visible_devices"] for r in cuda[:2]}
    assert gpus == {"0", "1"}
    mosaic.run("cancel", cuda[0], check=True)
    third = wait_state(home, cuda[2], P.RUNNING)
    assert third["resources"]["gpu"] == mosaic.show(cuda[0])["resources"]["gpu"]
    for run_id in cuda[1:]:
        mosaic.run("cancel", run_id, check=True)
    mosaic.run("daemon", "stop")


def test_cpu_affinity_sets(home, mosaic):
    _restart_with(mosaic, home, {"cpu_sets": [[0], [1]], "max_concurrent_runs": 2})
    runs = [mosaic.synthetic(100000, "rate=200") for _ in range(2)]
    for run_id in runs:
        wait_state(home, run_id, P.RUNNING)
    affinities = sorted(tuple(_started(home, r)["affinity"]) for r in runs)
    assert affinities == [(0,), (1,)]
    for run_id in runs:
        mosaic.run("cancel", run_id, check=True)
    mosaic.run("daemon", "stop")


def test_bad_settings_are_refused_with_the_key_named(home, mosaic):
    home.ensure()
    home.settings_file.write_text(json.dumps({"gpus": "all"}))
    proc = mosaic.run("daemon", "start")
    assert proc.returncode != 0
    log = home.daemon_log.read_text()
    assert "gpus must be a list of GPU ids" in log + proc.stderr


def _nice(pid: int) -> int:
    """Field 19 of /proc/<pid>/stat: the process's nice value."""
    return int(proctree._stat_fields(pid)[18])


def _worker_and_children(home, run_id: str) -> tuple[int, int, list[int]]:
    """The supervisor's pid, the worker's pid, and the pids of the children the worker started."""
    sup = wait_for(lambda: (home.run_dir(run_id) / "supervisor.json").exists()
                   and json.loads((home.run_dir(run_id) / "supervisor.json").read_text()), what="supervisor.json")
    return sup["supervisor_pid"], sup["worker_pid"], _started(home, run_id)["children"]


def _check_nice(home, mosaic, expected: int) -> None:
    run_id = mosaic.synthetic(10_000_000, "rate=100", "children=2")
    wait_state(home, run_id, P.RUNNING)
    sup, worker, children = _worker_and_children(home, run_id)
    assert len(children) == 2
    # relative to the supervisor, which runs at the daemon's (and this test's) priority
    want = min(19, _nice(sup) + expected)
    assert _nice(worker) == want, f"worker nice {_nice(worker)}, expected {want}"
    for child in children:
        assert _nice(child) == want, f"worker's child nice {_nice(child)}, expected {want}"
    mosaic.run("cancel", run_id, check=True)


def test_workers_run_nicer_than_the_daemon_by_default(daemon, mosaic):
    _check_nice(daemon, mosaic, 10)


def test_worker_nice_setting(home, mosaic):
    _restart_with(mosaic, home, {"worker_nice": 0})
    _check_nice(home, mosaic, 0)
    _restart_with(mosaic, home, {"worker_nice": 19})
    _check_nice(home, mosaic, 19)
    mosaic.run("daemon", "stop")


def test_bad_worker_nice_is_refused_with_the_key_named(home, mosaic):
    home.ensure()
    for bad in (25, -1, "x", True, 2.5):
        home.settings_file.write_text(json.dumps({"worker_nice": bad}))
        home.daemon_log.unlink(missing_ok=True)
        proc = mosaic.run("daemon", "start")
        assert proc.returncode != 0, f"worker_nice={bad!r} was accepted"
        # one line, on the terminal of whoever started it, naming the key
        assert proc.stderr.endswith("settings.json: worker_nice must be an integer from 0 to 19\n"), proc.stderr
        assert len(proc.stderr.splitlines()) == 1, proc.stderr
        assert "worker_nice must be an integer from 0 to 19" in home.daemon_log.read_text()


def test_wall_time_limit(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10000000",
                           "--set", "rate=100", "--wall-time", "1.5")
    run = wait_state(daemon, run_id, P.CANCELLED, timeout=60)
    assert run["reason"] == "stopped: wall-time limit of 1.5s reached"
    assert 1.5 <= run["ended_at"] - run["started_at"] < 30


def test_step_limit(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10000000",
                           "--set", "rate=2000", "--max-steps", "500")
    run = wait_state(daemon, run_id, P.CANCELLED, timeout=60)
    assert run["reason"] == "stopped: step limit of 500 reached"
    assert 500 <= run["summary"]["steps"] < 10000000


def test_memory_limit_fails_the_run_with_the_reason(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10",
                           "--set", "allocate_mb=2000", "--memory-mb", "300")
    mosaic.run("wait", run_id, "--timeout", "60")
    run = mosaic.show(run_id)
    assert run["state"] == P.FAILED and run["exit_code"] == 1
    assert "MemoryError" in run["stderr_tail"]


def test_checkpoint_paths_cannot_escape_the_home(daemon):
    base = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 10, "mode": "eval"}
    with connect(daemon) as c:
        for ref, message in (("../../etc/passwd", "must stay inside the home"),
                             ("runs/nothing.pt", "no such file"),
                             ("run:no-such-run", "names 0 runs")):
            try:
                c.call(P.SUBMIT, config={**base, "checkpoint": ref})
                raise AssertionError(f"{ref} was accepted")
            except P.RPCError as err:
                assert err.code == P.INVALID_CONFIG and err.data == {"field": "checkpoint"}
                assert message in err.message
        # an absolute path is the user's explicit choice
        run = c.call(P.SUBMIT, config={**base, "checkpoint": "/etc/hostname"})
        assert run["config"]["checkpoint"] == "/etc/hostname"
