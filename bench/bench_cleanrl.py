"""CleanRL under mosaic against the same script run bare.

    python -m bench.bench_cleanrl

Overhead: CleanRL's ppo.py on CartPole-v1 with the same arguments, run bare
(`python ppo.py ...`, gym 0.23 as CleanRL expects) and managed (submitted to a
daemon; the worker runs the same file under its import-time patches),
alternating bare, managed, bare, managed... Each run's steps/s is the script's
own last `charts/SPS` (global_step / elapsed), so process start-up is not
counted on either side. Figure: median managed / median bare (goal >= 0.97;
MOSAIC's table shows 7.6% overhead). Both sides run with OMP_NUM_THREADS=1, at the
workers' nice level, one at a time (bench.common.alike, run_bare).

The learning check is bench_cleanrl_learning (long: --long).
"""
from __future__ import annotations

import re
import sys
import tempfile

from bench.common import alike, alike_settings, alternate, daemon_home, figure, median, print_table, run_bare

STEPS = 40_000
PAIRS = 5        # run-to-run spread here is ~10%: five pairs for a stable median


def cleanrl_script(name: str) -> str:
    from workers.cleanrl_worker import catalog
    return catalog.script_path(name)


def bare_sps(steps: int) -> float:
    with tempfile.TemporaryDirectory(prefix="mb-bare-") as cwd:
        proc = run_bare([sys.executable, cleanrl_script("ppo"), "--total-timesteps", str(steps), "--seed", "1",
                         "--cuda", "False", "--track", "False"], cwd=cwd)
        if proc.returncode != 0:
            raise RuntimeError(f"bare run failed:\n{proc.stderr[-3000:]}")
        out = proc.stdout
    return float(re.findall(r"^SPS: (\d+)", out, re.M)[-1])


def managed_sps(home, steps: int) -> float:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    with Client(home, name="bench") as c:
        run = c.call(P.SUBMIT, config={"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": steps,
                                       "seed": 1})
        c.call(P.SUBSCRIBE, runs=True, rev=run["rev"])
        state = run["state"]
        while state not in P.FINAL_STATES:
            for method, params in c.notifications(timeout=5):
                if method == P.NOTIFY_RUN and params.get("run", {}).get("id") == run["id"]:
                    state = params["run"]["state"]
                    if state in P.FINAL_STATES:
                        break
        if state != P.SUCCEEDED:
            raise RuntimeError(f"managed run {state}")
        points = c.call(P.METRICS, run=run["id"], tags=["charts/SPS"])
        while points["next"] < points["end"]:
            more = c.call(P.METRICS, run=run["id"], tags=["charts/SPS"], **{"from": points["next"]})
            points["points"].setdefault("charts/SPS", []).extend(more["points"].get("charts/SPS", []))
            points["next"] = more["next"]
        return float(points["points"]["charts/SPS"][-1][1])


def run() -> list[dict]:
    alike(1)  # OMP_NUM_THREADS=1, inherited by the daemon and its runs; the bare script gets it and the nice level
    with daemon_home(max_runs=1) as (home, _pid):
        bare, managed = alternate(PAIRS, lambda: bare_sps(STEPS), lambda: managed_sps(home, STEPS))
    ratio = median(managed) / median(bare)
    return [
        figure("CleanRL PPO CartPole steps/s, bare script (median)", median(bare), "steps/s", "",
               f"runs: {', '.join(f'{v:.0f}' for v in bare)}"),
        figure("CleanRL PPO CartPole steps/s, under mosaic (median)", median(managed), "steps/s", "",
               f"runs: {', '.join(f'{v:.0f}' for v in managed)}"),
        figure("CleanRL training overhead: managed / bare", ratio, "ratio", ">= 0.97",
               f"MOSAIC: 0.924 (7.6% overhead); {PAIRS} pairs A B / B A; {alike_settings(seed=1)}", ratio >= 0.97),
    ]


if __name__ == "__main__":
    print_table(run())
