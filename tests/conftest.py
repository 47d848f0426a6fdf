"""Shared fixtures: each test gets its own daemon home, real processes, real sockets."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from daemon import proctree
from daemon import protocol as P
from daemon.home import Home
from workers.fastlane import layout as fastlane_layout

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def home():
    """A fresh home in a short path (socket paths stay under sun_path's limit)."""
    path = tempfile.mkdtemp(prefix="mh-", dir="/tmp")
    h = Home.resolve(path)
    yield h
    _stop_everything(h)
    shutil.rmtree(path, ignore_errors=True)


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
        return json.loads(self.run("show", run, "--json", check=True).stdout)


@pytest.fixture
def mosaic(home) -> Mosaic:
    return Mosaic(home)


@pytest.fixture
def daemon(home, mosaic):
    """A running daemon for the test's home."""
    mosaic.run("daemon", "start", check=True)
    yield home
    mosaic.run("daemon", "stop")


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


def wait_state(home: Home, run_id: str, states, timeout: float = 60.0) -> dict:
    states = {states} if isinstance(states, str) else set(states)

    def check():
        with connect(home) as c:
            run = c.call(P.GET, run=run_id)
        return run if run["state"] in states else None
    return wait_for(check, timeout, 0.1, f"run {run_id} to reach {states}")


# -- docs/reliability.md ---------------------------------------------------
# pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment; the app
# (Rich and Textual read them) would draw at 80x24 in every tmux pane, xterm and kitty
# the tests start at another size. A terminal the tests open sizes itself.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

_reliability = {"collected": 0, "passed": 0}


# The real app in tmux, xterm or kitty: one at a time, so two terminals never wait on each other's redraws
TERMINAL_MODULES = {"test_e2e_tmux", "test_loop_tmux", "test_tmux_keys", "test_alerts_tmux", "test_frames_terminals",
                    "test_start_under_load"}


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(config, items):
    _reliability["collected"] = sum(1 for item in items if item.get_closest_marker("reliability"))
    # `make test` runs the suite in parallel (pytest-xdist, --dist loadgroup). Tests
    # that start a private Ray cluster run one after another in one process: two
    # Rays starting at once on 2 cores time out ("The current node timed out").
    # The terminal tests (TERMINAL_MODULES) run one after another too. The reliability tests run together so one process sees all of them pass and
    # writes build/reliability.md.
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.get_closest_marker("ray") or (callspec is not None and callspec.params.get("worker") == "ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif item.get_closest_marker("reliability"):
            item.add_marker(pytest.mark.xdist_group("reliability"))
        elif item.module.__name__.rsplit(".", 1)[-1] in TERMINAL_MODULES:
            item.add_marker(pytest.mark.xdist_group("terminal"))
    # planted tests (tests/test_suite_guard.py: a test process that kills itself) run only inside
    # the check that plants them
    if os.environ.get("MOSAIC_PLANTED_CRASH") != "1":
        planted = [item for item in items if item.get_closest_marker("planted")]
        if planted:
            items[:] = [item for item in items if not item.get_closest_marker("planted")]
            config.hook.pytest_deselected(items=planted)
    # `long` tests (the breadth sweeps: every algorithm, every env family on every
    # worker, several minutes each) keep `make test` inside CI's half hour; they run
    # with MOSAIC_LONG=1 (`make test-long`) before an issue about them is resolved.
    if os.environ.get("MOSAIC_LONG") != "1":
        skip = pytest.mark.skip(reason="long: runs with MOSAIC_LONG=1 (make test-long)")
        for item in items:
            if item.get_closest_marker("long"):
                item.add_marker(skip)


def pytest_runtest_logreport(report):
    if report.when == "call" and report.passed and "reliability" in report.keywords:
        _reliability["passed"] += 1


def _segments() -> set[str]:
    try:
        return {n for n in os.listdir(fastlane_layout.SHM_DIR) if n.startswith(fastlane_layout.PREFIX)}
    except FileNotFoundError:
        return set()


def _xdist_worker(session) -> bool:
    return hasattr(session.config, "workerinput")


def pytest_sessionstart(session):
    session.config._mosaic_segments_before = _segments()


def pytest_sessionfinish(session, exitstatus):
    from tests import reliability_report
    total = _reliability["collected"]
    if total and _reliability["passed"] == total and total >= 10:
        reliability_report.write()
    if _xdist_worker(session):
        return   # the segment check below runs once, in the controller, after every worker ended
    # FastLane promises that nothing is left in /dev/shm when runs end: the
    # whole suite is held to it (segments that were there before are not ours)
    left = sorted(_segments() - getattr(session.config, "_mosaic_segments_before", set()))
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = f"FastLane segments left in {fastlane_layout.SHM_DIR} by this session: {', '.join(left)}"
        if reporter is not None:
            reporter.write_line(message, red=True)
        else:
            print(message, file=sys.stderr)
        if session.exitstatus == 0:
            session.exitstatus = 1


def _shared_compile_cache(config) -> None:
    """One JAX compilation cache for the whole session (every test home would otherwise get its
    own, and the Jumanji tests compile the same epoch functions again and again). Set in the
    controller before xdist starts its workers, which inherit it; the daemons and workers the
    tests start inherit it in turn (a value already set is kept: workers/sdk/registration.py)."""
    if hasattr(config, "workerinput") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    config._mosaic_cache_root = tempfile.mkdtemp(prefix="mosaic-test-cache-", dir="/tmp")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(config._mosaic_cache_root, "jax")


def _no_files_in_home(config) -> None:
    """What libraries write under the user's home by default goes to the session's temp dir:
    caches and configs (XDG: kitty, mesa, fontconfig; matplotlib's own variable), and Ray's
    token (token auth is on by default in Ray 2.60: a new local cluster writes its token to
    ~/.ray/auth_token unless one is found; a token file of the session's is found first).
    Set in the controller, inherited by xdist's workers, the daemons and their runs.
    .ci/run checks that the suite left nothing in the home."""
    if hasattr(config, "workerinput") or os.environ.get("MOSAIC_TEST_HOME_REDIRECTED"):
        return
    root = tempfile.mkdtemp(prefix="mosaic-test-home-", dir="/tmp")
    config._mosaic_home_root = root
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "MPLCONFIGDIR"):
        os.environ[var] = os.path.join(root, var.lower())
    token = os.path.join(root, "ray", "auth_token")
    os.makedirs(os.path.dirname(token))
    with open(token, "w") as f:
        f.write(os.urandom(16).hex())
    os.environ["RAY_AUTH_TOKEN_PATH"] = token
    os.environ["MOSAIC_TEST_HOME_REDIRECTED"] = "1"


def pytest_unconfigure(config):
    home_root = getattr(config, "_mosaic_home_root", None)
    if home_root:
        shutil.rmtree(home_root, ignore_errors=True)
    root = getattr(config, "_mosaic_cache_root", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


def pytest_configure(config):
    _shared_compile_cache(config)
    _no_files_in_home(config)
