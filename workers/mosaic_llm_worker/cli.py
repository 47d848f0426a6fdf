"""python -m workers.mosaic_llm_worker.cli --config config.json   (cwd: the run directory)

Seats the run's agents (runtime.make_seats: LLM clients load their model once,
Stockfish starts, checkpoints load), then plays ``params.episodes`` episodes
(runtime.Match) and reports each: ``llm_step`` events per LLM call, an
``episode`` event with every seat's return, win/draw/loss and Elo scalars.
SIGTERM (a cancel) stops between two calls of the running step; the engines and
clients are closed on the way out.
"""
from __future__ import annotations

import os
import sys
import traceback

from workers.mosaic_llm_worker import WORKER
from workers.sdk.frames import env_frames
from workers.sdk.stop import Cancelled, StopSignals, end_cancelled
from workers.sdk.worker_cli import start


def _cache_dirs() -> None:
    """mosaic-multigrid compiles its observation code with numba (cache=True): the cache goes under
    the mosaic home, not into site-packages (read-only for a user) or the run directory."""
    home = os.environ.get("MOSAIC_HOME")
    if home:
        os.environ.setdefault("NUMBA_CACHE_DIR", os.path.join(home, "cache", "numba"))
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")       # pygame renders boards off screen
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def main(argv: list[str] | None = None) -> int:
    emitter, config = start("python -m workers.mosaic_llm_worker.cli", argv, WORKER)
    if config is None:
        return 2
    stop = StopSignals().install()
    _cache_dirs()
    from workers.mosaic_llm_worker import catalog, runtime

    params = config["params"]
    seats, match, frames = [], None, None
    try:
        ids = catalog.seat_ids(config["env"])
        emitter.run_started(worker="mosaic_llm", algo=config["algo"], env=config["env"], total_steps=None,
                            upstream=_upstream(config["env"]),
                            seats={sid: runtime.describe_seat(spec) for sid, spec in zip(ids, params["seats"])},
                            coordination=params["coordination"], observation_mode=params["observation_mode"])
        emitter.phase("seat", step=0)   # LLM models load, Stockfish starts, checkpoints load
        seats = runtime.make_seats(config["env"], params["seats"], params, int(config["seed"]))
        frames = env_frames(config)
        match = runtime.Match(config, seats, emitter, frames)
        emitter.phase("play", step=0)
        match.play()
        emitter.run_completed(step=match.steps)
        return 0
    except Cancelled as exc:
        _close(match, seats, frames)
        end_cancelled(emitter, exc.signum, step=match.steps if match else None)
        return 1
    except BaseException as exc:  # noqa: BLE001 -- reported, then the process fails
        if stop.received is None:
            traceback.print_exc()
        emitter.run_failed(f"{type(exc).__name__}: {exc}", step=match.steps if match else None)
        return 1
    finally:
        _close(match, seats, frames)
        emitter.close()


def _close(match, seats, frames) -> None:
    if match is not None:
        match.close()
    for seat in seats:
        seat.close()
    if frames is not None:
        frames.close()


def _upstream(env_id: str) -> str:
    from workers.mosaic_llm_worker import catalog
    from workers.sdk.descriptor import dist_version

    dist = "pettingzoo" if catalog.env_family(env_id) == "classic" else "mosaic-multigrid"
    return f"{dist} {dist_version(dist)}"


if __name__ == "__main__":
    sys.exit(main())
