"""The Tianshou worker's entry points: ``train`` and ``evaluate`` (checkpoints.py writes the
checkpoints, resume.py reads them back, run_setup.py builds the envs and the algorithm both modes use).

Train: build the algorithm (algorithms.build), its collectors on tianshou
DummyVectorEnvs (or, offline, the recorded dataset as the trainer's buffer) and
call ``algorithm.run_training`` with Tianshou's trainer params; the trainer
logs through ``logger.TelemetryLogger``, which also saves checkpoints.
The env and the algorithm are run_setup.py's (eval uses them too).
Eval (evaluate.py): load a checkpoint and play ``eval_episodes`` episodes with the
policy, with frames and, if the run records, a dataset. MultiGrid envs: multiagent.py.

The trainer prints its epoch lines on stdout: ``worker_cli.start`` has made
stdout the run's stdout.log, so they never reach the telemetry channel.
"""
from __future__ import annotations

import math
from typing import Any

from workers.sdk.dataset import Recorder, env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.registration import prepare_process
from workers.sdk.telemetry import Emitter
from workers.sdk.worker_cli import training_begins
from workers.tianshou_worker import algorithms, catalog, resume
from workers.tianshou_worker.checkpoints import save_checkpoint
from workers.tianshou_worker.logger import TelemetryLogger
from workers.tianshou_worker.run_setup import build, make_env, training_env_maker


def train(config: dict[str, Any], emitter: Emitter) -> int:
    """Build the algorithm, its collectors (or, offline, the dataset as the trainer's buffer) and
    run Tianshou's trainer; a MultiGrid env: every agent its own learner (multiagent.train)."""
    prepare_process()  # MUJOCO_GL=egl (MuJoCo renders headless), before any env library is imported
    if catalog.is_multigrid(config["env"]):
        from workers.tianshou_worker import multiagent
        return multiagent.train(config, emitter, save_checkpoint)
    recorder = env_recorder(config)
    try:
        return _train(config, emitter, recorder)
    except BaseException:
        if recorder is not None:  # a cancelled or failed run keeps the episodes it finished
            recorder.finish(emitter)
        raise


def _train(config: dict[str, Any], emitter: Emitter, recorder: Recorder | None) -> int:
    import numpy as np
    import torch
    from tianshou.data import Collector, CollectStats, VectorReplayBuffer
    from tianshou.env import DummyVectorEnv
    from tianshou.trainer import OfflineTrainerParams, OffPolicyTrainerParams, OnPolicyTrainerParams

    algo, params = config["algo"], config["params"]
    kind = catalog.ALGORITHMS[algo]["kind"]
    torch.set_num_threads(params["torch_threads"])
    np.random.seed(config["seed"])
    torch.manual_seed(config["seed"])
    algorithm, dataset, state = build(config)
    restored = resume.restored(state)
    logger = TelemetryLogger(emitter, params["checkpoint_every"], restored, offline=kind == catalog.OFFLINE)
    total = int(config["steps"])
    epoch_steps = min(params["epoch_num_steps"], total)
    _, _, trainer_params = algorithms.split_params(algo, params)
    trainer_params["epoch_num_steps"] = epoch_steps
    saved: list[str] = []

    def save_fn(epoch: int, env_step: int, update_step: int) -> str:
        saved.append(save_checkpoint(algorithm, config, f"epoch_{epoch:04d}", epoch, env_step, update_step, emitter,
                                     periodic=True))
        return saved[-1]

    logger.stop_checkpoint = lambda epoch, env_step, update_step: save_checkpoint(
        algorithm, config, resume.stop_name(epoch), epoch, env_step, update_step, emitter)
    logger.max_epochs = math.ceil(total / epoch_steps)

    test_collector = None
    envs = []   # closed at the end, however it ends (ViZDoom's game processes outlive an unclosed env)
    if params["test_envs"]:
        test_envs = DummyVectorEnv([lambda: make_env(config["env"]) for _ in range(params["test_envs"])])
        envs.append(test_envs)
        test_envs.seed(config["seed"] + 1000)
        test_collector = Collector[CollectStats](algorithm, test_envs)
    common = dict(max_epochs=math.ceil(total / epoch_steps), test_collector=test_collector, logger=logger,
                  save_checkpoint_fn=save_fn, resume_from_log=state is not None, verbose=True, show_progress=False)
    if not params["test_envs"]:
        trainer_params.pop("test_step_num_episodes", None)
    emitter.run_started("tianshou", algo, config["env"], total_steps=total, upstream=upstream("tianshou"))
    frames = None
    if kind == catalog.OFFLINE:
        emitter.phase("offline", step=restored[2])
        trainer = OfflineTrainerParams(buffer=dataset, **common, **trainer_params)
    else:
        n = params["training_envs"]
        frames = env_frames(config)
        training_envs = DummyVectorEnv([training_env_maker(config["env"], recorder, frames, i) for i in range(n)])
        envs.append(training_envs)
        training_envs.seed(config["seed"])
        if kind == catalog.ONLINE_OFF:
            size = params["buffer_size"]
        else:  # what one collection step gathers, in whole steps of every env
            size = math.ceil(trainer_params["collection_step_num_env_steps"] / n) * n + n
        stacked = {}
        if catalog.ENVS[config["env"]].get("image"):
            # as Tianshou's Atari examples: the buffer keeps each step's newest frame only and
            # stacks 4 when it samples (a 4x84x84 observation and its next would be 8x the memory)
            stacked = {"ignore_obs_next": True, "save_only_last_obs": True, "stack_num": 4}
        collector = Collector[CollectStats](algorithm, training_envs, VectorReplayBuffer(size, n, **stacked),
                                            exploration_noise=True)
        if params.get("eps_training_final") is not None:
            trainer_params["training_fn"] = algorithms.eps_annealing(algorithm, params, logger)
        cls = OffPolicyTrainerParams if kind == catalog.ONLINE_OFF else OnPolicyTrainerParams
        emitter.phase("train", step=restored[1])
        trainer = cls(training_collector=collector, **common, **trainer_params)
    training_begins()
    try:
        result = algorithm.run_training(trainer)
    finally:
        for env in envs:
            env.close()
        if frames is not None:
            frames.close()
    step = result.update_step if kind == catalog.OFFLINE else logger.env_step
    save_checkpoint(algorithm, config, "final", logger.epoch, logger.env_step, result.update_step, emitter)
    if recorder is not None:
        recorder.finish(emitter)
    emitter.run_completed(step=step)
    return 0


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Load the checkpoint and play ``eval_episodes`` episodes with its policy (evaluate.run)."""
    from workers.tianshou_worker import evaluate as evaluation
    return evaluation.run(config, emitter)
