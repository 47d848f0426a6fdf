"""python -m workers.jumanji_worker.cli --config config.json   (cwd: the run directory)

Train: jumanji.training's A2C or random agent, epoch by epoch (a2c.py), or
rejax's PPO, chunk by chunk (ppo.py), both driven by runtime.train.
Eval: a checkpoint's policy plays ``eval_episodes`` episodes (runtime.evaluate).
"""
from __future__ import annotations

import sys

from workers.jumanji_worker import WORKER
from workers.sdk.worker_cli import serve


def main(argv: list[str] | None = None) -> int:
    return serve("python -m workers.jumanji_worker.cli", argv, WORKER, "workers.jumanji_worker.runtime")


if __name__ == "__main__":
    sys.exit(main())
