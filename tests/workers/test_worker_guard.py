"""The shape every worker shares: a thin cli.py handing over to ``worker_cli.serve``, the entry
points in runtime.py (eval in evaluate.py), the SDK's upstream() and episode series, and one guard (workers/sdk/guard.py) for every way a run ends but completing.

The guard's cases run in real processes (a worker's exit status and death by a signal are what
the supervisor reads); the workers' own cancels and failures are in each worker's tests.
"""
from __future__ import annotations

import ast
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, wait_for

BUNDLED = ("cleanrl", "xuance", "ray", "tianshou", "jumanji", "balrog", "mosaic_llm", "human")
# the entry points a runtime.py defines, by worker: train/evaluate, or play for the LLM workers and a person
ENTRY_POINTS = {"balrog": ("play",), "mosaic_llm": ("play",), "human": ("play",)}
CLI_MAX_LINES = 30


def _functions(path: Path) -> set[str]:
    return {node.name for node in ast.parse(path.read_text()).body if isinstance(node, ast.FunctionDef)}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_worker_has_a_thin_cli_that_hands_over_to_the_shared_guard(name):
    folder = ROOT / "workers" / f"{name}_worker"
    cli = (folder / "cli.py").read_text()
    assert len(cli.splitlines()) <= CLI_MAX_LINES, f"{name}_worker/cli.py has {len(cli.splitlines())} lines"
    assert f'serve("python -m workers.{name}_worker.cli", argv, WORKER, "workers.{name}_worker.runtime"' in cli
    for word in ("run_failed", "run_completed", "Cancelled", "traceback", "signal."):
        assert word not in cli, f"{name}_worker/cli.py handles an ending itself ({word})"
    defined = _functions(folder / "runtime.py")
    for entry in ENTRY_POINTS.get(name, ("train", "evaluate")):
        assert entry in defined, f"{name}_worker/runtime.py has no {entry}()"
    # one failure path: no worker module catches a cancel or words a failure of its own
    for module in folder.rglob("*.py"):
        text = module.read_text()
        assert "except Cancelled" not in text and "end_cancelled" not in text, module
        assert 'run_failed(f"{type(exc).__name__}' not in text, module


def _imported(path: Path) -> set[str]:
    """The modules a file imports, at its top or inside functions (``from a import b``: a and a.b)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
    return names


def _worker_modules(name: str) -> list[Path]:
    return sorted(p for p in (ROOT / "workers" / f"{name}_worker").rglob("*.py") if "sitedir" not in p.parts)


@pytest.mark.parametrize("name", BUNDLED)
def test_every_worker_keeps_its_file_roles(name):
    """catalog.py holds the worker's algorithms, envs and params; runtime.py the entry points; an eval mode lives in evaluate.py (``run``), which
    runtime.evaluate hands over to and which never imports runtime.py back; the run's library is named by the SDK's one ``upstream()``;
    training that stops and continues keeps how in resume.py; a series of episodes stops and continues with the SDK's ``EpisodeSeries``."""
    folder = ROOT / "workers" / f"{name}_worker"
    assert (folder / "catalog.py").is_file(), f"{name}_worker has no catalog.py (its algorithms, envs, params as data)"
    tree = ast.parse((folder / "runtime.py").read_text())
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    if "evaluate" in functions:
        assert "run" in _functions(folder / "evaluate.py"), f"{name}_worker/evaluate.py has no run()"
        # what eval shares with training lives in a setup module both import (CleanRL's run_setup.py)
        assert f"workers.{name}_worker.runtime" not in _imported(folder / "evaluate.py"), \
            f"{name}_worker/evaluate.py imports runtime.py; what both modes need belongs in a setup module"
        body = [n for n in functions["evaluate"].body
                if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]   # its docstring
        text = ast.unparse(functions["evaluate"])
        assert len(body) <= 3 and "evaluation.run(config, emitter)" in text, \
            f"{name}_worker/runtime.py's evaluate() is more than a hand-over to evaluate.run"
    started = 0
    for module in _worker_modules(name):
        where = module.relative_to(ROOT)
        module_tree = ast.parse(module.read_text())
        for node in ast.walk(module_tree):
            if isinstance(node, ast.FunctionDef):
                assert node.name not in ("upstream", "_upstream"), f"{where}: its own upstream(); use workers.sdk.packages'"
            if isinstance(node, ast.ClassDef):
                assert "EpisodeCut" not in node.name, f"{where}: its own {node.name}; use workers.sdk.series'"
            if isinstance(node, ast.Assign):
                assert "STOP_STATE" not in [getattr(t, "id", None) for t in node.targets], \
                    f"{where}: its own STOP_STATE; use workers.sdk.series'"
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "run_started":
                started += 1
                given = {k.arg: k.value for k in node.keywords}
                value = given.get("upstream")
                assert isinstance(value, ast.Call) and getattr(value.func, "id", None) == "upstream", \
                    f"{where}:{node.lineno}: run_started's upstream is not workers.sdk.packages.upstream(...)"
    assert started, f"{name}_worker never says run_started"
    capabilities = __import__(f"workers.{name}_worker", fromlist=["WORKER"]).WORKER.capabilities()
    if capabilities.get("stop") and capabilities.get("checkpoints"):   # training that stops and continues
        assert (folder / "resume.py").is_file(), f"{name}_worker stops and continues without a resume.py"
    if capabilities.get("stop") is True and not capabilities.get("checkpoints"):   # a series of episodes
        assert any("EpisodeSeries(" in module.read_text() for module in _worker_modules(name)), \
            f"{name}_worker stops a series of episodes without workers.sdk.series.EpisodeSeries"


