"""The Tianshou worker: descriptor, schemas from Tianshou's source, and real runs through the daemon
(online -> recorded dataset -> offline, checkpoints, resume, eval with frames, every algorithm)."""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, connect, wait_for
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event
from workers.tianshou_worker import WORKER, catalog

pytest.importorskip("tianshou")
WAIT = "600"


def events_of(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [check_event(json.loads(line)) for line in lines]


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def finish(mosaic, run_id: str, state: str = "succeeded") -> dict:
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    if run["state"] != state:
        stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}), not {state}:\n{stderr}")
    return run


def submit(mosaic, config: dict) -> str:
    path = Path(mosaic.home.root) / f"config-{abs(hash(json.dumps(config, sort_keys=True)))}.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


# -- the descriptor ---------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from workers.tianshou_worker import WORKER
        caps = WORKER.capabilities()
        for algo in caps["algorithms"]:
            WORKER.schema(algo)
        WORKER.validate({"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 1000})
        heavy = sorted(m for m in ("torch", "tianshou", "gymnasium", "numpy", "h5py") if m in sys.modules)
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_schemas_are_tianshous_own_signatures():
    """Every upstream param of every schema is a parameter of the class Tianshou builds it
    with, with Tianshou's default (or ours, naming Tianshou's in the description)."""
    import tianshou.trainer
    from tianshou.algorithm import DQN

    checked = 0
    for algo, info in catalog.ALGORITHMS.items():
        props = catalog.schema(algo)["properties"]
        classes = [_load(*info["cls"]), _load(*info["policy"])]
        trainer = getattr(tianshou.trainer, catalog.TRAINER_PARAMS[info["kind"]])
        upstream = {}
        for cls in classes:
            upstream.update({n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()})
        upstream.update({f.name: f.default for f in trainer.__dataclass_fields__.values()})
        for key, spec in props.items():
            if key in catalog.MOSAIC_PARAMS:
                continue
            assert key in upstream, (algo, key)
            if spec["default"] != upstream[key]:
                assert f"Tianshou's default: {upstream[key]!r}" in spec["description"], (algo, key)
            checked += 1
    assert checked > 200
    dqn = catalog.schema("dqn")["properties"]
    assert dqn["is_double"]["default"] is True and "Double DQN" in dqn["is_double"]["description"]
    assert "target_update_freq" in inspect.signature(DQN.__init__).parameters
    assert "max_kl" in catalog.schema("trpo")["properties"] and "cql_weight" in catalog.schema("cql")["properties"]


def _load(path: str, name: str):
    import importlib
    module = "tianshou." + path[:-3].replace("/", ".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("config, field", [
    ({"algo": "dqn", "env": "Pendulum-v1"}, "env"),
    ({"algo": "sac", "env": "CartPole-v1"}, "env"),
    ({"algo": "dqn", "env": "CartPol-v1"}, "env"),
    ({"algo": "dqn", "params": {"gamma": 1.5}}, "params.gamma"),
    ({"algo": "dqn", "params": {"hidden_sizes": [64, 0]}}, "params.hidden_sizes[1]"),
    ({"algo": "dqn", "params": {"n_step_return_horizon": 0}}, "params.n_step_return_horizon"),
    ({"algo": "dqn", "params": {"eps_trainin": 0.1}}, "params.eps_trainin"),
    ({"algo": "c51", "params": {"v_min": 5.0, "v_max": 1.0}}, "params.v_min"),
    ({"algo": "discrete_cql"}, "dataset"),
    ({"algo": "gail", "env": "Pendulum-v1"}, "dataset"),
    ({"algo": "gail"}, "env"),
    ({"algo": "dqn", "dataset": "/nonexistent.hdf5"}, "dataset"),
    ({"algo": "dqn", "record": {}}, "record"),
])
def test_bad_config_is_refused_naming_the_field(config, field):
    full = {"worker": "tianshou", "env": "CartPole-v1", "steps": 300, **config}
    with pytest.raises(ConfigError) as err:
        WORKER.validate(full)
    assert err.value.field == field, err.value


def test_capabilities():
    caps = WORKER.capabilities()
    assert {"dqn", "c51", "rainbow", "qrdqn", "iqn", "fqf", "reinforce", "a2c", "ppo", "npg", "trpo", "ddpg",
            "td3", "sac", "discrete_sac", "redq", "bcq", "cql", "td3_bc", "discrete_bcq", "discrete_cql",
            "discrete_crr", "bc", "gail"} == set(caps["algorithms"])
    assert "CartPole-v1" in caps["envs"]["dqn"] and "Pendulum-v1" not in caps["envs"]["dqn"]
    assert "Pendulum-v1" in caps["envs"]["ppo"] and "CartPole-v1" in caps["envs"]["ppo"]
    assert set(caps["offline_algorithms"]) == {"bcq", "cql", "td3_bc", "discrete_bcq", "discrete_cql",
                                               "discrete_crr", "bc", "gail"}


# -- through the daemon --------------------------------------------------------------
SMALL = {"epoch_num_steps": 300, "test_envs": 1, "test_step_num_episodes": 2, "hidden_sizes": [32]}


def test_online_record_offline_resume_and_eval_through_the_daemon(daemon, mosaic):
    """DQN records a dataset; discrete CQL and BC learn from it by the run's name; PPO trains
    and resumes from its checkpoint; an eval of the DQN checkpoint records 3 episodes and
    publishes frames."""
    home = mosaic.home
    dqn = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 600,
                          "name": "dqn-rec", "record": {"episodes": 8}, "params": SMALL})
    ppo = submit(mosaic, {"worker": "tianshou", "algo": "ppo", "env": "CartPole-v1", "steps": 400,
                          "name": "ppo", "params": {**SMALL, "epoch_num_steps": 200,
                                                    "collection_step_num_env_steps": 200}})
    run = finish(mosaic, dqn)
    summary = run["summary"]
    assert summary["dataset"]["episodes"] == 8 and summary["dataset"]["transitions"] >= 8 * 8
    assert summary["checkpoints"][-1].endswith("final.pt") and summary["episodes"] > 8
    events = events_of(home, dqn)
    tags = {e["tag"] for e in of_type(events, "scalar")}
    assert {"test/returns_stat/mean", "update/loss", "train/n_collected_steps"} <= tags
    assert "Epoch #1: test_reward" in (home.run_dir(dqn) / "stdout.log").read_text()  # stray prints: the log
    meta = json.loads((home.run_dir(dqn) / "dataset.json").read_text())
    assert meta["env"] == "CartPole-v1" and meta["transitions"] == summary["dataset"]["transitions"]
    with connect(home) as c:
        offered = c.call("datasets", env="CartPole-v1")
        assert [d["name"] for d in offered] == ["dqn-rec"]
        assert c.call("datasets", env="Pendulum-v1") == []

    offline = {}
    for algo in ("discrete_cql", "bc"):
        offline[algo] = submit(mosaic, {"worker": "tianshou", "algo": algo, "env": "CartPole-v1", "steps": 200,
                                        "dataset": "dqn-rec", "params": {**SMALL, "epoch_num_steps": 100}})
    # refused at submit: a run without a dataset, a dataset of another env
    no_data = Path(home.root) / "no-data.json"
    no_data.write_text(json.dumps({"worker": "tianshou", "algo": "discrete_bcq", "env": "CartPole-v1",
                                   "steps": 100, "dataset": "ppo"}))
    out = mosaic.run("submit", str(no_data))
    assert out.returncode != 0 and "dataset: run ppo has recorded no dataset" in out.stderr, out.stderr
    other_env = Path(home.root) / "other-env.json"
    other_env.write_text(json.dumps({"worker": "tianshou", "algo": "discrete_bcq", "env": "Acrobot-v1",
                                     "steps": 100, "dataset": "dqn-rec"}))
    out = mosaic.run("submit", str(other_env))
    assert out.returncode != 0 and "dataset: run dqn-rec recorded CartPole-v1, not Acrobot-v1" in out.stderr

    for algo, run_id in offline.items():
        run = finish(mosaic, run_id)
        assert run["config"]["dataset"] == summary["dataset"]["path"]
        events = events_of(home, run_id)
        assert of_type(events, "scalar") and run["summary"]["steps"] == 200, algo
        assert any(e["tag"].startswith("update/") for e in of_type(events, "scalar")), algo

    # PPO resumes from its final checkpoint: the trainer's counters continue to the new total
    run = finish(mosaic, ppo)
    first_steps = run["summary"]["steps"]
    resumed = submit(mosaic, {"worker": "tianshou", "algo": "ppo", "env": "CartPole-v1", "steps": 800,
                              "checkpoint": "run:ppo", "params": {**SMALL, "epoch_num_steps": 200,
                                                                  "collection_step_num_env_steps": 200}})
    run = finish(mosaic, resumed)
    episodes = of_type(events_of(home, resumed), "episode")
    assert episodes and min(e["step"] for e in episodes) > first_steps >= 400
    assert run["summary"]["steps"] >= 800

    # eval of the DQN checkpoint: 3 episodes, recorded as a dataset, frames through FastLane
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    evaluation = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "mode": "eval",
                                 "checkpoint": "run:dqn-rec", "eval_episodes": 3, "record": {"episodes": 3},
                                 "params": SMALL})
    run = finish(mosaic, evaluation)
    assert run["summary"]["episodes"] == 3 and run["summary"]["dataset"]["episodes"] == 3
    watched = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "mode": "eval",
                              "checkpoint": "run:dqn-rec", "eval_episodes": 100000, "params": SMALL,
                              "frames": {"enabled": True, "fps": 30, "max_dim": 120}})
    wait_for(lambda: layout.run_files(watched), 120, what="the eval run's FastLane segment")
    with FrameReader(watched) as reader:
        number, frame = wait_for(reader.latest, 60, what="a frame")
    assert number >= 1 and frame.shape == (80, 120, 3) and frame.std() > 0
    mosaic.run("cancel", watched)
    run = finish(mosaic, watched, "cancelled")
    assert any(e.get("reason", "").startswith("cancelled") for e in of_type(events_of(home, watched), "run_failed"))
