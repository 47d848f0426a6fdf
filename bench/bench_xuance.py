"""The XuanCe worker's overhead: MAPPO on simple_spread_v3 under mosaic against XuanCe alone.

    python -m bench.bench_xuance [--steps N] [--rounds R]

A (mosaic): the run is submitted to a daemon (a throwaway home), which starts
the per-run supervisor and the worker; the worker runs XuanCe in process and
turns its logging into telemetry that the daemon ingests. Time: from submit
(the run's created_at) to the end of the worker (ended_at), both stamped by
the daemon.

B (XuanCe alone): a fresh Python process calls ``xuance.get_runner(...)`` and
``runner.run(mode="train")`` with the same arguments -- the very Namespace
the worker builds (``run_setup.parser_args``) -- and the same process
environment (one torch thread, the pettingzoo.mpe alias without which XuanCe
cannot create MPE scenarios here). Time: the process's wall time.

Rounds alternate A B A B so that load from other work on the two shared
cores hits both alike; each figure is the ratio of the medians of steps per
second. Goal (issue 6): >= 0.97; MOSAIC's own table shows about 8% overhead
for its XuanCe worker. Three ways of counting the seconds:

- training (the headline): from XuanCe's own TensorBoard files, written alike
  in both: the first event (the writer is created as the agent is built, just
  before training) to the last (the last scalar of training). Starting Python
  and importing torch take 5 to 15 s here depending on the other load, and
  would otherwise be most of the noise.

- end to end: A from submit (the run's created_at) to the end of the worker
  (ended_at), both stamped by the daemon; B the process's wall time. Both
  include starting Python and the imports.
- CPU seconds, which other work on the machine disturbs much less: for A,
  everything the daemon's process tree spent during the run (the daemon's own
  time, and the supervisor's and worker's, which the daemon collects when it
  reaps the supervisor); for B, the process and its children.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import sys
import tempfile
import time
from pathlib import Path

from bench.common import alike, alike_settings, alternate, daemon_home, figure, machine, median, print_table, run_bare

STEPS = 3_000
ROUNDS = 4
CONFIG = {
    "worker": "xuance", "algo": "mappo", "env": "simple_spread_v3", "seed": 1, "device": "cpu",
    # XuanCe's simple_spread_v3 MAPPO config, with 4 environments stepped in process instead
    # of 16 spawned processes: on two shared cores their start-up and IPC would be most of a
    # short run, and the noise with it
    "params": {"parallels": 4, "vectorize": "DummyVecMultiAgentEnv"},
}


def run_config(steps: int) -> dict:
    return {**CONFIG, "steps": steps}


# -- B: XuanCe alone ---------------------------------------------------------------
def direct_main(config_path: str) -> None:
    """The B side, in its own process: XuanCe's runner with the worker's arguments."""
    from workers.xuance_worker import WORKER, catalog, run_setup

    config = WORKER.validate(json.loads(Path(config_path).read_text()))
    run_setup.prepare_process(config["params"]["torch_threads"])  # the same process environment
    run_setup.set_torch_threads(config["params"]["torch_threads"])
    family, env_id = catalog.resolve_env(config["env"])
    args = run_setup.parser_args(config, family, env_id, config["params"], config["steps"])

    import xuance
    runner = xuance.get_runner(algo=config["algo"], env=family, env_id=env_id, parser_args=args)
    runner.run(mode="train")


def tensorboard_span(folder: Path) -> float:
    """Seconds from the first to the last event XuanCe wrote into its TensorBoard files.

    A TFRecord is: length (u64), its CRC (u32), the data, its CRC (u32); the data
    is an ``Event`` protobuf whose field 1 is ``wall_time`` (a double, tag 0x09).
    """
    times = []
    for path in folder.rglob("events.out.tfevents.*"):
        data = path.read_bytes()
        offset = 0
        while offset + 12 <= len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            record = data[offset + 12:offset + 12 + length]
            if record[:1] == b"\x09":
                times.append(struct.unpack_from("<d", record, 1)[0])
            offset += 12 + length + 4
    if len(times) < 2:
        raise RuntimeError(f"no TensorBoard events under {folder}")
    return max(times) - min(times)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_direct(steps: int) -> tuple[float, float, float]:
    """Training, wall and CPU seconds of one plain-XuanCe run."""
    with tempfile.TemporaryDirectory(prefix="xb-") as folder:
        config_path = Path(folder) / "config.json"
        config_path.write_text(json.dumps(run_config(steps)))
        cpu0 = children_cpu()
        t0 = time.monotonic()
        proc = run_bare([sys.executable, "-m", "bench.bench_xuance", "--direct", str(config_path)], cwd=folder)
        elapsed = time.monotonic() - t0
        cpu = children_cpu() - cpu0
        if proc.returncode != 0:
            raise RuntimeError(f"XuanCe alone failed:\n{proc.stderr[-3000:]}")
        training = tensorboard_span(Path(folder) / "tensorboard")
    return training, elapsed, cpu


# -- A: under mosaic ---------------------------------------------------------------------
def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and of the children it has reaped (utime, stime, cutime, cstime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def run_mosaic(home, daemon_pid: int, steps: int) -> tuple[float, float, float, dict]:
    """Training seconds, seconds from submit to the worker's end, CPU seconds of the daemon's tree,
    and the run record."""
    from daemon import protocol as P
    from mosaic_tui.client import Client

    cpu0 = tree_cpu(daemon_pid)
    with Client(home, name="bench-xuance", timeout=30) as client:
        run = client.call(P.SUBMIT, config=run_config(steps))
        while run["state"] not in P.FINAL_STATES:
            time.sleep(0.5)  # the end is taken from the record, not from this loop
            run = client.call(P.GET, run=run["id"])
    cpu = tree_cpu(daemon_pid) - cpu0
    if run["state"] != P.SUCCEEDED:
        raise RuntimeError(f"the mosaic run ended {run['state']}: {run.get('reason')}")
    training = tensorboard_span(home.run_dir(run["id"]) / "tensorboard")
    return training, run["ended_at"] - run["created_at"], cpu, run


def run(steps: int = STEPS, rounds: int = ROUNDS) -> list[dict]:
    rates: dict[str, dict[str, list[float]]] = {
        way: {"mosaic": [], "direct": []} for way in ("training", "wall", "cpu")}
    lines_per_run: list[int] = []
    alike()

    def mosaic_side() -> tuple[float, float, float]:
        training, wall, cpu, record = run_mosaic(home, daemon_pid, steps)
        summary = record["summary"] or {}
        if summary.get("steps") != steps or summary.get("invalid"):
            raise RuntimeError(f"the mosaic run's telemetry is incomplete: {summary}")
        lines_per_run.append(summary.get("lines", 0))
        return training, wall, cpu

    with daemon_home() as (home, daemon_pid):
        mosaic_runs, direct_runs = alternate(rounds, mosaic_side, lambda: run_direct(steps))
    for arm, runs in (("mosaic", mosaic_runs), ("direct", direct_runs)):
        for seconds in runs:
            for way, s in zip(("training", "wall", "cpu"), seconds):
                rates[way][arm].append(steps / s)

    def ratio(way: str) -> float:
        return median(rates[way]["mosaic"]) / median(rates[way]["direct"])

    def listing(way: str) -> str:
        return " / ".join(", ".join(f"{r:.0f}" for r in rates[way][arm]) for arm in ("mosaic", "direct"))

    training, wall, cpu = ratio("training"), ratio("wall"), ratio("cpu")
    return [
        figure("MAPPO simple_spread_v3 steps/s, mosaic / XuanCe alone", training, "ratio", ">= 0.97",
               f"MOSAIC ~0.92; {rounds} pairs A B / B A; {alike_settings(seed=1)}", training >= 0.97),
        figure("  same, end to end (with start-up)", wall, "ratio", ">= 0.97", "", wall >= 0.97),
        figure("  same, steps per CPU second", cpu, "ratio", ">= 0.97", "", cpu >= 0.97),
        figure("MAPPO training steps/s, mosaic (median)", median(rates["training"]["mosaic"]), "steps/s", "",
               f"{rounds} runs of {steps:,} steps, mosaic / alone: {listing('training')}", None),
        figure("MAPPO training steps/s, XuanCe alone (median)", median(rates["training"]["direct"]), "steps/s",
               "", "", None),
        figure("end-to-end steps/s, mosaic / alone", median(rates["wall"]["mosaic"]), "steps/s", "",
               listing("wall"), None),
        figure("steps per CPU second, mosaic / alone", median(rates["cpu"]["mosaic"]), "steps/s", "",
               listing("cpu"), None),
        figure("telemetry lines per mosaic run", median(lines_per_run), "lines", "", "", None),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_xuance")
    parser.add_argument("--steps", type=int, default=STEPS, help="steps of every run (all parallel envs)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="A B rounds; medians are taken")
    parser.add_argument("--direct", metavar="CONFIG", help=argparse.SUPPRESS)
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.direct:
        direct_main(args.direct)
        return
    print(f"bench_xuance on {machine()}", flush=True)
    rows = run(args.steps, args.rounds)
    print_table(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