# runtime.py holds entry points: what a checkpoint writer, a curriculum or a schedule is lives in its own
# module (checkpoints.py, resume.py, curriculum.py, run_setup.py, algorithms.py)
HELPER_WORDS = ("checkpoint", "curriculum", "anneal")
WRITER_CALLS = ("save_model", "save_resume_state", "write_manifest")


@pytest.mark.parametrize("name", BUNDLED)
def test_runtime_writes_no_checkpoint_and_runs_no_curriculum_itself(name):
    """A runtime.py defines no checkpoint writer, curriculum or schedule (no function or class named
    so, no torch.save, no XuanCe save_model, no manifest or checkpoint metadata written); it calls them."""
    where = f"{name}_worker/runtime.py"
    for node in ast.walk(ast.parse((ROOT / "workers" / where).read_text())):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            assert not any(word in node.name.lower() for word in HELPER_WORDS), \
                f"{where}:{node.lineno}: {node.name} belongs in a module of its own, not among the entry points"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = getattr(node.func.value, "id", None)
            assert (owner, node.func.attr) != ("torch", "save"), f"{where}:{node.lineno}: writes a checkpoint"
        if isinstance(node, ast.Call):
            called = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            assert called not in WRITER_CALLS, f"{where}:{node.lineno}: writes a checkpoint ({called})"
        if isinstance(node, ast.Name):
            assert node.id != "CHECKPOINT_META", f"{where}:{node.lineno}: writes a checkpoint's metadata"


def test_the_example_worker_has_the_same_shape():
    folder = ROOT / "docs" / "workers" / "example" / "mosaic_example_worker"
    cli = (folder / "cli.py").read_text()
    assert len(cli.splitlines()) <= CLI_MAX_LINES and "serve(" in cli and "run_failed" not in cli
    assert "train" in _functions(folder / "runtime.py")   # no checkpoints: no evaluate (mode eval needs one)


GUARDED = textwrap.dedent("""
    import os, signal, sys, time
    from workers.sdk.config import ConfigError
    from workers.sdk.guard import RunFailed, guarded
    from workers.sdk.stop import SIGNALS
    from workers.sdk.telemetry import Emitter

    emitter = Emitter(1)
    SIGNALS.install()
    case = sys.argv[1]

    def entry():
        emitter.scalar("x", 1.0, 7)
        emitter.heartbeat(12)
        if case == "completes":
            emitter.run_completed(step=12)
            return 0
        if case == "raises":
            raise ValueError("the learning rate is a string")
        if case == "worded":
            raise RunFailed("ppo exited with code 5: boom", code=5)
        if case == "worded-signal":
            raise RunFailed("ppo was killed by SIGSEGV", signum=signal.SIGSEGV)
        if case == "config":
            raise ConfigError("params.lr", "must be a number")
        if case in ("cancel", "cancel-turned"):
            print("ready", file=sys.stderr, flush=True)
            try:
                while True:
                    time.sleep(0.01)
            except BaseException:
                if case == "cancel-turned":   # as Ray's Cython code or jax make their own error of it
                    raise SystemError("error return without exception set") from None
                raise

    sys.exit(guarded(emitter, SIGNALS, entry, "python -m test_worker"))
""")


