"""Population-based training against random search, the same members and the same env steps.

    python -m bench.bench_pbt [--quick]        (or python -m bench --long)

CleanRL's PPO on CartPole-v1, a population of 4 whose learning rates are drawn log-uniform from
1e-5 to 1e-1 (bad values at both ends). Two sides, 3 repetitions (sampler seeds 0, 1, 2), run
A B, then B A, ... (bench.common.alternate):

- PBT: a ``sampler: pbt`` sweep (daemon/pbt.py): every ``interval`` env steps the members stop
  with a checkpoint, the bottom quarter copies the top quarter's weights and goes on with its
  learning rate times 0.8 or 1.2.
- Random search: the same 4 members (the PBT sweep's own seeded draws, daemon/pbt_decisions.py
  ``initial_params``, and seeds) as plain runs, never stopped: a random search of the same size.

Both sides train each member for the same ``steps``, 4 at a time (the daemon's max_runs).
``--quick`` (8,192 steps, interval 2,048, one repetition) checks that it all runs, in about 4 min
here; its members are too young at their exploits for its scores to compare the sides.

Figures:
- final score: each member's mean return of its last 20 episodes; a side's score is the IQM over
  the 3 repetitions of the best member's (rliable's IQM: the mean of the middle half, which for 3
  values is their mean), and the IQM of all 12 members' beside it;
- env steps to the threshold: the first member step at which a member's mean of its last 20
  returns reaches it, median over the repetitions (one that never does counts as the budget);
- the exploit overhead: the time each member spends between its last logged step before a stop
  for the interval and its first logged step after it continues (the stop's checkpoint, the wait
  for the others, the daemon's decision and copy, the new worker's start), summed over the
  members and divided by members x the sweep's wall time; split into those parts.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time

from bench.common import alternate, daemon_home, figure, median, print_table

LONG = True
POPULATION = 4
LAST = 20                       # episodes in a member's score
SPACE = {"learning-rate": {"loguniform": [1e-5, 1e-1]}}
BASE = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "seed": 1, "params": {}}
SIZES = {"full": {"steps": 49_152, "interval": 12_288, "threshold": 250.0, "repetitions": 3},
         "quick": {"steps": 8_192, "interval": 2_048, "threshold": 100.0, "repetitions": 1}}


def training(event: dict) -> bool:
    """An event of a training step: an episode or a scalar the algorithm logs (the worker's own
    ``system/`` samples go on while it saves, exits or starts)."""
    kind = event.get("type")
    return kind == "episode" or (kind == "scalar" and not str(event.get("tag", "")).startswith("system/"))


# -- figures: pure functions of the runs' events (tests/unit/bench/test_bench_pbt.py) ---------------
def iqm(values: list[float]) -> float:
    """Interquartile mean as rliable computes it (scipy's trim_mean at 0.25): a quarter of the
    values (rounded down) cut from each end, the mean of the rest."""
    data = sorted(values)
    cut = int(0.25 * len(data))
    return statistics.fmean(data[cut:len(data) - cut])


def episodes(events: list[dict]) -> list[tuple[int, float]]:
    """(step, return) of a member's episodes, in the order logged."""
    return [(e["step"], e["return"]) for e in events if e.get("type") == "episode"]


def final_score(events: list[dict], last: int = LAST) -> float | None:
    """The mean return of a member's last ``last`` episodes."""
    returns = [r for _, r in episodes(events)][-last:]
    return statistics.fmean(returns) if returns else None


def steps_to_threshold(events: list[dict], threshold: float, window: int = LAST) -> int | None:
    """The first step at which the mean of a member's last ``window`` returns reaches ``threshold``
    (a full window only); None if it never does."""
    eps = episodes(events)
    for i in range(window - 1, len(eps)):
        if statistics.fmean(r for _, r in eps[i - window + 1:i + 1]) >= threshold:
            return eps[i][0]
    return None


def trained_steps(events: list[dict]) -> int:
    """Env steps a member trained, over all its processes: each process from the step it started at
    (0, or its ``restarted`` seam's checkpoint step) to the last step it reached."""
    total, start, reached = 0, 0, 0
    for e in events:
        if e.get("type") == "restarted":
            total += max(0, reached - start)
            start = reached = e["step"]
        elif isinstance(e.get("step"), int) and (training(e) or e.get("type") == "run_stopped"):
            reached = max(reached, e["step"])
    return total + max(0, reached - start)


def exploit_gaps(events: list[dict]) -> list[dict[str, float]]:
    """Each stop-and-continue of a member, in seconds: ``stop`` from its last logged step to its
    ``run_stopped`` (the checkpoint, the process's exit), ``wait`` from there to the ``restarted``
    seam the daemon writes (the others' stops, the decision, the copy), ``start`` from the seam to
    its first logged step (the new worker's start, imports, checkpoint load); ``total`` their sum."""
    gaps, last_train, stopped, seam = [], None, None, None
    for e in events:
        kind = e.get("type")
        if kind == "run_stopped":
            stopped = e["t"]
        elif kind == "restarted" and stopped is not None:
            seam = e["t"]
        elif training(e):
            if seam is not None and last_train is not None:
                gaps.append({"stop": stopped - last_train, "wait": seam - stopped, "start": e["t"] - seam,
                             "total": e["t"] - last_train})
                stopped = seam = None
            if stopped is None:
                last_train = e["t"]
    return gaps


def overhead(members_gaps: list[list[dict[str, float]]], wall_s: float, part: str = "total") -> float:
    """The share of the members' wall time spent in stop-and-continue (``part`` of it): the gaps of
    every member summed, over members x wall time."""
    if not members_gaps or wall_s <= 0:
        return 0.0
    return sum(g[part] for gaps in members_gaps for g in gaps) / (len(members_gaps) * wall_s)


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every`` seconds while the bench runs: the machine is shared."""

    def __init__(self, every: float = 10.0):
        super().__init__(daemon=True)
        self.every, self.samples, self.done = every, [os.getloadavg()[0]], threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> str:
        self.done.set()
        return f"load average {statistics.fmean(self.samples):.1f} (min {min(self.samples):.1f}, max {max(self.samples):.1f})"


# -- the two sides ------------------------------------------------------------------------------------
def member_configs(steps: int, seed: int, name: str) -> list[dict]:
    """The PBT sweep's members as it submits them (daemon/pbt.py ``_submit_member``): the same draws."""
    from daemon.pbt_decisions import initial_params
    from daemon.sweeps import normalise_param
    space = {n: normalise_param(n, s) for n, s in SPACE.items()}
    return [{**BASE, "steps": steps, "params": {**BASE["params"], **initial_params(space, seed, i)},
             "seed": BASE["seed"] + i, "name": f"{name}-m{i}"} for i in range(POPULATION)]


def read_events(home, run_id: str) -> list[dict]:
    with open(home.run_dir(run_id) / "events.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def pbt_side(client, home, size: dict, seed: int) -> dict:
    from daemon import protocol as P
    name = f"pbt-{seed}"
    spec = {"name": name, "base": {**BASE, "steps": size["steps"]}, "params": SPACE, "seed": seed,
            "objective": {"tag": "episode/return", "last": LAST},
            "pbt": {"population": POPULATION, "interval": size["interval"], "quantile": 0.25,
                    "mutations": {"learning-rate": {"factors": [0.8, 1.2]}}}}
    t0 = time.monotonic()
    client.call(P.SWEEP, spec=spec)
    while next(s for s in client.call(P.SWEEPS) if s["name"] == name)["state"] == "running":
        time.sleep(0.5)
    wall = time.monotonic() - t0
    sweep = client.call(P.SWEEP_GET, sweep=name)
    members = [client.call(P.GET, run=m["id"]) for m in sweep["members"]]
    return {"wall": wall, "states": [m["state"] for m in members], "exploits": len(sweep["lineage"]),
            "lrs": [m["config"]["params"]["learning-rate"] for m in members],
            "events": [read_events(home, m["id"]) for m in members]}


def random_side(client, home, size: dict, seed: int) -> dict:
    from daemon import protocol as P
    t0 = time.monotonic()
    runs = [client.call(P.SUBMIT, config=c) for c in member_configs(size["steps"], seed, f"random-{seed}")]
    while any(r["state"] not in P.FINAL_STATES for r in runs):
        time.sleep(0.5)
        runs = [client.call(P.GET, run=r["id"]) for r in runs]
    wall = time.monotonic() - t0
    return {"wall": wall, "states": [r["state"] for r in runs], "exploits": 0,
            "lrs": [r["config"]["params"]["learning-rate"] for r in runs],
            "events": [read_events(home, r["id"]) for r in runs]}


def side_figures(label: str, results: list[dict], size: dict) -> list[dict]:
    best = [max(final_score(ev) or 0.0 for ev in r["events"]) for r in results]
    everyone = [final_score(ev) or 0.0 for r in results for ev in r["events"]]
    reached = [min((s for s in (steps_to_threshold(ev, size["threshold"]) for ev in r["events"]) if s is not None),
                   default=None) for r in results]
    censored = [s if s is not None else size["steps"] for s in reached]
    steps = [trained_steps(ev) for r in results for ev in r["events"]]
    ok = all(s == "succeeded" for r in results for s in r["states"])
    return [figure(f"{label}: final score, best member (IQM of {len(results)})", round(iqm(best), 1), "return", "",
                   "best of each: " + ", ".join(f"{b:.0f}" for b in best) + f"; all {len(everyone)} members' IQM "
                   f"{iqm(everyone):.0f}; {sum(r['exploits'] for r in results)} exploits", ok),
            figure(f"{label}: member steps to a mean of {size['threshold']:.0f} (median of {len(results)})",
                   median(censored), "steps", "",
                   "each: " + ", ".join(f"{s:,}" if s is not None else "never" for s in reached) +
                   f"; env steps trained, all members: {sum(steps):,}", None)]


def run(quick: bool = False) -> list[dict]:
    from mosaic_tui.client import Client
    size = SIZES["quick" if quick else "full"]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    calls = {"pbt": 0, "random": 0}   # pair i is each side's call i: sampler seed i on both

    def next_seed(side: str) -> int:
        calls[side] += 1
        return calls[side] - 1
    load = LoadSampler()
    load.start()
    with daemon_home(max_runs=POPULATION) as (home, _pid):
        with Client(home, name="bench", timeout=60) as client:
            t0 = time.monotonic()
            pbt, rs = alternate(size["repetitions"], lambda: pbt_side(client, home, size, next_seed("pbt")),
                                lambda: random_side(client, home, size, next_seed("random")))
            minutes = (time.monotonic() - t0) / 60
    loaded = load.stop()
    pbt_best = iqm([max(final_score(ev) or 0.0 for ev in r["events"]) for r in pbt])
    rs_best = iqm([max(final_score(ev) or 0.0 for ev in r["events"]) for r in rs])
    gaps = [exploit_gaps(ev) for r in pbt for ev in r["events"]]
    shares = [overhead([exploit_gaps(ev) for ev in r["events"]], r["wall"]) for r in pbt]
    parts = {p: statistics.fmean(overhead([exploit_gaps(ev) for ev in r["events"]], r["wall"], p) for r in pbt)
             for p in ("stop", "wait", "start")}
    share = statistics.fmean(shares)
    count = sum(len(g) for g in gaps)
    mean_gap = statistics.fmean(g["total"] for m in gaps for g in m) if count else 0.0
    setting = (f"PPO CartPole-v1, {POPULATION} members x {size['steps']:,} steps, lr log-uniform 1e-5..1e-1, "
               f"interval {size['interval']:,}; {minutes:.0f} min, {loaded}")
    rows = side_figures("PBT", pbt, size) + side_figures("random search", rs, size)
    rows.insert(0, figure("PBT vs random search: best member's final score, PBT - random", round(pbt_best - rs_best, 1),
                          "return", "> 0", setting, pbt_best > rs_best))
    rows.append(figure("PBT: stop/continue overhead, share of the members' wall time", round(100 * share, 1), "%",
                       "<= 5%", f"{count} stops, {mean_gap:.1f} s each: stop {100 * parts['stop']:.1f}%, wait for "
                       f"the others + decision {100 * parts['wait']:.1f}%, worker start {100 * parts['start']:.1f}%; "
                       f"wall PBT {statistics.fmean(r['wall'] for r in pbt):.0f} s vs random "
                       f"{statistics.fmean(r['wall'] for r in rs):.0f} s", share <= 0.05))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{SIZES['quick']['steps']:,} steps a member")
    args = parser.parse_args()
    print_table(run(quick=args.quick))


if __name__ == "__main__":
    main()
