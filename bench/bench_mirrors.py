"""W&B and MLflow mirrors (daemon/mirror.py): what they cost a run, and what a failing one costs its telemetry.

    python -m bench.bench_mirrors            (MOSAIC_BENCH_MIRRORS_SHORT=1: fewer, shorter runs)

Throughput: CleanRL's PPO on CartPole-v1 under mosaic, with both mirrors on (W&B offline into
the home, MLflow's sqlite store in the home) and off, alternating off, on, on, off... Each run's
steps/s is the script's own last ``charts/SPS``, so start-up is not counted. Figure: median on /
median off (goal >= 0.97: the mirror is a process of the daemon's at nice 19, below the worker's
10, and the worker never waits for it; at nice 10 it took a fifth of the run's CPU on 2 cores).

Latency: a synthetic run writing 10,000 lines/s, one line a write, two subscribed clients; the
same with a mirror to an MLflow server that is not there (a closed port: the mirror fails, says
so once and backs off) and with none, alternating. Figure: p99 of write -> client receipt with the
failing mirror over without (bench_telemetry's measurement).
"""
from __future__ import annotations

import json
import os
import time

from bench.bench_telemetry import _clients
from bench.common import alike, alike_settings, alternate, daemon_home, figure, median, print_table
from tests.plugins.base import free_port

SHORT = bool(os.environ.get("MOSAIC_BENCH_MIRRORS_SHORT"))
STEPS = 20_000 if SHORT else 40_000
PAIRS = 2 if SHORT else 4
LATENCY_RATE = 10_000
LATENCY_SECONDS = 3 if SHORT else 5
LATENCY_PAIRS = 1 if SHORT else 2


def _wait(client, run_id: str, timeout: float = 1200) -> dict:
    from daemon import protocol as P
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.call(P.GET, run=run_id)
        if run["state"] in P.FINAL_STATES:
            return run
        time.sleep(0.5)
    raise RuntimeError(f"run {run_id} did not end in {timeout:.0f} s")


def ppo_sps(home, mirror: list[str]) -> float:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    with Client(home, name="bench") as c:
        run = c.call(P.SUBMIT, config={"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": STEPS,
                                       "seed": 1, "mirror": mirror})
        run = _wait(c, run["id"])
        if run["state"] != P.SUCCEEDED:
            raise RuntimeError(f"run {run['state']}: {run.get('reason')}")
        points = c.call(P.METRICS, run=run["id"], tags=["charts/SPS"])
        sps = points["points"].get("charts/SPS", [])
        while points["next"] < points["end"]:
            points = c.call(P.METRICS, run=run["id"], tags=["charts/SPS"], **{"from": points["next"]})
            sps += points["points"].get("charts/SPS", [])
    if mirror:   # the mirror mirrored it all (else the figure would flatter it)
        state_file = home.run_dir(run["id"]) / "mirror.json"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            state = json.loads(state_file.read_text()) if state_file.exists() else {}
            if all(state.get(t, {}).get("closed_offset") for t in mirror):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the mirror of {run['id']} did not finish")
    return float(sps[-1][1])


def latency(mirror: list[str]) -> tuple[float, float, int]:
    """p50, p99 (ms) of write -> receipt at LATENCY_RATE lines/s; the run's warning events. A home
    of its own each time: the clients subscribe to every run, and would first be served the
    earlier runs' lines from disk."""
    settings = {"mirrors": {"mlflow": {"tracking_uri": f"http://127.0.0.1:{free_port()}"}}}
    with daemon_home(max_runs=4, settings=settings) as (home, _pid):
        return _latency(home, mirror)


def _latency(home, mirror: list[str]) -> tuple[float, float, int]:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    lines = LATENCY_RATE * LATENCY_SECONDS
    clients = _clients(home, 1, lines, timeout=120)
    with Client(home, name="bench-submit") as c:
        run = c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": lines,
                                       "mirror": mirror, "params": {"tags": 1, "episode_every": 0,
                                                                    "rate": LATENCY_RATE, "unbuffered": True}})
        run_id = run["id"]
        results = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in clients]
        _wait(c, run_id)
    warnings = sum(1 for line in (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
                   if '"type":"warning"' in line)
    return max(r["p50"] for r in results) * 1000, max(r["p99"] for r in results) * 1000, warnings


def run() -> list[dict]:
    alike(1)
    rows = []
    settings = {"mirrors": {"wandb": {"mode": "offline"}}}
    with daemon_home(max_runs=1, settings=settings) as (home, _pid):
        off, on = alternate(PAIRS, lambda: ppo_sps(home, []), lambda: ppo_sps(home, ["wandb", "mlflow"]))
    ratio = median(on) / median(off)
    rows += [
        figure("CleanRL PPO CartPole steps/s, no mirror (median)", median(off), "steps/s", "",
               f"runs: {', '.join(f'{v:.0f}' for v in off)}"),
        figure("CleanRL PPO CartPole steps/s, W&B + MLflow mirrors (median)", median(on), "steps/s", "",
               f"runs: {', '.join(f'{v:.0f}' for v in on)}"),
        figure("training throughput with the mirrors on / off", ratio, "ratio", ">= 0.97",
               f"{PAIRS} pairs A B / B A, {STEPS:,} steps; W&B offline, MLflow sqlite, both in the home; "
               f"{alike_settings(seed=1)}", ratio >= 0.97),
    ]
    none, failing = alternate(LATENCY_PAIRS, lambda: latency([]), lambda: latency(["mlflow"]))
    p99_none, p99_failing = median([r[1] for r in none]), median([r[1] for r in failing])
    rows += [
        figure(f"delivery latency p99 at {LATENCY_RATE:,} lines/s, no mirror", p99_none, "ms", "",
               f"p50 {median([r[0] for r in none]):.2f} ms", None),
        figure(f"delivery latency p99 at {LATENCY_RATE:,} lines/s, MLflow mirror at a closed port", p99_failing,
               "ms", "<= 10", f"p50 {median([r[0] for r in failing]):.2f} ms; warning events a run: "
                              f"{', '.join(str(r[2]) for r in failing)}", p99_failing <= 10),
    ]
    return rows


if __name__ == "__main__":
    print_table(run())
