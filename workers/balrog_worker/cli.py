"""python -m workers.balrog_worker.cli --config config.json   (cwd: the run directory)

Plays ``params.episodes`` episodes with the agent type ``algo`` (runtime.play).
A budget that runs out ends the run as completed (a ``phase`` event names it);
an LLM failure with ``on_error: fail``, an env error or a cancel ends it as failed.
"""
from __future__ import annotations

import sys

from workers.balrog_worker import WORKER
from workers.sdk.worker_cli import PLAY, serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.balrog_worker.cli", argv, WORKER, "workers.balrog_worker.runtime",
                 PLAY)


if __name__ == "__main__":
    sys.exit(main())
