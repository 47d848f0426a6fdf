"""Figures of a report (mosaic_tui/report.py) for a paper: learning curves with a confidence band
per group, the aggregates' interval estimates (rliable's ``plot_interval_estimates`` look),
performance profiles and probabilities of improvement, as PDF, SVG or PNG sized for a paper's
column, or as pixels for the terminal (the app's report view draws them with sixel or kitty).

matplotlib is imported inside the functions that draw, never at import: the app and the CLI start
without it. No pyplot: a ``Figure`` of its own, so no display and no global state.
"""
from __future__ import annotations

from typing import Any

import numpy as np

KINDS = ("curves", "intervals", "profiles", "poi")
FORMATS = ("pdf", "svg", "png")
# a paper's text column and its full text width, in inches (ICML and ICLR: 3.25 and 6.75; NeurIPS
# is one column of 5.5, which `double` comes closest to)
COLUMN_INCHES = {"single": 3.25, "double": 6.75}
# --venue: the venue's own widths and font sizes, from tueplots (its figsizes and fontsizes; not its
# bundles, which ask for a LaTeX install). NeurIPS and ICLR are one column: `single` is half of it.
VENUES = ("icml", "neurips", "iclr")
DPI = 300                  # PNG for print
SCREEN_DPI = 110           # pixels for the terminal
CURVE_POINTS = 100         # where a learning curve is evaluated, evenly over its x range
CURVE_REPS = 2_000         # bootstrap replications of a curve's band at each point
FONT_POINTS = 7
# Okabe and Ito's palette: told apart in print, on a projector and by colour-blind readers
COLORS = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")


class FigureError(ValueError):
    """A figure that cannot be made as asked: one line."""


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


# -- learning curves: the numbers ---------------------------------------------------------------
def run_curve(steps: np.ndarray, values: np.ndarray, grid: np.ndarray, window: int, until: float) -> np.ndarray:
    """A run's score along ``grid``: at each x the mean of its last ``window`` episode returns
    reported at or before x (the runs table's figure, as it stood then); NaN before its first
    episode and past ``until`` (how far the run got)."""
    order = np.argsort(steps, kind="stable")
    steps, values = np.asarray(steps, float)[order], np.asarray(values, float)[order]
    keep = np.isfinite(values)
    steps, values = steps[keep], values[keep]
    out = np.full(len(grid), np.nan)
    if not len(steps):
        return out
    sums = np.concatenate([[0.0], np.cumsum(values)])
    seen = np.searchsorted(steps, grid, side="right")          # episodes at or before each x
    first = np.maximum(seen - window, 0)
    inside = (seen > 0) & (grid <= until)
    out[inside] = (sums[seen[inside]] - sums[first[inside]]) / (seen[inside] - first[inside])
    return out


