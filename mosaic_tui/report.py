"""`mosaic report`: runs grouped, scored, normalised per env and aggregated with confidence
(mosaic_tui/aggregates.py), as text, JSON or CSV; the app's report view shows the same
``build_report`` (docs/results.md).

A run's score is chosen (``--score``): by default the mean of its last N episode returns, the
figure the runs table shows. Runs are grouped by config keys, fields or their tag set
(``--by``); by default by their config less the seed, so a group is one config's seeds. Each
env is a task: per group the aggregates over all its envs and over each env alone.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from mosaic_tui import query as Q
from workers.sdk.modes import run_mode

SCORES = ("return", "best", "last", "median")
DEFAULT_STATES = ("succeeded", "stopped")
DEFAULT_WINDOW = 20
PROFILE_POINTS = 21
OUTPUT_FORMATS = ("text", "json", "csv", "md", "latex", "long")
FIGURES = ("curves", "intervals", "profiles", "poi")     # mosaic_tui/figures.py's KINDS
SUFFIX_FORMATS = {"md": "md", "markdown": "md", "tex": "latex", "csv": "csv", "json": "json", "txt": "text"}
EPISODE_RETURN = "episode/return"
# bootstrap replications: rliable's default is 50,000; 10,000 keeps a report of 300 runs within 2 s
# (bench/bench_report.py), and `--reps 50000` gives rliable's own numbers at its default
REPORT_REPS = 10_000


class ReportError(ValueError):
    """A report that cannot be made as asked: one line."""


@dataclass
class Options:
    by: list[str] | None = None          # keys to group by; None: the config less the seed
    score: str = "return"
    window: int = DEFAULT_WINDOW
    normalize: str = "none"              # none, minmax, ref
    refs: dict[str, tuple[float, float]] | None = None   # env -> (low, high) for ref
    reps: int = REPORT_REPS
    seed: int = 0
    size: float = 0.95
    gamma: float = 1.0
    poi: list[tuple[str, str]] | None = None   # pairs of group labels; None: every pair if 2 groups
    profile_reps: int = 2_000


# -- a run's score ------------------------------------------------------------------------------
def _finite(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v)]


def score_getter(name: str, window: int, keys: Q.Keys | None) -> Callable[[dict[str, Any]], float | None]:
    """The score of a run: ``return`` (the mean of the last ``window`` returns, as the table
    shows), ``median`` (of them), ``best`` (the best return), ``last`` (the last return), or any
    numeric key of the query language (``steps``, ``sps``, a param...)."""
    if name == "return":
        return lambda r: Q.run_return(r, window)
    if name == "median":
        def median(r):
            vals = sorted(_finite(((r.get("summary") or {}).get("returns") or [])[-window:]))
            if not vals:
                return None
            mid = len(vals) // 2
            return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2
        return median
    if name == "best":
        return lambda r: (r.get("summary") or {}).get("best_return")
    if name == "last":
        return lambda r: (lambda v: v[-1] if v else None)(_finite((r.get("summary") or {}).get("returns") or []))
    try:
        resolved = Q.resolve(name, keys)
    except Q.QueryError as exc:
        raise ReportError(f"--score {name}: {exc.message}") from None
    if resolved.kind not in ("num", "any", "duration"):
        raise ReportError(f"--score {name}: not a number (return, best, last, median, or a numeric key)")
    now = time.time()

    def get(r):
        v = resolved.get(r, now, window)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
    return get


def score_label(opts: Options) -> str:
    return {"return": f"the mean of the last {opts.window} episode returns",
            "median": f"the median of the last {opts.window} episode returns",
            "best": "the best episode return", "last": "the last episode return"}.get(opts.score, opts.score)


# -- groups -------------------------------------------------------------------------------------
_NOT_CONFIG = ("seed", "seed_drawn", "name", "run_id", "continue_from", "logged_until", "logged_at_until", "env",
               "checkpoint", "frames", "mirror", "placement", "limits", "device")


def _config_key(run: dict[str, Any]) -> dict[str, Any]:
    """What makes two runs one config's seeds: worker, algo, steps, mode and params."""
    config = run.get("config") or {}
    return {"worker": run.get("worker"), "algo": run.get("algo"),
            **{k: v for k, v in config.items() if k not in _NOT_CONFIG and k not in ("worker", "algo")},
            "mode": run_mode(run)}   # an older record's "train" of a play is one group with the new "play"


