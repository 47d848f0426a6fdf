"""python -m workers.jumanji_worker.cli --config config.json   (cwd: the run directory)

Train: jumanji.training's A2C or random agent, epoch by epoch (runtime.train);
rejax's PPO, chunk by chunk (ppo.train).
Eval: a checkpoint's policy plays ``eval_episodes`` episodes (runtime.evaluate, ppo.evaluate).

Everything runs in this one process (JAX steps the envs in jitted, vmapped
code): pause is the supervisor's SIGSTOP, a cancel's SIGTERM raises Cancelled
between (or inside) epochs and the process ends by the signal after reporting.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

# Before jax is imported: matplotlib viewers draw off-screen; XLA on CPU is told to
# keep to one device (pmap over one device is what jumanji's train.py does on a laptop).
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from workers.sdk import registration  # noqa: E402

registration.prepare_process()  # the JAX compilation cache under the home: a resumed run does not compile again

from workers.jumanji_worker import WORKER  # noqa: E402
from workers.sdk.stop import Cancelled, StopSignals, end_cancelled  # noqa: E402
from workers.sdk.worker_cli import start  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    emitter, config = start("python -m workers.jumanji_worker.cli", argv, WORKER)
    if config is None:
        return 2
    stop = StopSignals().install()
    try:
        if config["algo"] == "ppo":  # rejax's PPO
            from workers.jumanji_worker import ppo as runtime
        else:  # jumanji.training's agents
            from workers.jumanji_worker import runtime

        emitter.run_started("jumanji", config["algo"], config["env"], total_steps=runtime.total_steps(config),
                            upstream=runtime.upstream())
        if config["mode"] == "eval":
            return runtime.evaluate(config, emitter)
        return runtime.train(config, emitter, Path.cwd())
    except Cancelled as exc:
        end_cancelled(emitter, exc.signum)
        return 1
    except Exception as exc:  # noqa: BLE001 -- reported as run_failed, with the traceback in stderr.log
        traceback.print_exc()
        if stop.received is not None:  # jax turned our Cancelled into its own error
            end_cancelled(emitter, stop.received)
        emitter.run_failed(f"{type(exc).__name__}: {exc}")
        return 1
    finally:
        emitter.close()


if __name__ == "__main__":
    sys.exit(main())
