"""The Jumanji worker's PPO: rejax's PPO on Jumanji's envs through the daemon, chunk by chunk, with
checkpoints, resume, eval mode with frames; its params and envs are rejax's own; refusals at submit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT, wait_for
from tests.workers.jumanji_worker.test_jumanji_worker import WAIT, config_file, events_of, finish, of_type, tags
from workers.jumanji_worker import WORKER, catalog
from workers.sdk.config import ConfigError


@pytest.mark.slow  # imports jax, jumanji and rejax and makes every Jumanji env: up to a minute on busy cores
def test_ppo_schema_and_envs_are_rejaxs():
    """The ppo params are rejax PPO's own fields and defaults; its env list is what rejax's adapter takes."""
    props = WORKER.schema("ppo", "Snake-v1")["properties"]
    code = textwrap.dedent("""
        import dataclasses, json, jumanji
        from rejax import PPO
        from rejax.compat.jumanji2gymnax import Jumanji2GymnaxEnv
        fields = {f.name: f.default for f in dataclasses.fields(PPO) if f.default is not dataclasses.MISSING}
        takes = {}
        for env_id in jumanji.registered_environments():
            if env_id == "Sokoban-v0":  # downloads its levels when made (no network here); discrete actions
                continue
            try:
                Jumanji2GymnaxEnv(jumanji.make(env_id))
                takes[env_id] = True
            except NotImplementedError:
                takes[env_id] = False
        print(json.dumps({"fields": {k: v if isinstance(v, (int, float, bool)) and v != float("inf") else repr(v)
                                     for k, v in fields.items()}, "takes": takes}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-3000:]
    rejax = json.loads(out.stdout.strip().splitlines()[-1])
    fields = {k: v for k, v in rejax["fields"].items() if k not in catalog.REJAX_SET_BY_CREATE}
    rejax_params = {k for k in props if k not in catalog.PPO_MOSAIC_PARAMS and not k.startswith("agent_kwargs.")}
    assert rejax_params == set(fields)
    for name, default in fields.items():
        assert props[name]["default"] == (None if default == "inf" else default), name
    assert props["num_envs"]["default"] == 64 and props["eval_freq"]["default"] == 4096
    assert props["agent_kwargs.hidden_layer_sizes"]["default"] == [64, 64]
    assert props["agent_kwargs.activation"]["default"] == "swish" and "relu" in props["agent_kwargs.activation"]["enum"]
    takes = {env for env, ok in rejax["takes"].items() if ok}
    assert set(WORKER.capabilities()["envs"]["ppo"]) == takes | {"Sokoban-v0"}
    for env, ok in rejax["takes"].items():
        if not ok:
            with pytest.raises(ConfigError) as err:
                WORKER.validate({"worker": "jumanji", "algo": "ppo", "env": env})
            assert err.value.field == "env" and "rejax.compat.jumanji2gymnax" in str(err.value), env


@pytest.mark.parametrize("config,field", [
    ({"env": "BinPack-v2"}, "env"),  # multi-discrete actions
    ({"env": "Snak-v1"}, "env"),
    ({"env": "Snake-v1", "params": {"num_envs": 6, "num_steps": 10, "num_minibatches": 8}}, "params.num_minibatches"),
    ({"env": "Snake-v1", "steps": 1000, "params": {"total_timesteps": 2000}}, "steps"),
    ({"env": "Snake-v1", "params": {"agent_kwargs.activation": "one_hot"}}, "params.agent_kwargs.activation"),
    ({"env": "Snake-v1", "params": {"agent_kwargs.hidden_layer_sizes": [0]}},
     "params.agent_kwargs.hidden_layer_sizes[0]"),
    ({"env": "Snake-v1", "params": {"clip_epsilon": 0.1}}, "params.clip_epsilon"),
])
def test_bad_ppo_config_is_refused_naming_the_field(config, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "jumanji", "algo": "ppo", **config})
    assert err.value.field == field


# chunks of 256 env steps: PPO iterations of 16 steps on 8 envs, 2 epochs of 4 minibatches
PPO_TINY = {"num_envs": 8, "num_steps": 16, "num_minibatches": 4, "num_epochs": 2, "eval_freq": 256,
            "eval_seeds": 8, "skip_initial_evaluation": True}


