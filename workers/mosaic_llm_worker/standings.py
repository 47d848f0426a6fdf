"""Results and ratings across a match's episodes: win/draw/loss per seat and Elo.

Pure bookkeeping (no env, no seat): ``Standings.record`` turns one episode's
points per team into each seat's outcome and updates the ratings pairwise
against every seat of another team.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ELO_START = 1500.0


@dataclass
class Standings:
    """Win/draw/loss per seat and Elo ratings across the series."""
    seats: list[str]
    k: float = 32.0
    rating: dict[str, float] = field(default_factory=dict)
    wins: dict[str, int] = field(default_factory=dict)
    draws: dict[str, int] = field(default_factory=dict)
    losses: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for s in self.seats:
            self.rating.setdefault(s, ELO_START)
            self.wins.setdefault(s, 0)
            self.draws.setdefault(s, 0)
            self.losses.setdefault(s, 0)

    def record(self, points: dict[Any, float], teams: dict[str, Any]) -> dict[str, str]:
        """One episode: each seat's outcome from its team's points (the most points win; a tie at the
        top is a draw for those teams), and Elo updated pairwise against every seat of another team."""
        best = max(points[team] for team in teams.values())
        top = {team for team in teams.values() if points[team] == best}
        outcome = {seat: ("win" if len(top) == 1 else "draw") if team in top else "loss"
                   for seat, team in teams.items()}
        for seat, result in outcome.items():
            {"win": self.wins, "draw": self.draws, "loss": self.losses}[result][seat] += 1
        old = dict(self.rating)
        for seat, team in teams.items():
            rivals = [o for o, t in teams.items() if t != team]
            if not rivals:
                continue
            delta = 0.0
            for other in rivals:
                mine, theirs = points[team], points[teams[other]]
                score = 1.0 if mine > theirs else 0.5 if mine == theirs else 0.0
                expected = 1.0 / (1.0 + 10 ** ((old[other] - old[seat]) / 400.0))
                delta += score - expected
            self.rating[seat] = old[seat] + self.k * delta / len(rivals)
        return outcome

