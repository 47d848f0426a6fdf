"""mosaic_tui/aggregates.py against rliable itself (PyPI's, the `dev` extra): the same scores and
the same seed give the same point estimates, the same bootstrap intervals, the same probability
of improvement and the same performance profiles."""
from __future__ import annotations

import numpy as np
import pytest

from mosaic_tui import aggregates as A

library = pytest.importorskip("rliable.library")
metrics = pytest.importorskip("rliable.metrics")


def rliable_all(x):
    return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x),
                     metrics.aggregate_optimality_gap(x)])


def _scores(runs, tasks, seed):
    rng = np.random.default_rng(seed)
    return rng.gamma(2.0, 0.3, size=(runs, tasks)) * rng.uniform(0.5, 1.5, size=tasks)


@pytest.mark.parametrize("runs, tasks, seed", [(5, 6, 0), (3, 1, 1), (10, 4, 7), (4, 3, 3)])
def test_interval_estimates_equal_rliable(runs, tasks, seed):
    scores = _scores(runs, tasks, seed)
    reps = 2000
    np.random.seed(seed)
    points, intervals = library.get_interval_estimates({"x": scores}, rliable_all, reps=reps)
    ours = A.interval_estimates(scores, reps=reps, seed=seed)
    assert np.array_equal(ours.point, points["x"])
    assert np.array_equal(ours.lower, intervals["x"][0])
    assert np.array_equal(ours.upper, intervals["x"][1])


def test_interval_estimates_equal_rliable_across_batches():
    # 40 runs x 100 tasks: the replications are drawn and reduced in batches (memory); the
    # draws go on from one batch to the next as rliable's one replication after another
    scores = _scores(40, 100, 11)
    assert len(A._chunks(1500, scores.size)) > 1
    np.random.seed(3)
    points, intervals = library.get_interval_estimates({"x": scores}, rliable_all, reps=1500)
    ours = A.interval_estimates(scores, reps=1500, seed=3)
    assert np.array_equal(ours.point, points["x"])
    assert np.array_equal(np.stack([ours.lower, ours.upper]), intervals["x"])


def test_point_estimates_with_ties_and_a_threshold():
    scores = np.array([[0.2, 1.4, 0.5], [0.2, 0.9, 0.5], [1.0, 1.4, 0.0], [0.2, 0.3, 0.5]])
    ours = A.aggregates(scores, gamma=0.8)
    assert ours[0] == metrics.aggregate_iqm(scores)
    assert ours[1] == metrics.aggregate_mean(scores)
    assert ours[2] == metrics.aggregate_median(scores)
    assert ours[3] == metrics.aggregate_optimality_gap(scores, gamma=0.8)


@pytest.mark.parametrize("nx, ny, tasks", [(5, 5, 6), (4, 6, 2), (3, 3, 1)])
def test_probability_of_improvement_equals_rliable(nx, ny, tasks):
    x = _scores(nx, tasks, 5)
    y = _scores(ny, tasks, 6)
    y[0, 0] = x[0, 0]          # a tie counts a half
    assert A.probability_of_improvement(x, y) == metrics.probability_of_improvement(x, y)
    assert A.probability_of_improvement(x, x) == metrics.probability_of_improvement(x, x) == 0.5
    reps = 500
    np.random.seed(9)
    points, intervals = library.get_interval_estimates({"x,y": [x, y]}, metrics.probability_of_improvement, reps=reps)
    point, low, high = A.poi_interval(x, y, reps=reps, seed=9)
    assert point == points["x,y"]
    assert (low, high) == (intervals["x,y"][0], intervals["x,y"][1])


def test_performance_profile_equals_rliable():
    scores = _scores(5, 6, 2)
    taus = A.profile_taus([scores], points=11)
    np.random.seed(4)
    profiles, cis = library.create_performance_profile({"x": scores}, taus, reps=300)
    ours = A.performance_profile(scores, taus, reps=300, seed=4)
    assert np.array_equal(ours.point, profiles["x"])
    assert np.array_equal(ours.lower, cis["x"][0]) and np.array_equal(ours.upper, cis["x"][1])


def test_tasks_of_different_sizes_resample_each_task_from_its_own_runs():
    tasks = [np.array([1.0, 2.0, 3.0]), np.array([10.0, 11.0]), np.array([5.0, 5.0, 5.0, 6.0])]
    point = A.aggregates(tasks)
    flat = np.concatenate(tasks)
    assert point[1] == pytest.approx(np.mean([t.mean() for t in tasks]))
    assert point[2] == pytest.approx(np.median([t.mean() for t in tasks]))
    import scipy.stats
    assert point[0] == pytest.approx(scipy.stats.trim_mean(flat, 0.25))
    ours = A.interval_estimates(tasks, reps=3000, seed=1)
    # every replication keeps each task's own values: the mean's interval stays within the task
    # means' extremes, and a task of one value (5, 5, 5, 6) moves it little
    assert ours.lower[1] <= point[1] <= ours.upper[1]
    lows = np.mean([t.min() for t in tasks])
    highs = np.mean([t.max() for t in tasks])
    assert lows <= ours.lower[1] and ours.upper[1] <= highs
    same = A.interval_estimates(tasks, reps=3000, seed=1)
    assert np.array_equal(same.lower, ours.lower)      # the seed decides it


def test_one_task_one_run():
    ours = A.interval_estimates(np.array([[3.0]]), reps=100, seed=0)
    assert list(ours.point) == [3.0, 3.0, 3.0, 0.0] and list(ours.lower) == [3.0, 3.0, 3.0, 0.0]   # gap: above 1
