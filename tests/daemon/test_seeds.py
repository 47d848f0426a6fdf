"""A random seed (`seed: null`, `--seed random`, the form's empty seed): drawn by the daemon at
submit, recorded in the run, and enough to repeat the run exactly."""
from __future__ import annotations

import json

from tests.helpers import events_of
from workers.sdk.config import SEED_DRAWN_BELOW, draw_seed

# CleanRL's PPO seeds the env's resets and torch with the run's seed: its first episodes are
# the seed's (one env, so the episodes come in one order)
PPO = ("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "256",
       "--set", "num-envs=1", "--set", "num-steps=128")


def first_returns(home, run_id: str, count: int = 5) -> list[float]:
    returns = [e["return"] for e in events_of(home, run_id) if e["type"] == "episode"]
    assert len(returns) >= count, returns
    return returns[:count]


def test_only_a_missing_seed_is_drawn():
    assert draw_seed({"seed": 7}) == {"seed": 7}
    assert draw_seed({}) == {}                      # no seed: the default (1), not a random one
    for asked in (None, "random", " Random "):
        drawn = draw_seed({"seed": asked})
        assert drawn["seed_drawn"] is True and 0 <= drawn["seed"] < SEED_DRAWN_BELOW


def test_random_seeds_are_recorded_and_a_recorded_seed_repeats_the_run(daemon, mosaic):
    first = mosaic.submit(*PPO, "--seed", "random")
    # a config file's null is the same request
    config = mosaic.home.root / "null-seed.json"
    config.write_text(json.dumps({"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 256,
                                  "seed": None, "params": {"num-envs": 1, "num-steps": 128}}))
    second = mosaic.submit(str(config))
    records = [mosaic.show(r) for r in (first, second)]
    seeds = [r["config"]["seed"] for r in records]
    assert all(r["config"]["seed_drawn"] is True for r in records)
    assert seeds[0] != seeds[1] and all(isinstance(s, int) for s in seeds), seeds
    # what the worker ran with is the recorded seed
    for run_id, seed in zip((first, second), seeds):
        written = json.loads((mosaic.home.run_dir(run_id) / "config.json").read_text())
        assert written["seed"] == seed
    shown = mosaic.run("show", first, check=True).stdout
    assert f"seed: {seeds[0]} (drawn at random)" in shown

    again = mosaic.submit(*PPO, "--seed", str(seeds[0]))
    for run_id in (first, second, again):
        assert mosaic.run("wait", run_id, "--timeout", "240").returncode == 0, mosaic.show(run_id)
    assert not mosaic.show(again)["config"]["seed_drawn"]
    assert first_returns(mosaic.home, again) == first_returns(mosaic.home, first)
    assert first_returns(mosaic.home, second) != first_returns(mosaic.home, first)


def test_a_seed_that_is_neither_a_number_nor_random_is_refused_in_one_line(daemon, mosaic):
    proc = mosaic.run("submit", *PPO, "--seed", "lucky")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--seed" in proc.stderr and "lucky" in proc.stderr