def band(stack: np.ndarray, strata: list[np.ndarray], reps: int, size: float, seed: int) -> tuple[np.ndarray, ...]:
    """The mean over runs (rows) at each point (column), and its percentile interval from a
    bootstrap that draws each stratum's (env's) runs again from that stratum, as the report's
    intervals do. A point no run reached is NaN; one only one run reached has no spread."""
    import warnings
    rng = np.random.RandomState(seed)
    # nanmean's own arithmetic (a NaN summed as 0, divided by the count of numbers), done on the
    # stack once rather than on a copy of every draw: the same figures, bit for bit
    known = ~np.isnan(stack)
    filled = np.where(known, stack, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # a point no run reached: NaN, said above
        mean = np.nanmean(stack, axis=0)
        means = []
        chunk = max(1, 2_000_000 // max(1, stack.size))
        for start in range(0, reps, chunk):
            n = min(chunk, reps - start)
            drawn = np.concatenate([rows[rng.randint(0, len(rows), size=(n, len(rows)))] for rows in strata], axis=1)
            means.append(filled[drawn].sum(axis=1) / known[drawn].sum(axis=1))
        means = np.concatenate(means)
        tail = 100 * (1 - size) / 2
        return mean, *percentiles(means, [tail, 100 - tail])


def percentiles(samples: np.ndarray, q: list[float]) -> np.ndarray:
    """``np.nanpercentile(samples, q, axis=0)``: numpy's nan-version works column by column in
    Python, so the columns with no NaN (most) go through ``np.percentile`` at once."""
    out = np.empty((len(q), samples.shape[1]))
    whole = ~np.isnan(samples).any(axis=0)
    out[:, whole] = np.percentile(samples[:, whole], q, axis=0)
    if not whole.all():
        out[:, ~whole] = np.nanpercentile(samples[:, ~whole], q, axis=0)
    return out


def curves(report: dict[str, Any], series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
           runs: dict[str, dict[str, Any]], x: str = "step", points: int = CURVE_POINTS, reps: int = CURVE_REPS,
           size: float | None = None, seed: int | None = None) -> dict[str, Any]:
    """The learning curve of each of the report's groups: over a common x range (environment steps,
    or seconds since each run started), the mean of its runs' scores (``run_curve``, normalised per
    env as the report is) and a band: the interval of that mean (``band``). ``series``: run id ->
    (steps, values, wall times) of its episode returns; ``runs``: run id -> its record."""
    if x not in ("step", "time"):
        raise FigureError(f"--x {x}: step or time")
    size = report["bootstrap"]["size"] if size is None else size
    seed = report["bootstrap"]["seed"] if seed is None else seed
    window = report["score"]["window"]
    bounds = {env: tuple(b) for env, b in report["normalize"]["bounds"].items()}
    per_run: dict[str, tuple[np.ndarray, np.ndarray, float]] = {}
    for g in report["groups"]:
        for rid in g["run_ids"]:
            steps, values, walls = (np.asarray(a, float) for a in series.get(rid, ([], [], [])))
            if not len(steps):
                continue
            run = runs.get(rid) or {}
            env = str(run.get("env"))
            if env in bounds:
                lo, hi = bounds[env]
                values = (values - lo) / (hi - lo)
            if x == "time":
                start = run.get("started_at") or float(np.min(walls))
                xs = walls - start
                until = float(np.max(xs))
            else:
                xs = steps
                done = run.get("steps")
                until = float(max(done if isinstance(done, (int, float)) else 0, np.max(xs)))
            per_run[rid] = (xs, values, until)
    if not per_run:
        raise FigureError("no run of the report has episode returns to draw")
    end = max(until for _, _, until in per_run.values())
    grid = np.linspace(0.0, end, points)
    out: dict[str, Any] = {"x": x, "grid": grid.tolist(), "window": window, "size": size, "reps": reps,
                           "normalized": bool(bounds), "groups": {}}
    for g in report["groups"]:
        members = [rid for rid in g["run_ids"] if rid in per_run]
        if not members:
            continue
        stack = np.stack([run_curve(xs, values, grid, window, until) for xs, values, until in map(per_run.get, members)])
        envs: dict[str, list[int]] = {}
        for i, rid in enumerate(members):
            envs.setdefault(str((runs.get(rid) or {}).get("env")), []).append(i)
        mean, low, high = band(stack, [np.array(v) for v in envs.values()], reps, size, seed)
        out["groups"][g["group"]] = {"runs": len(members), "mean": mean.tolist(), "ci_low": low.tolist(),
                                     "ci_high": high.tolist()}
    return out


# -- drawing ------------------------------------------------------------------------------------
def _rc() -> dict[str, Any]:
    return {"font.size": FONT_POINTS, "axes.titlesize": FONT_POINTS, "axes.labelsize": FONT_POINTS,
            "xtick.labelsize": FONT_POINTS - 1, "ytick.labelsize": FONT_POINTS - 1, "legend.fontsize": FONT_POINTS - 1,
            "axes.spines.top": False, "axes.spines.right": False, "axes.linewidth": 0.6, "lines.linewidth": 1.2,
            "xtick.major.width": 0.6, "ytick.major.width": 0.6, "pdf.fonttype": 42, "ps.fonttype": 42,
            "svg.fonttype": "none", "svg.hashsalt": "mosaic", "figure.dpi": 100}


def venue_style(venue: str, column: str) -> tuple[float, dict[str, Any]]:
    """A venue's figure width (inches) for the column, and its font sizes (rcParams)."""
    if venue not in VENUES:
        raise FigureError(f"--venue {venue}: one of {', '.join(VENUES)}")
    try:
        from tueplots import figsizes, fontsizes
    except ImportError:
        raise FigureError("--venue needs tueplots: pip install 'mosaic-tui[experiments]'") from None
    if venue == "icml":
        size = (figsizes.icml2024_half if column == "single" else figsizes.icml2024_full)()
        return size["figure.figsize"][0], fontsizes.icml2024()
    size = getattr(figsizes, f"{venue}2024")(rel_width=0.5 if column == "single" else 1.0)
    return size["figure.figsize"][0], getattr(fontsizes, f"{venue}2024")()


def figure_size(kind: str, column: str, report: dict[str, Any], venue: str | None = None) -> tuple[float, float]:
    """(width, height) in inches: the column's width (the venue's, with one); a height that fits
    the kind and its rows."""
    if column not in COLUMN_INCHES:
        raise FigureError(f"--column {column}: single or double")
    width = venue_style(venue, column)[0] if venue else COLUMN_INCHES[column]
    groups = len(report["groups"])
    if kind == "intervals":
        rows = 1 if column == "double" else 2
        return width, round(rows * (0.55 + 0.22 * groups) + 0.35, 2)
    if kind == "poi":
        return width, round(0.6 + 0.25 * max(1, len(report.get("poi") or [])), 2)
    return width, round(width * (0.62 if width < 4 else 0.38), 2)


def draw(kind: str, report: dict[str, Any], column: str = "single", curve: dict[str, Any] | None = None,
         dpi: float = DPI, venue: str | None = None):
    """The figure (a matplotlib Figure, no pyplot) of one kind. Each group's artists carry an id
    (``curve-<i>``, ``band-<i>``, ``interval-<metric>-<i>``, ``profile-<i>``, ``poi-<i>``): the SVG
    keeps it, so the figure can be read back. ``venue``: its width and font sizes (``VENUES``)."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise FigureError("figures need matplotlib: pip install 'mosaic-tui[experiments]'") from None
    if kind not in KINDS:
        raise FigureError(f"--figure {kind}: one of {', '.join(KINDS)}")
    if not report["groups"]:   # an empty figure written without a word would look like a result
        raise FigureError("no run of the report has a score: no figure to draw")
    rc = _rc()
    if venue:
        rc.update(venue_style(venue, column)[1])
    with matplotlib.rc_context(rc):
        fig = Figure(figsize=figure_size(kind, column, report, venue), dpi=dpi, layout="constrained")
        {"curves": _curves, "intervals": _intervals, "profiles": _profiles, "poi": _poi}[kind](fig, report, curve,
                                                                                             column)
    return fig


def matplotlib_rc(key: str):
    import matplotlib
    return matplotlib.rcParams[key]


def _score_axis_label(report: dict[str, Any]) -> str:
    return {"none": "score", "minmax": "min-max normalised score", "ref": "normalised score"}[
        report["normalize"]["method"]]


def _curves(fig, report, curve, column) -> None:
    if curve is None:
        raise FigureError("learning curves need the runs' episode returns")
    ax = fig.add_subplot()
    grid = np.asarray(curve["grid"])
    from mosaic_tui.report import short_labels
    shown = short_labels(list(curve["groups"]))
    for i, (label, g) in enumerate(curve["groups"].items()):
        _band(ax, grid, g["ci_low"], g["ci_high"], color(i), f"band-{i}")
        ax.plot(grid, g["mean"], color=color(i), label=shown[label], gid=f"curve-{i}")
    ax.set_xlabel("environment steps" if curve["x"] == "step" else "wall time (s)")
    what = "normalised return" if curve["normalized"] else "return"
    ax.set_ylabel(f"{what} (mean of last {curve['window']})")
    ax.legend(frameon=False, loc="best")
    ax.grid(alpha=0.25, linewidth=0.5)


def _band(ax, x, low, high, colour: str, gid: str) -> None:
    """A confidence band as one polygon (along the low bound, back along the high), over the
    points where it is known: one plain path in the SVG."""
    x, low, high = (np.asarray(a, dtype=float) for a in (x, low, high))
    known = np.isfinite(low) & np.isfinite(high)
    if known.sum() < 2:
        return
    x, low, high = x[known], low[known], high[known]
    ax.fill(np.concatenate([x, x[::-1]]), np.concatenate([low, high[::-1]]), color=colour, alpha=0.2,
            linewidth=0, gid=gid)


def _intervals(fig, report, curve, column) -> None:
    from mosaic_tui.aggregates import METRIC_NAMES, METRICS
    groups = report["groups"]
    axes = fig.subplots(1, 4) if column == "double" else fig.subplots(2, 2).ravel()
    from mosaic_tui.report import short_labels
    shown = short_labels([g["group"] for g in groups])
    labels = [shown[g["group"]] for g in groups]
    for m, (metric, ax) in enumerate(zip(METRICS, axes)):
        for i, g in enumerate(groups):
            agg = g["aggregates"][metric]
            y = len(groups) - 1 - i          # the first group on top
            if agg["ci_low"] is not None:
                ax.barh(y, agg["ci_high"] - agg["ci_low"], left=agg["ci_low"], height=0.6, color=color(i),
                        alpha=0.75, gid=f"interval-{metric}-{i}")
            ax.vlines(agg["value"], y - 0.3, y + 0.3, color="black", linewidth=1.0, gid=f"point-{metric}-{i}")
        ax.set_yticks(range(len(groups)))
        ax.set_yticklabels(labels[::-1] if m % (4 if column == "double" else 2) == 0 else [])
        ax.tick_params(axis="y", length=0)
        ax.set_title(METRIC_NAMES[metric])
        ax.spines["left"].set_visible(False)
        ax.grid(axis="x", alpha=0.25, linewidth=0.5)
        ax.set_ylim(-0.6, len(groups) - 0.4)
        # a bar's left end is a sticky edge, which keeps the axis from its margin: an interval at
        # the lowest score (or a zero-width one, seeds alike) would sit on the axes' edge, half drawn
        ax.use_sticky_edges = False
        ax.autoscale_view(scalex=True, scaley=False)
    fig.supxlabel(_score_axis_label(report), fontsize=matplotlib_rc("axes.labelsize"))


def _profiles(fig, report, curve, column) -> None:
    prof = report.get("profile")
    if not prof:
        raise FigureError("the report has no performance profiles (--reps 0)")
    ax = fig.add_subplot()
    taus = np.asarray(prof["taus"])
    from mosaic_tui.report import short_labels
    shown = short_labels(list(prof["groups"]))
    for i, (label, g) in enumerate(prof["groups"].items()):
        _band(ax, taus, g["ci_low"], g["ci_high"], color(i), f"band-{i}")
        ax.plot(taus, g["fraction_above"], color=color(i), label=shown[label], gid=f"profile-{i}")
    ax.set_xlabel(f"{_score_axis_label(report)} ($\\tau$)")
    ax.set_ylabel("fraction of runs with score $> \\tau$")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(frameon=False, loc="best")
    ax.grid(alpha=0.25, linewidth=0.5)


def _poi(fig, report, curve, column) -> None:
    pairs = report.get("poi") or []
    if not pairs:
        raise FigureError("no probability of improvement in the report: --poi X Y (with two groups: both ways)")
    ax = fig.add_subplot()
    for i, p in enumerate(pairs):
        y = len(pairs) - 1 - i
        ax.barh(y, p["ci_high"] - p["ci_low"], left=p["ci_low"], height=0.6, color=color(i), alpha=0.75,
                gid=f"poi-{i}")
        ax.vlines(p["value"], y - 0.3, y + 0.3, color="black", linewidth=1.0, gid=f"poi-point-{i}")
    ax.set_yticks(range(len(pairs)))
    from mosaic_tui.report import short_labels
    shown = short_labels([g["group"] for g in report["groups"]])
    ax.set_yticklabels([f"P({shown.get(p['x'], p['x'])} > {shown.get(p['y'], p['y'])})" for p in pairs][::-1])
    ax.axvline(0.5, color="grey", linestyle="--", linewidth=0.6)
    ax.set_xlim(0, 1)
    ax.set_ylim(-0.6, len(pairs) - 0.4)
    ax.set_xlabel("probability of improvement")
    ax.tick_params(axis="y", length=0)
    ax.spines["left"].set_visible(False)


def save(fig, path: str) -> str:
    """The figure to ``path``; its suffix picks the format (pdf, svg, png)."""
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in FORMATS:
        raise FigureError(f"--out {path}: a figure is .pdf, .svg or .png")
    metadata = {"pdf": {"CreationDate": None, "Creator": "mosaic report"}, "svg": {"Date": None, "Creator": "mosaic report"},
                "png": {"Software": "mosaic report"}}[suffix]
    import matplotlib
    with matplotlib.rc_context(_rc()):      # the fonts' embedding is read as the file is written
        fig.savefig(path, format=suffix, metadata=metadata)
    return path


def pixels(fig) -> np.ndarray:
    """The figure as an RGB array (rows, columns, 3), for the terminal."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return np.ascontiguousarray(np.asarray(canvas.buffer_rgba())[:, :, :3])


def screen_dpi(width_px: int, column: str = "single") -> float:
    """The dpi that makes a figure of the column ``width_px`` pixels wide (the terminal's box)."""
    return max(40.0, min(300.0, width_px / COLUMN_INCHES[column]))
