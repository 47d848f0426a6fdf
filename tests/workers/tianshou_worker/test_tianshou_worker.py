"""The Tianshou worker: descriptor, schemas from Tianshou's source, and real runs through the daemon
(online -> recorded dataset -> offline, checkpoints, resume, eval with frames, every algorithm)."""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT, connect, wait_for
from tests.workers.ray_worker.test_ray_worker import WAIT, events_of, finish, of_type  # the same run helpers
from workers.sdk.config import ConfigError
from workers.tianshou_worker import WORKER, catalog

pytest.importorskip("tianshou")


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
    # MOSAIC MultiGrid: the DQN family, one learner per agent; Jumanji: the discrete and continuous envs
    assert caps["paradigms"] == ["single_agent", "multi_agent"]
    assert caps["multi_agent_algorithms"] == ["dqn", "c51", "rainbow", "qrdqn", "iqn", "fqf"]
    assert {"jumanji", "multigrid"} <= set(caps["env_families"])
    assert "MosaicMultiGrid-S-2v2-IndAgObs-v1" in caps["envs"]["iqn"]
    assert not any(e.startswith("MosaicMultiGrid") for e in caps["envs"]["ppo"])
    assert "jumanji/Snake-v1" in caps["envs"]["ppo"] and "jumanji/BinPack-v2" not in caps["envs"]["ppo"]
    assert "jumanji/MultiCVRP-v0" in caps["envs"]["sac"] and "jumanji/MultiCVRP-v0" not in caps["envs"]["dqn"]
    # the game's keyword arguments are a param of a MultiGrid run only
    assert "env_kwargs" in WORKER.schema("dqn", "soccer_1vs1")["properties"]
    assert "env_kwargs" not in WORKER.schema("dqn", "CartPole-v1")["properties"]


# -- through the daemon --------------------------------------------------------------
SMALL = {"epoch_num_steps": 300, "test_envs": 1, "test_step_num_episodes": 2, "hidden_sizes": [32]}


