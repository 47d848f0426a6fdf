"""Helpers shared by the benchmarks: a throwaway daemon home, figures, the table."""
from __future__ import annotations

import contextlib
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent

# Managed and bare sides of a worker bench run alike: the bare process gets the
# nice level and the thread count the daemon gives a worker (daemon/runs.py:
# worker_nice 10 and OMP_NUM_THREADS = cores / max_runs, unless the daemon's own
# environment sets OMP_NUM_THREADS, which `alike()` does before the daemon starts).
WORKER_NICE = 10
ALIKE_THREADS = 1


def alike(threads: int = ALIKE_THREADS) -> None:
    """Set the thread count both sides use: the daemon started after this passes it to its
    workers, and run_bare's processes inherit it."""
    os.environ["OMP_NUM_THREADS"] = str(threads)


def run_bare(command: list[str], extra_env: dict | None = None, timeout: float = 1200,
             **kwargs) -> subprocess.CompletedProcess:
    """The bare side: a process at the workers' nice level, in this environment (after `alike()`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})}
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout,
                          preexec_fn=lambda: os.nice(WORKER_NICE), **{"cwd": str(ROOT), **kwargs})


def alternate(pairs: int, a: Callable[[], Any], b: Callable[[], Any]) -> tuple[list, list]:
    """``pairs`` results of ``a()`` and of ``b()``, run A B, then B A, ...: whatever drifts over
    the minutes a pair takes (the machine's load, its clock) favours neither side. Result i of
    each list is pair i's."""
    results_a, results_b = [], []
    for index in range(pairs):
        if index % 2 == 0:
            results_a.append(a())
            results_b.append(b())
        else:
            results_b.append(b())
            results_a.append(a())
    return results_a, results_b


def alike_settings(**more) -> str:
    """What both sides ran with, printed beside the figure."""
    items = {"nice": WORKER_NICE, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"), **more}
    return "both sides: " + ", ".join(f"{k} {v}" for k, v in items.items())


def figure(name: str, value: float | None, unit: str, goal: str, anchor: str = "", ok: bool | None = None) -> dict:
    return {"figure": name, "value": value, "unit": unit, "goal": goal, "anchor": anchor, "ok": ok}


def median(values) -> float:
    return statistics.median(values)


def percentile(values, q: float) -> float:
    data = sorted(values)
    if not data:
        return float("nan")
    k = min(len(data) - 1, max(0, int(round(q / 100 * (len(data) - 1)))))
    return data[k]


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def daemon_home(max_runs: int = 64, settings: dict | None = None) -> Iterator[Any]:
    """A fresh home with a running daemon (with these settings.json values);
    everything is stopped afterwards."""
    import json

    from daemon.home import Home
    from mosaic_tui.client import start_daemon
    path = tempfile.mkdtemp(prefix="mb-", dir="/tmp")
    home = Home.resolve(path)
    if settings:
        home.settings_file.write_text(json.dumps(settings))
    info = start_daemon(home, max_runs=max_runs)
    if threading.current_thread() is threading.main_thread():
        # a bench stopped with SIGTERM still reaches the finally below (runs outlive their
        # daemon by design: without it they would go on in a deleted home)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        yield home, info["pid"]
    finally:
        stop_runs(home)
        try:
            os.kill(info["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        subprocess.run(["pkill", "-KILL", "-f", f"daemon.shim {path}"], check=False)
        kill_processes_under(path)
        time.sleep(0.2)
        shutil.rmtree(path, ignore_errors=True)


def stop_runs(home, timeout: float = 30.0) -> None:
    """Cancel the home's runs that have not ended and wait for them (the daemon kills their trees)."""
    from daemon import protocol as P
    from mosaic_tui.client import Client
    live = [s for s in P.STATES if s not in P.FINAL_STATES]
    try:
        with Client(home, timeout=10) as client:
            runs = client.call(P.LIST, brief=True, states=live)["runs"]
            for run in runs:
                with contextlib.suppress(P.RPCError):
                    client.call(P.CANCEL, run=run["id"])
            deadline = time.monotonic() + timeout
            while runs and time.monotonic() < deadline:
                time.sleep(0.2)
                runs = client.call(P.LIST, brief=True, states=live)["runs"]
    except (OSError, P.RPCError):
        pass  # no daemon to ask: kill_processes_under is what is left


def kill_processes_under(path: str) -> None:
    """SIGKILL every process whose working directory is inside ``path`` (a run's worker
    runs in its run directory), whatever its command line says."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if cwd == path or cwd.startswith(path + "/"):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(entry), signal.SIGKILL)


def finished_run_events(client, home, config: dict) -> list[dict]:
    """Submit a run, wait for it to end, and return its events (RuntimeError if it did not succeed):
    the managed side of the workers' managed/bare benches."""
    import json

    from daemon import protocol as P
    run = client.call(P.SUBMIT, config=config)
    while run["state"] not in P.FINAL_STATES:
        time.sleep(0.5)
        run = client.call(P.GET, run=run["id"])
    if run["state"] != P.SUCCEEDED:
        raise RuntimeError(f"managed run {run['id']} {run['state']}: {run.get('reason')}")
    with open(home.run_dir(run["id"]) / "events.jsonl") as f:
        return [json.loads(line) for line in f]


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def print_table(rows: list[dict]) -> None:
    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)
    table = [["figure", "value", "unit", "goal", "ok", "anchor"]]
    for r in rows:
        ok = "" if r.get("ok") is None else ("yes" if r["ok"] else "NO")
        table.append([r["figure"], fmt(r["value"]), r["unit"], r["goal"], ok, r.get("anchor", "")])
    widths = [max(len(str(row[i])) for row in table) for i in range(len(table[0]))]
    for i, row in enumerate(table):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))
    sys.stdout.flush()
