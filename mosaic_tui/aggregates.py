"""Aggregate scores with confidence, as Agarwal et al. (NeurIPS 2021) ask and their library
rliable computes: the interquartile mean, mean, median and optimality gap of a set of runs over
several tasks (envs), with stratified bootstrap confidence intervals, the probability of
improvement of one set over another, and performance profiles (docs/results.md).

numpy only: rliable needs arch, scipy, pandas and seaborn, and loops in Python over its 50,000
bootstrap replications; here they are drawn and reduced as arrays. The numbers are rliable's:
a matrix of scores (runs x tasks) with the same seed gives the same point estimates and the same
interval bounds as ``rliable.library.get_interval_estimates`` after ``np.random.seed(seed)``
(rliable draws from numpy's global generator; here a ``RandomState(seed)`` of each estimate's
own draws the same numbers in the same order). tests/unit/mosaic_tui/test_aggregates.py runs
rliable beside these functions.

Scores come as one 1-D array per task. When every task has the same number of runs they form
rliable's matrix; when they do not (a seed that failed on one env), each task is resampled from
its own runs (the same stratified bootstrap, strata of their own sizes), which rliable cannot
take.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

METRICS = ("iqm", "mean", "median", "optimality_gap")
METRIC_NAMES = {"iqm": "IQM", "mean": "mean", "median": "median", "optimality_gap": "optimality gap"}
DEFAULT_REPS = 50_000          # rliable's get_interval_estimates
DEFAULT_PROFILE_REPS = 2_000   # rliable's create_performance_profile
DEFAULT_POI_REPS = 2_000


Tasks = Sequence[np.ndarray]   # one 1-D array of run scores per task


def as_tasks(scores: np.ndarray | Tasks) -> list[np.ndarray]:
    """A runs x tasks matrix or a list of per-task arrays, as a list of float arrays."""
    if isinstance(scores, np.ndarray) and scores.ndim == 2:
        return [np.asarray(scores[:, m], dtype=float) for m in range(scores.shape[1])]
    tasks = [np.asarray(t, dtype=float).ravel() for t in scores]
    if not tasks or any(t.size == 0 for t in tasks):
        raise ValueError("every task needs at least one run's score")
    return tasks


def matrix(tasks: Tasks) -> np.ndarray | None:
    """The runs x tasks matrix when every task has as many runs, else None."""
    sizes = {len(t) for t in tasks}
    if len(sizes) != 1:
        return None
    return np.stack([np.asarray(t, dtype=float) for t in tasks], axis=1)


# -- point estimates, over a batch of score sets ------------------------------------------------
def _trim_mean(flat: np.ndarray) -> np.ndarray:
    """scipy.stats.trim_mean(x, 0.25) of each row: the same partition and the same sum as scipy's
    on one row, so the same float."""
    nobs = flat.shape[-1]
    lowercut = int(0.25 * nobs)
    uppercut = nobs - lowercut
    part = np.partition(flat, (lowercut, uppercut - 1), axis=-1)
    return np.mean(part[..., lowercut:uppercut], axis=-1)


def _aggregates_batch(batch: np.ndarray, gamma: float) -> np.ndarray:
    """(reps, runs, tasks) -> (reps, 4): IQM, mean, median, optimality gap of each score matrix,
    each as rliable's metrics.aggregate_* computes it."""
    reps = batch.shape[0]
    flat = batch.reshape(reps, -1)
    task_means = np.mean(batch, axis=1)
    out = np.empty((reps, 4))
    out[:, 0] = _trim_mean(flat)
    if task_means.shape[1] == 1:
        # one task: the mean and the median of one task mean are that mean, to the bit (a sum of
        # one value over one), and np.median's partition of 10,000 rows of one is saved
        out[:, 1] = out[:, 2] = task_means[:, 0]
    else:
        out[:, 1] = np.mean(task_means, axis=1)
        out[:, 2] = np.median(task_means, axis=1)
    out[:, 3] = gamma - np.mean(np.minimum(flat, gamma), axis=1)
    return out


