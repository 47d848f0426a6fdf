"""Runs on a cluster: submit to first metric, polled telemetry, the daemon following 100 jobs,
and training throughput under Slurm against the same job submitted by hand.

    python -m bench.bench_cluster [--repeats 3] [--latency-seconds 30] [--live 100] [--window 10]
                                  [--steps 20000] [--pairs 4] [--only first,latency,live,train]

Against real clusters on this machine: a single-node Slurm (tests/plugins/slurm_cluster.py, its node
declaring CPUS CPUs, more than the machine has: SlurmdParameters=config_overrides, so that 100
jobs run at once) and a two-node Ray (tests/plugins/ray_cluster.py: a head and a second node, the Jobs
API with token authentication). The daemons run with the default ``cluster_poll_seconds`` (2 s).

The home is on the same machine as the "nodes" here, so inotify would see the jobs' writes: on a
real cluster it does not (the node writes through a network filesystem), and the daemon follows a
cluster run by polling. The daemons of this bench are started with inotify withheld from cluster
runs only (``RunManager._watch`` wrapped by the launcher below: a job's events file gets no watch,
as on a cluster); local runs keep theirs. Every figure below is so "as on a cluster".

1. Submit to first metric: the same synthetic config (STEPS_FIRST steps at 100/s) placed local, on
   Slurm and on Ray, rotating A B C / B C A / C A B over REPEATS rounds; each run waits for the
   previous to end. The time from `mosaic submit` (the CLI, a process of its own) returning to
   the run's first scalar received by a client subscribed to every run's events (a thread of this
   process). Figures: the medians, each cluster's as a ratio to local's; apart, the engine's own
   queue time: Slurm's StartTime - SubmitTime (scontrol, whole seconds), Ray's from the job's
   start_time (the Jobs API's submission time, ms; it records no start of running) to the
   entrypoint's (the run's supervisor) process start (/proc, 10 ms).
2. Telemetry latency of a polled run: one Slurm run and one Ray run at once, 100 scalars/s for
   LATENCY_SECONDS, the synthetic worker's SDK emitter as a real worker has it (buffered: flushed
   every 0.1 s); each scalar's ``t`` (the worker's wall clock when it made it) to its receipt by
   the subscribed client; p50, p99, and p99 / the poll interval (goal <= 1.5).
3. The daemon's CPU following LIVE runs at 100 scalars/s each: the daemon process's user+system
   CPU time (psutil, its own; the squeue processes it waited for apart) over WINDOW seconds once
   every run is running, local runs (as bench_scale's live figure) and Slurm runs, each side in a
   fresh home and daemon started alike. The workers share the machine's 2 real cores with
   slurmd/slurmstepd and the daemon: the window is short (WINDOW s) and every run is checked to
   be running at its end.
4. Training throughput: CleanRL PPO on CartPole-v1, STEPS steps, CPU, submitted with `mosaic
   submit --placement slurm --mem 2G`, against the worker's own command line (the part after
   ``--`` of the run's job.sh) submitted by hand with `sbatch --wrap` (--mem 2G, its stdout to an
   events.jsonl of its own, the same OMP_NUM_THREADS and CUDA_VISIBLE_DEVICES). PAIRS pairs,
   each submitted together, side by side on the node (which goes first alternates): the 2 cores
   are shared with other work, and what loads them meanwhile loads both sides alike (run one
   after the other, the two sides' steps/s swung between ~1,700 and ~4,200 with that load).
   steps/s of each run: the median over its updates (but the first) of the steps between two
   ``charts/SPS`` scalars over the time between them (their ``t``), so that an update slowed by
   another process on the 2 shared cores does not move it; the last ``charts/SPS`` (CleanRL's
   global_step / elapsed) and steps / (first to last scalar's time) beside it.
   Figure: the median of the pairs' mosaic / by hand (goal >= 0.97).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Iterator

from bench.common import (
    ROOT,
    alike,
    alike_settings,
    figure,
    kill_processes_under,
    median,
    percentile,
    print_table,
    stop_runs,
)

CPUS = 128              # CPUs the Slurm node declares (the machine has 2)
REPEATS = 3             # rounds of local / Slurm / Ray for the first metric
STEPS_FIRST = 200       # steps of each of those runs, at 100 scalars/s
LATENCY_SECONDS = 30    # the polled runs of figure 2, at 100 scalars/s
LIVE = 100              # runs followed at once, figure 3
WINDOW = 10.0           # seconds over which the daemon's CPU is measured
STEPS = 20_000          # CleanRL PPO steps, figure 4
PAIRS = 4
POLL_DEFAULT = 2.0      # daemon/__main__.py: settings.get("cluster_poll_seconds", 2.0)

# The daemon, as `python -m daemon` starts it, but a cluster run's events file gets no inotify
# watch: on a cluster the node writes it through a network filesystem, which inotify does not see.
LAUNCHER = """\
import runpy
from daemon import runs
watch = runs.RunManager._watch
def blind(self, run, run_dir, shim_pid, popen, job=None):
    if job is None:
        return watch(self, run, run_dir, shim_pid, popen)
    inotify, self.inotify = self.inotify, None
    try:
        return watch(self, run, run_dir, shim_pid, popen, job=job)
    finally:
        self.inotify = inotify
