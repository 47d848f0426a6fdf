"""The Jumanji learning check: A2C on Snake-v1 beats Jumanji's random agent by a clear margin.

    python -m bench.bench_jumanji_learning      (or python -m bench --long)
    python -m bench.bench_jumanji_learning --epochs 2 --eval-episodes 16   (a tiny end-to-end check)

Two runs through a daemon, the same env, seed and evaluation: Jumanji's A2C
(its Snake config, smaller batches so it fits a CPU: 32 envs, 20-step
rollouts, 100 updates an epoch) and Jumanji's random agent. The figure is each
run's last stochastic evaluation (the policy sampled, as it trains; jumanji's
own evaluator): the mean return over 256 whole episodes. Goal: A2C's return at
least twice the random agent's, and at least 1 fruit more. A2C's greedy return
is printed beside it: a greedy Snake policy often circles until the time limit,
so it trails the sampled one for many epochs. Long: about 10 minutes on a quiet
2-core machine, an hour under load.

Measured once with the 40-epoch version of this check (stopped at epoch 12 on a
loaded machine, load 10): after 10 epochs A2C's stochastic return was 17.6
(5.95 before training), the random agent's 6.34, A2C's greedy 0.62.
"""
from __future__ import annotations

import json
import time

from bench.common import daemon_home, figure, print_table

LONG = True
EPOCHS = 10
COMMON = {"training.num_learner_steps_per_epoch": 100, "training.n_steps": 20, "training.total_batch_size": 32,
          "evaluation.eval_total_batch_size": 256, "evaluation.greedy_eval_total_batch_size": 256,
          "training.num_epochs": EPOCHS, "eval_every": 10, "checkpoint_every": 0}


def last_value(home, run_id: str, tag: str) -> float:
    value = None
    with open(home.run_dir(run_id) / "events.jsonl") as f:
        for line in f:
            event = json.loads(line)
            if event["type"] == "scalar" and event["tag"] == tag:
                value = event["value"]
    return value


def run(epochs: int = EPOCHS, eval_episodes: int = 256) -> list[dict]:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    common = {**COMMON, "training.num_epochs": epochs, "eval_every": min(COMMON["eval_every"], epochs),
              "evaluation.eval_total_batch_size": eval_episodes,
              "evaluation.greedy_eval_total_batch_size": eval_episodes}
    results = {}
    with daemon_home(max_runs=2) as (home, _pid):
        with Client(home, name="bench-jumanji-learning", timeout=None) as c:
            ids = {algo: c.call(P.SUBMIT, config={"worker": "jumanji", "algo": algo, "env": "Snake-v1", "seed": 1,
                                                  "params": {k: v for k, v in common.items()
                                                             if algo == "a2c" or k.split(".")[0] != "a2c"}})["id"]
                   for algo in ("a2c", "random")}
            for algo, run_id in ids.items():
                while (run := c.call(P.GET, run=run_id))["state"] not in P.FINAL_STATES:
                    time.sleep(2)
                if run["state"] != P.SUCCEEDED:
                    raise RuntimeError(f"{algo} run {run['state']}: {run.get('reason')}")
            results["a2c"] = last_value(home, ids["a2c"], "eval_stochastic/episode_return")
            results["a2c_greedy"] = last_value(home, ids["a2c"], "eval_greedy/episode_return")
            results["random"] = last_value(home, ids["random"], "eval_stochastic/episode_return")
    print(f"A2C return {results['a2c']:.2f} (greedy {results['a2c_greedy']:.2f}), "
          f"random agent return {results['random']:.2f}")
    ok = results["a2c"] >= max(2 * results["random"], results["random"] + 1)
    return [figure(f"Jumanji A2C Snake-v1, {epochs} epochs: eval return", results["a2c"], "return",
                   ">= 2x random and +1", f"random agent: {results['random']:.2f}; "
                                          f"A2C greedy: {results['a2c_greedy']:.2f}", ok),
            figure("Jumanji random agent Snake-v1: eval return", results["random"], "return", "", "", None)]


def main() -> None:
    import argparse
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--eval-episodes", type=int, default=256)
    args = parser.parse_args()
    print_table(run(args.epochs, args.eval_episodes))


if __name__ == "__main__":
    main()
