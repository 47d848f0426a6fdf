"""Worker discovery through entry points, without heavy imports."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT


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
            "print(sorted(m for m in ('torch', 'ray', 'xuance') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(ROOT))
    assert out.stdout.strip() == "[]"


def test_workers_command_lists_capabilities(daemon, mosaic):
    workers = json.loads(mosaic.run("workers", "--all", "--json", check=True).stdout)  # synthetic is hidden
    synthetic = next(w for w in workers if w["name"] == "synthetic")
    assert synthetic["available"] and synthetic["capabilities"]["algorithms"] == ["emit"]
    assert {"name", "version", "upstream", "upstream_version", "capabilities"} <= set(synthetic)


def test_no_worker_module_imports_a_module_that_imports_it_back():
    """Circles (CleanRL's cli and evaluate imported each other) make the import order matter;
    lazy imports inside functions count too."""
    import ast
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "workers").rglob("*.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
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
