"""What the tests share besides fixtures: the real CLI against a home, a client, waiting for a
condition or a run's state, and running many configs in one process. Test modules import
these from here; the fixtures and the session's hooks stay in tests/conftest.py."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from daemon import proctree
from daemon import protocol as P
from daemon.home import Home
from workers.fastlane import layout as fastlane_layout

ROOT = Path(__file__).resolve().parent.parent


def _stop_everything(h: Home) -> None:
    """Stop the daemon of a home and every run supervisor it left."""
    pid_file = h.pid_file
    if pid_file.exists():
        try:
            pid = int(pid_file.read_text())
            os.kill(pid, signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass
    runs_dir = h.runs_dir
    if runs_dir.exists():
        for run_dir in runs_dir.iterdir():
            sup = run_dir / "supervisor.json"
            if sup.exists():
                try:
                    info = json.loads(sup.read_text())
                except ValueError:
                    continue
                pid = info.get("supervisor_pid")
                if pid and proctree.is_alive(pid, info.get("supervisor_start")):
                    proctree.signal_tree(pid, signal.SIGKILL, include_root=True)
        # What the daemon does when it learns a run ended, which this one never
        # will: its frame segments go (a run killed here had 23 MB of tmpfs).
        for run_dir in runs_dir.iterdir():
            fastlane_layout.cleanup(run_dir.name)
    # the shared model servers it started (daemon/model_server.py): detached, they outlive it
    for record in (h.root / "model_servers").glob("*.json"):
        try:
            info = json.loads(record.read_text())
        except ValueError:
            continue
        if info.get("pid") and proctree.is_alive(info["pid"], info.get("pid_start")):
            os.killpg(info["pid"], signal.SIGKILL)


class Mosaic:
    """Runs the real `mosaic` CLI against one home."""

    def __init__(self, home: Home):
        self.home = home

    def run(self, *args: str, check: bool = False, timeout: float = 300, input: str | None = None):
        proc = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", "--home", str(self.home.root), *args],
                              capture_output=True, text=True, timeout=timeout, input=input, cwd=str(ROOT))
        if check and proc.returncode != 0:
            raise AssertionError(f"mosaic {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
        return proc

    def submit(self, *args: str) -> str:
        return self.run("submit", *args, check=True).stdout.strip()

    def synthetic(self, steps: int = 100, *sets: str, name: str | None = None) -> str:
        args = ["--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", str(steps)]
        for s in sets:
            args += ["--set", s]
        if name:
            args += ["--name", name]
        return self.submit(*args)

    def show(self, run: str) -> dict:
        """What `mosaic show RUN --json` prints (the daemon's record and its derived figures), read
        from this process as the CLI reads it (a daemon started when none answers): no interpreter and
        CLI imports per look, 0.8 s against 8 ms on two busy cores, where a wait_for polling it every
        0.2 s took a core of its own from the run it waited for."""
        from mosaic_tui.client import connect
        from mosaic_tui.fmt import DEFAULT_RETURN_WINDOW, derived
        try:
            with connect(self.home, name="test") as client:
                record = client.call(P.GET, run=run)
        except Exception as exc:   # as the CLI's non-zero exit did: one AssertionError naming it
            raise AssertionError(f"mosaic show {run} --json: {type(exc).__name__}: {exc}") from exc
        shown = {**record, "derived": derived(record, time.time(), DEFAULT_RETURN_WINDOW)}
        return json.loads(json.dumps(shown, default=str))   # the types the CLI's JSON has


def start_daemon(home: Home) -> int:
    """What `mosaic daemon start` does (mosaic_tui.client.start_daemon: a detached daemon in a
    session of its own, answering), from this process: no interpreter and CLI imports per test, about
    a second of two busy cores. The daemon is this process's child here: a thread reaps it when it
    ends, so no zombie of it is left to look alive. Returns its pid."""
    import threading

    from mosaic_tui.client import start_daemon as start
    pid = start(home)["pid"]

    def reap():
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:   # not this process's child (another start won), or reaped already
            pass
    threading.Thread(target=reap, daemon=True).start()
    return pid


def stop_daemon(home: Home, timeout: float = 15.0) -> None:
    """What `mosaic daemon stop` does, from this process: shutdown asked, then its end awaited."""
    from mosaic_tui.client import Client, DaemonUnavailable
    try:
        client = Client(home, timeout=5)
    except (DaemonUnavailable, ConnectionError):   # reset: a daemon already shutting down closed on our hello
        return
    with client:
        pid = client.info["pid"]
        client.call(P.SHUTDOWN)
    deadline = time.monotonic() + timeout
    while proctree.is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def worker_scalar(event: dict) -> bool:
    """A scalar the worker wrote: the daemon's own system/* samples share the stream, more of
    them the slower the machine, so counts of lines a worker wrote must leave them out."""
    return event["type"] == "scalar" and not event["tag"].startswith("system/")


def connect(home: Home, name: str = "test"):
    from mosaic_tui.client import Client
    return Client(home, timeout=30, name=name)


_WALK = """
import json, os, sys
from workers.sdk.telemetry import Emitter
{imports}
results = {{}}
for run_dir, config in json.loads(sys.argv[1]):
    os.chdir(run_dir)
    fd = os.open("events.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    emitter = Emitter(fd)
    key = config.get("name") or config["algo"]
    try:
        results[key] = {call}
    except BaseException as exc:
        results[key] = repr(exc)
    emitter.close()
    os.close(fd)
print(json.dumps(results))
"""


def walk_runs(jobs: list[tuple[str, dict]], imports: str, call: str, timeout: float = 900) -> dict:
    """Run many configs in one process (a library imported once, not once a run): each job is
    (run directory, config), its events written to the directory's events.jsonl by ``call``
    (an expression of ``config`` and ``emitter``, after ``imports``). Returns name or algo ->
    the call's result, or the exception's repr."""
    code = _WALK.format(imports=imports, call=call)
    out = subprocess.run([sys.executable, "-c", code, json.dumps(jobs)], capture_output=True, text=True,
                         cwd=ROOT, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def holds(predicate, seconds: float, interval: float = 0.05, what: str = "condition") -> None:
    """That ``predicate`` stays true for ``seconds``: checked again and again, failing at the first
    time it is not (a "nothing happens" check that looks the whole time, not once at its end)."""
    deadline = time.monotonic() + seconds
    while True:
        if not predicate():
            raise AssertionError(f"{what} no longer held")
        if time.monotonic() >= deadline:
            return
        time.sleep(interval)


def writes_on(home: Home, run_id: str):
    """A predicate: the run's events file has grown since this call (its worker writes on: with no
    daemon, say, a positive sign that a window passed, where a sleep would only hope so)."""
    path = home.run_dir(run_id) / "events.jsonl"
    size = path.stat().st_size
    return lambda: path.stat().st_size > size


def wait_state(home: Home, run_id: str, states, timeout: float = 60.0) -> dict:
    states = {states} if isinstance(states, str) else set(states)

    def check():
        with connect(home) as c:
            run = c.call(P.GET, run=run_id)
        return run if run["state"] in states else None
    return wait_for(check, timeout, 0.1, f"run {run_id} to reach {states}")


# -- private clusters (tests/plugins/slurm_cluster.py, tests/plugins/ray_cluster.py) ----------------------------
def processes_marked(marker: str, value: str) -> set[int]:
    """Live processes whose environment holds ``marker=value`` (a private cluster's daemons and
    everything they started inherit it), this one left out."""
    needle = f"{marker}={value}\0".encode()
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle in f.read() + b"\0":
                    pids.add(int(entry))
        except OSError:
            continue
    return pids


def kill_until_gone(find, rounds: int) -> set[int]:
    """SIGKILL what ``find()`` names, again until it names nothing (at most ``rounds`` times);
    every pid killed."""
    import signal as signals
    killed: set[int] = set()
    for _ in range(rounds):
        left = find()
        if not left:
            break
        killed |= left
        for pid in left:
            try:
                os.kill(pid, signals.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return killed


def events_of(home, run_id: str) -> list[dict]:
    """A run's events so far, whole lines only (its worker may be writing the next)."""
    text = (home.run_dir(run_id) / "events.jsonl").read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


def scalar_steps(home, run_id: str, tag: str) -> list[int]:
    """The steps of one scalar tag in a run's events, in order."""
    return [e["step"] for e in events_of(home, run_id) if e["type"] == "scalar" and e["tag"] == tag]

