"""workers/mosaic_llm_worker/standings.py: win/draw/loss and Elo from an episode's points per team."""
from __future__ import annotations

import pytest

from workers.mosaic_llm_worker.standings import ELO_START, Standings


def test_a_team_win_moves_every_rating_by_half_k_from_equal_ratings():
    table = Standings(["0", "1", "2", "3"], k=32)
    teams = {"0": 1, "1": 1, "2": 2, "3": 2}
    assert table.record({1: 1.0, 2: 0.0}, teams) == {"0": "win", "1": "win", "2": "loss", "3": "loss"}
    assert table.rating == {"0": ELO_START + 16, "1": ELO_START + 16, "2": ELO_START - 16, "3": ELO_START - 16}
    assert (table.wins, table.losses) == ({"0": 1, "1": 1, "2": 0, "3": 0}, {"0": 0, "1": 0, "2": 1, "3": 1})


def test_a_draw_moves_ratings_toward_each_other_and_the_sum_stays():
    table = Standings(["a", "b"], k=32)
    table.record({"a": 1.0, "b": 0.0}, {"a": "a", "b": "b"})
    assert table.record({"a": 0.0, "b": 0.0}, {"a": "a", "b": "b"}) == {"a": "draw", "b": "draw"}
    assert ELO_START < table.rating["a"] < ELO_START + 16
    assert sum(table.rating.values()) == pytest.approx(2 * ELO_START)
    assert table.draws == {"a": 1, "b": 1}


def test_a_tie_at_the_top_of_three_teams_is_a_draw_for_those_and_a_loss_for_the_last():
    table = Standings(["0", "1", "2"])
    assert table.record({1: 2, 2: 2, 3: 0}, {"0": 1, "1": 2, "2": 3}) == {"0": "draw", "1": "draw", "2": "loss"}
    assert table.rating["0"] == table.rating["1"] > ELO_START > table.rating["2"]


def test_a_seat_without_rivals_keeps_its_rating():
    table = Standings(["0", "1"])   # a solo or one-sided env: one team
    assert table.record({1: 5.0}, {"0": 1, "1": 1}) == {"0": "win", "1": "win"}
    assert table.rating == {"0": ELO_START, "1": ELO_START}
