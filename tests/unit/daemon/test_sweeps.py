"""daemon/sweeps.py's pure parts: a param's search space, the objective's aggregation, and RunReader
(what the pruner is told: a run's values as they stood at each bucket step)."""
from __future__ import annotations

import math

import pytest

from daemon.sweeps import MARKS_KEPT, RunReader, aggregate, normalise_param
from workers.sdk import telemetry as tm
from workers.sdk.config import ConfigError


def scalar(tag: str, value, step) -> bytes:
    return tm.encode({"v": 1, "type": tm.SCALAR, "t": 1.0, "tag": tag, "value": value, "step": step})


def episode(step: int, ret: float) -> bytes:
    return tm.encode(tm.make_event(tm.EPISODE, t=1.0, step=step, length=1, **{"return": ret}))


# -- the search space ------------------------------------------------------------------------

def test_a_list_is_a_grid_and_each_distribution_keeps_its_bounds():
    assert normalise_param("lr", [1, 2]) == {"kind": "grid", "values": [1, 2]}
    assert normalise_param("lr", {"categorical": [True, False]}) == {"kind": "categorical", "values": [True, False]}
    assert normalise_param("lr", {"loguniform": [1e-4, 1e-2]}) == {
        "kind": "loguniform", "low": 1e-4, "high": 1e-2, "log": False}
    assert normalise_param("n", {"int": [64, 256], "log": True}) == {"kind": "int", "low": 64, "high": 256, "log": True}


@pytest.mark.parametrize("spec, says", [
    ({"grid": []}, "a non-empty list"),
    ({"uniform": [1.0, 1.0]}, "low < high"),
    ({"uniform": [0.0, math.inf]}, "low < high"),
    ({"uniform": [True, 2]}, "low < high"),
    ({"loguniform": [0.0, 1.0]}, "low must be > 0"),
    ({"int": [1.5, 4]}, "integer bounds"),
    ({"normal": [0, 1]}, "unknown kind"),
    ({"grid": [1], "uniform": [0, 1]}, "one of"),
    ("fast", "one of"),
])
def test_a_bad_search_space_names_the_param_and_the_mistake(spec, says):
    with pytest.raises(ConfigError) as exc:
        normalise_param("lr", spec)
    assert "sweep.params.lr" in str(exc.value) and says in str(exc.value)


# -- the objective ---------------------------------------------------------------------------

def test_each_aggregation_of_the_numbers_only():
    values = [3.0, "nan", 1.0, None, True, math.inf, 2.0, 10]
    assert aggregate(values, "mean") == 4.0
    assert aggregate(values, "median") == 2.5
    assert aggregate(values, "max") == 10 and aggregate(values, "min") == 1.0
    assert aggregate(values, "last") == 10
    assert aggregate(["nan", None], "mean") is None and aggregate([], "last") is None


# -- RunReader --------------------------------------------------------------------------------

def test_the_reader_takes_its_tag_only_and_keeps_the_last_values(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join([scalar("loss", 9.0, 1), scalar("acc", 0.1, 1), scalar("loss", 8.0, 2),
                               episode(2, 100.0), scalar("loss", 7.0, 3), scalar("loss", 6.0, 4)]))
    reader = RunReader(str(path), "loss", keep=3)
    reader.read(path.stat().st_size)
    assert reader.values == [8.0, 7.0, 6.0] and reader.step == 4
    assert reader.at_step == {} and reader.closed_step() == 0 and reader.value_at(2, "mean") is None


def test_the_reader_goes_on_from_where_it_stopped_as_the_file_grows(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(episode(10, 1.0) + b'{"v":1,"type":"epi')          # a line still being written
    reader = RunReader(str(path), "episode/return", keep=10, every=10)
    reader.read(len(episode(10, 1.0)))                  # up to the run's ingest offset, a line's end
    assert reader.values == [1.0] and reader.offset == len(episode(10, 1.0))
    with open(path, "wb") as f:
        f.write(episode(10, 1.0) + episode(20, 2.0) + episode(35, 3.0))
    reader.read(path.stat().st_size)
    assert reader.values == [1.0, 2.0, 3.0]
    # 35 arriving closes 20 and 30: 30 as it stood when 20 was the last value
    assert reader.at_step == {10: [1.0], 20: [1.0, 2.0], 30: [1.0, 2.0]}
    assert reader.closed_step() == 30 and reader.value_at(30, "last") == 2.0


def test_a_value_at_a_bucket_step_belongs_to_that_bucket(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(episode(5, 1.0) + episode(10, 2.0) + episode(11, 3.0))
    reader = RunReader(str(path), "episode/return", keep=10, every=10)
    reader.read(path.stat().st_size)
    assert reader.at_step == {10: [1.0, 2.0]}


def test_values_without_an_integer_step_are_kept_but_close_no_bucket(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(scalar("r", 1.0, 5) + scalar("r", 2.0, 1.5) + scalar("r", 3.0, 25))
    reader = RunReader(str(path), "r", keep=10, every=10)
    reader.read(path.stat().st_size)
    assert reader.values == [1.0, 2.0, 3.0] and reader.step == 25
    assert reader.at_step == {10: [1.0, 2.0], 20: [1.0, 2.0]}


def test_the_reader_keeps_only_the_latest_bucket_steps(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_bytes(episode(1, 0.0) + episode(1000, 1.0))
    reader = RunReader(str(path), "episode/return", keep=2, every=1)
    reader.read(path.stat().st_size)
    assert sorted(reader.at_step) == list(range(1000 - MARKS_KEPT, 1000))


def test_a_step_logged_again_lower_closes_no_bucket_twice(tmp_path):
    # a continued run trains some steps again: the buckets closed before stay as they stood
    path = tmp_path / "events.jsonl"
    path.write_bytes(episode(5, 1.0) + episode(30, 2.0) + episode(15, 3.0) + episode(45, 4.0))
    reader = RunReader(str(path), "episode/return", keep=10, every=10)
    reader.read(path.stat().st_size)
    assert reader.at_step == {10: [1.0], 20: [1.0], 30: [1.0, 2.0, 3.0], 40: [1.0, 2.0, 3.0]}