runs.RunManager._watch = blind
runpy.run_module("daemon", run_name="__main__", alter_sys=True)
"""


# -- clusters and daemons ------------------------------------------------------------------
def cluster_env(slurm, ray=None) -> dict[str, str]:
    """What the daemon (and the CLI) need to reach the clusters."""
    from tests.plugins.slurm_cluster import MARKER
    env = {"SLURM_CONF": str(slurm.conf), MARKER: slurm.env[MARKER]}   # the cluster's stop finds its jobs
    if ray is not None:
        env.update(RAY_ADDRESS=ray.address, RAY_AUTH_TOKEN_PATH=str(ray.token_file))
    return env


@contextlib.contextmanager
def cluster_daemon(env: dict[str, str], max_runs: int = 8, settings: dict | None = None) -> Iterator:
    """A fresh home and its daemon (LAUNCHER), with ``env`` added to its environment; its runs
    cancelled, the daemon ended and the home removed afterwards. Yields (home, daemon pid)."""
    from daemon.home import Home
    from mosaic_tui.client import Client, DaemonUnavailable
    path = tempfile.mkdtemp(prefix="mbc-", dir="/tmp")
    home = Home.resolve(path)
    home.ensure()
    if settings:
        home.settings_file.write_text(json.dumps(settings))
    full_env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
    full_env.update(env)
    with open(home.daemon_log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-P", "-c", LAUNCHER, "--home", path, "--max-runs", str(max_runs)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                cwd=path, start_new_session=True, close_fds=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(home, timeout=5):
                    break
            except (DaemonUnavailable, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the daemon did not start: {home.daemon_log.read_text()[-2000:]}") from None
                time.sleep(0.05)
        yield home, proc.pid
    finally:
        stop_runs(home, timeout=60)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        kill_processes_under(path)
        time.sleep(0.2)
        shutil.rmtree(path, ignore_errors=True)


class Receipts(threading.Thread):
    """A client subscribed to every run's events, reading in a thread: when each run's first
    scalar arrived, and each scalar's delay from its ``t`` to its receipt."""

    def __init__(self, home):
        from daemon import protocol as P
        from mosaic_tui.client import Client
        super().__init__(daemon=True, name="receipts")
        self.client = Client(home, timeout=30, name="bench-cluster")
        self.client.call(P.SUBSCRIBE, events="*")
        self.first: dict[str, float] = {}
        self.delays: dict[str, list[float]] = {}
        self.stopping = False

    def run(self) -> None:
        from daemon import protocol as P
        while not self.stopping:
            for method, params in self.client.notifications(timeout=0.5):
                now = time.time()
                if method == P.NOTIFY_EVENTS:
                    scalars = [ev["t"] for ev in params["events"] if ev.get("type") == "scalar"]
                    if scalars:
                        self.first.setdefault(params["run"], now)
                        self.delays.setdefault(params["run"], []).extend(now - t for t in scalars)
                if self.stopping:
                    break

    def wait_first(self, run_id: str, timeout: float = 180) -> float:
        deadline = time.monotonic() + timeout
        while run_id not in self.first:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no scalar of run {run_id} within {timeout:.0f} s")
            time.sleep(0.005)
        return self.first[run_id]

    def close(self) -> None:
        self.stopping = True
        self.join(timeout=5)
        self.client.close()