def _value_text(value: Any) -> str:
    if value is Q._MISSING or value is None:
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, (list, tuple, set)):
        return "+".join(map(str, value))
    return str(value)


def group_runs(runs: list[dict[str, Any]], by: list[str] | None,
               keys: Q.Keys | None) -> tuple[list[str], dict[str, list[dict[str, Any]]], dict[str, dict[str, str]]]:
    """(labels in order, label -> runs, label -> {key: value}). ``by`` None: one group per config
    less the seed, labelled by what differs between the groups."""
    if by:
        now = time.time()
        getters = []
        for key in by:
            if key.lower() in ("tags", "tag"):
                getters.append((key, lambda r, now, w: "+".join(sorted(r.get("tags") or [])) or "(untagged)"))
                continue
            try:
                getters.append((key, Q.resolve(key, keys).get))
            except Q.QueryError as exc:
                raise ReportError(f"--by {key}: {exc.message}") from None
        groups: dict[str, list[dict[str, Any]]] = {}
        values: dict[str, dict[str, str]] = {}
        for run in runs:
            vals = {key: _value_text(get(run, now, DEFAULT_WINDOW)) for key, get in getters}
            label = ",".join(f"{k}={v}" for k, v in vals.items()) if len(vals) > 1 else next(iter(vals.values()))
            groups.setdefault(label, []).append(run)
            values[label] = vals
        return sorted(groups, key=_natural), groups, values
    by_config: dict[str, list[dict[str, Any]]] = {}
    configs: dict[str, dict[str, Any]] = {}
    for run in runs:
        cfg = _config_key(run)
        key = json.dumps(cfg, sort_keys=True, default=str)
        by_config.setdefault(key, []).append(run)
        configs[key] = cfg
    flat = {key: _flatten(cfg) for key, cfg in configs.items()}
    varying = sorted({k for f in flat.values() for k in f if len({json.dumps(g.get(k), sort_keys=True, default=str)
                                                                  for g in flat.values()}) > 1})
    groups, values = {}, {}
    for key, members in by_config.items():
        vals = {k: _value_text(flat[key].get(k)) for k in varying}
        label = ",".join(f"{k}={v}" for k, v in vals.items()) or f"{configs[key]['worker']} {configs[key]['algo']}"
        groups[label] = members
        values[label] = vals
    return sorted(groups, key=_natural), groups, values


def _flatten(cfg: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in cfg.items() if k != "params"}
    for k, v in (cfg.get("params") or {}).items():
        out[k] = v
    return out


def _natural(label: str) -> tuple:
    """Labels in the order of the numbers in them (lr=3e-4 before lr=1e-3), else as text."""
    parts = []
    for piece in label.split(","):
        value = piece.split("=", 1)[-1]
        try:
            parts.append((0, float(value), ""))
        except ValueError:
            parts.append((1, 0.0, value))
    return tuple(parts)


# -- the report ---------------------------------------------------------------------------------
def parse_refs(items: list[str]) -> dict[str, tuple[float, float]]:
    """``ENV=LOW:HIGH`` (a random and a human score, or any two references) -> {env: (low, high)}."""
    refs = {}
    for item in items:
        env, sep, pair = item.rpartition("=")
        low, sep2, high = pair.partition(":")
        try:
            if not (sep and sep2 and env):
                raise ValueError
            lo, hi = float(low), float(high)
        except ValueError:
            raise ReportError(f"--ref {item}: expected ENV=LOW:HIGH, e.g. CartPole-v1=9.3:500") from None
        if hi == lo:
            raise ReportError(f"--ref {item}: LOW and HIGH are the same")
        refs[env] = (lo, hi)
    return refs


