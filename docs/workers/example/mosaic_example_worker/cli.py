"""The worker process: python -m mosaic_example_worker.cli --config config.json (cwd: the run directory)."""
import sys

from mosaic_example_worker import WORKER
from workers.sdk.worker_cli import serve


def main(argv=None):
    # serve(): --config read and validated again, stdout made the telemetry wire, SIGTERM/SIGINT
    # raise Cancelled, then the runtime's entry point for the run's mode (train here; a worker with
    # checkpoints has evaluate for mode "eval" too), and one way to report a failure or a cancel
    # (workers/sdk/guard.py)
    return serve("python -m mosaic_example_worker.cli", argv, WORKER, "mosaic_example_worker.runtime",
                 {"train": "train"})


if __name__ == "__main__":
    sys.exit(main())