def wait_final(home, run_id: str, timeout: float = 300) -> dict:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    deadline = time.monotonic() + timeout
    with Client(home, timeout=30) as client:
        while True:
            run = client.call(P.GET, run=run_id)
            if run["state"] in P.FINAL_STATES:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {run_id} still {run['state']} after {timeout:.0f} s")
            time.sleep(0.2)


def wait_running(home, ids: list[str], timeout: float) -> None:
    from daemon import protocol as P
    from mosaic_tui.client import Client
    deadline = time.monotonic() + timeout
    with Client(home, timeout=120) as client:
        while True:
            runs = {r["id"]: r["state"] for r in client.call(P.LIST, brief=True)["runs"]}
            states = [runs.get(i) for i in ids]
            if all(s == P.RUNNING for s in states):
                return
            if any(s in P.FINAL_STATES for s in states) or time.monotonic() > deadline:
                raise RuntimeError(f"not all runs running: {sorted((s, states.count(s)) for s in set(states))}")
            time.sleep(0.5)


def say(text: str) -> None:
    print(f"[bench_cluster {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def cli_submit(home, env: dict[str, str], *args: str) -> tuple[str, float, float]:
    """`mosaic submit ARGS` in a process of its own: (run id, when it was started, when it returned)."""
    from mosaic_tui.client import cli_command
    started = time.time()
    proc = subprocess.run(cli_command(home, "submit", *args), capture_output=True, text=True, cwd=str(ROOT),
                          env={**os.environ, **env}, timeout=120)
    returned = time.time()
    if proc.returncode != 0:
        raise RuntimeError(f"mosaic submit {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout.strip(), started, returned


def supervisor_started(run_dir: Path) -> float | None:
    """The wall-clock start of the run's supervisor (its job's process), from supervisor.json's
    /proc start time (clock ticks since boot), set against /proc/uptime now (btime is whole seconds)."""
    try:
        ticks = json.loads((run_dir / "supervisor.json").read_text())["supervisor_start"]
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, KeyError):
        return None
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


def slurm_time(value: str) -> float:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S").timestamp()


def events_of(path: Path) -> list[dict]:
    text = path.read_text()
    out = []
    for line in text[:text.rfind("\n") + 1].splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


# -- 1. submit to first metric -----------------------------------------------------------
def first_metric(home, env: dict, receipts: Receipts, slurm, ray, repeats: int) -> list[dict]:
    synthetic = ("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", str(STEPS_FIRST),
                 "--set", "rate=100")
    sides = ("local", "slurm", "ray") if ray is not None else ("local", "slurm")
    firsts: dict[str, list[float]] = {s: [] for s in sides}
    submits: dict[str, list[float]] = {s: [] for s in sides}
    to_supervisor: dict[str, list[float]] = {s: [] for s in sides}
    queue: dict[str, list[float]] = {"slurm": [], "ray": []}
    ray_submitted: list[float] = []     # submit returned -> the Jobs API's record of the job made
    for index in range(repeats):
        order = sides[index % len(sides):] + sides[:index % len(sides)]
        for side in order:
            run_id, started, returned = cli_submit(home, env, *synthetic, "--placement", side,
                                                   "--name", f"first-{side}-{index}")
            first = receipts.wait_first(run_id)
            firsts[side].append(first - returned)
            submits[side].append(returned - started)
            run = wait_final(home, run_id)
            if run["state"] != "succeeded":
                raise RuntimeError(f"{side} run {run_id} {run['state']}: {run.get('reason')}")
            sup = supervisor_started(home.run_dir(run_id))
            if sup is not None:
                to_supervisor[side].append(sup - returned)
            job = (run.get("resources") or {}).get("job") or ""
            if side == "slurm":
                info = slurm.job_info(job.split(":", 1)[1])
                queue["slurm"].append(slurm_time(info["StartTime"]) - slurm_time(info["SubmitTime"]))
            elif side == "ray" and sup is not None:
                submitted = ray.job(job.split(":", 1)[1])["start_time"] / 1000
                queue["ray"].append(sup - submitted)
                ray_submitted.append(submitted - returned)
    local = median(firsts["local"])
    rows = []
    for side in sides:
        value = median(firsts[side])
        spread = f"{min(firsts[side]):.2f}-{max(firsts[side]):.2f} s"
        anchor = (f"median of {repeats} ({spread}); `mosaic submit` itself {median(submits[side]):.2f} s; "
                  f"submit returned -> the run's supervisor started {median(to_supervisor[side]):+.2f} s")
        if side != "local":
            anchor = f"{value / local:.1f}x local; " + anchor
        rows.append(figure(f"submit -> first metric, synthetic run, {side}", round(value, 2), "s", "", anchor,
                           None))
    rows.append(figure("Slurm's own queue time (StartTime - SubmitTime)", median(queue["slurm"]), "s", "",
                       f"scontrol, whole seconds: {queue['slurm']}", None))
    if queue["ray"]:
        rows.append(figure("Ray's own queue and start (job start_time -> entrypoint process start)",
                           round(median(queue["ray"]), 2), "s", "",
                           "the Jobs API's start_time is the submission's; it records no start of running: "
                           + ", ".join(f"{q:.2f}" for q in queue["ray"])
                           + f"; submit returned -> the job submitted (the daemon's part) "
                             f"{median(ray_submitted):.2f} s", None))
    return rows


# -- 2. telemetry latency of a polled run ------------------------------------------------------
def polled_latency(home, env: dict, receipts: Receipts, seconds: float, with_ray: bool) -> list[dict]:
    steps = int(100 * seconds)
    synthetic = ("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", str(steps),
                 "--set", "rate=100")
    sides = ("slurm", "ray") if with_ray else ("slurm",)
    ids = {side: cli_submit(home, env, *synthetic, "--placement", side, "--name", f"latency-{side}")[0]
           for side in sides}
    for side, run_id in ids.items():
        run = wait_final(home, run_id, timeout=seconds + 180)
        if run["state"] != "succeeded":
            raise RuntimeError(f"{side} run {run_id} {run['state']}: {run.get('reason')}")
    time.sleep(1.0)
    rows = []
    for side, run_id in ids.items():
        delays = [d * 1000 for d in receipts.delays.get(run_id, [])]
        if len(delays) < steps:
            raise RuntimeError(f"{side}: only {len(delays)} of {steps} scalars received")
        p50, p99 = percentile(delays, 50), percentile(delays, 99)
        ratio = p99 / 1000 / POLL_DEFAULT
        rows.append(figure(f"telemetry latency p99, a run on {side} (polled every {POLL_DEFAULT:g} s)",
                           round(ratio, 2), "x the poll interval", "<= 1.5",
                           f"p99 {p99:,.0f} ms, p50 {p50:,.0f} ms, max {max(delays):,.0f} ms; {len(delays):,} "
                           "scalars at 100/s, the worker's emit time (its clock) -> a subscribed client's receipt",
                           ratio <= 1.5))
    return rows


# -- 3. the daemon following many runs --------------------------------------------------------------
def live_side(env: dict, count: int, window: float, placement: dict | None) -> dict:
    import psutil

    from daemon import protocol as P
    from mosaic_tui.client import Client
    with cluster_daemon(env, max_runs=count) as (home, pid):
        config = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 10_000_000,
                  "params": {"rate": 100, "tags": 1, "episode_every": 0}}
        if placement:
            config["placement"] = placement
        t0 = time.monotonic()
        side = (placement or {}).get("backend", "local")
        say(f"{count} {side} runs: submitting")
        with Client(home, timeout=120) as client:
            ids = [client.call(P.SUBMIT, config={**config, "name": f"live-{i}"})["id"] for i in range(count)]
        say(f"{count} {side} runs: submitted in {time.monotonic() - t0:.0f} s")
        wait_running(home, ids, timeout=600)
        up = time.monotonic() - t0
        say(f"{count} {side} runs: all running after {up:.0f} s")
        time.sleep(3)
        daemon = psutil.Process(pid)
        files = [home.run_dir(i) / "events.jsonl" for i in ids]
        sizes = [f.stat().st_size for f in files]
        before, w0 = daemon.cpu_times(), time.monotonic()
        time.sleep(window)
        after, elapsed = daemon.cpu_times(), time.monotonic() - w0
        written = 0     # the lines the workers wrote in the window: were they at their rate?
        for f, size in zip(files, sizes):
            with open(f, "rb") as fh:
                fh.seek(size)
                written += fh.read(f.stat().st_size - size).count(b"\n")
        load = os.getloadavg()[0]
        with Client(home, timeout=120) as client:
            runs = {r["id"]: r for r in client.call(P.LIST, brief=True)["runs"]}
        running = sum(1 for i in ids if runs[i]["state"] == P.RUNNING)
    own = (after.user + after.system - before.user - before.system) / elapsed * 100
    children = (after.children_user + after.children_system - before.children_user - before.children_system)
    return {"cpu": own, "children": children / elapsed * 100, "running": running, "up": up, "load": load,
            "rate": written / elapsed}