def build_report(runs: list[dict[str, Any]], opts: Options) -> dict[str, Any]:
    """Groups, their scores per env, the aggregates with their intervals (overall and per env),
    performance profiles and probabilities of improvement, as one JSON-able dict."""
    import numpy as np

    from mosaic_tui import aggregates as A

    keys = Q.Keys(runs)
    score = score_getter(opts.score, opts.window, keys)
    scored, missing = [], []
    for run in runs:
        value = score(run)
        (scored if value is not None else missing).append((run, value))
    if opts.normalize not in ("none", "minmax", "ref"):
        raise ReportError(f"--normalize {opts.normalize}: none, minmax or ref")
    envs = sorted({str(r.get("env")) for r, _ in scored})
    bounds: dict[str, tuple[float, float]] = {}
    if opts.normalize == "minmax":
        for env in envs:
            vals = [v for r, v in scored if str(r.get("env")) == env]
            lo, hi = min(vals), max(vals)
            bounds[env] = (lo, hi if hi > lo else lo + 1.0)
    elif opts.normalize == "ref":
        refs = opts.refs or {}
        absent = [env for env in envs if env not in refs]
        if absent:
            raise ReportError(f"--normalize ref: no reference scores for {', '.join(absent)} (--ref ENV=LOW:HIGH)")
        bounds = {env: refs[env] for env in envs}
    norm = {env: (lambda v, lo=lo, hi=hi: (v - lo) / (hi - lo)) for env, (lo, hi) in bounds.items()}

    labels, groups, values = group_runs([r for r, _ in scored], opts.by, keys)
    score_of = {r["id"]: v for r, v in scored}
    out_groups = []
    tasks_of: dict[str, dict[str, np.ndarray]] = {}
    for label in labels:
        members = groups[label]
        per_env: dict[str, list[float]] = {}
        for run in members:
            env = str(run.get("env"))
            value = score_of[run["id"]]
            per_env.setdefault(env, []).append(norm[env](value) if env in norm else value)
        tasks = {env: np.array(vals) for env, vals in sorted(per_env.items())}
        tasks_of[label] = tasks
        overall = _estimates(A, list(tasks.values()), opts)
        env_rows = {env: {"runs": len(vals), "scores": [float(v) for v in vals], **_estimates(A, [vals], opts)}
                    for env, vals in tasks.items()}
        out_groups.append({"group": label, "key": values[label], "runs": len(members),
                           "run_ids": [r["id"] for r in members],
                           "states": _count(r.get("state") for r in members),
                           "envs": {env: len(v) for env, v in tasks.items()},
                           "aggregates": overall, "per_env": env_rows})
    report: dict[str, Any] = {
        "score": {"name": opts.score, "window": opts.window, "text": score_label(opts)},
        "normalize": {"method": opts.normalize, "bounds": {env: list(b) for env, b in bounds.items()}},
        "bootstrap": {"reps": opts.reps, "seed": opts.seed, "size": opts.size, "method": "percentile, stratified by env"},
        "by": opts.by or ["config"], "gamma": opts.gamma, "envs": envs, "groups": out_groups,
        "left_out": [{"id": r["id"], "name": r.get("name"), "why": "no score"} for r, _ in missing],
    }
    if out_groups and opts.reps:
        everything = [np.concatenate(list(t.values())) for t in tasks_of.values()]
        taus = A.profile_taus(everything, PROFILE_POINTS)
        report["profile"] = {"taus": [float(t) for t in taus], "groups": {}}
        for label, tasks in tasks_of.items():
            prof = A.performance_profile(list(tasks.values()), taus, reps=opts.profile_reps, size=opts.size,
                                         seed=opts.seed)
            report["profile"]["groups"][label] = {"fraction_above": prof.point.tolist(), "ci_low": prof.lower.tolist(),
                                                  "ci_high": prof.upper.tolist()}
    pairs = opts.poi if opts.poi is not None else ([(labels[0], labels[1]), (labels[1], labels[0])]
                                                   if len(labels) == 2 else [])
    report["poi"] = []
    for x, y in pairs if opts.reps else []:
        for name in (x, y):
            if name not in tasks_of:
                raise ReportError(f"--poi: no group is called {name} (groups: {', '.join(labels)})")
        common = sorted(set(tasks_of[x]) & set(tasks_of[y]))
        if not common:
            raise ReportError(f"--poi {x} {y}: the groups share no env")
        point, low, high = A.poi_interval([tasks_of[x][e] for e in common], [tasks_of[y][e] for e in common],
                                          reps=min(opts.reps, 2_000), size=opts.size, seed=opts.seed)
        report["poi"].append({"x": x, "y": y, "envs": common, "value": point, "ci_low": low, "ci_high": high})
    return report


