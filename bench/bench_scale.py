"""Scale: many finished runs, one long run, many live runs.

    python -m bench.bench_scale [--runs 1000,10000] [--points 1000000,10000000] [--live 100]

1. N finished runs in the store (written through the store's own API, each
   with a config and a summary the size a real run has): `mosaic ls` wall
   time, daemon RSS with them loaded, the app's first screen (spawn to the
   newest run's name drawn). Each N printed, so the cost curve shows.
2. One run with P scalar points in its events.jsonl (written directly, the
   lines a worker writes): `mosaic metrics RUN --csv` lines/s to /dev/null.
3. L synthetic runs at 100 scalars/s each: the daemon's CPU and RSS over 20 s.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, cpu_seconds, daemon_home, figure, print_table, rss_bytes

TAGS = ("charts/episodic_return", "losses/value_loss", "losses/policy_loss", "charts/SPS")


def _summary(i: int) -> dict:
    returns = [float((i * 7 + k) % 500) for k in range(100)]
    return {"steps": 50_000, "total_steps": 50_000, "lines": 12_000, "invalid": 0, "episodes": 100,
            "last_return": returns[-1], "returns": returns, "best_return": max(returns), "best_step": 40_000,
            "tags": list(TAGS) + ["episode/return", "episode/length"], "sps": None, "started": True,
            "completed": True, "failed_reason": None, "last_event_t": time.time(), "checkpoints": [],
            "phase": None, "irregular_from": None}


def fill_store(home, n: int) -> str:
    """n finished runs through the store's API; returns the newest run's name."""
    from daemon.store import Store, new_ulid
    home.ensure()
    store = Store(home.db)
    now = time.time() - n
    name = ""
    try:
        for i in range(n):
            run_id = new_ulid(now + i)
            name = f"scale-{i:05d}"
            config = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 50_000, "seed": i,
                      "device": "cpu", "name": name, "params": {"learning-rate": 2.5e-4, "num-envs": 4,
                                                                "num-steps": 128, "gamma": 0.99},
                      "mode": "train", "checkpoint": None, "eval_episodes": 10,
                      "frames": {"enabled": False, "fps": 15.0, "max_dim": 400, "grid": 1}, "run_id": run_id}
            store.create_run({"id": run_id, "name": name, "worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1",
                              "config": config, "state": "succeeded", "created_at": now + i,
                              "started_at": now + i, "ended_at": now + i + 60, "exit_code": 0,
                              "summary": _summary(i), "ingest_offset": 0})
    finally:
        store.close()
    return name


def _timed(cmd: list[str], repeats: int = 3, stdout=subprocess.DEVNULL) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=stdout, cwd=str(ROOT))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def many_runs(counts: list[int]) -> list[dict]:
    from bench.bench_app import PtyApp
    rows = []
    for n in counts:
        with daemon_home() as (home, pid):
            home.ensure()
            # the daemon was started on an empty store: restart it on the filled one
            from mosaic_tui.client import Client, start_daemon
            with Client(home, timeout=30) as c:
                from daemon import protocol as P
                c.call(P.SHUTDOWN)
            time.sleep(1.0)
            newest = fill_store(home, n)
            pid = start_daemon(home)["pid"]
            ls = _timed([sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "ls"])
            rss = rss_bytes(pid) / 1e6
            times = []
            for _ in range(3):
                app = PtyApp(home)
                try:
                    times.append(app.read_until(newest.encode(), timeout=60))
                finally:
                    app.quit()
            first = statistics.median(times)
            os.kill(pid, 15)
        rows.append(figure(f"mosaic ls, {n:,} finished runs", round(ls, 3), "s", "<= 0.5" if n >= 10_000 else "",
                           "", ls <= 0.5 if n >= 10_000 else None))
        rows.append(figure(f"daemon RSS, {n:,} runs in the store", round(rss, 1), "MB",
                           "<= 150" if n >= 10_000 else "", "", rss <= 150 if n >= 10_000 else None))
        rows.append(figure(f"app first screen, {n:,} runs", round(first, 3), "s", "<= 1" if n >= 10_000 else "",
                           "", first <= 1 if n >= 10_000 else None))
    return rows


def long_run(points: list[int]) -> list[dict]:
    from daemon.store import Store, new_ulid
    from workers.sdk import telemetry as tm
    rows = []
    for n in points:
        with daemon_home() as (home, pid):
            run_id = new_ulid()
            run_dir = home.run_dir(run_id)
            run_dir.mkdir(parents=True)
            t = time.time()
            with open(run_dir / "events.jsonl", "wb") as f:
                batch = []
                for step in range(1, n + 1):
                    batch.append(b'{"v":1,"type":"scalar","t":%.3f,"tag":"%s","value":%.6f,"step":%d}\n'
                                 % (t + step * 1e-4, TAGS[step % 4].encode(), (step % 997) / 997, step))
                    if len(batch) == 100_000:
                        f.writelines(batch)
                        batch.clear()
                f.writelines(batch)
            size = (run_dir / "events.jsonl").stat().st_size
            summary = dict(_summary(0), lines=n, steps=n, tags=list(TAGS))
            store = Store(home.db)
            store.create_run({"id": run_id, "name": "long", "worker": "synthetic", "algo": "emit", "env": "none",
                              "config": {"worker": "synthetic", "algo": "emit", "env": "none", "params": {},
                                         "run_id": run_id}, "state": "succeeded", "created_at": t,
                              "ended_at": t + 1, "summary": summary, "ingest_offset": size})
            store.close()
            del tm
            secs = _timed([sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "metrics", "long",
                           "--csv"], repeats=1)
        rate = n / secs
        goal = ">= 1,000,000" if n >= 10_000_000 else ""
        rows.append(figure(f"mosaic metrics --csv, one run of {n:,} points", round(rate), "lines/s", goal, "",
                           rate >= 1e6 if goal else None))
    return rows


def live_runs(count: int, seconds: float = 20.0) -> list[dict]:
    from bench.bench_app import submit_synthetic, wait_state
    with daemon_home(max_runs=count) as (home, pid):
        ids = [submit_synthetic(home, f"live-{i}", 10_000_000, 100, tags=1, episode_every=0)
               for i in range(count)]
        wait_state(home, ids, "running", timeout=120)
        time.sleep(3)
        c0 = cpu_seconds(pid)
        time.sleep(seconds)
        cpu = (cpu_seconds(pid) - c0) / seconds * 100
        rss = rss_bytes(pid) / 1e6
        subprocess.run(["pkill", "-TERM", "-f", f"synthetic_worker.*{home.root}"], check=False)
    return [figure(f"daemon CPU, {count} live runs at 100 scalars/s", round(cpu, 1), "% of a core", "",
                   f"{count * 100:,} lines/s in all", None),
            figure(f"daemon RSS, {count} live runs", round(rss, 1), "MB", "", "", None)]


def run(runs=(1_000, 10_000), points=(1_000_000, 10_000_000), live=100) -> list[dict]:
    return many_runs(list(runs)) + long_run(list(points)) + live_runs(live)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="1000,10000")
    parser.add_argument("--points", default="1000000,10000000")
    parser.add_argument("--live", type=int, default=100)
    args = parser.parse_args()
    print_table(run([int(x) for x in args.runs.split(",") if x], [int(x) for x in args.points.split(",") if x],
                    args.live))


if __name__ == "__main__":
    main()
