"""The env-id lookup the workers share (workers/sdk/envs.py): a mistyped id is refused at submit
with the closest ids the worker knows, through the real CLI and daemon."""
from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("worker, algo, typed, meant", [
    ("ray", "PPO", "CartPol-v1", "CartPole-v1"),
    ("xuance", "ppo", "CartPol-v1", "CartPole-v1"),
    ("xuance", "mappo", "simple_sprad_v3", "simple_spread_v3"),
])
def test_a_mistyped_env_is_refused_with_did_you_mean(daemon, mosaic, worker, algo, typed, meant):
    proc = mosaic.run("submit", "--worker", worker, "--algo", algo, "--env", typed, "--steps", "1000")
    assert proc.returncode != 0
    line = proc.stderr.strip()
    assert line.startswith("mosaic: error:") and "\n" not in line
    assert f"unknown environment {typed!r}" in line and f"did you mean {meant!r}" in line
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []  # nothing was queued


def test_an_id_far_from_every_known_one_lists_them(daemon, mosaic):
    proc = mosaic.run("submit", "--worker", "ray", "--algo", "PPO", "--env", "Nothing-v9", "--steps", "1000")
    # the ray worker knows over a hundred ids (Atari, MultiGrid...): the first few are named
    assert proc.returncode != 0 and "ids are known, e.g. CartPole-v1, Acrobot-v1" in proc.stderr
