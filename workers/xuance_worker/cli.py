"""The XuanCe worker process.

    python -m workers.xuance_worker.cli --config config.json

Runs with the run directory as cwd, stdout on ``events.jsonl`` and stderr on
``stderr.log``. XuanCe runs in this process (``runtime``); its prints go to
``stdout.log``, its progress bars to ``stderr.log``, its TensorBoard files to
``tensorboard/`` and its models to ``checkpoints/``.

Pausing is the daemon's business (SIGSTOP to the process tree): nothing here.
SIGTERM/SIGINT end the run with a ``run_failed`` event, then the process dies
of the signal.

Keep this module's imports light: processes XuanCe spawns for its vectorised
environments re-import it (as ``__mp_main__``).
"""
from __future__ import annotations

import sys

from workers.sdk.worker_cli import start


def main(argv: list[str] | None = None) -> int:
    from workers.xuance_worker import WORKER
    emitter, config = start("python -m workers.xuance_worker.cli", argv, WORKER)
    if config is None:
        return 2
    from workers.xuance_worker import runtime
    code = runtime.run(config, emitter)
    emitter.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