def _estimates(A, tasks: list, opts: Options) -> dict[str, dict[str, float | None]]:
    """The aggregates of one set of tasks with their intervals; with ``reps`` 0 the point
    estimates alone (the app shows them at once, the intervals when the bootstrap is done)."""
    if opts.reps:
        return A.interval_estimates(tasks, reps=opts.reps, size=opts.size, seed=opts.seed, gamma=opts.gamma).as_dict()
    point = A.aggregates(tasks, opts.gamma)
    return {name: {"value": float(point[i]), "ci_low": None, "ci_high": None} for i, name in enumerate(A.METRICS)}


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[str(item)] = out.get(str(item), 0) + 1
    return out


# -- output -------------------------------------------------------------------------------------
def _fig(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.3g}"
    return f"{value:.4g}" if abs(value) < 10 else f"{value:.1f}"


def _cell(agg: dict[str, Any]) -> str:
    if agg["ci_low"] is None:
        return _fig(agg["value"])
    return f"{_fig(agg['value'])} [{_fig(agg['ci_low'])}, {_fig(agg['ci_high'])}]"


def text_lines(report: dict[str, Any], per_env: bool = True) -> list[str]:
    """The report as the terminal shows it: a line a group (and under it a line per env)."""
    from mosaic_tui.aggregates import METRICS
    b = report["bootstrap"]
    norm = report["normalize"]["method"]
    lines = [f"score: {report['score']['text']}; normalised: "
             f"{ {'none': 'no', 'minmax': 'min-max per env', 'ref': 'by reference scores per env'}[norm] }; "
             + (f"{round(100 * b['size'])}% CIs: stratified bootstrap over each env's runs, {b['reps']:,} reps, "
                f"seed {b['seed']}" if b["reps"] else "intervals: the bootstrap is running")
             + f"; optimality gap below {report['gamma']:g}"]
    by = report.get("by") or []
    header = [by[0] if len(by) == 1 and by[0] != "config" else "group", "runs", "IQM", "mean", "median", "opt. gap"]
    rows = []
    shown = short_labels([g["group"] for g in report["groups"]])
    for g in report["groups"]:
        rows.append([shown[g["group"]], str(g["runs"]), *(_cell(g["aggregates"][m]) for m in METRICS)])
        if per_env and len(report["envs"]) > 1:
            for env, e in g["per_env"].items():
                rows.append([f"  {env}", str(e["runs"]), *(_cell(e[m]) for m in METRICS)])
    if not rows:
        lines.append("no runs with a score")
    else:
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines += [fmt.format(*header).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]
    for p in report.get("poi") or []:
        lines.append(f"P({shown.get(p['x'], p['x'])} > {shown.get(p['y'], p['y'])}) = {p['value']:.3f} [{p['ci_low']:.3f}, {p['ci_high']:.3f}] "
                     f"over {len(p['envs'])} env{'s' if len(p['envs']) != 1 else ''}")
    if report.get("left_out"):
        lines.append(f"left out: {len(report['left_out'])} run(s) without a score "
                     f"({', '.join(str(r['name']) for r in report['left_out'][:5])}"
                     f"{'...' if len(report['left_out']) > 5 else ''})")
    return lines


_LONG_FLOAT = re.compile(r"-?\d+\.\d{5,}(?:e[-+]?\d+)?")


def short_labels(labels: list[str]) -> dict[str, str]:
    """Each group label as it is shown: a long float in it (a continuous swept value, such as
    ``return_offset=43.59949021420037``) at the fewest significant digits, 4 or more, that keep
    every label apart. The group's own label (JSON, CSV) stays whole."""
    for digits in range(4, 18):
        short = {label: _LONG_FLOAT.sub(lambda m: f"{float(m.group()):.{digits}g}", label) for label in labels}
        if len(set(short.values())) == len(short):
            return short
    return {label: label for label in labels}


