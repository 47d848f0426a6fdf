"""python -m workers.balrog_worker.cli --config config.json   (cwd: the run directory)

Plays ``params.episodes`` episodes with the agent type ``algo`` (runtime.py).
A budget that runs out ends the run as completed (a ``phase`` event names it);
an LLM failure with ``on_error: fail``, an env error or a cancel ends it as failed.
"""
from __future__ import annotations

import sys
import traceback

from workers.balrog_worker import WORKER
from workers.sdk.frames import env_frames
from workers.sdk.stop import Cancelled, StopSignals, end_cancelled
from workers.sdk.worker_cli import start


def main(argv: list[str] | None = None) -> int:
    emitter, config = start("python -m workers.balrog_worker.cli", argv, WORKER)
    if config is None:
        return 2
    StopSignals().install()
    frames = env_frames(config)
    from workers.balrog_worker.runtime import BalrogRun, LLMFailed  # heavy: the worker process only

    run = BalrogRun(config, emitter, frames)
    try:
        run.run()
    except Cancelled as exc:
        end_cancelled(emitter, exc.signum, step=run.step)
    except LLMFailed as exc:
        emitter.run_failed(str(exc), step=run.step)
        emitter.close()
        return 1
    except Exception as exc:  # noqa: BLE001 -- the reason goes to the run record, the trace to stderr.log
        traceback.print_exc()
        emitter.run_failed(f"{type(exc).__name__}: {exc}", step=run.step)
        emitter.close()
        return 1
    finally:
        if frames is not None:
            frames.close()
    emitter.run_completed(step=run.step)
    emitter.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
