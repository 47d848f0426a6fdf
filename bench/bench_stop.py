"""Stop with a checkpoint: how long from `mosaic stop` to the run `stopped`, and the checkpoint's size.

For each worker that stops (capability ``stop``), on a small default config: the run is
submitted, left to train (or play) until under way, then stopped through the daemon, as
``mosaic stop`` does. Figures per worker: the latency from the stop request to the state
``stopped`` (the next safe point, the save, the process's end: what the daemon's
``stop_grace_seconds`` must allow), the save alone (``save_s`` of the ``run_stopped``
event), and the checkpoint's size on disk. Latency is not a ratio: it depends on where
the run is when the stop arrives (an epoch, an iteration, an LLM step under way).

python -m bench.bench_stop
"""
from __future__ import annotations

import os
import time

from bench.common import daemon_home, figure, print_table

RUNS = {
    "jumanji A2C Snake (between epochs)": {
        "worker": "jumanji", "algo": "a2c", "env": "Snake-v1",
        "params": {"training.num_epochs": 2000, "training.num_learner_steps_per_epoch": 4, "training.n_steps": 10,
                   "training.total_batch_size": 8, "evaluation.eval_total_batch_size": 4,
                   "evaluation.greedy_eval_total_batch_size": 4, "eval_every": 100000, "checkpoint_every": 0}},
    "tianshou DQN CartPole (at an epoch's end, 1,000 steps)": {
        "worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 10**6,
        "params": {"epoch_num_steps": 1000, "test_envs": 1, "test_step_num_episodes": 2}},
    "ray PPO CartPole (between iterations)": {
        "worker": "ray", "algo": "PPO", "env": "CartPole-v1", "steps": 10**6,
        "params": {"train_batch_size_per_learner": 1000, "minibatch_size": 250, "num_epochs": 2}},
    "cleanrl PPO CartPole (between two updates)": {
        "worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 10**7, "params": {}},
    "cleanrl DQN CartPole, 10,000-step buffer (between two steps)": {
        "worker": "cleanrl", "algo": "dqn", "env": "CartPole-v1", "steps": 10**7,
        "params": {"learning-starts": 1000, "buffer-size": 10000}},
    "xuance PPO CartPole (after an update)": {
        "worker": "xuance", "algo": "ppo", "env": "CartPole-v1", "steps": 10**7, "params": {}},
    "xuance DQN CartPole (after a training step)": {
        "worker": "xuance", "algo": "dqn", "env": "CartPole-v1", "steps": 10**7, "params": {}},
    "balrog random BabyAI (before the next step)": {
        "worker": "balrog", "algo": "random", "env": "BabyAI-GoToRedBallGrey-v0", "params": {"episodes": 100000}},
    "mosaic_llm tic-tac-toe, random seats (before the next move)": {
        "worker": "mosaic_llm", "algo": "play", "env": "tictactoe_v3",
        "params": {"episodes": 100000, "seats": ["random", "random"]}},
}


def size_of(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def stop_one(home, client, config: dict) -> tuple[float, float | None, int]:
    from daemon import protocol as P
    run = client.call(P.SUBMIT, config=config)
    deadline = time.monotonic() + 600
    while True:   # under way: a few events past the start (the first epoch compiled, Ray up)
        run = client.call(P.GET, run=run["id"])
        summary = run.get("summary") or {}
        if run["state"] == P.RUNNING and summary.get("steps", 0) > 0 and summary.get("phase") not in (
                "setup", "compiling", "ray_init", "build", "seat"):
            break
        if run["state"] in P.FINAL_STATES or time.monotonic() > deadline:
            raise RuntimeError(f"{config['worker']}: {run['state']} {run.get('reason')}")
        time.sleep(0.2)
    time.sleep(2.0)
    started = time.perf_counter()
    client.call(P.STOP, run=run["id"])
    while True:
        run = client.call(P.GET, run=run["id"])
        if run["state"] in P.FINAL_STATES:
            break
        time.sleep(0.02)
    latency = time.perf_counter() - started
    if run["state"] != P.STOPPED:
        raise RuntimeError(f"{config['worker']}: {run['state']} {run.get('reason')}")
    stopped = run["summary"]["stopped"]
    save_s = None
    import json
    for line in (home.run_dir(run["id"]) / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "run_stopped":
            save_s = event.get("save_s")
    return latency, save_s, size_of(stopped["checkpoint"])


def run() -> list[dict]:
    from mosaic_tui.client import Client
    rows = []
    with daemon_home(max_runs=1) as (home, _pid):
        with Client(home, timeout=60) as client:
            for label, config in RUNS.items():
                latency, save_s, size = stop_one(home, client, config)
                saved = f"save {save_s:.3f} s" if save_s is not None else "save -"
                rows.append(figure(f"stop -> stopped: {label}", round(latency, 2), "s", "<= 120 (stop_grace_seconds)",
                                   f"{saved}, checkpoint {size / 1e6:.2f} MB", latency <= 120))
    return rows


if __name__ == "__main__":
    print_table(run())
