"""Results: `mosaic report` over many finished runs, and the runs filter typed as a query.

    python -m bench.bench_report [--runs 10000]

1. 300 finished runs in the store (10 configs x 5 seeds x 6 envs, 1,000 episodes each, the
   last 100 returns in each summary as the daemon keeps them), written through the store's
   API: `mosaic report --by lr --normalize minmax` wall time, the process started to its
   exit (listing, scores, the stratified bootstrap of every group and env, profiles), median
   of 3; and the same with --json.
2. The app's group view of those runs (the screen `R` opens from compare), pushed: to the
   groups and their point estimates drawn, and to the bootstrap intervals drawn.
3. Figures of those 300 runs: `mosaic report --figure intervals --out f.pdf`, the process
   started to its exit; and learning curves in process (each run's 1,000 episode returns, the
   curves' bootstrap bands and the PDF), the step after the runs' episodes are read.
4. The app on N finished runs (bench_scale's home): key to paint of each letter of a query
   typed into the `/` filter and erased (`learning-rate < 3e-4 and mean_return > 250`): every
   prefix is parsed, and compiled or found wrong, at each key; p50 and p99.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import resource
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, daemon_home, figure, percentile, print_table

ENVS = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "LunarLander-v3", "BipedalWalker-v3")
LRS = [round(1e-4 * 1.5 ** k, 8) for k in range(10)]
SEEDS = 5
EPISODES = 1_000
QUERY = "learning-rate < 3e-4 and mean_return > 250"


def fill_results(home) -> int:
    """10 configs x 5 seeds x 6 envs finished runs through the store's API; the run count."""
    from daemon.store import Store, new_ulid
    home.ensure()
    store = Store(home.db)
    now = time.time() - 10_000
    count = 0
    try:
        for c, lr in enumerate(LRS):
            for seed in range(SEEDS):
                for e, env in enumerate(ENVS):
                    rng = random.Random(count)
                    base = 100.0 * (e + 1) + 20.0 * c
                    returns = [base + rng.gauss(0, 30.0) for _ in range(100)]
                    run_id = new_ulid(now + count)
                    name = f"lr{c}-{env}-s{seed}"
                    config = {"worker": "cleanrl", "algo": "ppo", "env": env, "steps": 500_000, "seed": seed,
                              "device": "cpu", "name": name, "mode": "train", "checkpoint": None,
                              "eval_episodes": 10, "params": {"learning-rate": lr, "num-envs": 4, "gamma": 0.99},
                              "run_id": run_id}
                    summary = {"steps": 500_000, "total_steps": 500_000, "episodes": EPISODES,
                               "last_return": returns[-1], "returns": returns, "best_return": max(returns),
                               "best_step": 400_000, "tags": ["episode/return"], "sps": None, "started": True,
                               "completed": True}
                    store.create_run({"id": run_id, "name": name, "worker": "cleanrl", "algo": "ppo", "env": env,
                                      "config": config, "state": "succeeded", "created_at": now + count,
                                      "started_at": now + count, "ended_at": now + count + 600, "exit_code": 0,
                                      "summary": summary, "ingest_offset": 0})
                    count += 1
    finally:
        store.close()
    return count


@contextlib.contextmanager
def results_home():
    """A daemon on a store of the 300 runs: (home, run count)."""
    from daemon import protocol as P
    from mosaic_tui.client import Client, start_daemon
    with daemon_home() as (home, pid):
        with Client(home, timeout=30) as c:
            c.call(P.SHUTDOWN)
        time.sleep(1.0)
        n = fill_results(home)
        pid = start_daemon(home)["pid"]
        try:
            yield home, n
        finally:
            os.kill(pid, 15)