def profile_lines(report: dict[str, Any], points: int = 6) -> list[str]:
    """Performance profiles: the fraction of runs above each of a few thresholds."""
    prof = report.get("profile")
    if not prof:
        return []
    taus = prof["taus"]
    pick = sorted({round(i * (len(taus) - 1) / (points - 1)) for i in range(points)})
    header = ["fraction of runs above", *(_fig(taus[i]) for i in pick)]
    shown = short_labels(list(prof["groups"]))
    rows = [[shown[label], *(f"{g['fraction_above'][i]:.2f}" for i in pick)] for label, g in prof["groups"].items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header).rstrip(), *(fmt.format(*r).rstrip() for r in rows)]


CSV_HEADER = ["group", "env", "runs", *(f"{m}{s}" for m in ("iqm", "mean", "median", "optimality_gap")
                                        for s in ("", "_ci_low", "_ci_high"))]


def csv_rows(report: dict[str, Any]) -> list[list[Any]]:
    """One row a group over all its envs (env "*"), then one a group and env."""
    from mosaic_tui.aggregates import METRICS
    rows = []
    for g in report["groups"]:
        for env, agg, n in [("*", g["aggregates"], g["runs"]),
                            *((e, v, v["runs"]) for e, v in g["per_env"].items())]:
            rows.append([g["group"], env, n, *(agg[m][k] for m in METRICS for k in ("value", "ci_low", "ci_high"))])
    return rows