def _aggregates_ragged(columns: list[np.ndarray], gamma: float) -> np.ndarray:
    """Per-task arrays of shape (reps, runs_m) -> (reps, 4), tasks of different sizes."""
    flat = np.concatenate(columns, axis=1)
    task_means = np.stack([np.mean(c, axis=1) for c in columns], axis=1)
    out = np.empty((flat.shape[0], 4))
    out[:, 0] = _trim_mean(flat)
    out[:, 1] = np.mean(task_means, axis=1)
    out[:, 2] = np.median(task_means, axis=1)
    out[:, 3] = gamma - np.mean(np.minimum(flat, gamma), axis=1)
    return out


def aggregates(scores: np.ndarray | Tasks, gamma: float = 1.0) -> np.ndarray:
    """IQM, mean, median and optimality gap (at ``gamma``) of one set of scores, in METRICS order."""
    tasks = as_tasks(scores)
    m = matrix(tasks)
    if m is not None:
        return _aggregates_batch(m[None], gamma)[0]
    return _aggregates_ragged([t[None] for t in tasks], gamma)[0]


# -- bootstrap ----------------------------------------------------------------------------------
def _percentile_ci(results: np.ndarray, size: float) -> tuple[np.ndarray, np.ndarray]:
    """arch's percentile interval: the same percentiles, from the same arithmetic."""
    alpha = (1.0 - size) / 2
    lo_pct, hi_pct = 100 * alpha, 100 * (1.0 - alpha)
    k = results.shape[1]
    lower, upper = np.zeros(k), np.zeros(k)
    for i in range(k):
        if i and np.array_equal(results[:, i], results[:, i - 1]):   # one task: mean and median alike
            lower[i], upper[i] = lower[i - 1], upper[i - 1]
            continue
        lower[i], upper[i] = np.percentile(results[:, i], [lo_pct, hi_pct])
    return lower, upper


