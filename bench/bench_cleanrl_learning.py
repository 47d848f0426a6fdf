"""The learning check: CleanRL's PPO on CartPole-v1 under mosaic, default hyperparameters.

    python -m bench.bench_cleanrl_learning      (or python -m bench --long)

Goal: mean episodic return >= 475 over the last 20 episodes within 500,000
steps (CleanRL's published runs reach about 490). Long: about 10 minutes here.
"""
from __future__ import annotations

import os

from bench.common import daemon_home, figure, print_table

LONG = True
STEPS = 500_000


def run() -> list[dict]:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with daemon_home(max_runs=1) as (home, _pid):
        with Client(home, name="bench", timeout=None) as c:
            run = c.call(P.SUBMIT, config={"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1",
                                           "steps": STEPS, "seed": 1})
            c.call(P.SUBSCRIBE, runs=True, rev=run["rev"])
            state = run["state"]
            while state not in P.FINAL_STATES:
                for method, params in c.notifications(timeout=30):
                    if method == P.NOTIFY_RUN and params.get("run", {}).get("id") == run["id"]:
                        state = params["run"]["state"]
            returns, offset = [], 0
            while True:
                page = c.call(P.EVENTS, run=run["id"], types=["episode"], **{"from": offset})
                returns += [e["return"] for e in page["events"]]
                if page["next"] >= page["end"]:
                    break
                offset = page["next"]
    last20 = sum(returns[-20:]) / max(1, len(returns[-20:]))
    return [figure("CleanRL PPO CartPole: mean return of the last 20 episodes", last20, "return", ">= 475",
                   f"CleanRL published ~490; {len(returns)} episodes in {STEPS:,} steps ({state})",
                   last20 >= 475 and state == P.SUCCEEDED)]


if __name__ == "__main__":
    print_table(run())
