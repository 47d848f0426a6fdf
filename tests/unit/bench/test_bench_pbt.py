"""bench/bench_pbt.py's figures from a member's events: IQM, score, steps to a threshold, the env
steps trained across its processes, and the stop/continue overhead."""
from __future__ import annotations

import pytest

from bench.bench_pbt import exploit_gaps, final_score, iqm, overhead, steps_to_threshold, trained_steps


def ep(step: int, ret: float, t: float = 0.0) -> dict:
    return {"type": "episode", "step": step, "return": ret, "t": t}


def scalar(step: int, t: float) -> dict:
    return {"type": "scalar", "tag": "charts/learning_rate", "step": step, "value": 1e-3, "t": t}


def test_iqm_is_rliables_trimmed_mean():
    assert iqm([1.0, 2.0, 3.0]) == 2.0                           # 3 values: none cut, their mean
    assert iqm([1.0, 2.0, 30.0]) == 11.0
    assert iqm([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0]) == 3.5  # 8 values: 2 cut from each end
    assert iqm([9.0, 0.0, 1000.0, 10.0, 11.0, 12.0, -50.0, 13.0, 14.0, 15.0, 16.0, 17.0]) == 12.5


def test_final_score_is_the_mean_of_the_last_episodes():
    events = [ep(i * 10, float(i)) for i in range(30)] + [scalar(300, 1.0)]
    assert final_score(events, last=20) == pytest.approx(sum(range(10, 30)) / 20)
    assert final_score(events[:3], last=20) == 1.0
    assert final_score([scalar(1, 1.0)]) is None


def test_steps_to_threshold_needs_a_full_window_at_the_threshold():
    returns = [50.0] + [10.0] * 5 + [100.0] * 5
    events = [ep(100 * (i + 1), r) for i, r in enumerate(returns)]
    assert steps_to_threshold(events, 100.0, window=5) == 1100      # the window of five 100s
    assert steps_to_threshold(events, 90.0, window=2) == 800
    assert steps_to_threshold(events, 101.0, window=5) is None
    assert steps_to_threshold([ep(100, 500.0)], 100.0, window=5) is None  # one 500 is no full window


def test_trained_steps_counts_each_process_from_its_seam():
    events = [scalar(512, 1), scalar(1024, 2), {"type": "run_stopped", "step": 1536, "checkpoint": "c", "t": 3},
              # exploited: continues from a donor's checkpoint at 1024, trains to 2048
              {"type": "restarted", "step": 1024, "checkpoint": "d", "restarts": 1, "t": 4},
              scalar(1536, 5), ep(2048, 9.0, 6)]
    assert trained_steps(events) == 1536 + 1024
    assert trained_steps([scalar(512, 1), ep(700, 1.0, 2)]) == 700


def test_exploit_gaps_split_each_stop_into_its_parts():
    events = [scalar(512, 10.0), ep(600, 1.0, 11.0),
              {"type": "run_stopped", "step": 1024, "checkpoint": "c", "t": 12.0},
              {"type": "restarted", "step": 1024, "checkpoint": "c", "restarts": 1, "t": 20.0},
              {"type": "scalar", "tag": "system/cpu_percent", "step": 1024, "value": 9.0, "t": 22.0},
              {"type": "run_started", "t": 23.0},
              {"type": "scalar", "tag": "system/rss_mb", "step": 1024, "value": 400.0, "t": 24.0},
              scalar(1536, 25.0), scalar(2048, 26.0),
              {"type": "run_stopped", "step": 2048, "checkpoint": "e", "t": 26.5},
              {"type": "restarted", "step": 2048, "checkpoint": "e", "restarts": 2, "t": 27.0},
              ep(2100, 2.0, 30.0), {"type": "run_completed", "t": 31.0}]
    assert exploit_gaps(events) == [{"stop": 1.0, "wait": 8.0, "start": 5.0, "total": 14.0},
                                    {"stop": 0.5, "wait": 0.5, "start": 3.0, "total": 4.0}]
    assert exploit_gaps(events[:2]) == []   # never stopped: no gap
    # the worker's system/ samples, logged while it starts, are no training step


def test_overhead_is_the_gaps_over_members_times_wall():
    one = [{"stop": 1.0, "wait": 2.0, "start": 3.0, "total": 6.0}]
    two = [{"stop": 1.0, "wait": 0.0, "start": 1.0, "total": 2.0}, {"stop": 0.0, "wait": 1.0, "start": 1.0, "total": 2.0}]
    assert overhead([one, two], 100.0) == pytest.approx(10.0 / 200.0)
    assert overhead([one, two], 100.0, "wait") == pytest.approx(3.0 / 200.0)
    assert overhead([[], []], 100.0) == 0.0
