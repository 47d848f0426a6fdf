"""python -m workers.mosaic_llm_worker.cli --config config.json   (cwd: the run directory)

Seats the run's agents, then plays ``params.episodes`` episodes (runtime.play)
and reports each: ``llm_step`` events per LLM call, an ``episode`` event with
every seat's return, win/draw/loss and Elo scalars. SIGTERM (a cancel) stops
between two calls of the running step.
"""
from __future__ import annotations

import sys

from workers.mosaic_llm_worker import WORKER
from workers.sdk.worker_cli import PLAY, serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.mosaic_llm_worker.cli", argv, WORKER, "workers.mosaic_llm_worker.runtime",
                 PLAY)


if __name__ == "__main__":
    sys.exit(main())
