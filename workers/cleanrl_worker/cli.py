"""The CleanRL worker process.

    python -m workers.cleanrl_worker.cli --config config.json

Runs with the run directory as cwd, stdout on ``events.jsonl`` and stderr on
``stderr.log``. Train: the CleanRL script as a child (runtime.train); eval: a
checkpoint played in this process (runtime.evaluate).
"""
from __future__ import annotations

import sys

from workers.cleanrl_worker import WORKER
from workers.sdk.worker_cli import serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.cleanrl_worker.cli", argv, WORKER, "workers.cleanrl_worker.runtime")


if __name__ == "__main__":
    sys.exit(main())