@pytest.mark.slow
def test_online_record_offline_resume_and_eval_through_the_daemon(daemon, mosaic):
    """DQN records a dataset; discrete CQL learns from it by the run's name; DQN resumes from
    its checkpoint; an eval of the checkpoint publishes frames and records the episodes it
    finished before it was cancelled."""
    home = mosaic.home
    dqn = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 600,
                          "name": "dqn-rec", "record": {"episodes": 8},
                          "params": {**SMALL, "eps_training_final": 0.02, "eps_decay_steps": 400}})
    run = finish(mosaic, dqn)
    summary = run["summary"]
    assert summary["dataset"]["episodes"] == 8 and summary["dataset"]["transitions"] >= 8 * 8
    assert summary["checkpoints"][-1].endswith("final.pt") and summary["episodes"] > 8
    events = events_of(home, dqn)
    tags = {e["tag"] for e in of_type(events, "scalar")}
    assert {"test/returns_stat/mean", "update/loss", "train/n_collected_steps"} <= tags
    assert "Epoch #1: test_reward" in (home.run_dir(dqn) / "stdout.log").read_text()  # stray prints: the log
    # exploration annealed by Tianshou's EpochTrainCallbackDQNEpsLinearDecay: 0.1 at the start, 0.02 after 400 steps
    eps = [(e["step"], e["value"]) for e in of_type(events, "scalar") if e["tag"] == "train/eps"]
    assert eps[0][1] > 0.09 and eps[-1] == (eps[-1][0], 0.02) and eps[-1][0] > 400, eps
    meta = json.loads((home.run_dir(dqn) / "dataset.json").read_text())
    assert meta["env"] == "CartPole-v1" and meta["transitions"] == summary["dataset"]["transitions"]
    with connect(home) as c:
        offered = c.call("datasets", env="CartPole-v1")
        assert [d["name"] for d in offered] == ["dqn-rec"]
        assert c.call("datasets", env="Pendulum-v1") == []

    # all at once: offline from the dataset, a resumed DQN, an eval with frames that records
    # (these two through the CLI's flags: everything the form sets, submit can say)
    small = [f"--set={k}={json.dumps(v)}" for k, v in SMALL.items() if k != "epoch_num_steps"]
    offline = mosaic.submit("--worker", "tianshou", "--algo", "discrete_cql", "--env", "CartPole-v1", "--steps", "200",
                            "--name", "cql", "--dataset", "dqn-rec", "--set", "epoch_num_steps=100", *small)
    resumed = mosaic.submit("--worker", "tianshou", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "900",
                            "--checkpoint", "run:dqn-rec", "--set", "epoch_num_steps=300", *small)
    assert mosaic.show(offline)["config"]["dataset"].endswith("dataset.hdf5")
    watched = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "mode": "eval",
                              "checkpoint": "run:dqn-rec", "eval_episodes": 100000, "params": SMALL,
                              "record": {"episodes": 100000},
                              "frames": {"enabled": True, "fps": 30, "max_dim": 120}})
    # refused at submit: a run without a dataset, a dataset of another env
    no_data = Path(home.root) / "no-data.json"
    no_data.write_text(json.dumps({"worker": "tianshou", "algo": "discrete_bcq", "env": "CartPole-v1",
                                   "steps": 100, "dataset": "cql"}))
    out = mosaic.run("submit", str(no_data))
    assert out.returncode != 0 and "dataset: run cql has recorded no dataset" in out.stderr, out.stderr
    other_env = Path(home.root) / "other-env.json"
    other_env.write_text(json.dumps({"worker": "tianshou", "algo": "discrete_bcq", "env": "Acrobot-v1",
                                     "steps": 100, "dataset": "dqn-rec"}))
    out = mosaic.run("submit", str(other_env))
    assert out.returncode != 0 and "dataset: run dqn-rec recorded CartPole-v1, not Acrobot-v1" in out.stderr

    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    wait_for(lambda: layout.run_files(watched), 300, what="the eval run's FastLane segment")
    with FrameReader(watched) as reader:
        number, frame = wait_for(reader.latest, 120, what="a frame")
    assert number >= 1 and frame.shape == (80, 120, 3) and frame.std() > 0
    wait_for(lambda: mosaic.show(watched)["summary"]["episodes"] >= 2, 120, what="two eval episodes")
    mosaic.run("cancel", watched)
    run = finish(mosaic, watched, "cancelled")
    assert run["summary"]["dataset"]["episodes"] >= 2  # what it finished before the cancel is kept
    assert any(e["reason"].startswith("cancelled") for e in of_type(events_of(home, watched), "run_failed"))

    run = finish(mosaic, offline)
    assert run["config"]["dataset"] == summary["dataset"]["path"]
    assert run["summary"]["steps"] == 200
    assert any(e["tag"].startswith("update/") for e in of_type(events_of(home, offline), "scalar"))

    # the resumed run's trainer counters continue from the checkpoint's to the new total
    run = finish(mosaic, resumed)
    episodes = of_type(events_of(home, resumed), "episode")
    assert episodes and min(e["step"] for e in episodes) > 600
    assert run["summary"]["steps"] >= 900


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_every_algorithm_through_the_daemon(daemon, mosaic):
    """Every algorithm a few hundred steps (offline: 100 gradient steps on a dataset recorded
    by a DQN run on CartPole and a SAC run on Pendulum), two at a time; the wall time of each
    run goes to stderr (docs/workers/tianshou.md's table)."""
    home = mosaic.home
    tiny = {"epoch_num_steps": 300, "test_envs": 1, "test_step_num_episodes": 1, "hidden_sizes": [32, 32]}
    recorders = {
        "CartPole-v1": submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": 600,
                                       "name": "rec-cartpole", "record": {"episodes": 10}, "params": tiny}),
        "Pendulum-v1": submit(mosaic, {"worker": "tianshou", "algo": "sac", "env": "Pendulum-v1", "steps": 400,
                                       "name": "rec-pendulum", "record": {"episodes": 2},
                                       "params": {**tiny, "training_envs": 1}}),
    }
    for run_id in recorders.values():
        assert finish(mosaic, run_id)["summary"]["dataset"]["transitions"] > 0
    runs = {}
    for algo, info in catalog.ALGORITHMS.items():
        env = "Pendulum-v1" if info["actions"] == "continuous" else "CartPole-v1"
        params = dict(tiny)
        config = {"worker": "tianshou", "algo": algo, "env": env, "steps": 300, "params": params}
        if info["kind"] == catalog.ONLINE_ON:
            params["collection_step_num_env_steps"] = 100
        if info["kind"] == catalog.OFFLINE or info.get("dataset"):
            config["dataset"] = f"rec-{env.split('-')[0].lower()}"
        if info["kind"] == catalog.OFFLINE:
            config["steps"], params["epoch_num_steps"] = 100, 100
        runs[algo] = (env, submit(mosaic, config))
    failed = {}
    for algo, (env, run_id) in runs.items():
        mosaic.run("wait", run_id, "--timeout", WAIT)
        run = mosaic.show(run_id)
        events = events_of(home, run_id)
        ok = (run["state"] == "succeeded" and run["summary"]["steps"] >= run["config"]["steps"]
              and any(e["tag"].startswith("update/") for e in of_type(events, "scalar"))
              and of_type(events, "checkpoint_saved"))
        if not ok:
            failed[algo] = (run["state"], run.get("reason"), run["summary"]["steps"])
        sys.stderr.write(f"| {algo} | {env} | {run['ended_at'] - run['started_at']:.1f} |\n")
    assert not failed, failed