# -- the command --------------------------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic report`'s parser; ``cli``: the running mosaic_tui.cli module (its CLIError is the
    one its main catches: under `python -m` that module is __main__, not mosaic_tui.cli)."""
    from mosaic_tui.fmt import DEFAULT_RETURN_WINDOW
    p = sub.add_parser("report", parents=[common],
                       help="group runs and aggregate their scores with confidence (IQM, mean, median, gap)")
    p.add_argument("--where", metavar="QUERY", help="only the runs the query keeps (docs/results.md)")
    p.add_argument("--by", metavar="KEY[,KEY]", help="group by these keys (a field, a param, config.KEY, tags); "
                   "default: one group per config, its seeds together")
    p.add_argument("--state", action="append", metavar="STATE",
                   help=f"runs in this state (repeatable; default: {', '.join(DEFAULT_STATES)}; all: every run)")
    p.add_argument("--score", default="return", metavar="SCORE",
                   help="a run's score: return (mean of the last --window returns, the default), median, best, "
                        "last, or a numeric key")
    p.add_argument("--window", type=int, default=DEFAULT_RETURN_WINDOW, metavar="N",
                   help=f"episodes the return is taken over (default {DEFAULT_RETURN_WINDOW}, at most 100)")
    p.add_argument("--normalize", choices=["none", "minmax", "ref"], default=None,
                   help="per env: none (default), minmax (the lowest and highest score of the env in the report), "
                        "ref (--ref)")
    p.add_argument("--ref", action="append", metavar="ENV=LOW:HIGH", default=[],
                   help="reference scores of an env (e.g. random and human): (score - LOW) / (HIGH - LOW)")
    p.add_argument("--poi", nargs=2, action="append", metavar=("X", "Y"),
                   help="the probability of improvement of group X over group Y (repeatable; with two groups: both ways)")
    p.add_argument("--reps", type=int, default=REPORT_REPS,
                   help=f"bootstrap replications (default {REPORT_REPS:,}; rliable's default is 50,000)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed (default 0)")
    p.add_argument("--ci", type=float, default=0.95, metavar="SIZE", help="interval coverage (default 0.95)")
    p.add_argument("--gamma", type=float, default=1.0, help="optimality gap threshold (default 1: normalised scores)")
    p.add_argument("--profile", action="store_true", help="also print the performance profiles")
    p.add_argument("--envs", action=argparse.BooleanOptionalAction, default=True,
                   help="a line per env under each group (default: yes)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true")
    out.add_argument("--csv", action="store_true", help="one row a group over all envs (env *) and per env")
    out.add_argument("--format", choices=OUTPUT_FORMATS, default=None,
                     help="text (default), json, csv, md (Markdown table), latex (booktabs table), long (every "
                          "point of the runs' --metric series: run, group, env, seed, step, metric, value)")
    out.add_argument("--figure", choices=FIGURES,
                     help="a figure to --out FILE.pdf|.svg|.png: curves (learning curves, mean and CI band per "
                          "group), intervals (the aggregates' CIs), profiles (performance profiles), poi "
                          "(probabilities of improvement)")
    p.add_argument("--out", metavar="FILE", help="write to FILE instead of printing; a table's format follows its "
                   "suffix (.md, .tex, .csv, .json, .txt) unless --format says")
    p.add_argument("--x", choices=["step", "time"], default="step",
                   help="learning curves over environment steps (default) or wall time since each run started")
    p.add_argument("--column", choices=["single", "double"], default="single",
                   help="figure width: a paper's column (3.25 in, the default) or its full text width (6.75 in)")
    p.add_argument("--venue", choices=["icml", "neurips", "iclr"],
                   help="figure width and font sizes of the venue's template (tueplots); --column single on "
                        "NeurIPS and ICLR, one-column templates, is half the text width")
    p.add_argument("--metric", action="append", metavar="TAG",
                   help=f"--format long: the series to write (repeatable; default {EPISODE_RETURN})")
    p.set_defaults(func=lambda args: cmd_report(args, cli))


def options_from(args: argparse.Namespace) -> Options:
    from mosaic_tui.fmt import MAX_RETURN_WINDOW
    if not 1 <= args.window <= MAX_RETURN_WINDOW:
        raise ReportError(f"--window must be between 1 and {MAX_RETURN_WINDOW}, not {args.window}")
    if args.reps < 1:
        raise ReportError(f"--reps must be at least 1, not {args.reps}")
    if not 0 < args.ci < 1:
        raise ReportError(f"--ci must be between 0 and 1, not {args.ci}")
    refs = parse_refs(args.ref)
    normalize = args.normalize or ("ref" if refs else "none")
    if refs and normalize != "ref":
        raise ReportError(f"--ref with --normalize {normalize}: reference scores are --normalize ref")
    by = [k.strip() for k in args.by.split(",") if k.strip()] if args.by else None
    return Options(by=by, score=args.score, window=args.window, normalize=normalize, refs=refs, reps=args.reps,
                   seed=args.seed, size=args.ci, gamma=args.gamma,
                   poi=[tuple(p) for p in args.poi] if args.poi else None)


def cmd_report(args: argparse.Namespace, cli) -> int:
    from daemon import protocol as P
    EXIT_USAGE, CLIError = cli.EXIT_USAGE, cli.CLIError
    try:
        opts = options_from(args)
        fmt = output_format(args)
        check_out(args)
    except ReportError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    states = None if args.state and "all" in args.state else (args.state or list(DEFAULT_STATES))
    for state in states or []:
        if state not in P.STATES:
            raise CLIError(f"--state {state}: no such state ({', '.join(P.STATES)}, or all)", EXIT_USAGE)
    with cli._client(args) as client:
        runs = client.call(P.LIST, states=states)["runs"]
    runs = cli.where_runs(args.where, runs, opts.window)
    try:
        report = build_report(runs, opts)
    except ReportError as exc:
        raise CLIError(str(exc), EXIT_USAGE) from None
    if args.figure:
        return _write_figure(args, report, runs, client_of=lambda: cli._client(args), CLIError=CLIError)
    if fmt == "long":
        with cli._client(args) as client:
            series = fetch_series(client, [rid for g in report["groups"] for rid in g["run_ids"]],
                                  args.metric or [EPISODE_RETURN])
        from mosaic_tui.report_tables import LONG_HEADER, long_rows
        with _output(args.out) as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(LONG_HEADER)
            writer.writerows(long_rows(report, {r["id"]: r for r in runs}, series))
    elif fmt == "json":
        with _output(args.out) as f:
            f.write(json.dumps(report, indent=2) + "\n")
    elif fmt in ("csv", "md", "latex"):
        from mosaic_tui.report_tables import table
        with _output(args.out) as f:
            f.write(table(report, fmt, per_env=args.envs))
    else:
        text = "\n".join(text_lines(report, per_env=args.envs)) + "\n"
        if args.profile:
            text += "\n".join(profile_lines(report)) + "\n"
        with _output(args.out) as f:
            f.write(text)
    if args.out:
        print(f"wrote {args.out}")
    return 0


def output_format(args: argparse.Namespace) -> str:
    """What to write: --json, --csv or --format, else the --out file's suffix, else text."""
    if args.json:
        return "json"
    if args.csv:
        return "csv"
    if args.format:
        return args.format
    if args.out and not args.figure:
        suffix = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
        if suffix not in SUFFIX_FORMATS:
            raise ReportError(f"--out {args.out}: a table's suffix is .md, .tex, .csv, .json or .txt (or say --format)")
        return SUFFIX_FORMATS[suffix]
    return "text"


