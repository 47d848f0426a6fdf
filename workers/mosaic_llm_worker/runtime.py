"""The MOSAIC LLM worker process's entry point: ``play`` seats the agents and plays the match.

The seats are ``seats.py``, the match (MultiGrid simultaneous steps, board games
move by move, stop and continue) ``match.py``, win/draw/loss and Elo
``standings.py``; a person's seat talks through ``human.py``.
"""
from __future__ import annotations

import os
from typing import Any

from workers.mosaic_llm_worker import catalog, human
from workers.mosaic_llm_worker.match import Match
from workers.mosaic_llm_worker.seats import describe_seat, make_seats
from workers.sdk.frames import env_frames
from workers.sdk.llm import classic, multigrid
from workers.sdk.packages import upstream


def play(config: dict[str, Any], emitter) -> int:
    """The run: seat the agents (LLM clients load their model once, Stockfish starts, checkpoints
    load), then play ``params.episodes`` episodes (``Match``); engines and clients closed on the way out."""
    _cache_dirs()
    params = config["params"]
    ids = catalog.seat_ids(config["env"])
    emitter.run_started(worker="mosaic_llm", algo=config["algo"], env=config["env"], total_steps=None,
                        upstream=upstream(_library(config["env"])),
                        seats={sid: describe_seat(spec) for sid, spec in zip(ids, params["seats"])},
                        coordination=params["coordination"], observation_mode=params["observation_mode"])
    seats, match, frames, humans = [], None, None, None
    try:
        if any(spec["kind"] == "human" for spec in params["seats"]):
            humans = human.Humans(".")   # the control pipe: a client can take a seat from now on
            names = None if config["env"] in classic.GAMES else multigrid.action_names()
            for sid, spec in zip(ids, params["seats"]):
                if spec["kind"] == "human":
                    controls = human.keymap(config["env"], names)
                    emitter.keymap(sid, controls["actions"], controls["keys"], "turn", text=controls["text"],
                                   noop=controls["noop"])
        emitter.phase("seat", step=0)
        seats = make_seats(config["env"], params["seats"], params, int(config["seed"]), humans, emitter)
        frames = env_frames(config)
        match = Match(config, seats, emitter, frames)
        emitter.phase("play", step=0)
        match.play()
    finally:
        if match is not None:
            match.close()
        for seat in seats:
            seat.close()
        if frames is not None:
            frames.close()
        if humans is not None:
            humans.close()
    emitter.run_completed(step=match.steps)
    return 0


def _cache_dirs() -> None:
    """mosaic-multigrid compiles its observation code with numba (cache=True): the cache goes under
    the mosaic home, not into site-packages (read-only for a user) or the run directory."""
    home = os.environ.get("MOSAIC_HOME")
    if home:
        os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(home, "cache", "numba"))
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")       # pygame renders boards off screen
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def _library(env_id: str) -> str:
    """The distribution that makes the run's env."""
    return "pettingzoo" if catalog.env_family(env_id) == "classic" else "mosaic-multigrid"