@pytest.mark.slow
def test_dqn_stopped_at_an_epoch_end_and_continued_trains_the_epochs_left(daemon, mosaic):
    """mosaic stop: the run saves the algorithm (networks, optimisers) and the trainer's counters at
    the end of its epoch and ends "stopped"; mosaic continue resumes the trainer from those counters,
    in the same run: the epochs left, every env step once and in order, the full step count."""
    # 12 epochs: the stop, asked after the second, lands well before the last (at the sixth with a
    # load average of 20 on 2 cores); the continued run then has epochs left, more than the 3 kept
    epoch, epochs = 300, 12
    run_id = submit(mosaic, {"worker": "tianshou", "algo": "dqn", "env": "CartPole-v1", "steps": epochs * epoch,
                             "name": "dqn-stop", "params": {**SMALL, "epoch_num_steps": epoch}})
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 2 * epoch, float(WAIT), 0.1,
             what="two epochs")
    assert mosaic.run("stop", run_id, "--timeout", WAIT).returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]
    assert "/stop_" in at["checkpoint"] and at["step"] % epoch == 0 and 2 * epoch <= at["step"] < epochs * epoch
    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] == epochs * epoch and run["restarts"] == 1

    events = events_of(mosaic.home, run_id)
    assert len(of_type(events, "restarted")) == 1 and len(of_type(events, "run_stopped")) == 1
    stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text()
    assert f"loaded {at['checkpoint']}" in stderr
    # the training collect stats, every 500 env steps: in order across the seam, none twice
    steps = [e["step"] for e in of_type(events, "scalar") if e["tag"] == "train/n_collected_steps"]
    assert steps == sorted(set(steps)) and steps[-1] > at["step"]
    episodes = [e["step"] for e in of_type(events, "episode")]
    assert episodes == sorted(episodes)
    saved = [e["path"].split("/")[-1] for e in of_type(events, "checkpoint_saved")]
    assert saved[-1] == "final.pt" and f"stop_{at['step'] // epoch:04d}.pt" in saved
    # one periodic checkpoint an epoch, each with its manifest; the home's keep_checkpoints (3) kept
    checkpoints = mosaic.home.run_dir(run_id) / "checkpoints"
    kept = sorted(p.name for p in checkpoints.glob("epoch_*.pt"))
    assert kept == sorted(n for n in saved if n.startswith("epoch_"))[-3:]
    assert sorted(p.name for p in checkpoints.glob("epoch_*.manifest.json")) == [n + ".manifest.json" for n in kept]
