"""Scale: many finished runs, one long run, many live runs.

    python -m bench.bench_scale [--runs 1000,10000] [--points 1000000,10000000] [--live 100]

1. N finished runs in the store (written through the store's own API, each
   with a config and a summary the size a real run has): `mosaic ls` wall
   time, daemon RSS with them loaded, the app's first screen (spawn to the
   newest run's name drawn). Each N printed, so the cost curve shows.
2. One run with P scalar points in its events.jsonl (written directly, the
   lines a worker writes): `mosaic metrics RUN --csv` lines/s to /dev/null.
3. L synthetic runs at 100 scalars/s each: the daemon's CPU and RSS over 20 s.
4. The app on N finished runs (in-process, connected to the daemon): key to paint
   (the key sent until the screen painted its effect) for j/k, page down/up, G/g
   and each letter of a `/` filter typed and erased: p50 and p99.
5. The app on one run of P points: the Metrics tab opened (first plot painted, and
   the whole history in and painted), a redraw of every plot (log y toggled, key to
   paint), the app's RSS once the history is in.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import time

from bench.common import ROOT, cpu_seconds, daemon_home, figure, percentile, print_table, rss_bytes

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


@contextlib.contextmanager
def filled_home(n: int):
    """A daemon on a store of n finished runs: (home, daemon pid, the newest run's name)."""
    from daemon import protocol as P
    from mosaic_tui.client import Client, start_daemon
    with daemon_home() as (home, pid):
        home.ensure()
        # the daemon was started on an empty store: restart it on the filled one
        with Client(home, timeout=30) as c:
            c.call(P.SHUTDOWN)
        time.sleep(1.0)
        newest = fill_store(home, n)
        pid = start_daemon(home)["pid"]
        try:
            yield home, pid, newest
        finally:
            os.kill(pid, 15)


def many_runs(counts: list[int]) -> list[dict]:
    from bench.bench_app import PtyApp
    rows = []
    for n in counts:
        with filled_home(n) as (home, pid, newest):
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
        rows.append(figure(f"mosaic ls, {n:,} finished runs", round(ls, 3), "s", "<= 0.5" if n >= 10_000 else "",
                           "", ls <= 0.5 if n >= 10_000 else None))
        rows.append(figure(f"daemon RSS, {n:,} runs in the store", round(rss, 1), "MB",
                           "<= 150" if n >= 10_000 else "", "", rss <= 150 if n >= 10_000 else None))
        rows.append(figure(f"app first screen, {n:,} runs", round(first, 3), "s", "<= 1" if n >= 10_000 else "",
                           "", first <= 1 if n >= 10_000 else None))
    return rows


def write_long_run(home, n: int, episode_every: int = 0) -> str:
    """One finished run of n scalar points (4 tags) in its events.jsonl, as a worker writes them
    (with an episode line after every ``episode_every`` points, as a real run has); its id."""
    from daemon.store import Store, new_ulid
    run_id = new_ulid()
    run_dir = home.run_dir(run_id)
    run_dir.mkdir(parents=True)
    t = time.time()
    with open(run_dir / "events.jsonl", "wb") as f:
        batch = []
        for step in range(1, n + 1):
            batch.append(b'{"v":1,"type":"scalar","t":%.3f,"tag":"%s","value":%.6f,"step":%d}\n'
                         % (t + step * 1e-4, TAGS[step % 4].encode(), (step % 997) / 997, step))
            if episode_every and step % episode_every == 0:
                batch.append(b'{"v":1,"type":"episode","t":%.3f,"step":%d,"return":%.3f,"length":%d}\n'
                             % (t + step * 1e-4, step, (step % 500) / 5, episode_every))
            if len(batch) >= 100_000:
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
    return run_id


def long_run(points: list[int]) -> list[dict]:
    """`mosaic metrics RUN --csv` to /dev/null (the CLI's start-up included; the median of 3
    runs): scalars only, and
    at the largest size also a run with an episode every 100 points (a real run's pages hold
    episodes: the scalars between them are still cut without decoding, the episodes decoded)."""
    rows = []
    cases = [(n, 0) for n in points] + [(max(points), 100)]
    for n, episode_every in cases:
        with daemon_home() as (home, pid):
            write_long_run(home, n, episode_every)
            os.sync()      # the file's dirty pages written back before, not during, the timed runs
            times = [_timed([sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), "metrics", "long",
                             "--csv"], repeats=1) for _ in range(3)]
        lines = n + (n // episode_every * 2 if episode_every else 0)    # an episode is two rows
        rate = lines / statistics.median(times)
        goal = ">= 1,000,000" if n >= 10_000_000 and not episode_every else ""
        what = f", an episode every {episode_every}" if episode_every else ""
        rows.append(figure(f"mosaic metrics --csv, one run of {n:,} points{what}", round(rate), "lines/s", goal,
                           f"median of 3 runs ({lines / max(times):,.0f}-{lines / min(times):,.0f}); "
                           f"load avg {os.getloadavg()[0]:.1f}", rate >= 1e6 if goal else None))
    return rows


def live_runs(count: int, seconds: float = 20.0) -> list[dict]:
    """L synthetic runs at 100 scalars/s: the daemon's CPU and RSS, then the app's CPU (the real
    `mosaic` in a pseudo-terminal, on its runs table, every row changing) over the same span."""
    from bench.bench_app import PtyApp, submit_synthetic, wait_state
    with daemon_home(max_runs=count) as (home, pid):
        ids = [submit_synthetic(home, f"live-{i}", 10_000_000, 100, tags=1, episode_every=0)
               for i in range(count)]
        wait_state(home, ids, "running", timeout=120)
        time.sleep(3)
        c0 = cpu_seconds(pid)
        time.sleep(seconds)
        cpu = (cpu_seconds(pid) - c0) / seconds * 100
        rss = rss_bytes(pid) / 1e6
        app = PtyApp(home)
        try:
            app.read_until(b"live-", timeout=60)
            app.drain(3.0)   # settle
            a0, t0 = cpu_seconds(app.proc.pid), time.monotonic()
            app.drain(seconds)
            app_cpu = 100 * (cpu_seconds(app.proc.pid) - a0) / (time.monotonic() - t0)
        finally:
            app.quit()
    return [figure(f"daemon CPU, {count} live runs at 100 scalars/s", round(cpu, 1), "% of a core", "",
                   f"{count * 100:,} lines/s in all", None),
            figure(f"daemon RSS, {count} live runs", round(rss, 1), "MB", "", "", None),
            figure(f"app: CPU on its runs table, {count} live runs", round(app_cpu, 1), "% of a core", "< 10",
                   f"a run record changes about twice a second each; load avg {os.getloadavg()[0]:.1f}",
                   app_cpu < 10)]


async def runs_listed(app, pilot):
    """The runs table once it lists every run the app has loaded (and has settled a moment)."""
    from mosaic_tui.widgets.runs_table import RunsTable
    table = app.screen.query_one(RunsTable)
    deadline = time.monotonic() + 120
    while not (app.link.loaded and table.row_count == len(app.link.runs) > 0):
        if time.monotonic() > deadline:
            raise TimeoutError("the runs were not listed")
        await pilot.pause(0.05)
    await pilot.pause(0.5)
    return table


async def _key_to_paint(app, presses: list[tuple[str, str | None, object]], gap: float = 0.05,
                        cpu: list[float] | None = None) -> list[float]:
    """Per (key, character, done) sent to the app: seconds until the first paint (the
    compositor's update handed to the terminal) made once done() holds, i.e. that shows
    the key's effect. The terminal write itself is left out (headless). ``cpu`` gets this
    process's CPU seconds over the same span (what the key cost, whatever the machine's load)."""
    from textual import events
    painted = asyncio.Event()
    waiting: dict = {}
    display = app._display

    def timed_display(screen, renderable) -> None:
        display(screen, renderable)
        done = waiting.get("done")
        if renderable is not None and done is not None and done():
            waiting["at"] = time.perf_counter()
            waiting["cpu_at"] = time.process_time()
            waiting["done"] = None
            painted.set()

    app._display = timed_display
    latencies = []
    for key, character, done in presses:
        painted.clear()
        waiting["done"] = done
        event = events.Key(key, character)
        event.set_sender(app)
        c0, t0 = time.process_time(), time.perf_counter()
        app._driver.send_message(event)   # what Pilot.press does, without its wait for idle
        await asyncio.wait_for(painted.wait(), 60)
        latencies.append(waiting["at"] - t0)
        if cpu is not None:
            cpu.append(waiting["cpu_at"] - c0)
        await asyncio.sleep(gap)
    app._display = display
    return latencies


async def _table_keys(home, repeats: int) -> dict[str, tuple[list[float], list[float]]]:
    from bench.bench_app import COLS, ROWS
    from mosaic_tui.app import MosaicApp
    app = MosaicApp(home, restore=False, remember=False, cursor_blink=False)
    out: dict[str, tuple[list[float], list[float]]] = {}

    async def timed(presses) -> tuple[list[float], list[float]]:
        cpu: list[float] = []
        return await _key_to_paint(app, presses, cpu=cpu), cpu

    async with app.run_test(size=(COLS, ROWS)) as pilot:
        table = await runs_listed(app, pilot)

        def row_is(row: int):
            return lambda: table.cursor_row == row

        last = table.row_count - 1
        page = table.scrollable_content_region.height - 1
        jk = [("j", "j", row_is(1)), ("k", "k", row_is(0))] * repeats
        out["j/k"] = await timed(jk)
        jumps = [("G", "G", row_is(last)), ("g", "g", row_is(0))] * max(1, repeats // 4)
        out["G/g"] = await timed(jumps)
        pages = [("pagedown", None, row_is(page)), ("pageup", None, row_is(0))] * max(1, repeats // 4)
        out["page down/up"] = await timed(pages)
        await pilot.press("slash")
        typed: list[tuple[str, str | None, object]] = []
        word = "scale-09"
        for _ in range(max(1, repeats // 8)):
            for i, ch in enumerate(word):
                key = "minus" if ch == "-" else ch
                typed.append((key, ch, lambda q=word[:i + 1]: table.query_text == q))
            for i in range(len(word) - 1, -1, -1):
                typed.append(("backspace", None, lambda q=word[:i]: table.query_text == q))
        out["/ filter typing"] = await timed(typed)
    return out


def table_keys(counts: list[int], repeats: int = 40) -> list[dict]:
    """The runs table's key to paint at each N (the app in this process, on the daemon's run list)."""
    rows = []
    for n in counts:
        with filled_home(n) as (home, pid, newest):
            latencies = asyncio.run(_table_keys(home, repeats))
        load = os.getloadavg()[0]
        for what, (values, cpu) in latencies.items():
            ms = [x * 1000 for x in values]
            cpu_ms = [x * 1000 for x in cpu]
            p50, p99 = percentile(ms, 50), percentile(ms, 99)
            goal = "<= 100" if n >= 10_000 else ""
            rows.append(figure(f"app: runs table key to paint p99, {what}, {n:,} runs", round(p99, 1), "ms", goal,
                               f"p50 {p50:.1f} ms; the app's CPU per key p50/p99 {percentile(cpu_ms, 50):.1f}/"
                               f"{percentile(cpu_ms, 99):.1f} ms; {len(ms)} keys; load avg {load:.1f}",
                               p99 <= 100 if goal else None))
    return rows


async def _metrics_tab(home, run_id: str, n: int, timeout: float) -> dict:
    from bench.bench_app import COLS, ROWS
    from mosaic_tui.app import MosaicApp
    app = MosaicApp(home, restore=False, remember=False, cursor_blink=False)
    result: dict = {}
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        deadline = time.monotonic() + 60
        while run_id not in app.link.runs:
            if time.monotonic() > deadline:
                raise TimeoutError("the long run was not listed")
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        rss_before = rss_bytes(os.getpid())

        def pane():
            from mosaic_tui.widgets.metrics_pane import MetricsPane
            found = app.screen.query(MetricsPane)
            return found.first() if found else None

        def history_in() -> bool:
            series = app.link.series.get(run_id)
            return series is not None and sum(s.total for s in series.tags.values()) >= n

        painted: dict = {}
        display = app._display

        def timed_display(screen, renderable) -> None:
            display(screen, renderable)
            if renderable is None:
                return
            now = time.perf_counter()
            p = pane()
            if "first" not in painted and p is not None and p.plots:
                painted["first"] = now
            if "all" not in painted and history_in() and p is not None and len(p.plots) >= len(TAGS):
                painted["all"] = now

        app._display = timed_display
        t0 = time.perf_counter()
        app.open_run(run_id)
        deadline = time.monotonic() + timeout
        while "all" not in painted and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        app._display = display
        series = app.link.series.get(run_id)
        result["points_in"] = sum(s.total for s in series.tags.values()) if series else 0
        result["held"] = sum(s.n for s in series.tags.values()) if series else 0
        result["first"] = painted.get("first", float("nan")) - t0
        result["all"] = painted.get("all", float("nan")) - t0
        result["rss"] = rss_bytes(os.getpid()) / 1e6
        result["rss_before"] = rss_before / 1e6
        if "all" in painted:
            p = pane()
            p.focus()
            await pilot.pause(0.2)
            flips = [("l", "l", (lambda want: lambda: p.options.logy == want)(i % 2 == 0)) for i in range(6)]
            result["redraw"] = statistics.median(await _key_to_paint(app, flips, gap=0.1))
    return result


def metrics_tab(points: list[int], timeout: float = 120.0) -> list[dict]:
    """The Metrics tab of one run of P points: open (first plot, whole history), redraw, RSS."""
    rows = []
    for n in points:
        with daemon_home() as (home, pid):
            run_id = write_long_run(home, n)
            # The file was written behind the daemon's back: its history (daemon/history.py) is
            # built from it once, as the ingest of a real run builds it while the run trains.
            from mosaic_tui.client import Client
            t0 = time.perf_counter()
            with Client(home) as client:
                client.call("history", run=run_id)
            build = time.perf_counter() - t0
            r = asyncio.run(_metrics_tab(home, run_id, n, timeout))
        big = n >= 10_000_000
        complete = r["points_in"] >= n
        anchor = (f"first plot painted after {r['first']:.2f} s; {r['held']:,} points held (buckets); " +
                  (f"all {n:,} points in" if complete else
                   f"only {r['points_in']:,} of {n:,} points in after {timeout:.0f} s") +
                  f"; load avg {os.getloadavg()[0]:.1f}")
        rows.append(figure(f"app: Metrics tab open, one run of {n:,} points (whole history painted)",
                           round(r["all"], 2) if complete else None, "s", "<= 1" if big else "", anchor,
                           (complete and r["all"] <= 1) if big else None))
        rows.append(figure(f"daemon: history of {n:,} points built from a file it had not ingested", round(build, 2),
                           "s", "", "once; a run the daemon ingests has it built as it goes", None))
        if "redraw" in r:
            ms = r["redraw"] * 1000
            rows.append(figure(f"app: Metrics tab redraw (log y, key to paint), {n:,} points", round(ms, 1), "ms",
                               "<= 50" if big else "", f"{len(TAGS)} plots", ms <= 50 if big else None))
        rows.append(figure(f"app: RSS with the Metrics tab of {n:,} points", round(r["rss"], 1), "MB",
                           "<= 500" if big else "", f"{r['rss_before']:.0f} MB before the run was opened",
                           r["rss"] <= 500 if big else None))
    return rows


def run(runs=(1_000, 10_000), points=(1_000_000, 10_000_000), live=100) -> list[dict]:
    return (many_runs(list(runs)) + table_keys(list(runs)) + long_run(list(points)) + metrics_tab(list(points))
            + live_runs(live))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", default="1000,10000")
    parser.add_argument("--points", default="1000000,10000000")
    parser.add_argument("--live", type=int, default=100)
    parser.add_argument("--only", default="", help="comma-separated: many_runs,table_keys,long_run,metrics_tab,"
                                                   "live_runs (default: all)")
    args = parser.parse_args()
    runs = [int(x) for x in args.runs.split(",") if x]
    points = [int(x) for x in args.points.split(",") if x]
    if not args.only:
        print_table(run(runs, points, args.live))
        return
    parts = {"many_runs": lambda: many_runs(runs), "table_keys": lambda: table_keys(runs),
             "long_run": lambda: long_run(points), "metrics_tab": lambda: metrics_tab(points),
             "live_runs": lambda: live_runs(args.live)}
    rows = []
    for name in args.only.split(","):
        rows += parts[name]()
    print_table(rows)


if __name__ == "__main__":
    main()
