"""What periodic resume checkpoints cost a training run: CleanRL's scripts save one every
``checkpoint_minutes`` (settings.json, default 10).

    python -m bench.bench_checkpoints

Two daemons, one with ``checkpoint_minutes: 0`` (checkpoints only at a stop) and one
saving every 0.05 min (3 s: 200 times as often as the default), run the same CleanRL
run one at a time, alternating A B / B A. Each run's steps/s is the script's own last
``charts/SPS`` (start-up not counted). Figures: median with / median without at 3 s,
and, from it, the cost at the default interval (the time a save takes, 200 times
rarer). Goal at the default interval: >= 0.97 (issue 31). Tianshou saves every epoch by
default: its run with and without (steps/s between its first and last scalar).
Jumanji saves its training state every 10 epochs by default: the same. XuanCe and RLlib save
nothing on the way by default (checkpoint_interval 0, checkpoint_every 0).
"""
from __future__ import annotations

from bench.common import alike, alike_settings, alternate, daemon_home, figure, finished_run_events, median

EVERY_MINUTES = 0.05
DEFAULT_MINUTES = 10.0
PAIRS = 3
RUNS = {
    "PPO CartPole": {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 60_000, "seed": 1},
    "DQN CartPole, 10,000-step buffer": {
        "worker": "cleanrl", "algo": "dqn", "env": "CartPole-v1", "steps": 25_000, "seed": 1,
        "params": {"learning-starts": 1000, "buffer-size": 10000}},
}


def sps_and_saves(client, home, config: dict) -> tuple[float, int]:
    events = finished_run_events(client, home, config)
    sps = [e["value"] for e in events if e.get("type") == "scalar" and e.get("tag") == "charts/SPS"]
    saves = sum(1 for e in events if e.get("type") == "checkpoint_saved" and "resume-" in e.get("path", ""))
    return float(sps[-1]), saves


# Workers that save every N units by default: the same run with its default and with none on the way
UNIT_RUNS = {
    "Tianshou DQN CartPole, 20 epochs of 1,000 steps (default: a checkpoint every epoch)": (
        {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 20_000, "seed": 1,
         "params": {"epoch_num_steps": 1000, "test_envs": 1, "test_step_num_episodes": 2}},
        "checkpoint_every", 0),
    "Jumanji A2C Snake, 100 epochs (default: the training state every 10 epochs)": (
        {"worker": "jumanji", "algo": "a2c", "env": "Snake-v1", "seed": 1,
         "params": {"training.num_epochs": 100, "training.num_learner_steps_per_epoch": 4, "training.n_steps": 10,
                    "training.total_batch_size": 8, "evaluation.eval_total_batch_size": 4,
                    "evaluation.greedy_eval_total_batch_size": 4, "eval_every": 1000}},
        "checkpoint_every", 0),
}


def throughput(events: list[dict]) -> float:
    """Steps per second between the run's first and last scalar of its own (not system/*)."""
    points = [(e["t"], e["step"]) for e in events if e.get("type") == "scalar" and not e["tag"].startswith("system/")]
    (t0, s0), (t1, s1) = points[0], points[-1]
    return (s1 - s0) / (t1 - t0)


def run() -> list[dict]:
    from mosaic_tui.client import Client
    alike(1)
    rows = []
    with daemon_home(max_runs=1, settings={"checkpoint_minutes": 0}) as (without, _), \
            daemon_home(max_runs=1, settings={"checkpoint_minutes": EVERY_MINUTES}) as (with_, _):
        with Client(without, timeout=60) as a, Client(with_, timeout=60) as b:
            for label, config in RUNS.items():
                off, on = alternate(PAIRS, lambda: sps_and_saves(a, without, config),
                                    lambda: sps_and_saves(b, with_, config))
                ratio = median(s for s, _ in on) / median(s for s, _ in off)
                saves = [n for _, n in on]
                at_default = 1 - (1 - ratio) * EVERY_MINUTES / DEFAULT_MINUTES
                rows.append(figure(f"{label}: steps/s with a checkpoint every 3 s / without", round(ratio, 3),
                                   "ratio", "", f"{PAIRS} pairs A B / B A; saves per run {saves}; without "
                                   f"{', '.join(f'{s:.0f}' for s, _ in off)}, with {', '.join(f'{s:.0f}' for s, _ in on)}"))
                rows.append(figure(f"{label}: steps/s at the default interval (10 min) / without", round(at_default, 4),
                                   "ratio", ">= 0.97", f"from the 3 s figure, 200x rarer; {alike_settings(seed=1)}",
                                   at_default >= 0.97))
            for label, (config, key, off_value) in UNIT_RUNS.items():
                without_config = {**config, "params": {**config["params"], key: off_value}}
                off, on = alternate(PAIRS, lambda: throughput(finished_run_events(a, without, without_config)),
                                    lambda: throughput(finished_run_events(b, with_, config)))
                ratio = median(on) / median(off)
                rows.append(figure(f"{label}: steps/s with / without", round(ratio, 3), "ratio", ">= 0.97",
                                   f"{PAIRS} pairs A B / B A; without {', '.join(f'{v:.0f}' for v in off)}, "
                                   f"with {', '.join(f'{v:.0f}' for v in on)}", ratio >= 0.97))
    return rows


if __name__ == "__main__":
    from bench.common import print_table
    print_table(run())