def live_runs(slurm, count: int, window: float) -> list[dict]:
    results = {"local": live_side({}, count, window, None),
               "slurm": live_side(cluster_env(slurm), count, window, {"backend": "slurm"})}
    local, cluster = results["local"], results["slurm"]
    ok = cluster["running"] == count and cluster["cpu"] <= 30
    note = (f"the workers wrote {cluster['rate']:,.0f} lines/s in the window; "
            f"{window:g} s window once all {count} ran (they took {cluster['up']:.0f} s to start; {cluster['running']} "
            f"still running at its end); squeue etc. (the daemon's children) {cluster['children']:.1f}% more; "
            f"load avg {cluster['load']:.1f} on 2 cores")
    return [
        figure(f"daemon CPU, {count} Slurm runs at 100 scalars/s (polled)", round(cluster["cpu"], 1), "% of a core",
               "<= 30", f"{cluster['cpu'] / local['cpu']:.2f}x local; " + note, ok),
        figure(f"daemon CPU, {count} local runs at 100 scalars/s (inotify)", round(local["cpu"], 1), "% of a core",
               "", f"the same measure, same window ({local['rate']:,.0f} lines/s written; {local['running']} "
                   f"running at its end; started in "
                   f"{local['up']:.0f} s; load avg {local['load']:.1f}); bench_scale's 20 s figure: 26%", None),
    ]