def report_cli(repeats: int = 3) -> list[dict]:
    rows = []
    with results_home() as (home, n):
        for extra, what in (([], "text"), (["--json"], "--json")):
            cmd = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "report", "--by", "learning-rate",
                   "--normalize", "minmax", *extra]
            times, cpus = [], []
            for _ in range(repeats):
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                t0 = time.perf_counter()
                out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=str(ROOT))
                times.append(time.perf_counter() - t0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
            assert "0.0001" in out.stdout, out.stdout[:500]
            wall = statistics.median(times)
            from mosaic_tui.report import REPORT_REPS
            rows.append(figure(f"mosaic report, {n} finished runs (10 configs x 5 seeds x 6 envs), {what}",
                               round(wall, 2), "s", "<= 2",
                               f"median of {repeats} ({', '.join(f'{t:.2f}' for t in times)}); the process's "
                               f"CPU {statistics.median(cpus):.2f} s; 10 groups x 7 "
                               f"bootstraps of {REPORT_REPS:,} reps, profiles; load avg {os.getloadavg()[0]:.1f}",
                               wall <= 2))
    return rows


async def _query_typing(home, repeats: int) -> tuple[list[float], list[float]]:
    from textual.keys import _character_to_key

    from bench.bench_app import COLS, ROWS
    from bench.bench_scale import _key_to_paint, runs_listed
    from mosaic_tui.app import MosaicApp
    app = MosaicApp(home, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        table = await runs_listed(app, pilot)
        await pilot.press("slash")
        typed: list[tuple[str, str | None, object]] = []
        for _ in range(repeats):
            for i, ch in enumerate(QUERY):
                typed.append((_character_to_key(ch), ch, lambda q=QUERY[:i + 1]: table.query_text == q))
            for i in range(len(QUERY) - 1, -1, -1):
                typed.append(("backspace", None, lambda q=QUERY[:i]: table.query_text == q))
        cpu: list[float] = []
        latencies = await _key_to_paint(app, typed, cpu=cpu)
        return latencies, cpu


def query_typing(counts: list[int], repeats: int = 1) -> list[dict]:
    from bench.bench_scale import filled_home
    rows = []
    for n in counts:
        with filled_home(n) as (home, pid, newest):
            values, cpu = asyncio.run(_query_typing(home, repeats))
        ms = [x * 1000 for x in values]
        cpu_ms = [x * 1000 for x in cpu]
        p50, p99 = percentile(ms, 50), percentile(ms, 99)
        goal = "<= 100" if n >= 10_000 else ""
        rows.append(figure(f"app: runs table key to paint p99, / query typing, {n:,} runs", round(p99, 1), "ms", goal,
                           f"p50 {p50:.1f} ms; the app's CPU per key p50/p99 {percentile(cpu_ms, 50):.1f}/"
                           f"{percentile(cpu_ms, 99):.1f} ms; {len(ms)} keys of '{QUERY}' typed and erased; "
                           f"load avg {os.getloadavg()[0]:.1f}", p99 <= 100 if goal else None))
    return rows


async def _group_view(home) -> tuple[float, float]:
    from bench.bench_app import COLS, ROWS
    from bench.bench_scale import runs_listed
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.screens.report import for_runs
    app = MosaicApp(home, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        await runs_listed(app, pilot)
        t0 = time.perf_counter()
        screen = for_runs(list(app.link.runs), app.link.runs)   # what R on the compare screen opens
        app.push_screen(screen)
        while not (getattr(screen, "report", None) and "learning-rate" in screen.body_text()):
            await asyncio.sleep(0.005)
        opened = time.perf_counter() - t0
        while getattr(screen, "whole", None) is None:
            await asyncio.sleep(0.01)
        whole = time.perf_counter() - t0
    return opened, whole


def group_view(repeats: int = 3) -> list[dict]:
    """The app's group view of the 300 runs (the screen `R` opens from compare), pushed: to the
    groups and their point estimates drawn, and to the intervals drawn."""
    opened, whole = [], []
    with results_home() as (home, n):
        for _ in range(repeats):
            o, w = asyncio.run(_group_view(home))
            opened.append(o)
            whole.append(w)
    o, w = statistics.median(opened), statistics.median(whole)
    load = os.getloadavg()[0]
    return [figure(f"app: group view open, {n} runs (10 groups x 6 envs), to the groups drawn", round(o, 2), "s",
                   "<= 1", f"median of {repeats} ({', '.join(f'{t:.2f}' for t in opened)}); point estimates; "
                   f"load avg {load:.1f}", o <= 1),
            figure(f"app: group view, {n} runs, to the bootstrap intervals drawn", round(w, 2), "s", "",
                   f"median of {repeats} ({', '.join(f'{t:.2f}' for t in whole)}); in a thread, the view "
                   "answering keys meanwhile")]


def figure_export(repeats: int = 3) -> list[dict]:
    """`mosaic report --figure intervals --out f.pdf` over the 300 runs, and their learning curves
    (1,000 episodes a run) computed and drawn to a PDF in process."""
    import tempfile

    import numpy as np

    from mosaic_tui import figures as F
    from mosaic_tui import report as R
    rows = []
    with results_home() as (home, n), tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "intervals.pdf")
        cmd = [sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "report", "--by", "learning-rate",
               "--normalize", "minmax", "--figure", "intervals", "--column", "double", "--out", out]
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=str(ROOT))
            times.append(time.perf_counter() - t0)
        assert open(out, "rb").read(4) == b"%PDF"
        wall = statistics.median(times)
        rows.append(figure(f"mosaic report --figure intervals --out f.pdf, {n} runs", round(wall, 2), "s", "<= 3",
                           f"median of {repeats} ({', '.join(f'{t:.2f}' for t in times)}); the report and the "
                           f"figure; load avg {os.getloadavg()[0]:.1f}", wall <= 3))
        from daemon import protocol as P
        from mosaic_tui.client import Client
        with Client(home, timeout=30) as c:
            runs = c.call(P.LIST, states=None)["runs"]
        report = R.build_report(runs, R.Options(by=["learning-rate"], normalize="minmax", reps=1_000))
        rng = np.random.RandomState(0)
        steps = np.linspace(500, 500_000, EPISODES)
        series = {r["id"]: (steps, np.linspace(0, 300, EPISODES) + rng.normal(0, 30, EPISODES),
                            r["started_at"] + steps / 1_000) for r in runs}
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            curve = F.curves(report, series, {r["id"]: r for r in runs})
            F.save(F.draw("curves", report, "single", curve), os.path.join(tmp, "curves.pdf"))
            times.append(time.perf_counter() - t0)
        wall = statistics.median(times)
        rows.append(figure(f"learning curves of {n} runs x {EPISODES:,} episodes to a PDF, in process",
                           round(wall, 2), "s", "", f"median of {repeats} ({', '.join(f'{t:.2f}' for t in times)}); "
                           f"10 groups, {F.CURVE_POINTS} points, {F.CURVE_REPS:,}-rep bands; reading the episodes "
                           "from the daemon not counted"))
    return rows


def run(runs=(10_000,)) -> list[dict]:
    return report_cli() + group_view() + figure_export() + query_typing(list(runs))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="10000", help="run counts for the query typing (comma-separated)")
    parser.add_argument("--only", default="", help="report_cli, group_view, figure_export, query_typing (default: all)")
    args = parser.parse_args()
    runs = [int(x) for x in args.runs.split(",") if x]
    parts = {"report_cli": report_cli, "group_view": group_view, "figure_export": figure_export,
             "query_typing": lambda: query_typing(runs)}
    rows = []
    for name in (args.only.split(",") if args.only else list(parts)):
        rows += parts[name]()
    print_table(rows)


if __name__ == "__main__":
    main()
