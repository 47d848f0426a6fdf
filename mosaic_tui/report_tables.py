"""A report's tables for a paper (Markdown, LaTeX, CSV) and the long-format CSV of its runs'
series (one row a point: run, group, env, seed, step, metric, value, wall time), which pandas,
seaborn and rliable take as it is. No Textual and no matplotlib here (docs/results.md)."""
from __future__ import annotations

import csv
import io
from typing import Any, Iterable

from mosaic_tui.aggregates import METRIC_NAMES, METRICS

TABLE_FORMATS = ("md", "latex", "csv")
LONG_HEADER = ["run", "group", "env", "seed", "step", "metric", "value", "wall_time"]


def fig(value: float | None) -> str:
    """A number as the tables write it: 4 significant figures, no exponent below 1e5."""
    from mosaic_tui.report import _fig
    return "-" if value is None else _fig(value)


def _rows(report: dict[str, Any], per_env: bool) -> list[tuple[str, str, int, dict[str, Any]]]:
    """(group, env, runs, aggregates): a group over all its envs (env ``*``), then each env."""
    rows = []
    for g in report["groups"]:
        rows.append((g["group"], "*", g["runs"], g["aggregates"]))
        if per_env and len(report["envs"]) > 1:
            rows += [(g["group"], env, e["runs"], e) for env, e in g["per_env"].items()]
    return rows


def _group_title(report: dict[str, Any]) -> str:
    by = report.get("by") or []
    return by[0] if len(by) == 1 and by[0] != "config" else "group"


def _caption(report: dict[str, Any]) -> str:
    b = report["bootstrap"]
    norm = {"none": "", "minmax": ", min-max normalised per env", "ref": ", normalised by reference scores per env"}
    return (f"Score: {report['score']['text']}{norm[report['normalize']['method']]}. "
            f"{round(100 * b['size'])}% CIs from a stratified bootstrap ({b['reps']:,} reps, seed {b['seed']}).")


def markdown(report: dict[str, Any], per_env: bool = True) -> str:
    """A GitHub Markdown table: a row a group (and a row a group and env), each aggregate as
    ``value [low, high]``; the score and the intervals said under it."""
    header = [_group_title(report), "env", "runs", *(METRIC_NAMES[m] for m in METRICS)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 2 + "---:|" * (len(header) - 2)]
    for group, env, runs, agg in _rows(report, per_env):
        cells = [_md(group), _md(env), str(runs), *(_interval(agg[m]) for m in METRICS)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n\n" + _caption(report) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def _interval(agg: dict[str, Any]) -> str:
    if agg["ci_low"] is None:
        return fig(agg["value"])
    return f"{fig(agg['value'])} [{fig(agg['ci_low'])}, {fig(agg['ci_high'])}]"


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def tex(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex(report: dict[str, Any], per_env: bool = True) -> str:
    """A booktabs table (``\\usepackage{booktabs}``): a row a group, the envs under it, each
    aggregate as ``value`` and, smaller, its interval; the best value of each column in bold
    (the lowest for the optimality gap)."""
    rows = _rows(report, per_env)
    best = {}
    for m in METRICS:
        values = [agg[m]["value"] for _, env, _, agg in rows if env == "*"]
        if len(values) > 1:
            best[m] = min(values) if m == "optimality_gap" else max(values)
    out = [r"\begin{table}[t]", r"\centering", r"\small",
           r"\begin{tabular}{ll r " + "c" * len(METRICS) + "}", r"\toprule",
           " & ".join([tex(_group_title(report)), "env", "runs", *(METRIC_NAMES[m] for m in METRICS)]) + r" \\",
           r"\midrule"]
    for group, env, runs, agg in rows:
        cells = [tex(group) if env == "*" else "", "all" if env == "*" else tex(env), str(runs)]
        for m in METRICS:
            value = fig(agg[m]["value"])
            if env == "*" and best.get(m) == agg[m]["value"]:
                value = rf"\textbf{{{value}}}"
            if agg[m]["ci_low"] is not None:
                value += rf" {{\scriptsize [{fig(agg[m]['ci_low'])}, {fig(agg[m]['ci_high'])}]}}"
            cells.append(value)
        out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{tex(_caption(report))}}}", r"\end{table}"]
    return "\n".join(out) + "\n"


def csv_text(report: dict[str, Any]) -> str:
    """`mosaic report --csv`'s table: a row a group over all envs (env ``*``) and per env."""
    from mosaic_tui.report import CSV_HEADER, csv_rows
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(csv_rows(report))
    return buf.getvalue()


def table(report: dict[str, Any], fmt: str, per_env: bool = True) -> str:
    if fmt == "md":
        return markdown(report, per_env)
    if fmt == "latex":
        return latex(report, per_env)
    return csv_text(report)


def long_rows(report: dict[str, Any], runs: dict[str, dict[str, Any]],
              series: dict[str, dict[str, list[list[Any]]]]) -> Iterable[list[Any]]:
    """The long CSV's rows: each run of each group, each metric, each point (step, value, wall
    time) as the daemon has it. ``series``: run id -> {metric: [[step, value, t], ...]}."""
    for g in report["groups"]:
        for rid in g["run_ids"]:
            run = runs.get(rid) or {}
            seed = (run.get("config") or {}).get("seed")
            for metric, points in (series.get(rid) or {}).items():
                for step, value, t in points:
                    yield [run.get("name") or rid, g["group"], run.get("env"), "" if seed is None else seed, step,
                           metric, value, t]