# -- 4. training throughput under Slurm and by hand -----------------------------------------------
def sps_of(events: list[dict]) -> tuple[float, float, float]:
    """(the median over the run's updates but the first of steps/s between two charts/SPS scalars,
    the last charts/SPS (CleanRL's global_step / elapsed), steps / seconds from the first to the last
    scalar). The median: an update slowed by another process on the shared cores does not move it."""
    scalars = [e for e in events if e.get("type") == "scalar"]
    sps = [e for e in scalars if e["tag"] == "charts/SPS"]
    if len(sps) < 3:
        raise RuntimeError(f"{len(sps)} charts/SPS scalars in the events")
    rates = [(b["step"] - a["step"]) / (b["t"] - a["t"]) for a, b in zip(sps[1:], sps[2:]) if b["t"] > a["t"]]
    span = scalars[-1]["t"] - scalars[0]["t"]
    return median(rates), float(sps[-1]["value"]), (scalars[-1]["step"] - scalars[0]["step"]) / span


def training(slurm, steps: int, pairs: int) -> list[dict]:
    """Each pair: the mosaic run and the by-hand job submitted together (the first in turn), so that
    whatever else loads the 2 shared cores meanwhile loads both alike."""
    env = cluster_env(slurm)
    job: dict[str, str | list[str]] = {}
    say(f"CleanRL PPO {steps:,} steps: {pairs} pairs, mosaic on Slurm beside sbatch --wrap")
    with cluster_daemon(env) as (home, _pid):
        def submit_managed() -> str:
            run_id, _, _ = cli_submit(home, env, "--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1",
                                      "--steps", str(steps), "--seed", "1", "--placement", "slurm", "--mem", "2G")
            if "command" not in job:   # the worker's command line, after the supervisor's, from the job script
                script = home.run_dir(run_id) / "job.sh"
                deadline = time.monotonic() + 60
                while not script.exists():
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no job.sh for run {run_id}")
                    time.sleep(0.05)
                argv = shlex.split(script.read_text().strip().splitlines()[-1].removeprefix("exec "))
                job["command"] = argv[argv.index("--") + 1:]
                job["config"] = (home.run_dir(run_id) / "config.json").read_text()
            return run_id

        def managed_result(run_id: str) -> tuple[float, float, float]:
            run = wait_final(home, run_id, timeout=900)
            run_dir = home.run_dir(run_id)
            if run["state"] != "succeeded":
                raise RuntimeError(f"mosaic run {run['state']}: {run.get('reason')}\n"
                                   f"{(run_dir / 'stderr.log').read_text()[-2000:]}")
            return sps_of(events_of(run_dir / "events.jsonl"))

        def submit_by_hand() -> tuple[Path, str]:
            folder = Path(tempfile.mkdtemp(prefix="hand-", dir=str(home.root)))
            (folder / "config.json").write_text(job["config"])
            hand_env = {**slurm.env, "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"], "CUDA_VISIBLE_DEVICES": ""}
            wrap = "exec " + " ".join(shlex.quote(a) for a in job["command"])
            out = subprocess.run(["sbatch", "--parsable", "--job-name=by-hand", f"--chdir={folder}",
                                  f"--output={folder / 'events.jsonl'}", f"--error={folder / 'stderr.log'}",
                                  "--export=ALL", "--nodes=1", "--ntasks=1", "--mem=2G", "--wrap", wrap],
                                 env=hand_env, capture_output=True, text=True, check=True, timeout=60)
            return folder, out.stdout.strip().split(";")[0]

        def by_hand_result(folder: Path, job_id: str) -> tuple[float, float, float]:
            state = slurm.wait_job(job_id, timeout=900)
            if state != "COMPLETED":
                info = slurm.job_info(job_id)
                tails = {name: (folder / name).read_text(errors="replace")[-1500:] if (folder / name).exists() else ""
                         for name in ("stderr.log", "events.jsonl", "stdout.log")}
                raise RuntimeError(f"by-hand job {state} (exit {info.get('ExitCode')}, {info.get('Reason')}): "
                                   f"{tails}")
            return sps_of(events_of(folder / "events.jsonl"))

        mosaic, hand = [], []
        for index in range(pairs):
            if index % 2 == 0 or "command" not in job:
                run_id = submit_managed()
                folder, job_id = submit_by_hand()
            else:
                folder, job_id = submit_by_hand()
                run_id = submit_managed()
            mosaic.append(managed_result(run_id))
            hand.append(by_hand_result(folder, job_id))
    ratios = [m[0] / h[0] for m, h in zip(mosaic, hand)]
    ratio = median(ratios)
    m_rate, h_rate = median([r[0] for r in mosaic]), median([r[0] for r in hand])
    m_sps, h_sps = median([r[1] for r in mosaic]), median([r[1] for r in hand])
    m_span, h_span = median([r[2] for r in mosaic]), median([r[2] for r in hand])
    return [figure(f"CleanRL PPO CartPole {steps:,} steps, steps/s: mosaic on Slurm / by hand (sbatch --wrap)",
                   round(ratio, 3), "x", ">= 0.97",
                   f"median of {pairs} pairs run side by side ({', '.join(f'{r:.3f}' for r in ratios)}); each run's "
                   f"steps/s the median over its updates: mosaic {', '.join(f'{r[0]:,.0f}' for r in mosaic)}; "
                   f"by hand {', '.join(f'{r[0]:,.0f}' for r in hand)} ({m_rate / h_rate:.3f}x of the medians); "
                   f"the last charts/SPS {m_sps / h_sps:.3f}x ({m_sps:,.0f} vs {h_sps:,.0f}); steps / scalar time "
                   f"span {m_span / h_span:.3f}x; load avg {os.getloadavg()[0]:.1f}; "
                   + alike_settings(nice=0, mem="2G"), ratio >= 0.97)]


