"""workers/mosaic_llm_worker/seats.py: how a seat is named before it is seated, and seat order and seeding."""
from __future__ import annotations

import pytest

from workers.mosaic_llm_worker import seats
from workers.mosaic_llm_worker.seats import RandomSeat, describe_seat, make_seats

PARAMS = {"on_error": "fallback"}


def test_describe_seat_names_each_kind_as_the_run_record_shows_it():
    assert describe_seat({"kind": "llm", "llm": {"backend": "openai", "model": "gpt-4o-mini"}}) == "llm:openai:gpt-4o-mini"
    assert describe_seat({"kind": "llm", "llm": {"backend": "local", "model": None}}) == \
        "llm:local:gemma-3-270m (default)"
    assert describe_seat({"kind": "stockfish", "level": 5}) == "stockfish:5"
    assert describe_seat({"kind": "checkpoint", "checkpoint": "/runs/x/checkpoints/c1"}) == \
        "checkpoint:/runs/x/checkpoints/c1"
    assert describe_seat({"kind": "random"}) == "random"
    assert describe_seat({"kind": "human"}) == "human"


def test_seats_follow_the_envs_seat_ids_and_each_has_its_own_seeded_generator():
    made = make_seats("tictactoe_v3", [{"kind": "random"}, {"kind": "random", "role": "x"}], PARAMS, seed=7)
    assert [(s.seat_id, s.kind, s.role) for s in made] == [("player_1", "random", None), ("player_2", "random", "x")]
    legal = {str(i): i for i in range(9)}
    first = [made[0].choose(legal).name for _ in range(20)]
    second = [made[1].choose(legal).name for _ in range(20)]
    assert first != second   # seats differ ...
    again = make_seats("tictactoe_v3", [{"kind": "random"}, {"kind": "random"}], PARAMS, seed=7)
    assert [again[0].choose(legal).name for _ in range(20)] == first   # ... and the same seed replays
    grid = make_seats("MosaicMultiGrid-S-2v2-IndAgObs-v1", [{"kind": "random"}] * 4, PARAMS, seed=0)
    assert [s.seat_id for s in grid] == ["0", "1", "2", "3"]


def test_a_seat_that_fails_to_sit_closes_the_seats_made_before_it(monkeypatch):
    closed = []
    monkeypatch.setattr(RandomSeat, "close", lambda self: closed.append(self.seat_id))
    with pytest.raises(KeyError):
        make_seats("tictactoe_v3", [{"kind": "random"}, {"kind": "llm"}], PARAMS, seed=0)   # no "llm" spec
    assert closed == ["player_1"]


def test_a_random_seat_only_plays_legal_moves():
    seat = seats.RandomSeat("0", {"kind": "random"}, __import__("random").Random(1))
    legal = {"a1": 3, "b2": 8}
    moves = {(m.name, m.action) for m in (seat.choose(legal) for _ in range(50))}
    assert moves == {("a1", 3), ("b2", 8)}
