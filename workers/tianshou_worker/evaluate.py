"""The Tianshou worker's eval mode (``runtime.evaluate``): a checkpoint's policy plays
``eval_episodes`` episodes, with frames and, if the run records, a dataset (MultiGrid: multiagent.py).
"""
from __future__ import annotations

from typing import Any

from workers.sdk.dataset import Recorder, env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.registration import prepare_process
from workers.sdk.telemetry import Emitter
from workers.tianshou_worker import catalog
from workers.tianshou_worker.run_setup import build, make_env


def run(config: dict[str, Any], emitter: Emitter) -> int:
    """Load the checkpoint and play ``eval_episodes`` episodes with its policy, with frames and,
    if the run records, a dataset."""
    prepare_process()
    if catalog.is_multigrid(config["env"]):
        from workers.tianshou_worker import multiagent
        return multiagent.evaluate(config, emitter)
    recorder = env_recorder(config)
    try:
        return _evaluate(config, emitter, recorder)
    except BaseException:
        if recorder is not None:
            recorder.finish(emitter)
        raise


def _evaluate(config: dict[str, Any], emitter: Emitter, recorder: Recorder | None) -> int:
    import torch

    torch.set_num_threads(config["params"]["torch_threads"])
    algorithm, _, _ = build(config)
    policy = algorithm.policy
    policy.eval()
    frames = env_frames(config)
    env = make_env(config["env"], recorder, render=frames is not None)
    emitter.run_started("tianshou", config["algo"], config["env"], upstream=upstream("tianshou"))
    emitter.phase("eval", step=0)
    steps = 0
    try:
        for index in range(config["eval_episodes"]):
            obs, info = env.reset(seed=config["seed"] + index)
            total, length, done = 0.0, 0, False
            while not done:
                if frames is not None:
                    frames.maybe_publish(env.render)
                with torch.no_grad():
                    action = policy.compute_action(obs, info)
                obs, reward, terminated, truncated, info = env.step(action)
                total += float(reward)
                length += 1
                steps += 1
                done = terminated or truncated
            emitter.episode(steps, total, length)
            emitter.heartbeat(steps)
    finally:
        env.close()
        if frames is not None:
            frames.close()
    if recorder is not None:
        recorder.finish(emitter)
    emitter.run_completed(step=steps)
    return 0
