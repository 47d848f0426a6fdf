"""python -m workers.human_worker.cli --config config.json   (cwd: the run directory)

A person plays ``params.episodes`` episodes of ``env`` (runtime.play), the actions coming
from the client that holds the run's seat (workers/sdk/control.py).
"""
from __future__ import annotations

import sys

from workers.human_worker import WORKER
from workers.sdk.worker_cli import PLAY, serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.human_worker.cli", argv, WORKER, "workers.human_worker.runtime",
                 PLAY)


if __name__ == "__main__":
    sys.exit(main())