def check_out(args: argparse.Namespace) -> None:
    """A figure needs a file of a figure's format; the file's folder must be there."""
    import os
    if args.figure:
        suffix = args.out.rsplit(".", 1)[-1].lower() if args.out and "." in args.out else ""
        if suffix not in ("pdf", "svg", "png"):
            raise ReportError(f"--figure {args.figure} needs --out FILE.pdf, .svg or .png"
                              + (f", not {args.out}" if args.out else ""))
    if args.out and not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        raise ReportError(f"--out {args.out}: no folder {os.path.dirname(os.path.abspath(args.out))}")


class _output:
    """--out FILE, or standard output: a file is written whole or not at all (a mistake half way
    leaves no half table)."""

    def __init__(self, path: str | None):
        self.path, self.file = path, None

    def __enter__(self):
        if self.path is None:
            return sys.stdout
        self.file = open(self.path + ".part", "w", newline="")
        return self.file

    def __exit__(self, kind, exc, tb):
        if self.file is None:
            return False
        self.file.close()
        import os
        if kind is None:
            os.replace(self.path + ".part", self.path)
        else:
            os.unlink(self.path + ".part")
        return False


def fetch_series(client, run_ids: list[str], tags: list[str]) -> dict[str, dict[str, list[list[Any]]]]:
    """Each run's points of each tag, [[step, value, wall time], ...], in the order the run wrote
    them: the pages `mosaic metrics --tag` reads. A run without the tag has none of it."""
    from daemon import protocol as P
    out: dict[str, dict[str, list[list[Any]]]] = {}
    for rid in run_ids:
        for tag in tags:
            offset, points = 0, []
            while True:
                try:
                    page = client.call(P.METRICS, run=rid, tags=[tag], max_bytes=16 << 20, **{"from": offset})
                except P.RPCError as exc:
                    if exc.code == P.NOT_FOUND:
                        break          # the run has no such metric (yet)
                    raise
                points += page["points"].get(tag, [])
                if page["next"] >= page["end"] or page["next"] == offset:
                    break
                offset = page["next"]
            if points:
                out.setdefault(rid, {})[tag] = points
    return out


def _write_figure(args: argparse.Namespace, report: dict[str, Any], runs: list[dict[str, Any]], client_of,
                  CLIError) -> int:
    import numpy as np

    from mosaic_tui import figures as F
    try:
        curve = None
        if args.figure == "curves":
            with client_of() as client:
                series = fetch_series(client, [rid for g in report["groups"] for rid in g["run_ids"]],
                                      [EPISODE_RETURN])
            points = {rid: tuple(np.asarray(col, dtype=float) for col in zip(*tags[EPISODE_RETURN]))
                      for rid, tags in series.items()}
            curve = F.curves(report, points, {r["id"]: r for r in runs}, x=args.x)
        fig = F.draw(args.figure, report, args.column, curve, venue=args.venue)
        F.save(fig, args.out)
    except F.FigureError as exc:
        raise CLIError(str(exc), 2) from None
    print(f"wrote {args.out}")
    return 0
