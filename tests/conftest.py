"""Shared fixtures: each test gets its own daemon home, real processes, real sockets."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

from daemon.home import Home
from tests.helpers import Mosaic, _stop_everything, start_daemon, stop_daemon
from workers.fastlane import layout as fastlane_layout

# `make test-fast`: the unit layer and the quick integration tests, and their markers (tests/fast.py)
pytest_plugins = ["tests.fast"]


@pytest.fixture
def home():
    """A fresh home in a short path (socket paths stay under sun_path's limit)."""
    path = tempfile.mkdtemp(prefix="mh-", dir="/tmp")
    h = Home.resolve(path)
    yield h
    _stop_everything(h)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def mosaic(home) -> Mosaic:
    return Mosaic(home)


@pytest.fixture
def tictactoe_checkpoint(daemon, mosaic) -> str:
    """A tiny RLlib PPO policy trained on tic-tac-toe by the real ray worker (about 30 s here): the
    opponent of the MOSAIC LLM worker's checkpoint seats and of the human's seats."""
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "tictactoe_v3", "--steps", "200",
                           "--set", "train_batch_size_per_learner=200", "--set", "minibatch_size=100",
                           "--set", "num_epochs=1", "--set", "fcnet_hiddens=[16]", "--set", "env_runners=0")
    mosaic.run("wait", run_id, "--timeout", "600")
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (run.get("reason"), (mosaic.home.run_dir(run_id) / "stderr.log").read_text(
        errors="replace")[-4000:])
    return str(mosaic.home.run_dir(run_id) / "checkpoints" / "final")


@pytest.fixture
def daemon(home):
    """A running daemon for the test's home (started and stopped as the CLI does, from this process)."""
    start_daemon(home)
    yield home
    stop_daemon(home)


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
                    "test_start_under_load", "test_play_tmux"}


def _expected_length(item) -> int:
    """The order xdist hands out the tests that are not in a group: longest first, so the last tests
    of the suite are short and the two processes end together (a 90 s training run handed out last
    would keep one process busy alone for its whole length). `slow` tests train, `daemon` tests start a
    daemon and real processes (seconds), the rest are in-process (milliseconds). A group is handed
    out whole, largest first (pytest-xdist's loadscope reorder), wherever its tests stand."""
    if item.get_closest_marker("xdist_group") or item.get_closest_marker("slow"):
        return 0
    return 1 if "daemon" in item.fixturenames else 2


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
    if hasattr(config, "workerinput"):
        items.sort(key=_expected_length)
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
    """One JAX compilation cache and one numba cache for the whole session (every test home would
    otherwise get its own, and the Jumanji tests compile the same epoch functions, the MultiGrid
    ones mosaic_multigrid's observation code, again and again), removed at its end. Set in the
    controller before xdist starts its workers, which inherit it; the daemons and workers the
    tests start inherit it in turn (a value already set is kept: workers/sdk/registration.py)."""
    if hasattr(config, "workerinput") or "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    config._mosaic_cache_root = tempfile.mkdtemp(prefix="mosaic-test-cache-", dir="/tmp")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(config._mosaic_cache_root, "jax")
    os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(config._mosaic_cache_root, "numba"))


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


# what the test processes themselves leave in the temp dir (runs get a temp dir of their own, removed
# by their supervisor): multiprocessing's pymp-* of a pytest process that ends without its atexit, and
# the tmp*wandb-media / tmp*wandb-artifacts pair W&B makes when XuanCe's agents are imported in-process
PROCESS_LITTER = ("pymp-*", "tmp*wandb-media", "tmp*wandb-artifacts")


def _temp_entries() -> set[str]:
    try:
        return set(os.listdir(tempfile.gettempdir()))
    except OSError:
        return set()


def _remove_process_litter(config) -> None:
    """Remove the entries PROCESS_LITTER names that appeared in the temp dir during this session
    (in the controller, after every xdist worker ended); .ci/run then checks nothing else was left."""
    import fnmatch
    before = getattr(config, "_mosaic_temp_before", None)
    if before is None:
        return
    for name in sorted(_temp_entries() - before):
        if any(fnmatch.fnmatch(name, pattern) for pattern in PROCESS_LITTER):
            shutil.rmtree(os.path.join(tempfile.gettempdir(), name), ignore_errors=True)


def pytest_unconfigure(config):
    _remove_process_litter(config)
    home_root = getattr(config, "_mosaic_home_root", None)
    if home_root:
        shutil.rmtree(home_root, ignore_errors=True)
    root = getattr(config, "_mosaic_cache_root", None)
    if root:
        shutil.rmtree(root, ignore_errors=True)


def pytest_configure(config):
    if not hasattr(config, "workerinput"):
        config._mosaic_temp_before = _temp_entries()
    _shared_compile_cache(config)
    _no_files_in_home(config)
