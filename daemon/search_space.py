"""A sweep's search space as Optuna's distributions: the daemon asks its trials with them
(daemon/sweeps.py) and `mosaic explain` rebuilds the sweep's study with the same ones
(mosaic_tui/sweep_explain.py), so both ends read one definition.

Pure, with no daemon imports: the app may import this module (it reaches no other daemon
internals). Optuna is imported by the call, never when the module loads.
"""
from __future__ import annotations

from typing import Any


def optuna_distributions(space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each param's Optuna distribution, from the normalised search space a sweep's spec holds
    (``{"kind": "grid"/"categorical", "values": [...]}`` or ``{"kind": "uniform"/"loguniform"/"int",
    "low": ..., "high": ..., "log": ...}``)."""
    import optuna.distributions as D
    out = {}
    for name, ps in space.items():
        if ps["kind"] in ("grid", "categorical"):
            out[name] = D.CategoricalDistribution(ps["values"])
        elif ps["kind"] == "int":
            out[name] = D.IntDistribution(int(ps["low"]), int(ps["high"]), log=ps["log"])
        else:
            out[name] = D.FloatDistribution(ps["low"], ps["high"], log=ps["kind"] == "loguniform")
    return out
