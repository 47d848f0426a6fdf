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


def test_two_post_import_patches_of_one_module_both_run():
    """A worker's patches installed twice in one process (its sitecustomize, then its own start-up)
    used to send two finders asking each other for the module until RecursionError."""
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        from workers.sdk.postimport import when_imported
        seen = []
        when_imported("wave", lambda m: seen.append(("first", m.__name__)))
        when_imported("wave", lambda m: seen.append(("second", m.__name__)))
        import wave
        when_imported("wave", lambda m: seen.append(("late", m.__name__)))
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[('first', 'wave'), ('second', 'wave'), ('late', 'wave')]"
