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


_COMPILE_TWICE = """
from workers.sdk import registration
registration.prepare_process()  # before jax is imported, as the workers do
import jax, jax.numpy as jnp
hits = []
jax.monitoring.register_event_listener(lambda name, **kw: hits.append(name) if name.endswith("cache_hits") else None)
jax.jit(lambda x: jnp.sin(x) @ x + 1).lower(jnp.ones((4, 4))).compile()
print(len(hits))
"""


def test_compiled_jax_programs_are_kept_under_the_home(tmp_path):
    """A Jumanji epoch function takes minutes to compile here: the next process (a resumed run,
    an evaluation, the same settings again) loads it from <home>/cache/jax."""
    import os
    import subprocess
    import sys

    from workers.sdk import registration
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    # this tiny program compiles in milliseconds: keep it anyway (the default keeps those over 1 s)
    env.update(MOSAIC_HOME=str(tmp_path), JAX_PLATFORMS="cpu", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    runs = [subprocess.run([sys.executable, "-c", _COMPILE_TWICE], capture_output=True, text=True, env=env,
                           timeout=120) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[-1].stderr[-2000:]
    first, second = (int(r.stdout.split()[-1]) for r in runs)
    assert first == 0 and second > 0, (first, second)  # compiled, then loaded
    assert any(name.startswith("jit_") for name in os.listdir(tmp_path / "cache" / "jax"))
    # a cache the user chose is kept
    assert "JAX_COMPILATION_CACHE_DIR" not in registration.process_environment(
        {"MOSAIC_HOME": str(tmp_path), "JAX_COMPILATION_CACHE_DIR": "/elsewhere"})
