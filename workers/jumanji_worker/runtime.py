"""The Jumanji worker's entry points: ``train`` and ``evaluate``, for both of its trainers.

- ``a2c.Trainer``: jumanji.training's A2C and random agents, epoch by epoch, as its
  train.py drives them;
- ``ppo.Trainer``: rejax's PPO, chunk by chunk.

Both offer the same interface, and one loop here drives either: setup, the unit
function compiled ahead of time under a "compiling" phase (the app shows it
instead of a silent stall), then per unit (epoch or chunk) the evaluation the
trainer runs first, the unit, its scalars, an episode record, a frame of the
first training env and the checkpoints on their schedule. A stop (mosaic stop)
is taken between two units and ``continue_from`` (mosaic continue) goes on from
the unit it saved (resume.py). Eval mode plays a checkpoint's policy one env at a
time, with frames.

Everything runs in this one process (JAX steps the envs in jitted, vmapped
code): pause is the supervisor's SIGSTOP, a cancel's SIGTERM raises Cancelled
between (or inside) units.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

# run_setup before anything that imports jax: it sets what jax reads at import
from workers.jumanji_worker import resume
from workers.jumanji_worker.run_setup import renderer, trainer_module
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.rundir import CHECKPOINT_DIR, CheckpointSchedule, periodic_checkpoint_saved
from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import Emitter


def train(config: dict[str, Any], emitter: Emitter) -> int:
    module = trainer_module(config)
    emitter.run_started("jumanji", config["algo"], config["env"], total_steps=module.total_steps(config),
                        upstream=upstream(*module.UPSTREAM))
    emitter.phase("setup", step=0)
    setup_started = time.monotonic()
    tr = module.Trainer(config)
    unit_name = module.UNIT
    start = resume.restore(tr, config, unit_name)
    steps = tr.steps
    emitter.scalar("time/setup_s", time.monotonic() - setup_started, steps)
    emitter.phase("compiling", step=steps)
    compile_started = time.monotonic()
    emitter.scalar(f"time/compile_{unit_name}_s", tr.compile(), steps)
    frames = env_frames(config)
    render = renderer(frames, tr)
    checkpoints = Path.cwd() / CHECKPOINT_DIR
    schedule = CheckpointSchedule(config["params"]["checkpoint_every"], start)
    compiling = True
    try:
        for unit in range(start, tr.units):
            evaluation = tr.evaluation_before(unit)
            if evaluation is not None:
                scalars, (episode_return, length) = evaluation
                emitter.scalars(scalars, steps)
                emitter.episode(steps, episode_return, length)
            if compiling:  # the evaluation before the first unit compiled the evaluators
                emitter.scalar("time/compile_s", time.monotonic() - compile_started, steps)
                emitter.phase("train", step=steps)
                compiling = False
            started = time.monotonic()
            scalars, episode = tr.run_unit()
            seconds = time.monotonic() - started
            scalars.update({f"time/{unit_name}_s": seconds, "train/steps_per_second": (tr.steps - steps) / seconds,
                            f"train/{unit_name}": float(unit + 1)})
            steps = tr.steps
            emitter.scalars(scalars, steps)
            if episode is not None:
                emitter.episode(steps, *episode)
            if render is not None:
                frames.maybe_publish(render, tr.frame_state())
            if schedule.due(unit + 1, finished=unit == tr.units - 1):
                path = tr.save(checkpoints / f"{unit_name}_{unit + 1:06d}", unit + 1, config)
                emitter.checkpoint_saved(path, steps)
                periodic_checkpoint_saved(os.path.dirname(path), steps, f"{unit_name}_")
                schedule.saved(unit + 1)
            emitter.heartbeat(steps)
            if SIGNALS.stop_requested and unit + 1 < tr.units:
                raise resume.stop(tr, checkpoints, unit + 1, config, steps)
        if schedule.final_due(tr.units):
            emitter.checkpoint_saved(tr.save(checkpoints / "final", tr.units, config), steps)
    finally:
        if frames is not None:
            frames.close()
    emitter.run_completed(step=steps)
    return 0


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Play ``eval_episodes`` episodes of the checkpoint's policy (evaluate.run)."""
    from workers.jumanji_worker import evaluate as evaluation
    return evaluation.run(config, emitter)

