"""A sweep explained: Optuna's own param importances, the best trials with their configs, and the
objective against each swept param (slice plots); `mosaic explain SWEEP` and the sweep screen
(docs/sweeps.md).

Everything is computed from the sweep's record (the daemon's ``sweep_get``, which every daemon
with sweeps answers): its complete trials, with the values Optuna was told, go into an in-memory
Optuna study with the distributions the daemon asked with, and Optuna's evaluator runs on that.
No new daemon method, so an old daemon is explained too, and a sweep on another machine (`--ssh`)
as well as a local one. Optuna (and scikit-learn for the forests) are imported by the functions
that need them, never at the app's or the CLI's start.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from daemon.search_space import optuna_distributions

# our names for Optuna's three evaluators; ped-anova is Optuna's default
EVALUATORS = ("ped-anova", "fanova", "mdi")
EVALUATOR_TITLES = {"ped-anova": "PED-ANOVA", "fanova": "fANOVA", "mdi": "mean decrease in impurity"}
DEFAULT_EVALUATOR = "ped-anova"
DEFAULT_TOP = 3
MIN_FINISHED = 2          # Optuna's evaluators compare trials: one alone explains nothing
PLOT_WIDTH = 48           # the CLI's text scatter: columns of the plotting area
PLOT_HEIGHT = 8           # ... and its rows


class ExplainError(ValueError):
    """A sweep that cannot be explained (yet): one line."""


# -- the trials -----------------------------------------------------------------------------------
def finished_trials(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The trials Optuna was told a value for (``complete``), by trial number: what its
    evaluators and its slice plots read. Pruned, failed and running trials have no final value."""
    done = [t for t in sweep.get("trials", []) if t.get("state") == "complete" and _finite(t.get("value"))]
    return sorted(done, key=lambda t: t["trial"])


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _maximize(sweep: dict[str, Any]) -> bool:
    return sweep["spec"]["objective"]["direction"] == "maximize"


def best_trials(sweep: dict[str, Any], top: int = DEFAULT_TOP) -> list[dict[str, Any]]:
    """The ``top`` finished trials, best first, each with the run config it trained with
    (the sweep's base with the trial's params: what `mosaic submit` takes, seed the first seed)."""
    sign = -1.0 if _maximize(sweep) else 1.0
    ranked = sorted(finished_trials(sweep), key=lambda t: (sign * t["value"], t["trial"]))
    base = sweep["spec"]["base"]
    out = []
    for rank, t in enumerate(ranked[:top], 1):
        config = {**base, "params": {**(base.get("params") or {}), **t["params"]}}
        out.append({"rank": rank, "trial": t["trial"], "value": t["value"], "std": t.get("std"),
                    "seeds": len(t.get("runs") or []), "params": t["params"], "config": config,
                    "runs": [r["name"] for r in t.get("runs") or []]})
    return out


def check_explainable(sweep: dict[str, Any]) -> None:
    done = finished_trials(sweep)
    if len(done) < MIN_FINISHED:
        others = len(sweep.get("trials", [])) - len(done)
        raise ExplainError(
            f"sweep {sweep['name']} has {len(done)} finished trial{'' if len(done) == 1 else 's'}"
            f" ({others} other{'' if others == 1 else 's'}, {sweep['state']}): importances need at least "
            f"{MIN_FINISHED}")


# -- Optuna's importances ---------------------------------------------------------------------------
def make_evaluator(name: str, seed: int = 0):
    """Optuna's evaluator by our name; the forests (fanova, mdi) are seeded, PED-ANOVA needs no seed."""
    from optuna import importance
    if name == "ped-anova":
        return importance.PedAnovaImportanceEvaluator()
    if name == "fanova":
        return importance.FanovaImportanceEvaluator(seed=seed)
    if name == "mdi":
        return importance.MeanDecreaseImpurityImportanceEvaluator(seed=seed)
    raise ExplainError(f"--evaluator {name}: one of {', '.join(EVALUATORS)}")


def study_of(sweep: dict[str, Any]):
    """An in-memory Optuna study holding the sweep's finished trials: their params in the
    distributions the daemon asked with, the values Optuna was told."""
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = optuna_distributions(sweep["spec"]["params"])
    study = optuna.create_study(direction=sweep["spec"]["objective"]["direction"])
    for t in finished_trials(sweep):
        dists = {name: space[name] for name in t["params"] if name in space}
        study.add_trial(optuna.trial.create_trial(params={n: t["params"][n] for n in dists},
                                                  distributions=dists, value=float(t["value"])))
    return study