# -- all ------------------------------------------------------------------------------------------
def run(repeats: int = REPEATS, latency_seconds: float = LATENCY_SECONDS, live: int = LIVE,
        window: float = WINDOW, steps: int = STEPS, pairs: int = PAIRS, only: tuple[str, ...] = ()) -> list[dict]:
    from tests.plugins.ray_cluster import RayCluster
    from tests.plugins.ray_cluster import missing_reason as ray_missing
    from tests.plugins.slurm_cluster import SlurmCluster
    from tests.plugins.slurm_cluster import missing_reason as slurm_missing
    parts = set(only or ("first", "latency", "live", "train"))
    reason = slurm_missing()
    if reason:
        return [figure(f"not measured: {reason}", None, "", "", "", None)]
    alike()
    rows: list[dict] = []
    with SlurmCluster(cpus=CPUS) as slurm:
        if parts & {"first", "latency"}:
            ray = None
            if ray_missing() is None:
                ray = RayCluster().start()
            try:
                env = cluster_env(slurm, ray)
                say("first metric and polled latency: local, Slurm" + (", Ray" if ray else ""))
                with cluster_daemon(env) as (home, _pid):
                    receipts = Receipts(home)
                    receipts.start()
                    try:
                        if "first" in parts:
                            rows += first_metric(home, env, receipts, slurm, ray, repeats)
                        if "latency" in parts:
                            rows += polled_latency(home, env, receipts, latency_seconds, ray is not None)
                    finally:
                        receipts.close()
            finally:
                if ray is not None:
                    ray.stop()
        if "live" in parts:
            rows += live_runs(slurm, live, window)
        if "train" in parts:
            if "live" in parts:
                time.sleep(10)    # the 100 jobs' ends (slurmstepd, their processes) out of the way
            rows += training(slurm, steps, pairs)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--latency-seconds", type=float, default=LATENCY_SECONDS)
    parser.add_argument("--live", type=int, default=LIVE)
    parser.add_argument("--window", type=float, default=WINDOW)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--only", default="", help="comma-separated: first,latency,live,train (default: all)")
    args = parser.parse_args()
    only = tuple(x for x in args.only.split(",") if x)
    print_table(run(args.repeats, args.latency_seconds, args.live, args.window, args.steps, args.pairs, only))


if __name__ == "__main__":
    main()
