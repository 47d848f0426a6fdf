"""Telemetry through the daemon: ingest rate with zero loss, delivery latency, idle cost.

    python -m bench.bench_telemetry

1. Throughput: 16 synthetic workers write as fast as they can into their
   events.jsonl; the daemon ingests and pushes every line to 2 subscribed
   clients (separate processes). The workers are started first and held at a
   start file (their interpreters' start-up is not telemetry); figure: lines/s
   from the start file's creation to the last line received by both clients,
   and whether each client got every line of every run exactly once, in order.
   Anchor: the raw JSON-lines parse rate of orjson on this machine (the
   daemon's parser) on the same lines, and stdlib json's; the daemon's own
   cost as lines per daemon CPU-second, beside orjson's rate.
2. Latency: one worker writes 10,000 lines/s, each line written as soon as it
   is made; p50/p99 from the line's timestamp to its receipt by each client.
3. Idle daemon: RSS, and CPU over 10 s with no runs (no busy polling).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from bench.common import ROOT, cpu_seconds, daemon_home, figure, percentile, print_table, rss_bytes
from daemon import protocol as P

WORKERS = 16
LINES_PER_WORKER = 60_000
LATENCY_RATE = 10_000
LATENCY_SECONDS = 5


def client_main(home_path: str, expect_runs: int, lines: int, timeout: float) -> None:
    """A subscriber process: counts every scalar of every run, reports JSON on stdout."""
    from daemon import protocol as P
    from daemon.home import Home
    from mosaic_tui.client import Client
    client = Client(Home.resolve(home_path), timeout=30, name="bench")
    client.call(P.SUBSCRIBE, events="*")
    print("ready", flush=True)
    last_step: dict[str, int] = {}
    ordered = True
    latencies: list[float] = []
    first_t = None
    last_recv = None
    deadline = time.monotonic() + timeout
    done = 0
    for method, params in client.notifications(timeout=30):
        if method != P.NOTIFY_EVENTS:
            continue
        now = time.time()
        run = params["run"]
        prev = last_step.get(run, 0)
        for ev in params["events"]:
            if ev["type"] == "run_started" and (first_t is None or ev["t"] < first_t):
                first_t = ev["t"]
            if ev["type"] != "scalar":
                continue
            step = ev["step"]
            if step != prev + 1:
                ordered = False
            prev = step
            latencies.append(now - ev["t"])
        last_step[run] = prev
        last_recv = now
        done = sum(1 for s in last_step.values() if s >= lines)
        if done >= expect_runs or time.monotonic() > deadline:
            break
    received = sum(last_step.values())
    lat = sorted(latencies[len(latencies) // 10:])  # skip start-up
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"runs_complete": done, "received": received, "ordered": ordered, "first_t": first_t,
                      "last_recv": last_recv, "p50": percentile(lat, 50), "p99": percentile(lat, 99),
                      "cpu": usage.ru_utime + usage.ru_stime}))


def _clients(home, n_runs: int, lines: int, timeout: float) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-m", "bench.bench_telemetry", "--client", str(home.root),
                               str(n_runs), str(lines), str(timeout)], stdout=subprocess.PIPE, text=True,
                              cwd=str(ROOT)) for _ in range(2)]
    for p in procs:
        assert p.stdout.readline().strip() == "ready"
    return procs


def _submit(client, steps: int, **params) -> str:
    from daemon import protocol as P
    run = client.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": steps,
                                        "params": {"tags": 1, "episode_every": 0, **params}})
    return run["id"]


def parse_anchor() -> tuple[float, float]:
    import orjson
    # the line the synthetic workers write (the SDK's emitter, tags=1); lines per
    # CPU-second, so that a machine loaded by others does not deflate the anchor
    # the daemon's CPU per million lines is set beside
    line = orjson.dumps({"v": 1, "type": "scalar", "t": time.time(), "tag": "synthetic/value_0",
                         "value": 123.0, "step": 123456})
    lines = [line] * 200_000
    t0 = time.process_time()
    for ln in lines:
        orjson.loads(ln)
    fast = len(lines) / (time.process_time() - t0)
    t0 = time.process_time()
    for ln in lines:
        json.loads(ln)
    slow = len(lines) / (time.process_time() - t0)
    return fast, slow


def throughput(home, daemon_pid: int, lines: int = LINES_PER_WORKER) -> dict:
    """WORKERS synthetic runs held at a start file, then let go: lines/s to the last
    line both clients received, daemon CPU-s from the start, every line there once in order."""
    from daemon import protocol as P
    from mosaic_tui.client import Client
    clients = _clients(home, WORKERS, lines, timeout=240)
    start_file = home.root / "start"
    with Client(home, name="bench-submit") as c:
        ids = [_submit(c, lines, rate=0, start_file=str(start_file)) for _ in range(WORKERS)]
        deadline = time.monotonic() + 120
        while any(c.call(P.GET, run=run_id)["state"] != P.RUNNING for run_id in ids):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not all start within 120 s")
            time.sleep(0.05)
    daemon_cpu0 = cpu_seconds(daemon_pid)
    go = time.time()
    start_file.touch()
    results = [json.loads(p.communicate(timeout=300)[0].strip().splitlines()[-1]) for p in clients]
    daemon_cpu = cpu_seconds(daemon_pid) - daemon_cpu0
    total = WORKERS * lines
    # the writers' CPU (whole processes: start-up, the wait, the lines) from their supervisors' exit records
    writers_cpu = 0.0
    for run_id in ids:
        exit_file = home.run_dir(run_id) / "exit.json"
        deadline = time.monotonic() + 30
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        writers_cpu += json.loads(exit_file.read_text()).get("cpu_s", 0.0)
    complete = all(r["runs_complete"] == WORKERS and r["received"] == total and r["ordered"] for r in results)
    elapsed = max(r["last_recv"] for r in results) - go
    rate = total / elapsed
    return {"rate": rate, "complete": complete, "daemon_cpu": daemon_cpu, "total": total, "elapsed": elapsed,
            "received": sum(r["received"] for r in results), "writers_cpu": writers_cpu,
            "clients_cpu": sum(r["cpu"] for r in results)}


def emitter_cost(lines: int = 300_000) -> tuple[float, float]:
    """CPU microseconds per scalar in a worker: the SDK's Emitter.scalar (writing to /dev/null),
    and orjson encoding the same event alone."""
    import orjson

    from workers.sdk.telemetry import Emitter
    fd = os.open(os.devnull, os.O_WRONLY)
    emitter = Emitter(fd)
    t0 = time.process_time()
    for step in range(lines):
        emitter.scalar("synthetic/value_0", 123.0, step)
    emitter.close()
    per_line = (time.process_time() - t0) / lines * 1e6
    os.close(fd)
    t0 = time.process_time()
    for step in range(lines):
        orjson.dumps({"v": 1, "type": "scalar", "t": time.time(), "tag": "synthetic/value_0", "value": 123.0,
                      "step": step})
    return per_line, (time.process_time() - t0) / lines * 1e6


def run() -> list[dict]:
    from mosaic_tui.client import Client
    rows = []
    orjson_rate, json_rate = parse_anchor()

    with daemon_home(max_runs=WORKERS) as (home, daemon_pid):
        # -- idle ------------------------------------------------------------
        time.sleep(1.0)
        cpu0 = cpu_seconds(daemon_pid)
        time.sleep(10.0)
        idle_cpu = (cpu_seconds(daemon_pid) - cpu0) / 10.0 * 100
        idle_rss = rss_bytes(daemon_pid) / 1e6
        rows.append(figure("daemon idle RSS", idle_rss, "MB", "<= 60"
                           , "", idle_rss <= 60))
        rows.append(figure("daemon idle CPU", idle_cpu, "% of a core", "~0 (no busy polling)", "", idle_cpu < 0.5))

        # -- throughput ------------------------------------------------------
        got = throughput(home, daemon_pid)
        rate, complete, daemon_cpu, total = got["rate"], got["complete"], got["daemon_cpu"], got["total"]
        rows.append(figure("telemetry lines/s, 16 workers -> 2 clients", rate, "lines/s", ">= 300,000",
                           f"{rate / orjson_rate:.2f}x orjson's bare parse; MOSAIC ~10,000/s",
                           rate >= 300_000 and complete))
        rows.append(figure("lines lost or reordered (both clients)", 0 if complete else
                           total * 2 - got["received"], "lines", "0", "", complete))
        rows.append(figure("daemon CPU per million lines", daemon_cpu / total * 1e6, "s", "",
                           f"{total / daemon_cpu / orjson_rate:.2f}x orjson's bare parse rate per CPU-second"
                           if daemon_cpu else "", None))
        rows.append(figure("JSON-lines parse rate, orjson (daemon's parser)", orjson_rate, "lines/CPU-s", "",
                           f"stdlib json {json_rate:,.0f}/CPU-s", None))
        # where the machine's CPU went in that window: the 2 cores are shared by all of them
        writers, clients = got["writers_cpu"] / total * 1e6, got["clients_cpu"] / 2 / total * 1e6
        rows.append(figure("writers' CPU per million lines (16 synthetic workers, whole processes)", writers, "s", "",
                           f"window {got['elapsed']:.2f} s x 2 cores = {2 * got['elapsed']:.1f} CPU-s; daemon "
                           f"{daemon_cpu:.2f}, writers {got['writers_cpu']:.2f}, clients {got['clients_cpu']:.2f}",
                           None))
        rows.append(figure("each client's CPU per million lines (decode and check every event)", clients, "s", "",
                           "", None))
    per_line, orjson_only = emitter_cost()
    rows.append(figure("worker side: Emitter.scalar, CPU per line", per_line, "us", "",
                       f"orjson.dumps of the event alone {orjson_only:.2f} us", None))

    # -- latency: a home of its own, or the clients (subscribed to every run)
    # would first be served the throughput runs' million lines from disk
    with daemon_home(max_runs=WORKERS) as (home, daemon_pid):
        lines = LATENCY_RATE * LATENCY_SECONDS
        clients = _clients(home, 1, lines, timeout=120)
        with Client(home, name="bench-submit") as c:
            _submit(c, lines, rate=LATENCY_RATE, unbuffered=True)
            # the daemon times each piece of its loop's work (daemon/stalls.py): from here on, the
            # longest one while the lines flow, the likeliest cause of a p99 tail
            c.call(P.STATUS, reset_stalls=True)
            results = [json.loads(p.communicate(timeout=180)[0].strip().splitlines()[-1]) for p in clients]
            stall = c.call(P.STATUS)["stalls"]
        p50 = max(r["p50"] for r in results) * 1000
        p99 = max(r["p99"] for r in results) * 1000
        rows.append(figure("delivery latency p50 at 10,000 lines/s", p50, "ms", "", "write -> client receipt", None))
        rows.append(figure("delivery latency p99 at 10,000 lines/s", p99, "ms", "<= 10", "write -> client receipt",
                           p99 <= 10))
        rows.append(figure("the daemon loop's longest stall meanwhile", stall["longest_ms"], "ms", "",
                           f"in: {stall['in']} ({stall['timed']:,} pieces of work timed)", None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", nargs=4, metavar=("HOME", "RUNS", "LINES", "TIMEOUT"))
    args = parser.parse_args()
    if args.client:
        client_main(args.client[0], int(args.client[1]), int(args.client[2]), float(args.client[3]))
        return
    print_table(run())


if __name__ == "__main__":
    main()