def importances(sweep: dict[str, Any], evaluator: str = DEFAULT_EVALUATOR, seed: int = 0) -> dict[str, float]:
    """Optuna's ``get_param_importances`` on the sweep's finished trials, most important first
    (normalised: they sum to 1)."""
    check_explainable(sweep)
    try:
        import optuna
    except ImportError:
        raise ExplainError("Optuna is not installed here: pip install 'mosaic-tui[experiments]'") from None
    try:
        chosen = make_evaluator(evaluator, seed)
        result = optuna.importance.get_param_importances(study_of(sweep), evaluator=chosen)
    except ImportError as exc:   # the forests (fanova, mdi) are scikit-learn's
        raise ExplainError(f"{EVALUATOR_TITLES[evaluator]} needs scikit-learn: pip install scikit-learn "
                           f"({exc.name or exc})") from None
    except (ValueError, RuntimeError) as exc:   # e.g. trials whose params never differ
        reason = " ".join(str(exc).split())
        raise ExplainError(f"{EVALUATOR_TITLES[evaluator]} cannot rank this sweep's params: {reason}") from None
    return {name: float(value) for name, value in result.items()}


# -- slices: the objective against each param ---------------------------------------------------------
def slices(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """Per swept param: its axis (``log`` for loguniform and log ints, ``categorical`` for lists,
    grids and categoricals, else ``linear``), its range, and a point per finished trial."""
    done = finished_trials(sweep)
    out = []
    for name, space in sweep["spec"]["params"].items():
        if space["kind"] in ("grid", "categorical"):
            axis = {"scale": "categorical", "values": list(space["values"])}
        else:
            log = space["kind"] == "loguniform" or (space["kind"] == "int" and space.get("log"))
            axis = {"scale": "log" if log else "linear", "low": space["low"], "high": space["high"]}
        points = [{"trial": t["trial"], "x": t["params"][name], "value": t["value"]}
                  for t in done if name in t["params"]]
        out.append({"param": name, **axis, "points": points})
    return out


def x_position(plot: dict[str, Any], x: Any) -> float:
    """Where ``x`` lies along its param's axis, 0 (low end) to 1 (high end)."""
    if plot["scale"] == "categorical":
        values = plot["values"]
        # the same type first: True is not 1 here
        index = next((i for i, v in enumerate(values) if v == x and type(v) is type(x)), None)
        if index is None:
            index = next((i for i, v in enumerate(values) if v == x), 0)
        return (index + 0.5) / len(values)     # each value the middle of its own share of the axis
    lo, hi = float(plot["low"]), float(plot["high"])
    if plot["scale"] == "log":
        lo, hi, x = math.log10(lo), math.log10(hi), math.log10(float(x))
    return min(1.0, max(0.0, (float(x) - lo) / (hi - lo))) if hi > lo else 0.5


def value_range(points: list[dict[str, Any]]) -> tuple[float, float]:
    """The plotted range of the objective: its values' span, or around a constant."""
    values = [p["value"] for p in points]
    lo, hi = min(values), max(values)
    if hi - lo <= 1e-12 * max(1.0, abs(hi)):
        pad = abs(hi) * 0.1 if hi else 1.0
        lo, hi = lo - pad, hi + pad
    return lo, hi


def text_scatter(plot: dict[str, Any], width: int = PLOT_WIDTH, height: int = PLOT_HEIGHT) -> list[str]:
    """One slice as text: a cell per point (``•``; a digit when 2 to 9 trials share the cell, ``#``
    for more), the objective's range on the left, the param's ends (or values) below."""
    from mosaic_tui import fmt
    counts: dict[tuple[int, int], int] = {}
    if plot["points"]:
        lo, hi = value_range(plot["points"])
        for p in plot["points"]:
            col = round(x_position(plot, p["x"]) * (width - 1))
            row = round((hi - p["value"]) / (hi - lo) * (height - 1))
            counts[(row, col)] = counts.get((row, col), 0) + 1
        labels = [fmt.num(hi)] + [""] * (height - 2) + [fmt.num(lo)]
    else:
        labels = [""] * height
    pad = max(len(label) for label in labels)
    lines = []
    for row in range(height):
        cells = [" "] * width
        for (r, c), n in counts.items():
            if r == row:
                cells[c] = "•" if n == 1 else (str(n) if n < 10 else "#")
        lines.append(f"{labels[row]:>{pad}} │" + "".join(cells).rstrip())
    lines.append(" " * pad + " └" + "─" * width)
    lines.append(" " * (pad + 2) + axis_labels(plot, width))
    return lines


def axis_labels(plot: dict[str, Any], width: int) -> str:
    """The x axis's labels: each value of a categorical axis at its place, else both ends."""
    from mosaic_tui import fmt

    def text(v: Any) -> str:
        return fmt.num(v) if _finite(v) else str(v)
    if plot["scale"] == "categorical":
        marks = [(x_position(plot, v), text(v)) for v in plot["values"]]
    else:
        marks = [(0.0, text(plot["low"])), (1.0, text(plot["high"]) + (" (log)" if plot["scale"] == "log" else ""))]
    line = ""
    for where, label in marks:
        start = min(max(0, round(where * (width - 1)) - len(label) // 2), max(0, width - len(label)))
        start = max(start, len(line) + 1 if line else 0)
        line = line.ljust(start) + label
    return line


# -- the whole explanation ------------------------------------------------------------------------------
def explain(sweep: dict[str, Any], evaluator: str = DEFAULT_EVALUATOR, seed: int = 0,
            top: int = DEFAULT_TOP) -> dict[str, Any]:
    """What `mosaic explain --json` prints: the importances, the best trials, the slices."""
    imp = importances(sweep, evaluator, seed)
    return {"sweep": sweep["name"], "id": sweep["id"], "state": sweep["state"],
            "objective": sweep["spec"]["objective"], "finished": len(finished_trials(sweep)),
            "trials": len(sweep.get("trials", [])), "evaluator": evaluator,
            "seed": seed if evaluator != "ped-anova" else None, "importances": imp,
            "best": best_trials(sweep, top), "slices": slices(sweep)}


def importance_bars(imp: dict[str, float], width: int = 24) -> list[str]:
    """``name  0.82  ████████▍`` a param, most important first; a bar's full width is 1."""
    if not imp:
        return []
    pad = max(len(name) for name in imp)
    lines = []
    for name, value in imp.items():
        eighths = round(max(0.0, min(1.0, value)) * width * 8)
        bar = "█" * (eighths // 8) + (" ▏▎▍▌▋▊▉"[eighths % 8] if eighths % 8 else "")
        lines.append(f"{name:<{pad}}  {value:.2f}  {bar}")
    return lines


def best_lines(best: list[dict[str, Any]]) -> list[str]:
    from mosaic_tui import fmt
    lines = []
    for b in best:
        spread = f" ± {fmt.num(b['std'])}" if _finite(b.get("std")) and b["seeds"] > 1 else ""
        params = "  ".join(f"{k}={fmt.num(v) if _finite(v) else v}" for k, v in b["params"].items())
        lines.append(f"#{b['rank']} trial {b['trial']}  {fmt.num(b['value'])}{spread}"
                     f" over {fmt.plural(b['seeds'], 'seed')}  {params}")
    return lines


def text_lines(result: dict[str, Any]) -> list[str]:
    obj = result["objective"]
    lines = [f"sweep {result['sweep']} {result['state']}: {obj['direction']} {obj['agg']} of the last "
             f"{obj['last']} {obj['tag']}; {result['finished']} of {result['trials']} trials finished",
             "",
             f"param importances (Optuna, {EVALUATOR_TITLES[result['evaluator']]}"
             + (f", seed {result['seed']}" if result["seed"] is not None else "") + "):"]
    lines += ["  " + line for line in importance_bars(result["importances"])]
    lines += ["", "best trials:"]
    for line, b in zip(best_lines(result["best"]), result["best"]):
        lines.append("  " + line)
        lines.append("    config: " + json.dumps(b["config"], sort_keys=True))
    for plot in result["slices"]:
        lines += ["", f"{obj['tag']} against {plot['param']}"
                  + (" (log)" if plot["scale"] == "log" else "") + f": {len(plot['points'])} trials"]
        lines += ["  " + line for line in text_scatter(plot)]
    return lines


# -- the command ----------------------------------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic explain`'s parser; ``cli``: the running mosaic_tui.cli module (its CLIError is the
    one its main catches)."""
    p = sub.add_parser("explain", parents=[common],
                       help="a sweep explained: Optuna's param importances, its best trials' configs, "
                            "the objective against each param")
    p.add_argument("sweep", help="a sweep name or id prefix (running or finished)")
    p.add_argument("--evaluator", choices=EVALUATORS, default=DEFAULT_EVALUATOR,
                   help=f"Optuna's importance evaluator (default {DEFAULT_EVALUATOR}, Optuna's own default)")
    p.add_argument("--seed", type=int, default=0, help="the forest's seed of fanova and mdi (default 0)")
    p.add_argument("--top", type=int, default=DEFAULT_TOP, metavar="N",
                   help=f"the best N trials with their configs (default {DEFAULT_TOP})")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda args: cmd_explain(args, cli))


def cmd_explain(args: argparse.Namespace, cli) -> int:
    from daemon import protocol as P
    if args.top < 1:
        raise cli.CLIError(f"--top must be at least 1, not {args.top}", cli.EXIT_USAGE)
    with cli._client(args) as client:
        sweep = client.call(P.SWEEP_GET, sweep=args.sweep)
    try:
        result = explain(sweep, args.evaluator, args.seed, args.top)
    except ExplainError as exc:
        raise cli.CLIError(str(exc)) from None
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        print("\n".join(text_lines(result)))
    return 0
