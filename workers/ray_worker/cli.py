"""python -m workers.ray_worker.cli --config config.json   (cwd: the run directory)

Train: start (or join) Ray, build the AlgorithmConfig, call ``algo.train()``
until ``steps`` env steps are sampled, turning each result into telemetry;
checkpoints every ``checkpoint_every`` iterations and at the end.
Eval: load a checkpoint's RLModules and play ``eval_episodes`` episodes
(evaluate.py); no Ray is started.

SIGTERM (a cancel) interrupts training wherever it is; the ``finally`` blocks
stop the algorithm's actors and, when this worker started Ray, Ray itself,
before the process exits.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from workers.ray_worker import WORKER
from workers.sdk import registration
from workers.sdk.frames import frames_request
from workers.sdk.rundir import CHECKPOINT_DIR, CheckpointSchedule
from workers.sdk.stop import StopSignals
from workers.sdk.telemetry import Emitter
from workers.sdk.worker_cli import start, training_begins

# Ray reports usage statistics by default; a run must not phone anywhere.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# One line per repeated warning from the env runners is enough in stderr.log.
os.environ.setdefault("RAY_DEDUP_LOGS", "1")

# How long stopping the algorithm and Ray may take before the worker gives up
# and exits anyway (the supervisor kills what is left after its grace period).
SHUTDOWN_SECONDS = 8.0


# The signal that stopped the run, once one came. Raising Cancelled inside Ray's
# Cython code surfaces as a SystemError, so the cleanup and the exit status go
# by STOP.received rather than by the exception's type.
STOP = StopSignals()


def _watchdog(seconds: float, emitter: Emitter, ray_rt) -> threading.Timer:
    """Exit hard if cleanup hangs (a dead raylet can leave ray.shutdown waiting)."""
    def fire():
        sys.stderr.write(f"mosaic ray worker: cleanup took more than {seconds:g}s, exiting\n")
        import faulthandler
        faulthandler.dump_traceback(all_threads=True)
        ray_rt.remove_link()
        emitter.flush()
        os._exit(3)
    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    return timer


def ray_environment(params: dict) -> None:
    """Environment Ray reads once, at import: set before ``import ray``."""
    if params["address"] == "":
        # A private Ray is one node: keep it on the loopback interface. Ray
        # otherwise binds its node to the machine's outward address (and
        # resolves 127.0.0.1 away), so its processes would talk over eth0.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    if params["auth_mode"]:
        os.environ["RAY_AUTH_MODE"] = params["auth_mode"]


def frames_environment(config: dict) -> None:
    """Live frames while training come from the env runner in this process (runtime.training_frames)."""
    request = frames_request(config)
    if request is not None and config["params"]["env_runners"] == 0:
        os.environ["MOSAIC_RAY_FRAMES"] = json.dumps(request)
        os.environ["MOSAIC_RAY_DRIVER_PID"] = str(os.getpid())


def train(config: dict, emitter: Emitter, run_dir: Path) -> int:
    params = config["params"]
    ray_environment(params)
    registration.prepare_process()  # MUJOCO_GL, NUMBA_CACHE_DIR: before Ray starts, so its actors inherit them
    frames_environment(config)
    import torch

    from workers.ray_worker import runtime

    torch.set_num_threads(params["torch_threads"])
    total = int(config["steps"])
    checkpoints = run_dir / CHECKPOINT_DIR
    ray_rt = runtime.RayRuntime(params, run_dir, config.get("run_id") or run_dir.name)
    algo = None
    steps = 0
    try:
        emitter.phase("ray_init", step=0)
        ray_rt.start()
        # ray.init installs its own SIGTERM handler (sys.exit) in the driver: ours again.
        STOP.install()
        setup = runtime.Setup(config)
        emitter.phase("build", step=0)
        algo = setup.config.build_algo()
        if config.get("checkpoint"):
            source = runtime.checkpoint_root(config["checkpoint"])
            algo.restore_from_path(str(source))
            sys.stderr.write(f"mosaic ray worker: resumed from {source}\n")
        league = None
        if setup.policy == "self_play":
            league = runtime.League(algo, params["league_size"], params["snapshot_every"])
            if not config.get("checkpoint"):
                league.fill()
        placement = runtime.runner_placement(algo)
        (run_dir / runtime.PLACEMENT_FILE).write_text(json.dumps(placement, indent=1))
        training_begins()
        emitter.phase("train", step=0)

        iteration = algo.iteration
        schedule = CheckpointSchedule(params["checkpoint_every"], start=iteration)
        while True:
            started = time.monotonic()
            result = algo.train()
            iteration = int(result.get("training_iteration", iteration + 1))
            steps = runtime.env_steps(result)
            scalars = runtime.flatten(result)
            scalars["time/iteration_s"] = time.monotonic() - started
            scalars["ray/env_runner_nodes"] = float(len(set(placement["env_runner_nodes"])))
            if league is not None:
                slot = league.after_iteration(iteration)
                if slot is not None:
                    scalars["self_play/snapshot_slot"] = float(slot)
                scalars["self_play/snapshots_taken"] = float(league.taken)
            emitter.scalars(scalars, steps)
            for record in runtime.episodes_of(result):
                extra = {"env_index": record.get("env_index", 0)}
                if record.get("agents"):
                    extra["agents"] = record["agents"]
                emitter.episode(steps, record["return"], record["length"], **extra)
            done = steps >= total
            if schedule.due(iteration, finished=done):
                path = runtime.save_checkpoint(algo, setup, checkpoints / f"iter_{iteration:06d}", iteration, steps)
                emitter.checkpoint_saved(path, steps)
                runtime.prune_checkpoints(checkpoints, params["keep_checkpoints"])
                schedule.saved(iteration)
            emitter.heartbeat(steps)
            if done:
                break
        if schedule.final_due(iteration):
            path = runtime.save_checkpoint(algo, setup, checkpoints / "final", iteration, steps)
            emitter.checkpoint_saved(path, steps)
        emitter.run_completed(step=steps)
        return 0
    finally:
        timer = _watchdog(SHUTDOWN_SECONDS, emitter, ray_rt)
        try:
            # On a cancel the supervisor has sent SIGTERM to Ray's processes too:
            # the env-runner actors are going, and algo.stop() would wait on them.
            if algo is not None and STOP.received is None:
                try:
                    algo.stop()
                except Exception as exc:
                    sys.stderr.write(f"mosaic ray worker: algo.stop(): {exc!r}\n")
            started = time.monotonic()
            ray_rt.stop(cancelled=STOP.received is not None)
            sys.stderr.write(f"mosaic ray worker: Ray stopped in {time.monotonic() - started:.1f}s\n")
        finally:
            timer.cancel()


def main(argv: list[str] | None = None) -> int:
    # validated again, as every worker does: the file may have been edited since the daemon took it
    emitter, config = start("python -m workers.ray_worker.cli", argv, WORKER)
    if config is None:
        return 2
    STOP.install()
    run_dir = Path.cwd()
    emitter.run_started(worker="ray", algo=config["algo"], env=config["env"],
                        total_steps=config.get("steps") if config.get("mode", "train") == "train" else None,
                        upstream=_ray_version(), mode=config.get("mode", "train"),
                        policy=config["params"].get("policy"))
    try:
        if config.get("mode") == "eval":
            from workers.ray_worker import evaluate
            return evaluate.run(config, emitter)
        return train(config, emitter, run_dir)
    except BaseException as exc:
        if STOP.received is not None:  # Cancelled, or what Ray made of it
            sys.stderr.write(f"mosaic ray worker: stopped by {STOP.name}\n")
            emitter.close()
            sys.stderr.flush()
            # Ray's atexit hook would disconnect from the raylet just killed and
            # wait seconds for it: leave now, the run's processes are gone.
            os._exit(128 + signal.SIGTERM)
        traceback.print_exc()
        emitter.run_failed(f"{type(exc).__name__}: {exc}")
        emitter.close()
        return 1
    finally:
        emitter.close()


def _ray_version() -> str:
    from workers.sdk.descriptor import dist_version
    return f"ray {dist_version('ray')}"


if __name__ == "__main__":
    sys.exit(main())
