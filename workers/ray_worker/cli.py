"""python -m workers.ray_worker.cli --config config.json   (cwd: the run directory)

Train and eval: runtime.train and runtime.evaluate.
"""
from __future__ import annotations

import sys

from workers.ray_worker import WORKER
from workers.sdk.worker_cli import serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.ray_worker.cli", argv, WORKER, "workers.ray_worker.runtime")


if __name__ == "__main__":
    sys.exit(main())