@pytest.mark.slow
@pytest.mark.timeout(1500)  # three runs, each mostly JIT compilation (a minute or more when the cores are busy)
def test_ppo_snake_chunks_checkpoint_resume_and_eval_with_frames(daemon, mosaic):
    run_id = mosaic.submit(config_file(mosaic, "ppo", algo="ppo", env="Snake-v1", steps=1024,
                                       params={**PPO_TINY, "checkpoint_every": 2},
                                       frames={"enabled": True, "fps": 30, "max_dim": 96}))
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] == run["summary"]["total_steps"] == 1024
    events = events_of(mosaic.home, run_id)
    assert [e["name"] for e in of_type(events, "phase")] == ["setup", "compiling", "train"]
    scalars = of_type(events, "scalar")
    # telemetry per chunk, not only at the end: an evaluation and the env steps after each chunk
    assert [e["value"] for e in scalars if e["tag"] == "train/env_steps"] == [256.0, 512.0, 768.0, 1024.0]
    assert [e["step"] for e in scalars if e["tag"] == "eval/episode_return"] == [256, 512, 768, 1024]
    assert {"time/compile_s", "time/compile_chunk_s", "eval/episode_length", "train/steps_per_second"} <= tags(events)
    assert [e["step"] for e in of_type(events, "episode")] == [256, 512, 768, 1024]
    saved = of_type(events, "checkpoint_saved")
    assert [(e["path"].split("/")[-2], e["step"]) for e in saved] == [("chunk_000002", 512), ("final", 1024)]
    assert "frames disabled" not in (mosaic.home.run_dir(run_id) / "stderr.log").read_text()

    # resume from chunk 2 (params, Adam states, env states, key) to 1536 steps: chunks 3..6;
    # eval mode on the final checkpoint: episodes drawn by Snake's viewer, watched, then cancelled
    resumed = mosaic.submit(config_file(mosaic, "ppo-resumed", algo="ppo", env="Snake-v1", steps=1536,
                                        checkpoint=saved[0]["path"], params={**PPO_TINY, "checkpoint_every": 0}))
    evaluation = mosaic.submit(config_file(mosaic, "ppo-eval", algo="ppo", env="Snake-v1", mode="eval",
                                           checkpoint=saved[-1]["path"], eval_episodes=1000, params=PPO_TINY,
                                           frames={"enabled": True, "fps": 30, "max_dim": 96}))
    run = finish(mosaic, resumed)
    events = events_of(mosaic.home, resumed)
    assert run["summary"]["steps"] == 1536
    assert [e["value"] for e in of_type(events, "scalar") if e["tag"] == "train/chunk"] == [3.0, 4.0, 5.0, 6.0]
    assert [e["value"] for e in of_type(events, "scalar") if e["tag"] == "train/env_steps"][0] == 768.0
    assert "resumed from" in (mosaic.home.run_dir(resumed) / "stderr.log").read_text()

    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    wait_for(lambda: layout.run_files(evaluation), float(WAIT), 0.2, what="the eval run's FastLane segment")
    with FrameReader(evaluation) as reader:
        number, frame = wait_for(reader.latest, float(WAIT), 0.2, what="a frame")
    assert number >= 1 and frame.shape == (96, 96, 3) and frame.std() > 0
    wait_for(lambda: mosaic.show(evaluation)["summary"]["episodes"] >= 1, float(WAIT), 0.5, what="an eval episode")
    mosaic.run("cancel", evaluation)
    finish(mosaic, evaluation, "cancelled")
    events = events_of(mosaic.home, evaluation)
    assert [e["name"] for e in of_type(events, "phase")] == ["setup", "compiling", "eval"]
    episodes = of_type(events, "episode")
    assert episodes and all(e["length"] >= 1 for e in episodes)
    assert episodes[-1]["step"] == sum(e["length"] for e in episodes)

    # refused at submit, naming the field: multi-discrete actions, a checkpoint of other network sizes
    out = mosaic.run("submit", "--worker", "jumanji", "--algo", "ppo", "--env", "Tetris-v0")
    assert out.returncode != 0 and "env" in out.stderr and "MultiDiscreteArray" in out.stderr
    out = mosaic.run("submit", config_file(mosaic, "ppo-other-net", algo="ppo", env="Snake-v1",
                                           checkpoint=saved[0]["path"],
                                           params={**PPO_TINY, "agent_kwargs.hidden_layer_sizes": [32]}))
    assert out.returncode != 0 and "params.agent_kwargs.hidden_layer_sizes" in out.stderr


@pytest.mark.parametrize("algo", ["ppo", "a2c"])
def test_steps_config_validates_again_as_the_worker_does(algo):
    """The daemon writes the validated config (params with defaults) to config.json and the worker
    validates it again: steps and the param it sets (total_timesteps, training.num_epochs) agree."""
    once = WORKER.validate({"worker": "jumanji", "algo": algo, "env": "Snake-v1", "steps": 1024})
    assert WORKER.validate(once) == once
    assert once["params"].get("total_timesteps", 1024) == 1024