def _chunks(reps: int, per_rep: int) -> list[int]:
    """Replications in batches of at most ~4M scores each (memory stays small at 50,000 reps)."""
    step = max(1, 4_000_000 // max(1, per_rep))
    return [min(step, reps - start) for start in range(0, reps, step)]


@dataclass
class Interval:
    """Point estimates and their confidence interval, one entry per METRICS name."""
    point: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {name: {"value": float(self.point[i]), "ci_low": float(self.lower[i]), "ci_high": float(self.upper[i])}
                for i, name in enumerate(METRICS)}


def interval_estimates(scores: np.ndarray | Tasks, reps: int = DEFAULT_REPS, size: float = 0.95, seed: int = 0,
                       gamma: float = 1.0) -> Interval:
    """The four aggregates and their stratified bootstrap ``size`` intervals (percentile method):
    each replication draws every task's runs again, with replacement, from that task's runs."""
    tasks = as_tasks(scores)
    point = aggregates(tasks, gamma)
    rs = np.random.RandomState(seed)
    m = matrix(tasks)
    results = np.empty((reps, 4))
    done = 0
    if m is not None:
        n, k = m.shape
        cols = np.arange(k)
        for count in _chunks(reps, n * k):
            # rliable's StratifiedBootstrap.update_indices: np.random.choice(n, (n, k)) per replication,
            # which is randint(0, n, (n, k)); one call of (count, n, k) draws the same numbers
            idx = rs.randint(0, n, size=(count, n, k))
            results[done:done + count] = _aggregates_batch(m[idx, cols], gamma)
            done += count
    else:
        sizes = [len(t) for t in tasks]
        for count in _chunks(reps, sum(sizes)):
            columns = [t[rs.randint(0, len(t), size=(count, len(t)))] for t in tasks]
            results[done:done + count] = _aggregates_ragged(columns, gamma)
            done += count
    lower, upper = _percentile_ci(results, size)
    return Interval(point, lower, upper)


# -- probability of improvement -----------------------------------------------------------------
def _poi_task(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) of one task for a batch: x (reps, nx), y (reps, ny) -> (reps,), as
    Mann-Whitney's U over nx * ny (ties count a half), and 0.5 where the samples are equal, as
    rliable's metrics.probability_of_improvement."""
    nx, ny = x.shape[1], y.shape[1]
    diff = x[:, :, None] - y[:, None, :]
    u = np.sum(diff > 0, axis=(1, 2)) + 0.5 * np.sum(diff == 0, axis=(1, 2))
    p = u / (nx * ny)
    if nx == ny:
        p = np.where(np.all(x == y, axis=1), 0.5, p)
    return p


def probability_of_improvement(x: np.ndarray | Tasks, y: np.ndarray | Tasks) -> float:
    """P(X > Y): for each task the probability that a run of X scores above a run of Y, averaged
    over the tasks (both sets have the same tasks, in the same order)."""
    tx, ty = as_tasks(x), as_tasks(y)
    if len(tx) != len(ty):
        raise ValueError(f"X has {len(tx)} tasks and Y {len(ty)}: they must be the same tasks")
    return float(np.mean([_poi_task(a[None], b[None])[0] for a, b in zip(tx, ty)]))


def poi_interval(x: np.ndarray | Tasks, y: np.ndarray | Tasks, reps: int = DEFAULT_POI_REPS, size: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """P(X > Y) and its interval, X and Y resampled independently per task (rliable's
    StratifiedIndependentBootstrap: per replication X's draws, then Y's)."""
    tx, ty = as_tasks(x), as_tasks(y)
    point = probability_of_improvement(tx, ty)
    rs = np.random.RandomState(seed)
    mx, my = matrix(tx), matrix(ty)
    if mx is not None and my is not None:
        (nx, k), (ny, _) = mx.shape, my.shape
        ix = np.empty((reps, nx, k), dtype=int)
        iy = np.empty((reps, ny, k), dtype=int)
        for r in range(reps):
            ix[r] = rs.randint(0, nx, size=(nx, k))
            iy[r] = rs.randint(0, ny, size=(ny, k))
        cols = np.arange(k)
        bx, by = mx[ix, cols], my[iy, cols]
        per_task = np.stack([_poi_task(bx[:, :, m], by[:, :, m]) for m in range(k)], axis=1)
    else:
        draws_x = [np.empty((reps, len(t)), dtype=int) for t in tx]
        draws_y = [np.empty((reps, len(t)), dtype=int) for t in ty]
        for r in range(reps):
            for t, d in zip(tx, draws_x):
                d[r] = rs.randint(0, len(t), size=len(t))
            for t, d in zip(ty, draws_y):
                d[r] = rs.randint(0, len(t), size=len(t))
        per_task = np.stack([_poi_task(a[dx], b[dy]) for a, b, dx, dy in zip(tx, ty, draws_x, draws_y)], axis=1)
    results = np.mean(per_task, axis=1)[:, None]
    lower, upper = _percentile_ci(results, size)
    return point, float(lower[0]), float(upper[0])


# -- performance profiles -----------------------------------------------------------------------
def profile_taus(all_scores: Sequence[np.ndarray], points: int = 21) -> np.ndarray:
    """Thresholds from the lowest score to the highest of every set shown together."""
    flat = np.concatenate([np.asarray(s, dtype=float).ravel() for s in all_scores])
    lo, hi = float(np.min(flat)), float(np.max(flat))
    if hi <= lo:
        hi = lo + 1.0
    return np.linspace(lo, hi, points)


def performance_profile(scores: np.ndarray | Tasks, taus: np.ndarray, reps: int = DEFAULT_PROFILE_REPS,
                        size: float = 0.95, seed: int = 0) -> Interval:
    """The score distribution: for each tau, the fraction of runs (over every task) scoring above
    it, with its stratified bootstrap interval (rliable's create_performance_profile with
    use_score_distribution)."""
    tasks = as_tasks(scores)
    taus = np.asarray(taus, dtype=float)
    m = matrix(tasks)
    rs = np.random.RandomState(seed)
    if m is not None:
        n, k = m.shape
        point = np.mean(m.ravel()[:, None] > taus[None, :], axis=0)
        cols = np.arange(k)
        results = np.empty((reps, len(taus)))
        done = 0
        for count in _chunks(reps, n * k * max(1, len(taus) // 4)):
            idx = rs.randint(0, n, size=(count, n, k))
            flat = m[idx, cols].reshape(count, -1)
            results[done:done + count] = np.mean(flat[:, :, None] > taus[None, None, :], axis=1)
            done += count
    else:
        flat_all = np.concatenate(tasks)
        point = np.mean(flat_all[:, None] > taus[None, :], axis=0)
        columns = [t[rs.randint(0, len(t), size=(reps, len(t)))] for t in tasks]
        flat = np.concatenate(columns, axis=1)
        results = np.mean(flat[:, :, None] > taus[None, None, :], axis=1)
    lower, upper = _percentile_ci(results, size)
    return Interval(point, lower, upper)
