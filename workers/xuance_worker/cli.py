"""The XuanCe worker process.

    python -m workers.xuance_worker.cli --config config.json

Runs with the run directory as cwd, stdout on ``events.jsonl`` and stderr on
``stderr.log``. XuanCe runs in this process (``runtime.train``,
``runtime.evaluate``); its prints go to ``stdout.log``, its progress bars to
``stderr.log``, its TensorBoard files to ``tensorboard/`` and its models to
``checkpoints/``.

Keep this module's imports light: processes XuanCe spawns for its vectorised
environments re-import it (as ``__mp_main__``).
"""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from workers.sdk.worker_cli import serve
    from workers.xuance_worker import WORKER

    return serve("python -m workers.xuance_worker.cli", argv, WORKER, "workers.xuance_worker.runtime")


if __name__ == "__main__":
    sys.exit(main())
