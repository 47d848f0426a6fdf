"""The new-sweep form's choices made into the spec `mosaic sweep SPEC.yaml` takes (daemon/sweeps.py):
the sampler, and for population-based training the ``pbt:`` block (population, interval, quantile,
each swept param's mutation). Pure: mosaic_tui/screens/new_sweep.py reads its fields into these.

Only the typing is checked here (a number where a number goes), one line per mistake, named as the
daemon names its fields; the ranges and the worker's say are the daemon's to check at submit, in
one line as for the CLI.
"""
from __future__ import annotations

import math
from typing import Any

FROM_SPEC = "spec"   # the sampler as the YAML says (or its default)
SAMPLERS = (FROM_SPEC, "grid", "random", "tpe", "pbt")
MUTATION_KINDS = ("factors", "neighbours")
NOT_WITH_PBT = ("trials", "seeds", "parallel", "sampler", "pruner")   # the population replaces them
DEFAULT_POPULATION = 4
DEFAULT_QUANTILE = 0.25
DEFAULT_FACTORS = "0.8 1.2"


def default_interval(steps: Any) -> int:
    """A first interval to offer: a fifth of the budget (four exploits), at least one step."""
    return max(1, int(steps) // 5) if isinstance(steps, (int, float)) and not isinstance(steps, bool) and steps > 0 \
        else 10000


def swept_params(text: str) -> list[str]:
    """The param names of a spec's text; none while the YAML does not parse."""
    import yaml
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    params = spec.get("params") if isinstance(spec, dict) else None
    return [str(k) for k in params] if isinstance(params, dict) else []


def _number(text: str) -> float | int | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def _integer(field: str, text: str, errors: list[str]) -> int | None:
    value = _number(text.strip())
    if not isinstance(value, int):
        errors.append(f"sweep.pbt.{field}: an integer, not {text.strip()!r}")
        return None
    return value


def _numbers(field: str, text: str, errors: list[str]) -> list[float | int] | None:
    words = text.replace(",", " ").split()
    values = [_number(w) for w in words]
    bad = [w for w, v in zip(words, values) if v is None]
    if bad:
        errors.append(f"sweep.pbt.{field}: numbers separated by spaces, not {' '.join(bad)!r}")
        return None
    return values


def pbt_block(population: str, interval: str, quantile: str,
              mutations: dict[str, dict[str, str]]) -> tuple[dict[str, Any], list[str]]:
    """The ``pbt:`` block from the form's texts, and one line per mistake. ``mutations``: per param
    {"kind": factors|neighbours, "values": "0.8 1.2", "resample_probability": "0.25"}; an empty
    text leaves the daemon's default (quantile 0.25, factors 0.8 1.2, resample probability 0)."""
    errors: list[str] = []
    block: dict[str, Any] = {}
    value = _integer("population", population, errors)
    if value is not None:
        block["population"] = value
    value = _integer("interval", interval, errors)
    if value is not None:
        block["interval"] = value
    if quantile.strip():
        q = _number(quantile.strip())
        if q is None:
            errors.append(f"sweep.pbt.quantile: a number, not {quantile.strip()!r}")
        else:
            block["quantile"] = q
    checked: dict[str, dict[str, Any]] = {}
    for name, m in mutations.items():
        field = f"mutations.{name}"
        out: dict[str, Any] = {}
        kind = m.get("kind") or "factors"
        if kind not in MUTATION_KINDS:
            errors.append(f"sweep.pbt.{field}: factors or neighbours, not {kind!r}")
            continue
        if (m.get("values") or "").strip():
            values = _numbers(f"{field}.{kind}", m["values"], errors)
            if values is not None:
                out[kind] = values
        elif kind == "neighbours":
            errors.append(f"sweep.pbt.{field}.neighbours: the values to move between, e.g. 1e-4 3e-4 1e-3")
        p = (m.get("resample_probability") or "").strip()
        if p:
            prob = _number(p)
            if prob is None:
                errors.append(f"sweep.pbt.{field}.resample_probability: a number, not {p!r}")
            else:
                out["resample_probability"] = prob
        checked[name] = out
    if checked:
        block["mutations"] = checked
    return block, errors


def apply_method(spec: dict[str, Any], sampler: str, pbt: dict[str, Any] | None = None) -> dict[str, Any]:
    """The spec with the form's sampler: as it was for FROM_SPEC; for "pbt" the ``pbt:`` block in
    place of the keys a population replaces; else that sampler and no ``pbt:`` block."""
    if sampler == FROM_SPEC:
        return dict(spec)
    if sampler == "pbt":
        out = {k: v for k, v in spec.items() if k not in NOT_WITH_PBT}
        out["pbt"] = pbt or {}
        return out
    out = {k: v for k, v in spec.items() if k != "pbt"}
    out["sampler"] = sampler
    return out
