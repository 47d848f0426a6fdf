"""python -m workers.tianshou_worker.cli --config config.json   (cwd: the run directory)

Train and eval: runtime.train and runtime.evaluate (multiagent.py for MultiGrid).
"""
from __future__ import annotations

import sys

from workers.sdk.worker_cli import serve
from workers.tianshou_worker import WORKER


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.tianshou_worker.cli", argv, WORKER, "workers.tianshou_worker.runtime")


if __name__ == "__main__":
    sys.exit(main())
