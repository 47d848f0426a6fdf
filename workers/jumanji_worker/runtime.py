"""The Jumanji worker's entry points: ``train`` and ``evaluate``, for both of its trainers.

- ``a2c.Trainer``: jumanji.training's A2C and random agents, epoch by epoch, as its
  train.py drives them;
- ``ppo.Trainer``: rejax's PPO, chunk by chunk.

Both offer the same interface, and one loop here drives either: setup, the unit
function compiled ahead of time under a "compiling" phase (the app shows it
instead of a silent stall), then per unit (epoch or chunk) the evaluation the
trainer runs first, the unit, its scalars, an episode record, a frame of the
first training env and the checkpoints on their schedule. A stop (mosaic stop)
is taken between two units: the whole training state saved as ``stop_<unit>``,
then ``Stopped``; ``continue_from`` (mosaic continue) loads it and the same run
goes on from that unit. Eval mode plays a checkpoint's policy one env at a
time, with frames.

Everything runs in this one process (JAX steps the envs in jitted, vmapped
code): pause is the supervisor's SIGSTOP, a cancel's SIGTERM raises Cancelled
between (or inside) units.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

# Before jax is imported: matplotlib viewers draw off-screen; XLA on CPU is told to
# keep to one device (pmap over one device is what jumanji's train.py does on a laptop).
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from workers.sdk import registration  # noqa: E402
from workers.sdk.frames import env_frames  # noqa: E402
from workers.sdk.packages import upstream  # noqa: E402
from workers.sdk.rundir import CHECKPOINT_DIR, CheckpointSchedule, periodic_checkpoint_saved  # noqa: E402
from workers.sdk.stop import SIGNALS, Stopped  # noqa: E402
from workers.sdk.telemetry import Emitter  # noqa: E402

registration.prepare_process()  # the JAX compilation cache under the home: a resumed run does not compile again


def trainer_module(config: dict[str, Any]):
    """The module of the run's trainer: ``ppo`` (rejax) or ``a2c`` (jumanji.training's agents)."""
    if config["algo"] == "ppo":
        from workers.jumanji_worker import ppo
        return ppo
    from workers.jumanji_worker import a2c
    return a2c


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps a training run will have done at its end (None in eval mode)."""
    return trainer_module(config).total_steps(config)


def train(config: dict[str, Any], emitter: Emitter) -> int:
    module = trainer_module(config)
    emitter.run_started("jumanji", config["algo"], config["env"], total_steps=module.total_steps(config),
                        upstream=upstream(*module.UPSTREAM))
    emitter.phase("setup", step=0)
    setup_started = time.monotonic()
    tr = module.Trainer(config)
    unit_name, start = module.UNIT, 0
    # continue_from: this same run goes on (mosaic continue); checkpoint: a new run starts from one
    source = config.get("continue_from") or config.get("checkpoint")
    if source:
        start = tr.load(source)
        sys.stderr.write(f"mosaic jumanji worker: resumed from {source} at {unit_name} {start}\n")
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
                done = unit + 1
                raise Stopped.after(lambda: tr.save(checkpoints / f"stop_{done:06d}", done, config), steps)
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


def renderer(frames, tr):
    """The rgb renderer of the trainer's Jumanji env when the run has frames, else None."""
    if frames is None:
        return None
    from workers.sdk.jumanji_envs import rgb_render
    return rgb_render(tr.render_env)
