"""workers/sdk/series.py: a series of episodes stopped between two episodes or inside one, and
continued from its state file, including one a previous version wrote."""
from __future__ import annotations

import json

import pytest

from workers.sdk.rundir import MANIFEST_SUFFIX
from workers.sdk.series import STOP_STATE, EpisodeCut, EpisodeSeries
from workers.sdk.stop import SIGNALS, Stopped

# checkpoints/stop_state.json as the BALROG worker wrote it before the series moved into the SDK
PREVIOUS_BALROG_STATE = {"next_episode": 3, "step": 41, "episodes": [{"episode": 0}, {"episode": 1}, {"episode": 2}],
                         "budget_note": None, "total": {"calls": 41}}


@pytest.fixture
def run_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(SIGNALS, "stop_requested", False)
    return tmp_path


def _series(counters: dict) -> EpisodeSeries:
    return EpisodeSeries("mosaic test", state=lambda: dict(counters), step=lambda: counters["step"])


def test_a_stop_inside_an_episode_saves_it_to_be_played_again(run_dir):
    counters = {"step": 7, "episodes": [{"episode": 0}]}
    series = _series(counters)
    series.check(1)   # no stop yet: the episode begins
    SIGNALS.stop_requested = True
    with pytest.raises(Stopped) as stopped:
        with series.episode(1):
            series.cut()
    assert stopped.value.step == 7 and stopped.value.checkpoint == str(run_dir / STOP_STATE)
    assert json.loads((run_dir / STOP_STATE).read_text()) == {"next_episode": 1, **counters}
    assert (run_dir / (STOP_STATE + MANIFEST_SUFFIX)).is_file()   # checked before the run continues from it


def test_a_stop_between_episodes_ends_before_the_next(run_dir):
    series = _series({"step": 12})
    SIGNALS.stop_requested = True
    with pytest.raises(Stopped):
        series.check(4)
    assert json.loads((run_dir / STOP_STATE).read_text())["next_episode"] == 4


def test_an_episode_cut_without_a_series_is_not_swallowed(run_dir):
    SIGNALS.stop_requested = True
    with pytest.raises(EpisodeCut):
        EpisodeSeries.cut()


def test_a_state_file_of_the_previous_version_continues(run_dir, capsys):
    (run_dir / "checkpoints").mkdir()
    (run_dir / STOP_STATE).write_text(json.dumps(PREVIOUS_BALROG_STATE))
    counters = {"step": 0}
    applied = {}

    def apply(state):
        applied.update(state)
        counters["step"] = state["step"]

    first = _series(counters).restore(str(run_dir / STOP_STATE), apply)
    assert first == 3 and applied == PREVIOUS_BALROG_STATE and counters["step"] == 41
    assert "continuing from" in capsys.readouterr().err


def test_episodes_in_flight_are_replayed_and_finished_ones_never(run_dir):
    """A stop with episodes in parallel: 2 and 4 were cut, 3 and 5 had finished. Continue plays
    2, 4 and what was never started, not 3 or 5."""
    from workers.sdk.series import to_play

    counters = {"step": 30, "episodes": [{"episode": e} for e in (0, 1, 3, 5)]}
    SIGNALS.stop_requested = True
    with pytest.raises(Stopped):
        raise _series(counters).stopped(2, in_flight=[4, 2])
    state = json.loads((run_dir / STOP_STATE).read_text())
    assert state["next_episode"] == 2 and state["in_flight"] == [2, 4]
    first = _series({"step": 0}).restore(str(run_dir / STOP_STATE), lambda s: None)
    assert to_play(first, 8, [e["episode"] for e in state["episodes"]]) == [2, 4, 6, 7]
    assert to_play(3, 5, [0, 1, 2]) == [3, 4]   # a sequential run's state: from next_episode on
