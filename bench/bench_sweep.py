"""Sweeps: what the sweep controller costs, and the runs table with a 200-run sweep folded.

1. Controller throughput: a grid sweep of 48 one-step synthetic trials, 16 in
   parallel, from submit to `finished`: runs started and tracked (told to
   Optuna) per second, and the daemon's CPU per run. The work per run is the
   worker's start (a Python process) and the controller's tick (0.5 s), so this
   is the ceiling of a sweep of very short runs, not of a real one.
2. Optuna's import, kept off the daemon's start (imported with the first sweep).
3. The app with a 200-run sweep (40 trials x 5 seeds, with returns) folded into
   groups: first paint of the table, and j presses through the folded rows.

python -m bench.bench_sweep
"""
from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, cpu_seconds, daemon_home, figure, print_table


def controller_throughput(trials: int = 48, parallel: int = 16) -> list[dict]:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    spec = {"name": "bench", "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 1,
                                      "params": {"rate": 0, "episode_every": 1}},
            "params": {"return_offset": list(range(trials))}, "parallel": parallel,
            "objective": {"tag": "episode/return", "last": 1}}
    with daemon_home(max_runs=parallel) as (home, pid):
        cpu0 = cpu_seconds(pid)
        with Client(home, timeout=60) as client:
            t0 = time.perf_counter()
            client.call(P.SWEEP, spec=spec)
            while True:
                sweep = client.call(P.SWEEPS)[0]
                if sweep["state"] != "running":
                    break
                time.sleep(0.05)
            seconds = time.perf_counter() - t0
            done = client.call(P.SWEEP_GET, sweep="bench")
        cpu = cpu_seconds(pid) - cpu0
    complete = sum(1 for t in done["trials"] if t["state"] == "complete")
    rate = trials / seconds
    return [figure(f"sweep controller: {trials} one-step trials, {parallel} parallel", round(rate, 2), "runs/s", "",
                   f"{seconds:.1f} s in all, {complete}/{trials} told to Optuna", complete == trials),
            figure("sweep controller: daemon CPU per run", round(cpu / trials * 1000, 1), "ms", "",
                   "submit, ingest, ticks, Optuna's SQLite", None)]


def optuna_import() -> list[dict]:
    code = ("import time, sys; t = time.perf_counter(); import daemon.server; b = time.perf_counter() - t; "
            "assert 'optuna' not in sys.modules; t = time.perf_counter(); import optuna; "
            "a = time.perf_counter() - t; print(a, b)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), check=True)
    optuna_s, daemon_s = (float(x) for x in out.stdout.split())
    return [figure("optuna import (only once a sweep exists)", round(optuna_s, 3), "s", "not at daemon start",
                   f"daemon.server imports in {daemon_s:.3f} s without it", True)]


def _sweep_runs(trials: int = 40, seeds: int = 5) -> list[dict]:
    now = time.time()
    runs = []
    for t in range(trials):
        for s in range(seeds):
            i = t * seeds + s
            run_id = f"01BENCH{i:019d}"
            returns = [float((t * 7 + s + k) % 50) for k in range(100)]
            runs.append({"id": run_id, "name": f"big-t{t}-s{s}", "worker": "synthetic", "algo": "emit", "env": "none",
                         "config": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 1000, "seed": s,
                                    "params": {"return_offset": t}},
                         "state": "succeeded", "created_at": now - 1000 + i, "started_at": now - 1000 + i,
                         "ended_at": now - 500 + i, "reason": None, "cancel_requested": False,
                         "summary": {"steps": 1000, "total_steps": 1000, "episodes": 100, "returns": returns,
                                     "last_return": returns[-1], "best_return": max(returns), "best_step": 900,
                                     "tags": ["episode/return"], "sps": None},
                         "rev": i + 1, "paused_at": None, "paused_seconds": 0.0, "tags": [], "note": "",
                         "sweep": "01BENCHSWEEP", "trial": t})
    return runs


async def _folded_table(presses: int) -> tuple[float, float, int]:
    import tempfile

    from daemon.home import Home
    from mosaic_tui.app import MosaicApp
    home = Home.resolve(tempfile.mkdtemp(prefix="mb-", dir="/tmp"))
    app = MosaicApp(home, connect=False, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(160, 48)) as pilot:
        app.ui_state["fold"] = True
        table = app.screen.table
        table.fold = True
        runs = _sweep_runs()
        t0 = time.perf_counter()
        app.link.load(runs, rev=len(runs))
        app.link.flush()
        while len(table.visible_ids) != 40:
            await pilot.pause(0.001)
        await pilot.pause()
        first = time.perf_counter() - t0
        times = []
        for _ in range(presses):
            t1 = time.perf_counter()
            await pilot.press("j")
            times.append(time.perf_counter() - t1)
        rows = len(table.visible_ids)
    return first, statistics.median(times), rows


def folded_table(presses: int = 30) -> list[dict]:
    first, key, rows = asyncio.run(_folded_table(presses))
    return [figure("app: a 200-run sweep folded (40 groups), first paint", round(first * 1000, 1), "ms", "",
                   f"{rows} rows", rows == 40),
            figure("app: a 200-run sweep folded, j p50", round(key * 1000, 2), "ms", "", "", None)]


def run() -> list[dict]:
    return controller_throughput() + optuna_import() + folded_table()


if __name__ == "__main__":
    print_table(run())
