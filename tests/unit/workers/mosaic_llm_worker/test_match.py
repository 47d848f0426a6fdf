"""workers/mosaic_llm_worker/match.py: a line of moves.jsonl and a MultiGrid episode's points per team."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from workers.mosaic_llm_worker.match import Match, moves_line
from workers.mosaic_llm_worker.seats import Move


def test_a_moves_line_has_every_seats_move_and_only_the_extras_a_seat_has():
    plain = moves_line(2, 40, {"0": Move(1, "left"), "1": Move(3, "forward")})
    assert plain == {"episode": 2, "step": 40, "moves": {"0": "left", "1": "forward"}}
    mixed = moves_line(0, 1, {"player_0": Move(5, "e2e4", typed="e4"),
                              "player_1": Move(2, "e7e5", policy_observation=[0.0, 1.0])})
    assert mixed["typed"] == {"player_0": "e4"}
    assert mixed["policy_observations"] == {"player_1": [0.0, 1.0]}


def test_multigrid_points_go_by_goals_where_the_game_counts_them_else_by_return():
    teams = {"0": 1, "1": 1, "2": 2, "3": 2}
    returns = {"0": 0.0, "1": 0.0, "2": 0.3, "3": 0.3}   # blue shaped near the ball, green scored
    assert Match.multigrid_points(SimpleNamespace(team_scores={1: 1}), returns, teams) == {1: 1.0, 2: 0.0}
    assert Match.multigrid_points(SimpleNamespace(team_scores={}), returns, teams) == {1: 0.0, 2: pytest.approx(0.6)}
    assert Match.multigrid_points(SimpleNamespace(), returns, teams) == {1: 0.0, 2: pytest.approx(0.6)}
