"""daemon/search_space.py: a sweep's normalised search space as Optuna's distributions, the one
definition the daemon asks trials with and `mosaic explain` rebuilds the study with."""
from __future__ import annotations

import pytest

from daemon.search_space import optuna_distributions

D = pytest.importorskip("optuna.distributions")


def test_each_kind_becomes_its_optuna_distribution():
    space = {"lr": {"kind": "loguniform", "low": 1e-4, "high": 1e-1, "log": False},
             "ent": {"kind": "uniform", "low": 0, "high": 0.1, "log": True},
             "layers": {"kind": "int", "low": 1.0, "high": 4.0, "log": False},
             "steps": {"kind": "int", "low": 64, "high": 512, "log": True},
             "gamma": {"kind": "grid", "values": [0.98, 0.99]},
             "act": {"kind": "categorical", "values": ["relu", "tanh"]}}
    assert optuna_distributions(space) == {
        "lr": D.FloatDistribution(1e-4, 1e-1, log=True),
        "ent": D.FloatDistribution(0, 0.1, log=False),   # only loguniform samples on a log scale
        "layers": D.IntDistribution(1, 4, log=False),
        "steps": D.IntDistribution(64, 512, log=True),
        "gamma": D.CategoricalDistribution([0.98, 0.99]),
        "act": D.CategoricalDistribution(["relu", "tanh"])}


def test_the_daemon_and_the_app_read_the_one_definition():
    from daemon.sweeps import SweepController
    from mosaic_tui import sweep_explain
    assert SweepController.distributions is optuna_distributions
    assert sweep_explain.optuna_distributions is optuna_distributions


def test_it_imports_nothing_of_the_daemon():
    """The app may import this module only because it reaches no daemon internals through it."""
    import ast
    from pathlib import Path

    import daemon.search_space as S
    tree = ast.parse(Path(S.__file__).read_text())
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert [m for m in modules if m and m.split(".")[0] == "daemon"] == []
