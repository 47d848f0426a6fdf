"""Worker discovery through entry points, without heavy imports."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT


def test_listing_workers_imports_no_torch_ray_or_xuance():
    code = ("import json, sys; from daemon import discovery; d, e = discovery.discover(); "
            "listing = discovery.describe(d, e); "
            "print(json.dumps({'names': sorted(d), 'errors': e, "
            "'heavy': sorted(m for m in ('torch', 'ray', 'xuance', 'gym', 'gymnasium') if m in sys.modules)}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    cwd=str(ROOT)).stdout)
    assert out["heavy"] == []
    assert "synthetic" in out["names"]
    assert out["errors"] == {}


def test_daemon_and_cli_import_nothing_heavy():
    code = ("import sys; import daemon.server, mosaic_tui.cli, mosaic_tui.client; "
            "print(sorted(m for m in ('torch', 'ray', 'xuance', 'wandb', 'mlflow') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(ROOT))
    assert out.stdout.strip() == "[]"


def test_workers_command_lists_capabilities(daemon, mosaic):
    workers = json.loads(mosaic.run("workers", "--all", "--json", check=True).stdout)  # synthetic is hidden
    synthetic = next(w for w in workers if w["name"] == "synthetic")
    assert synthetic["available"] and synthetic["capabilities"]["algorithms"] == ["emit"]
    assert {"name", "version", "upstream", "upstream_version", "capabilities"} <= set(synthetic)


def test_no_worker_module_imports_a_module_that_imports_it_back():
    """Circles (CleanRL's cli and evaluate imported each other) make the import order matter;
    lazy imports inside functions count too (runtime.evaluate's hand-over to evaluate.run is one:
    evaluate.py takes what it shares with training from a setup module, never from runtime.py)."""
    import ast
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "workers").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        names: set[str] = set()
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("workers"):
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("workers")}
        graph[module] = names - {module}
    circles = sorted((a, b) for a, names in graph.items() for b in names if b in graph and a in graph[b] and a < b)
    assert circles == []


def test_every_bundled_worker_refuses_an_unknown_algorithm_in_one_line_naming_its_own():
    """One message for schema() and validate() of every bundled worker (WorkerDescriptor.unknown_algo:
    the check each worker's schema() repeated); CleanRL adds that a script path is welcome."""
    import pytest

    from daemon import discovery
    from workers.sdk.config import ConfigError
    descriptors, _ = discovery.discover()
    assert {"cleanrl", "xuance", "ray", "tianshou", "jumanji", "balrog", "mosaic_llm"} <= set(descriptors)
    for name, worker in descriptors.items():
        noun = "agent" if name == "balrog" else "algorithm"
        start = f"unknown {noun} 'nope' for worker '{name}'; choose from {', '.join(worker.algorithms())}"
        with pytest.raises(ConfigError) as schema_error:
            worker.schema("nope")
        with pytest.raises(ConfigError) as validate_error:
            worker.validate({"worker": name, "algo": "nope", "env": "CartPole-v1"})
        for exc in (schema_error.value, validate_error.value):
            assert exc.field == "algo" and str(exc).startswith(f"algo: unknown algorithm 'nope' for worker '{name}'; "
                                                               if exc is validate_error.value else f"algo: {start}"), \
                (name, str(exc))
            assert "\n" not in str(exc)


def _checkpoint(tmp_path, worker: str, meta) -> str:
    """A checkpoint's outline as each worker's descriptor checks it (the files are never loaded here)
    with ``meta`` as mosaic_checkpoint.json beside it (None: none; a str: its raw text)."""
    from workers.jumanji_worker import STATE_FILE
    folder = tmp_path / worker
    folder.mkdir()
    if worker == "ray":
        (folder / "learner_group" / "learner" / "rl_module").mkdir(parents=True)
        target = folder
    elif worker == "tianshou":
        target = folder / "policy.pt"
        target.write_bytes(b"")
    else:
        (folder / STATE_FILE).write_bytes(b"")
        target = folder
    if meta is not None:
        (folder / "mosaic_checkpoint.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    return str(target)


def test_a_checkpoint_trained_on_another_env_or_by_another_algorithm_is_refused_by_name(tmp_path):
    """workers.sdk.rundir.read_checkpoint_meta and check_trained_on: the eval/resume check of ray,
    tianshou and jumanji (and mosaic_llm's checkpoint seats), written once."""
    import pytest

    from daemon import discovery
    from workers.sdk.config import ConfigError
    from workers.sdk.rundir import read_checkpoint_meta
    descriptors, _ = discovery.discover()
    cases = [  # worker, config, meta beside the checkpoint, the refusal
        ("ray", {"algo": "PPO", "env": "CartPole-v1", "mode": "eval"}, {"env": "Acrobot-v1", "algo": "PPO"},
         "checkpoint: was trained on Acrobot-v1, not CartPole-v1"),
        ("ray", {"algo": "PPO", "env": "CartPole-v1", "steps": 1000}, {"env": "CartPole-v1", "algo": "DQN"},
         "checkpoint: is a DQN checkpoint, not PPO"),                     # resuming: the same algorithm
        ("tianshou", {"algo": "dqn", "env": "CartPole-v1", "mode": "eval"}, {"env": "Acrobot-v1", "algo": "dqn"},
         "checkpoint: was trained on Acrobot-v1, not CartPole-v1"),
        ("tianshou", {"algo": "dqn", "env": "CartPole-v1", "mode": "eval"}, {"env": "CartPole-v1", "algo": "c51"},
         "checkpoint: is a c51 checkpoint, not dqn"),
        ("jumanji", {"algo": "a2c", "env": "Snake-v1", "mode": "eval"}, {"env": "Game2048-v1", "algo": "a2c"},
         "checkpoint: was trained on Game2048-v1, not Snake-v1"),
        ("jumanji", {"algo": "a2c", "env": "Snake-v1", "mode": "eval"}, None,
         "checkpoint: was trained on an unknown env, not Snake-v1"),      # jumanji's own files always have it
    ]
    for i, (worker, config, meta, refusal) in enumerate(cases):
        (tmp_path / str(i)).mkdir()
        path = _checkpoint(tmp_path / str(i), worker, meta)
        with pytest.raises(ConfigError) as error:
            descriptors[worker].validate({"worker": worker, **config, "checkpoint": path})
        assert str(error.value) == refusal, (worker, str(error.value))
    # what the meta reader makes of the rest: a file inside the checkpoint, garbage, a run reference
    folder = tmp_path / "read"
    folder.mkdir()
    (folder / "mosaic_checkpoint.json").write_text(json.dumps({"env": "CartPole-v1"}))
    (folder / "model.pt").write_bytes(b"")
    assert read_checkpoint_meta(str(folder / "model.pt")) == read_checkpoint_meta(str(folder)) == {"env": "CartPole-v1"}
    (folder / "mosaic_checkpoint.json").write_text("{not json")
    assert read_checkpoint_meta(str(folder)) is None
    assert read_checkpoint_meta("run:dqn-1") is None                     # before the daemon resolves it
