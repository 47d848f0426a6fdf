"""The RLlib worker's overhead: PPO on CartPole through the daemon against a plain algo.train() loop.

    python -m bench.bench_ray

A (managed): the run submitted to a daemon (bench.common.daemon_home), the
worker turning every result into telemetry (scalars, episode events through
the episode callback) and saving its final checkpoint.
B (plain): a Python process doing what an RLlib user writes: ray.init with the
same settings, the same PPOConfig, ``algo.train()`` in a loop, nothing else.

Both train ITERATIONS iterations of BATCH env steps with the env runner in the
process (num_env_runners=0). A run's throughput is the median over its
iterations but the first of env steps per second of the iteration (end to
end), so Ray's start, the build and the first iteration's warm-up (the same
code in both) are left out, and so is an iteration slowed by another process
on the shared cores; the time to the first iteration is reported apart. Runs alternate A B A B... and
the figure is the ratio of the medians (goal: at least 0.97).
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time

from bench.common import (
    alike,
    alike_settings,
    alternate,
    daemon_home,
    figure,
    finished_run_events,
    median,
    print_table,
    run_bare,
)

PAIRS = 4
ITERATIONS = 6
BATCH = 1000
PARAMS = {"train_batch_size_per_learner": BATCH, "minibatch_size": 250, "num_epochs": 2, "lr": 0.0003,
          "fcnet_hiddens": [64, 64], "num_cpus": 2}
# Ray on loopback, as the worker runs its private Ray (cli.ray_environment).
RAY_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}

PLAIN = """
import json, sys, time
t0 = time.time()
import ray, torch
from ray.rllib.algorithms.ppo import PPOConfig
torch.set_num_threads(1)
batch, iterations, temp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
ray.init(num_cpus=2, include_dashboard=False, _temp_dir=temp, logging_level="WARNING")
config = (PPOConfig().environment("CartPole-v1").framework("torch")
          .env_runners(num_env_runners=0, num_envs_per_env_runner=1)
          .learners(num_learners=0)
          .training(train_batch_size_per_learner=batch, minibatch_size=250, num_epochs=2, lr=0.0003)
          .rl_module(model_config={"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh"})
          .debugging(seed=1))
algo = config.build_algo()
ends = []
for _ in range(iterations):
    result = algo.train()
    ends.append((time.time(), int(result["env_runners"]["num_env_steps_sampled_lifetime"])))
print(json.dumps({"start": t0, "ends": ends}))
algo.stop()
ray.shutdown()
"""


def throughput(ends: list[tuple[float, int]]) -> float:
    """Median over the iterations after the first of (env steps / wall seconds): one
    iteration slowed by another process on the shared cores does not move it."""
    rates = [(s2 - s1) / (t2 - t1) for (t1, s1), (t2, s2) in zip(ends, ends[1:])]
    return median(rates)


def plain_run() -> tuple[float, float]:
    temp = tempfile.mkdtemp(prefix="mbr-", dir="/tmp")
    try:
        started = time.time()
        out = run_bare([sys.executable, "-c", PLAIN, str(BATCH), str(ITERATIONS), temp], extra_env=RAY_ENV,
                       timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"plain run failed:\n{out.stderr[-3000:]}")
        data = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        subprocess.run(["rm", "-rf", temp])
    return throughput(data["ends"]), data["ends"][0][0] - started


def managed_run(client, home) -> tuple[float, float]:
    started = time.time()
    config = {"worker": "ray", "algo": "PPO", "env": "CartPole-v1", "steps": BATCH * ITERATIONS, "seed": 1,
              "params": dict(PARAMS)}
    ends = [(event["t"], event["step"]) for event in finished_run_events(client, home, config)
            if event["type"] == "scalar" and event["tag"] == "env_runners/num_env_steps_sampled_lifetime"]
    return throughput(ends), ends[0][0] - started


def run() -> list[dict]:
    from mosaic_tui.client import Client
    alike()
    with daemon_home(max_runs=1) as (home, _pid):
        with Client(home, name="bench-ray") as client:
            managed_runs, plain_runs = alternate(PAIRS, lambda: managed_run(client, home), plain_run)
    managed, managed_first = [r for r, _ in managed_runs], [f for _, f in managed_runs]
    plain, plain_first = [r for r, _ in plain_runs], [f for _, f in plain_runs]
    ratio = median(managed) / median(plain)
    runs = f"{PAIRS} runs each, A B / B A"
    return [
        figure("RLlib PPO CartPole env steps/s, managed / plain algo.train()", ratio, "ratio", ">= 0.97",
               f"medians; {runs}; {alike_settings(seed=1)}", ratio >= 0.97),
        figure("managed run (daemon, telemetry, episode callback)", median(managed), "env steps/s", "",
               f"runs: {', '.join(f'{r:.0f}' for r in managed)}", None),
        figure("plain algo.train() loop", median(plain), "env steps/s", "",
               f"runs: {', '.join(f'{r:.0f}' for r in plain)}", None),
        figure("time to the first iteration, managed (submit -> result)", median(managed_first), "s", "",
               "imports, ray.init, build, one iteration", None),
        figure("time to the first iteration, plain (process start -> result)", median(plain_first), "s", "",
               "", None),
    ]


def main() -> None:
    print_table(run())


if __name__ == "__main__":
    main()
