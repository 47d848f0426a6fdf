"""The RLlib worker's entry points: ``train`` and ``evaluate``.

Train: start (or join) Ray (rllib.RayRuntime), build the AlgorithmConfig
(rllib.Setup), call ``algo.train()`` until ``steps`` env steps are sampled,
turning each result into telemetry; checkpoints every ``checkpoint_every``
iterations and at the end; stop and continue in resume.py.
Eval: load a checkpoint's RLModules and play ``eval_episodes`` episodes
(evaluate.py); no Ray is started.

This module imports no Ray at load: Ray reads some of its settings from the
environment once, at its import (``ray_environment``). SIGTERM (a cancel)
interrupts training wherever it is; the ``finally`` blocks stop the
algorithm's actors and, when this worker started Ray, Ray itself, before the
guard reports the cancel.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from workers.ray_worker import resume
from workers.sdk import registration
from workers.sdk.frames import frames_request
from workers.sdk.rundir import CHECKPOINT_DIR, CheckpointSchedule, periodic_checkpoint_saved
from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import Emitter
from workers.sdk.worker_cli import training_begins

# Ray reports usage statistics by default; a run must not phone anywhere.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# One line per repeated warning from the env runners is enough in stderr.log.
os.environ.setdefault("RAY_DEDUP_LOGS", "1")

# How long stopping the algorithm and Ray may take before the worker gives up
# and exits anyway (the supervisor kills what is left after its grace period).
SHUTDOWN_SECONDS = 8.0


def evaluate(config: dict, emitter: Emitter) -> int:
    """Play ``eval_episodes`` episodes of a checkpoint's RLModules (evaluate.run)."""
    _run_started(config, emitter)
    from workers.ray_worker import evaluate as evaluation
    return evaluation.run(config, emitter)


def _run_started(config: dict, emitter: Emitter) -> None:
    from workers.sdk.packages import upstream

    mode = config.get("mode", "train")
    emitter.run_started(worker="ray", algo=config["algo"], env=config["env"],
                        total_steps=config.get("steps") if mode == "train" else None,
                        upstream=upstream("ray"), mode=mode, policy=config["params"].get("policy"))


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
    """Live frames while training come from the env runner in this process (rllib.training_frames)."""
    request = frames_request(config)
    if request is not None and config["params"]["env_runners"] == 0:
        os.environ["MOSAIC_RAY_FRAMES"] = json.dumps(request)
        os.environ["MOSAIC_RAY_DRIVER_PID"] = str(os.getpid())


def train(config: dict, emitter: Emitter) -> int:
    """Start (or join) Ray, build the AlgorithmConfig, call ``algo.train()`` until ``steps`` env
    steps are sampled, turning each result into telemetry; checkpoints on their schedule."""
    run_dir = Path.cwd()
    params = config["params"]
    _run_started(config, emitter)
    ray_environment(params)
    registration.prepare_process()  # MUJOCO_GL, NUMBA_CACHE_DIR: before Ray starts, so its actors inherit them
    frames_environment(config)
    import torch

    from workers.ray_worker import rllib

    torch.set_num_threads(params["torch_threads"])
    total = int(config["steps"])
    checkpoints = run_dir / CHECKPOINT_DIR
    ray_rt = rllib.RayRuntime(params, run_dir, config.get("run_id") or run_dir.name)
    algo = None
    steps = 0
    try:
        emitter.phase("ray_init", step=0)
        ray_rt.start()
        # ray.init installs its own SIGTERM handler (sys.exit) in the driver: ours again.
        SIGNALS.install()
        setup = rllib.Setup(config)
        emitter.phase("build", step=0)
        algo = setup.config.build_algo()
        source = resume.restore(algo, config)
        league = None
        if setup.policy == "self_play":
            league = rllib.League(algo, params["league_size"], params["snapshot_every"])
            if not source:
                league.fill()
        placement = rllib.runner_placement(algo)
        (run_dir / rllib.PLACEMENT_FILE).write_text(json.dumps(placement, indent=1))
        training_begins()
        emitter.phase("train", step=0)

        iteration = algo.iteration
        schedule = CheckpointSchedule(params["checkpoint_every"], start=iteration)
        while True:
            started = time.monotonic()
            result = algo.train()
            iteration = int(result.get("training_iteration", iteration + 1))
            steps = rllib.env_steps(result)
            scalars = rllib.flatten(result)
            scalars["time/iteration_s"] = time.monotonic() - started
            scalars["ray/env_runner_nodes"] = float(len(set(placement["env_runner_nodes"])))
            if league is not None:
                slot = league.after_iteration(iteration)
                if slot is not None:
                    scalars["self_play/snapshot_slot"] = float(slot)
                scalars["self_play/snapshots_taken"] = float(league.taken)
            emitter.scalars(scalars, steps)
            for record in rllib.episodes_of(result):
                extra = {"env_index": record.get("env_index", 0)}
                if record.get("agents"):
                    extra["agents"] = record["agents"]
                emitter.episode(steps, record["return"], record["length"], **extra)
            done = steps >= total
            if schedule.due(iteration, finished=done):
                path = rllib.save_checkpoint(algo, setup, checkpoints / f"iter_{iteration:06d}", iteration, steps)
                emitter.checkpoint_saved(path, steps)
                # its manifest, and retention by the run's keep_checkpoints param (0: keep all)
                periodic_checkpoint_saved(path, steps, "iter_", params["keep_checkpoints"])
                schedule.saved(iteration)
            emitter.heartbeat(steps)
            if done:
                break
            if SIGNALS.stop_requested:   # mosaic stop: the algorithm's whole state, between two iterations
                raise resume.stop(algo, setup, checkpoints, iteration, steps)
        if schedule.final_due(iteration):
            path = rllib.save_checkpoint(algo, setup, checkpoints / "final", iteration, steps)
            emitter.checkpoint_saved(path, steps)
        emitter.run_completed(step=steps)
        return 0
    finally:
        timer = _watchdog(SHUTDOWN_SECONDS, emitter, ray_rt)
        try:
            # On a cancel the supervisor has sent SIGTERM to Ray's processes too:
            # the env-runner actors are going, and algo.stop() would wait on them.
            if algo is not None and SIGNALS.received is None:
                try:
                    algo.stop()
                except Exception as exc:
                    sys.stderr.write(f"mosaic ray worker: algo.stop(): {exc!r}\n")
            started = time.monotonic()
            ray_rt.stop(cancelled=SIGNALS.received is not None)
            sys.stderr.write(f"mosaic ray worker: Ray stopped in {time.monotonic() - started:.1f}s\n")
        finally:
            timer.cancel()