def _run_guarded(tmp_path: Path, case: str, cancel: bool = False):
    proc = subprocess.Popen([sys.executable, "-c", GUARDED, case], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    if cancel:
        stderr = proc.stderr
        wait_for(lambda: stderr.readline().startswith("ready"), 30, what="the entry point to run")
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    events = [json.loads(line) for line in out.splitlines() if line.strip()]
    return proc.returncode, events, err


@pytest.mark.parametrize("case, code, reason", [
    ("completes", 0, None),
    ("worded", 5, "ppo exited with code 5: boom"),
    ("config", 2, "invalid config: params.lr: must be a number"),
    ("worded-signal", -signal.SIGSEGV, "ppo was killed by SIGSEGV"),
    ("cancel", -signal.SIGTERM, "cancelled (SIGTERM)"),
    ("cancel-turned", -signal.SIGTERM, "cancelled (SIGTERM)"),
])
def test_the_guard_ends_a_run_with_one_wording(tmp_path, case, code, reason):
    returncode, events, stderr = _run_guarded(tmp_path, case, cancel=case.startswith("cancel"))
    assert returncode == code, stderr[-2000:]
    last = events[-1]
    if reason is None:
        assert last["type"] == "run_completed"
        return
    assert last["type"] == "run_failed" and last["reason"] == reason
    assert last["step"] == 12   # where the run was: the last step it reported
    if case.startswith("cancel"):
        assert "python -m test_worker: stopped by SIGTERM" in stderr


def test_the_guard_names_an_exception_and_keeps_its_traceback(tmp_path):
    returncode, events, stderr = _run_guarded(tmp_path, "raises")
    assert returncode == 1
    first, _, tail = events[-1]["reason"].partition("\n\n")
    assert first == "ValueError: the learning rate is a string"
    assert tail.startswith("Traceback (most recent call last)") and ", in entry\n" in tail   # where it was raised
    assert tail.rstrip().endswith("ValueError: the learning rate is a string")
    assert "Traceback (most recent call last)" in stderr   # the whole of it in stderr.log


def test_an_entry_point_that_cannot_be_imported_is_the_runs_failure(tmp_path):
    """serve() imports runtime.py in the worker process: a missing library is reported like any failure."""
    (tmp_path / "config.json").write_text(json.dumps({"worker": "ray", "algo": "PPO", "env": "CartPole-v1", "steps": 64}))
    code = textwrap.dedent("""
        import sys
        from workers.ray_worker import WORKER
        from workers.sdk.worker_cli import serve
        sys.exit(serve("python -m workers.ray_worker.cli", ["--config", sys.argv[1]], WORKER, "no_such_runtime"))
    """)
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "config.json")], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1, out.stderr[-2000:]
    events = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]   # stdout is the wire
    assert events[-1]["reason"].startswith("ModuleNotFoundError: No module named 'no_such_runtime'")


# -- the sitecustomize bootstrap the CleanRL, Jumanji and XuanCe workers share ------------------
SITEDIRS = {name: ROOT / "workers" / f"{name}_worker" / "sitedir" for name in ("cleanrl", "jumanji", "xuance")}


@pytest.mark.parametrize("name", sorted(SITEDIRS))
def test_each_workers_sitecustomize_runs_the_one_it_shadows(tmp_path, name):
    (tmp_path / "sitecustomize.py").write_text("print('the shadowed sitecustomize ran')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITEDIRS[name]), str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "the shadowed sitecustomize ran", out.stderr[-2000:]
    assert "mosaic: cannot" not in out.stderr


def test_a_cleanrl_script_that_cannot_be_patched_does_not_run(tmp_path):
    """Armed, the CleanRL patches must install: else the script would train without telemetry."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITEDIRS["cleanrl"]), str(ROOT)]),
           "MOSAIC_CLEANRL_PATCH": "1", "MOSAIC_CLEANRL_FRAMES": "{not json"}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "print('the script ran')"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 3 and "the script ran" not in out.stdout, (out.stdout, out.stderr[-2000:])
    assert out.stderr.rstrip().endswith("mosaic: cannot install the CleanRL patches")
    assert time.monotonic() - started < 120
