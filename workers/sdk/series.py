"""Stop and continue for a worker that plays a series of episodes (BALROG, MOSAIC LLM).

Such a run has no weights to checkpoint: what a stop keeps is the series' state
(what was played, the counters, the LLM use the budget goes on counting from)
and the episode to play next, in ``STOP_STATE``. A stop between two episodes
ends the run there; a stop inside one cuts it (``EpisodeCut``): that episode has
no result and is played again on continue (its steps stay in the transcript).

    series = EpisodeSeries("mosaic balrog", state=self.state, step=lambda: self.step)
    first = series.restore(config["continue_from"], self.apply) if config.get("continue_from") else 0
    for episode in range(first, count):
        series.check(episode)                 # a stop between two episodes
        with series.episode(episode):         # a stop inside it: series.cut() at a step
            ...

The file's layout is the worker's (``state()``'s keys) plus ``next_episode``
(the first episode without a result) and, from a run with episodes in parallel,
``in_flight`` (the episodes the stop cut). Episodes after ``next_episode``
may have finished already: the worker's state lists them, and ``to_play`` leaves
them out, so continue replays the cut ones and never a finished one. A run
stopped by an earlier version (no ``in_flight``) continues from its file as it is.
"""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

from workers.sdk.rundir import write_state
from workers.sdk.stop import SIGNALS, Stopped

STOP_STATE = "checkpoints/stop_state.json"   # in the run directory: the series' state at a stop


class EpisodeCut(Exception):
    """A stop came in the middle of an episode: it has no result, and is played again on continue."""


class EpisodeSeries:
    """``state()``: the worker's state to keep at a stop (a JSON object); ``step()``: the run's
    step now (the stop's step). ``who`` begins the line written to stderr on continue."""

    def __init__(self, who: str, state: Callable[[], dict[str, Any]], step: Callable[[], int]):
        self.who, self.state, self.step = who, state, step

    def save(self, next_episode: int, in_flight: list[int] | tuple[int, ...] = ()) -> str:
        """The state file written: the worker's state, the episode to play next and the ones cut."""
        cut = {"in_flight": sorted(in_flight)} if in_flight else {}
        return write_state(STOP_STATE, {"next_episode": next_episode, **cut, **self.state()})

    def stopped(self, next_episode: int, in_flight: Iterable[int] = ()) -> Stopped:
        """The Stopped to raise, its state saved (with its manifest)."""
        in_flight = list(in_flight)
        return Stopped.after(lambda: self.save(next_episode, in_flight), self.step())

    def check(self, next_episode: int) -> None:
        """Between two episodes: a stop ends the run here."""
        if SIGNALS.stop_requested:
            raise self.stopped(next_episode)

    @staticmethod
    def cut() -> None:
        """At a step inside an episode: a stop cuts the episode here."""
        if SIGNALS.stop_requested:
            raise EpisodeCut()

    @contextmanager
    def episode(self, episode: int) -> Iterator[None]:
        """Around one episode: cut by a stop, the run ends to play it again on continue."""
        try:
            yield
        except EpisodeCut:
            raise self.stopped(episode) from None

    def restore(self, path: str, apply: Callable[[dict[str, Any]], None]) -> int:
        """A stop's state back: ``apply(state)`` sets the worker's counters from it; the episode to
        play next."""
        with open(path, encoding="utf-8") as f:
            state = json.load(f)
        apply(state)
        replayed = f" (replaying {', '.join(map(str, state['in_flight']))})" if state.get("in_flight") else ""
        sys.stderr.write(f"{self.who}: continuing from {path} at episode {state['next_episode']}{replayed}, "
                         f"step {self.step()}\n")
        return int(state["next_episode"])


def to_play(first: int, count: int, finished: Iterable[int]) -> list[int]:
    """The episodes a run still plays, in order: from ``first`` (a stop's ``next_episode``) to
    ``count``, less those that have a result already (finished while an earlier one was in flight)."""
    done = set(finished)
    return [episode for episode in range(first, count) if episode not in done]
