"""The XuanCe worker, run the way the supervisor runs it: ``python -m
workers.xuance_worker.cli --config config.json`` in a run directory, stdout
appending to events.jsonl, stderr to stderr.log; and through the daemon.

Every run is a few thousand steps on CPU with small buffers and few parallel
environments, so updates happen and losses are logged. Trained runs are
shared between tests through ``trained()`` (each trains once per session).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from argparse import Namespace
from collections import defaultdict
from pathlib import Path

import pytest

from tests.helpers import ROOT, wait_for, walk_runs, worker_scalar
from workers.fastlane.reader import FrameReader
from workers.fastlane.writer import cleanup as fastlane_cleanup
from workers.sdk.config import ConfigError, check_params
from workers.sdk.rundir import CHECKPOINT_META
from workers.sdk.telemetry import check_event
from workers.xuance_worker import WORKER, catalog

CLI = [sys.executable, "-m", "workers.xuance_worker.cli", "--config", "config.json"]

RUNS = {
    "ppo": dict(algo="ppo", env="CartPole-v1", steps=2048,
                params={"parallels": 4, "horizon_size": 128, "n_epochs": 2, "checkpoint_interval": 1024}),
    "dqn": dict(algo="dqn", env="CartPole-v1", steps=1500,
                params={"parallels": 2, "start_training": 200, "batch_size": 32, "buffer_size": 2000}),
    # the default vectorizer, SubprocVecMultiAgentEnv: the MPE alias must work in spawned processes
    "mappo": dict(algo="mappo", env="simple_spread_v3", steps=1500, params={"parallels": 2}),
    # IPPO's default buffer_size (3200 over 16 envs) would not fill in a short run
    "ippo": dict(algo="ippo", env="simple_spread_v3", steps=1200,
                 params={"parallels": 2, "buffer_size": 200, "n_epochs": 2, "use_parameter_sharing": False,
                         "vectorize": "DummyVecMultiAgentEnv"},
                 # and live frames of both environments (the daemon sets run_id)
                 frames={"enabled": True, "fps": 20, "grid": 2}, run_id=f"xuance-test-{uuid.uuid4().hex[:12]}"),
}


# -- running the worker like the supervisor does -------------------------------
def config_for(spec: dict, **extra) -> dict:
    return {"worker": "xuance", "seed": 1, "device": "cpu", **spec, **extra}


def run_worker(run_dir: Path, config: dict, timeout: float = 300) -> tuple[int, list[dict]]:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    # O_APPEND, as the supervisor opens them
    with open(run_dir / "events.jsonl", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        proc = subprocess.Popen(CLI, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        returncode = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return returncode, read_events(run_dir)


def read_events(run_dir: Path) -> list[dict]:
    lines = (run_dir / "events.jsonl").read_text().splitlines()
    return [check_event(json.loads(line)) for line in lines]


def stderr_of(run_dir: Path) -> str:
    return (run_dir / "stderr.log").read_text(errors="replace")[-3000:]


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def tags_of(events: list[dict]) -> set[str]:
    return {e["tag"] for e in of_type(events, "scalar")}


_trained: dict[str, tuple[Path, int, list[dict]]] = {}
# the tests that read a run of trained() run in one xdist process, one after another: each run is
# trained once in the suite (handed out one by one, PPO's and MAPPO's could be trained in each process)
SHARES_TRAINED_RUNS = pytest.mark.xdist_group("xuance_trained")


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xuance-runs")


def trained(name: str, runs_root: Path) -> tuple[Path, int, list[dict]]:
    """Train RUNS[name] once per session: (run dir, exit code, events)."""
    if name not in _trained:
        run_dir = runs_root / name
        returncode, events = run_worker(run_dir, config_for(RUNS[name]))
        _trained[name] = (run_dir, returncode, events)
    return _trained[name]


def check_episode_accounting(episodes: list[dict], num_envs: int) -> None:
    """Exactly one event per episode end. XuanCe reports an episode at the step
    counter of the vector step that ended it (before adding that step), so in
    each sub-env the lengths of its episodes add up to step / num_envs + 1."""
    by_env = defaultdict(list)
    for event in episodes:
        by_env[event.get("env_index", 0)].append(event)
    for env_index, events in by_env.items():
        elapsed = 0
        for event in events:
            elapsed += event["length"]
            assert event["step"] == (elapsed - 1) * num_envs, (env_index, event)


def check_lifecycle(run_dir: Path, returncode: int, events: list[dict], spec: dict) -> None:
    assert returncode == 0, stderr_of(run_dir)
    assert events[0]["type"] == "run_started"
    assert (events[0]["worker"], events[0]["algo"], events[0]["env"]) == ("xuance", spec["algo"], spec["env"])
    assert events[0]["total_steps"] == spec["steps"]
    assert events[-1]["type"] == "run_completed" and events[-1]["step"] == spec["steps"]
    assert not of_type(events, "run_failed")
    # XuanCe's prints went to stdout.log, never among the events; TensorBoard files to tensorboard/
    assert "Algorithm: " in (run_dir / "stdout.log").read_text()
    assert list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert not (run_dir / "logs").exists() and not (run_dir / "models").exists()


# -- the descriptor ---------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from workers.xuance_worker import WORKER
        caps = WORKER.capabilities()
        for algo in caps["algorithms"]:
            WORKER.schema(algo)
        WORKER.validate({"worker": "xuance", "algo": "mappo", "env": "simple_spread_v3", "steps": 1000})
        WORKER.validate({"worker": "xuance", "algo": "ppo", "env": "CartPole-v1", "steps": 1000})
        heavy = sorted(m for m in ("torch", "xuance", "gym", "gymnasium", "numpy", "pettingzoo", "mpe2")
                       if m in sys.modules)
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_capabilities():
    caps = WORKER.capabilities()
    assert caps["paradigms"] == ["single_agent", "multi_agent"]
    assert caps["algorithms"] == list(catalog.ALGORITHMS)
    assert {"ppo", "dqn", "mappo", "ippo", "qmix", "vdn", "maddpg", "iql", "masac"} <= set(caps["algorithms"])
    assert caps["env_families"] == ["classic_control", "box2d", "mujoco", "atari", "vizdoom", "mpe", "multigrid",
                                    "sisl"]
    assert "vizdoom" in caps["env_families_by_algorithm"]["ppo"] and "VizdoomBasic-v1" in caps["envs"]["dqn"]
    assert "MosaicMultiGrid-S-1v1-IndAgObs-v1" in caps["envs"]["mappo"]
    assert caps["env_families_by_algorithm"]["mappo"] == ["mpe", "multigrid", "sisl"]
    assert caps["env_families_by_algorithm"]["maddpg"] == ["mpe", "sisl"]   # multiwalker_v9 (continuous)
    assert "simple_spread_v3" in caps["envs"]["mappo"] and "CartPole-v1" in caps["envs"]["ppo"]
    assert "CartPole-v1" not in caps["envs"]["mappo"] and "simple_spread_v3" not in caps["envs"]["dqn"]
    assert caps["action_spaces"]["dqn"] == ["discrete"] and caps["action_spaces"]["td3"] == ["continuous"]
    assert "mappo" in caps["competitive"] and "qmix" not in caps["competitive"]
    assert caps["pause"] is True and caps["checkpoints"] is True and caps["frames"] is True
    assert caps["self_play"] is False and caps["max_agents"] > 1


def test_schema_shows_xuance_defaults():
    ppo = WORKER.schema("ppo", "CartPole-v1")["properties"]
    # xuance/configs/ppo/classic_control/CartPole-v1.yaml
    assert ppo["horizon_size"]["default"] == 256 and ppo["horizon_size"]["type"] == "integer"
    assert ppo["learning_rate"]["default"] == 0.0004 and ppo["learning_rate"]["type"] == "number"
    assert ppo["use_gae"] == {"type": "boolean", "default": True}
    assert ppo["representation_hidden_size"]["default"] == [128]
    assert ppo["vectorize"]["enum"] == ["DummyVecEnv", "SubprocVecEnv"]
    # a key only basic.yaml has, and one XuanCe's learner reads with a default
    assert ppo["activation_action"]["default"] == "tanh"
    assert ppo["end_factor_lr_decay"]["default"] == 1.0
    # set by the run config, not params
    for owned in ("running_steps", "seed", "env_id", "device", "log_dir", "model_dir", "agent"):
        assert owned not in ppo
    assert "env_kwargs" not in ppo and "training_mode" not in ppo  # MPE only
    assert WORKER.schema("ppo", "Pendulum-v1")["properties"]["policy"]["default"] == "Gaussian_AC"
    assert WORKER.schema("ippo", "simple_spread_v3")["properties"]["buffer_size"]["default"] == 3200
    mappo = WORKER.schema("mappo", "simple_spread_v3")["properties"]
    assert mappo["buffer_size"]["default"] == 400 and mappo["use_parameter_sharing"]["default"] is True
    assert mappo["training_mode"]["default"] == "cooperative"
    assert mappo["parallels"]["description"] == "The number of environments to run in parallel."
    # a game of teams: agents have their own networks by default
    tag = WORKER.schema("mappo", "simple_tag_v3")["properties"]
    assert tag["training_mode"]["default"] == "competitive" and tag["use_parameter_sharing"]["default"] is False
    assert tag["use_global_state"]["default"] is True  # MAPPO's critic cannot stack unlike observations
    for algo in WORKER.algorithms():  # every default passes its own schema
        schema = WORKER.schema(algo)
        json.dumps(schema)
        check_params(schema, {})


# -- bad configs are refused before anything starts --------------------------------
PPO = {"worker": "xuance", "algo": "ppo", "env": "CartPole-v1", "steps": 10000}
MAPPO = {"worker": "xuance", "algo": "mappo", "env": "simple_spread_v3", "steps": 10000}


@pytest.mark.parametrize("config, field", [
    ({**PPO, "algo": "npg", "params": {"actor_hidden_size": [32, 128]}}, "params.actor_hidden_size"),  # 4096²
    ({**PPO, "algo": "npg", "params": {"representation_hidden_size": [128]}}, "params.representation_hidden_size"),
    ({**MAPPO, "algo": "dcg"}, "algo"),
    ({**PPO, "algo": "dreamerv3", "env": "VizdoomBasic-v1"}, "env"),      # Dreamer's decoder: 64x64, not 84x84
    ({**PPO, "env": "simple_spread_v3"}, "env"),                          # single-agent algo, MPE env
    ({**MAPPO, "env": "CartPole-v1"}, "env"),
    ({**PPO, "algo": "dqn", "env": "Pendulum-v1"}, "env"),                # discrete algo, continuous env
    ({**PPO, "algo": "td3"}, "env"),
    ({**PPO, "env": "LunarLandr-v3"}, "env"),                             # unknown here
    ({**PPO, "env": "boxed:LunarLander-v3"}, "env"),                      # no such family
    ({**PPO, "params": {"learning_rat": 0.001}}, "params.learning_rat"),
    ({**PPO, "params": {"learning_rate": "fast"}}, "params.learning_rate"),
    ({**PPO, "params": {"learning_rate": 0}}, "params.learning_rate"),
    ({**PPO, "params": {"parallels": 0}}, "params.parallels"),
    ({**PPO, "params": {"horizon_size": 2.5}}, "params.horizon_size"),
    ({**PPO, "params": {"vectorize": "RayVecEnv"}}, "params.vectorize"),
    ({**PPO, "params": {"representation_hidden_size": [64, 0]}}, "params.representation_hidden_size[1]"),
    ({**PPO, "params": {"running_steps": 5000}}, "params.running_steps"),  # owned by 'steps'
    ({**PPO, "params": {"seed": 3}}, "params.seed"),
    ({**PPO, "params": {"env_kwargs": {"N": 2}}}, "params.env_kwargs"),   # MPE only
    ({**PPO, "steps": 4, "params": {"parallels": 8}}, "steps"),
    ({**PPO, "params": {"parallels": 2, "horizon_size": 2, "n_minibatch": 8}}, "params.n_minibatch"),
    ({**PPO, "algo": "dqn", "params": {"batch_size": 512, "buffer_size": 100}}, "params.batch_size"),
    ({**PPO, "device": "cuda"}, "device"),                                # CPU-only torch
    ({**PPO, "mode": "eval"}, "checkpoint"),
    ({**PPO, "mode": "eval", "checkpoint": "/nonexistent/final_train_model.pth"}, "checkpoint"),
    ({**MAPPO, "params": {"buffer_size": 8}}, "params.buffer_size"),      # less than parallels (16)
    ({**MAPPO, "algo": "qmix", "params": {"training_mode": "competitive"}}, "params.training_mode"),
    ({**MAPPO, "params": {"training_mode": "competitive", "use_parameter_sharing": True}},
     "params.use_parameter_sharing"),
    ({**MAPPO, "env": "simple_tag_v3", "params": {"use_parameter_sharing": True}}, "params.use_parameter_sharing"),
    ({**MAPPO, "params": {"continuous_action": False}}, "params.continuous_action"),
    ({**MAPPO, "env": "simple_tag_v3", "params": {"use_global_state": False}}, "params.use_global_state"),
    ({**MAPPO, "params": {"env_kwargs": {"render_mode": "human"}}}, "params.env_kwargs.render_mode"),
    # curricula
    ({**PPO, "steps": None, "params": {"curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 100},
                                                               {"env_id": "Acrobot-v1", "steps": 100}]}},
     "params.curriculum_schedule[1].env_id"),
    ({**PPO, "steps": None, "params": {"curriculum_schedule": [{"env_id": "CartPole-v0", "steps": 100}]}},
     "params.curriculum_schedule[0].env_id"),                             # the first phase is the run's env
    ({**PPO, "steps": None, "params": {"curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 100},
                                                               {"env_id": "simple_v3", "steps": 100}]}},
     "params.curriculum_schedule[1].env_id"),
    ({**PPO, "steps": None, "params": {"curriculum_schedule": [{"env_id": "CartPole-v1"}]}},
     "params.curriculum_schedule[0].steps"),
    ({**PPO, "steps": None, "params": {"curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 10,
                                                                "speed": 2}]}},
     "params.curriculum_schedule[0].speed"),
    ({**PPO, "steps": 300, "params": {"curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 100},
                                                              {"env_id": "CartPole-v0", "steps": 100}]}},
     "steps"),                                                            # phases add up to 200
    ({**PPO, "steps": None, "params": {"curriculum_schedule": []}}, "params.curriculum_schedule"),
    ({**PPO, "worker": "cleanrl"}, "worker"),
    ({**PPO, "surprise": 1}, "surprise"),
    ({**MAPPO, "record": {"episodes": 3}}, "record"),                      # datasets are single-agent
])
def test_bad_config_is_refused_naming_the_field(config, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate(config)
    assert err.value.field == field


def test_good_configs_are_normalised():
    config = WORKER.validate({**PPO, "params": {"learning_rate": 1, "use_gae": False}})
    assert config["params"]["learning_rate"] == 1.0 and isinstance(config["params"]["learning_rate"], float)
    assert config["params"]["horizon_size"] == 256  # XuanCe's default, filled in
    # the family can be named; a curriculum sets the steps
    config = WORKER.validate({**PPO, "env": "classic_control:CartPole-v1", "steps": None, "params": {
        "curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 300}, {"env_id": "CartPole-v0", "steps": 200}]}})
    assert config["steps"] == 500
    # competitive training: own networks for every agent
    config = WORKER.validate({**MAPPO, "params": {"training_mode": "competitive"}})
    assert config["params"]["use_parameter_sharing"] is False
    # an env without its own XuanCe file takes the family's nearest one
    WORKER.validate({**PPO, "env": "MountainCarContinuous-v0"})
    WORKER.validate({**MAPPO, "env": "mpe:simple_reference_v3"})


# -- training ------------------------------------------------------------------------
@SHARES_TRAINED_RUNS
def test_ppo_cartpole(runs_root):
    run_dir, returncode, events = trained("ppo", runs_root)
    spec = RUNS["ppo"]
    check_lifecycle(run_dir, returncode, events, spec)
    assert {"actor_loss", "critic_loss", "entropy", "learning_rate", "predict_value"} <= tags_of(events)
    assert all(0 <= e["step"] <= spec["steps"] for e in of_type(events, "scalar"))
    episodes = of_type(events, "episode")
    assert len(episodes) > 20 and {e["env_index"] for e in episodes} == {0, 1, 2, 3}
    check_episode_accounting(episodes, 4)
    # every checkpoint_interval steps, and the final model; each with its metadata
    saved = of_type(events, "checkpoint_saved")
    assert [(e["path"], e["step"]) for e in saved] == [
        ("checkpoints/step_1024/model_step_1024.pth", 1024),
        ("checkpoints/final/final_train_model.pth", 2048)]
    for event in saved:
        assert (run_dir / event["path"]).is_file()
        meta = json.loads((run_dir / event["path"]).with_name(CHECKPOINT_META).read_text())
        assert meta["algo"] == "ppo" and meta["step"] == event["step"] and meta["env_id"] == "CartPole-v1"
        assert meta["params"]["horizon_size"] == 128 and "checkpoint_interval" not in meta["params"]
        assert (run_dir / event["path"]).with_name("obs_rms.npy").is_file()  # XuanCe's observation statistics


@SHARES_TRAINED_RUNS
def test_dqn_cartpole(runs_root):
    run_dir, returncode, events = trained("dqn", runs_root)
    check_lifecycle(run_dir, returncode, events, RUNS["dqn"])
    assert {"Qloss", "predictQ", "epsilon-greedy", "learning_rate"} <= tags_of(events)
    losses = [e for e in of_type(events, "scalar") if e["tag"] == "Qloss"]
    assert min(e["step"] for e in losses) > 200  # learning starts after start_training
    check_episode_accounting(of_type(events, "episode"), 2)


@SHARES_TRAINED_RUNS
def test_mappo_simple_spread(runs_root):
    run_dir, returncode, events = trained("mappo", runs_root)
    spec = RUNS["mappo"]
    check_lifecycle(run_dir, returncode, events, spec)
    started = events[0]
    assert started["n_agents"] == 3 and started["parameter_sharing"] is True
    assert started["training_mode"] == "cooperative"
    # one shared network: XuanCe logs it under the first agent's name
    assert {"agent_0/actor_loss", "agent_0/critic_loss", "agent_0/entropy", "learning_rate"} <= tags_of(events)
    episodes = of_type(events, "episode")
    assert len(episodes) == spec["steps"] // 25  # MPE episodes are 25 steps
    check_episode_accounting(episodes, 2)
    for event in episodes:
        assert set(event["agents"]) == {"agent_0", "agent_1", "agent_2"}
        assert event["return"] == pytest.approx(sum(event["agents"].values()) / 3)
    meta = json.loads((run_dir / "checkpoints" / "final" / CHECKPOINT_META).read_text())
    assert meta["n_agents"] == 3 and meta["parameter_sharing"] is True
    assert meta["agent_keys"] == ["agent_0", "agent_1", "agent_2"]


@SHARES_TRAINED_RUNS
def test_ippo_simple_spread_independent_networks(runs_root):
    run_dir, returncode, events = trained("ippo", runs_root)
    check_lifecycle(run_dir, returncode, events, RUNS["ippo"])
    tags = tags_of(events)
    for agent in ("agent_0", "agent_1", "agent_2"):  # each agent's own networks, each its own losses
        assert {f"{agent}/actor_loss", f"{agent}/critic_loss"} <= tags, tags
    check_episode_accounting(of_type(events, "episode"), 2)
    meta = json.loads((run_dir / "checkpoints" / "final" / CHECKPOINT_META).read_text())
    assert meta["parameter_sharing"] is False
    # frames went to FastLane: the two environments side by side, at most max_dim (400) wide
    run_id = RUNS["ippo"]["run_id"]
    reader = FrameReader(run_id)
    try:
        number, frame = reader.latest()
        assert number > 1 and frame.shape == (200, 400, 3) and frame.any()
    finally:
        reader.close()
        fastlane_cleanup(run_id)


def test_competitive_teams_are_reported_apart(tmp_path):
    spec = dict(algo="ippo", env="simple_adversary_v3", steps=500,
                params={"parallels": 2, "buffer_size": 100, "vectorize": "DummyVecMultiAgentEnv",
                        "env_kwargs": {"max_cycles": 10}})
    returncode, events = run_worker(tmp_path / "run", config_for(spec))
    check_lifecycle(tmp_path / "run", returncode, events, spec)
    assert events[0]["training_mode"] == "competitive" and events[0]["parameter_sharing"] is False
    episodes = of_type(events, "episode")
    assert len(episodes) == 50 and all(e["length"] == 10 for e in episodes)  # env_kwargs reached the scenario
    assert set(episodes[0]["agents"]) == {"adversary_0", "agent_0", "agent_1"}
    teams = [e for e in of_type(events, "scalar") if e["tag"] in ("returns/adversary", "returns/agent")]
    assert len(teams) == 2 * len(episodes)
    first = episodes[0]
    adversary = next(e for e in teams if e["tag"] == "returns/adversary" and e["step"] == first["step"])
    assert adversary["value"] == pytest.approx(first["agents"]["adversary_0"])
    assert {"adversary_0/actor_loss", "agent_1/actor_loss"} <= tags_of(events)


# -- curriculum --------------------------------------------------------------------
def test_two_phase_curriculum(tmp_path):
    spec = dict(algo="ppo", env="CartPole-v1", steps=2048,
                params={"parallels": 4, "horizon_size": 128, "n_epochs": 2, "end_factor_lr_decay": 0.1,
                        "curriculum_schedule": [{"env_id": "CartPole-v1", "steps": 1024},
                                                {"env_id": "CartPole-v0", "steps": 1024}]})
    returncode, events = run_worker(tmp_path / "run", config_for(spec))
    check_lifecycle(tmp_path / "run", returncode, events, spec)
    phases = of_type(events, "phase")
    assert [(e["name"], e["step"], e["index"]) for e in phases] == [("CartPole-v1", 0, 0), ("CartPole-v0", 1024, 1)]
    # one process, one learner: the learning-rate schedule runs on across the switch instead of restarting
    rates = [e["value"] for e in of_type(events, "scalar") if e["tag"] == "learning_rate"]
    assert len(rates) == 4 and rates == sorted(rates, reverse=True) and len(set(rates)) == 4
    assert rates[-1] == pytest.approx(0.0004 * 0.1, rel=0.5)
    # the second phase's episodes come from CartPole-v0's environments, counted on from the first phase
    switch = events.index(phases[1])
    after = [e for e in events[switch:] if e["type"] == "episode"]
    assert after and all(e["step"] >= 1024 for e in after)
    meta = json.loads((tmp_path / "run" / "checkpoints" / "final" / CHECKPOINT_META).read_text())
    assert meta["env_id"] == "CartPole-v0" and meta["step"] == 2048


def test_curriculum_with_other_spaces_is_refused_before_training(tmp_path):
    # the same scenario with 2 agents instead of 3: other observation spaces, found by building the envs
    spec = dict(algo="mappo", env="simple_spread_v3", steps=None,
                params={"parallels": 2, "vectorize": "DummyVecMultiAgentEnv",
                        "curriculum_schedule": [{"env_id": "simple_spread_v3", "steps": 500},
                                                {"env_id": "simple_spread_v3", "steps": 500, "env_kwargs": {"N": 2}}]})
    returncode, events = run_worker(tmp_path / "run", config_for(spec))
    assert returncode == 2, stderr_of(tmp_path / "run")
    failed = events[-1]
    assert failed["type"] == "run_failed"
    assert failed["reason"].startswith("invalid config: params.curriculum_schedule[1]: simple_spread_v3 has")
    assert "all phases must share observation and action spaces" in failed["reason"]
    assert not of_type(events, "episode") and not of_type(events, "phase")


# -- evaluation ------------------------------------------------------------------------
@SHARES_TRAINED_RUNS
def test_evaluation_from_a_checkpoint(runs_root, tmp_path):
    train_dir, returncode, _ = trained("ppo", runs_root)
    assert returncode == 0, stderr_of(train_dir)
    checkpoint = train_dir / "checkpoints" / "final" / "final_train_model.pth"
    config = {"worker": "xuance", "algo": "ppo", "env": "CartPole-v1", "mode": "eval",
              "checkpoint": str(checkpoint), "eval_episodes": 3, "seed": 3}
    returncode, events = run_worker(tmp_path / "eval", config)
    assert returncode == 0, stderr_of(tmp_path / "eval")
    assert events[0]["type"] == "run_started" and events[0]["mode"] == "eval"
    assert events[-1]["type"] == "run_completed"
    episodes = of_type(events, "episode")
    assert len(episodes) == 3
    elapsed = 0
    for event in episodes:  # one environment, episodes one after the other
        elapsed += event["length"]
        assert event["step"] == elapsed
    mean = [e for e in of_type(events, "scalar") if e["tag"] == "Test-Episode-Rewards/Mean-Score"]
    assert mean and mean[0]["value"] == pytest.approx(sum(e["return"] for e in episodes) / 3)
    assert "Successfully load model" in (tmp_path / "eval" / "stdout.log").read_text()
    # the checkpoint's folder works as well as its file
    config["checkpoint"] = str(checkpoint.parent)
    config["eval_episodes"] = 1
    returncode, events = run_worker(tmp_path / "eval-dir", config)
    assert returncode == 0 and len(of_type(events, "episode")) == 1


@SHARES_TRAINED_RUNS
def test_parameter_shared_checkpoint_refused_for_another_agent_count(runs_root, tmp_path):
    train_dir, returncode, _ = trained("mappo", runs_root)
    assert returncode == 0, stderr_of(train_dir)
    config = {"worker": "xuance", "algo": "mappo", "env": "simple_spread_v3", "mode": "eval",
              "checkpoint": str(train_dir / "checkpoints" / "final" / "final_train_model.pth"),
              "eval_episodes": 1, "params": {"env_kwargs": {"N": 2}}}
    # at submit time
    with pytest.raises(ConfigError) as err:
        WORKER.validate(config)
    assert err.value.field == "checkpoint"
    assert "shares one network among 3 agents (parameter sharing)" in err.value.message
    assert "here has 2" in err.value.message
    # and by the worker, before loading anything
    returncode, events = run_worker(tmp_path / "eval", config)
    assert returncode == 2
    assert events[-1]["type"] == "run_failed" and "parameter sharing" in events[-1]["reason"]
    # with 3 agents it plays
    config["params"] = {}
    returncode, events = run_worker(tmp_path / "eval-3", config)
    assert returncode == 0, stderr_of(tmp_path / "eval-3")
    (episode,) = of_type(events, "episode")
    assert set(episode["agents"]) == {"agent_0", "agent_1", "agent_2"}


def test_fit_check_in_the_worker():
    """The worker's own check, for checkpoints whose agent count mosaic cannot know at submit time."""
    from workers.xuance_worker.evaluate import check_fits
    meta = {"n_agents": 3, "parameter_sharing": True, "agent_keys": ["agent_0", "agent_1", "agent_2"],
            "observation_space": "A", "action_space": "B"}
    agent = Namespace(observation_space="A", action_space="B")
    envs = Namespace(num_agents=2, agents=["agent_0", "agent_1"])
    with pytest.raises(ConfigError, match="shares one network among 3 agents"):
        check_fits(meta, agent, envs, "custom_v1", multi_agent=True)
    with pytest.raises(ConfigError, match="has networks for agents agent_0, agent_1, agent_2"):
        check_fits({**meta, "parameter_sharing": False}, agent, envs, "custom_v1", multi_agent=True)
    with pytest.raises(ConfigError, match="observation space A; custom_v1 here has C"):
        check_fits(meta, Namespace(observation_space="C", action_space="B"), None, "custom_v1", multi_agent=False)
    check_fits(meta, agent, Namespace(num_agents=3, agents=meta["agent_keys"]), "custom_v1", multi_agent=True)


# -- cancelling -----------------------------------------------------------------------
def test_cancel_is_reported_and_the_worker_dies_of_the_signal(tmp_path):
    """The shim cancels with SIGTERM to the worker's process group: XuanCe's env processes too."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = config_for(dict(algo="mappo", env="simple_spread_v3", steps=1_000_000, params={"parallels": 2}))
    (run_dir / "config.json").write_text(json.dumps(config))
    with open(run_dir / "events.jsonl", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        proc = subprocess.Popen(CLI, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not of_type(read_events(run_dir), "episode"):
            assert proc.poll() is None and time.monotonic() < deadline, stderr_of(run_dir)
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    events = read_events(run_dir)
    assert events[-1]["type"] == "run_failed" and events[-1]["reason"] == "cancelled (SIGTERM)"
    def group_gone() -> bool:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        return False

    deadline = time.monotonic() + 15  # multiprocessing's resource tracker leaves once its pipe closes
    while not group_gone():
        assert time.monotonic() < deadline, "processes of the cancelled run are left"
        time.sleep(0.2)


# -- every algorithm in the capabilities runs ---------------------------------------------
def walk_config(algo: str) -> dict:
    """A few hundred steps, sized so that every algorithm updates at least once."""
    info = catalog.ALGORITHMS[algo]
    defaults = {key: prop.get("default") for key, prop in WORKER.schema(algo)["properties"].items()}
    params: dict = {"parallels": 2}
    if info["family"] == catalog.MPE:
        env, steps = "simple_spread_v3", 300
        params["vectorize"] = "DummyVecMultiAgentEnv"
        if "n_minibatch" in defaults:  # on-policy: a rollout of 50 steps per env, or 4 whole episodes (RNN)
            params["buffer_size"] = 4 if defaults.get("use_rnn") else 100
    else:
        continuous = info["actions"] == ["continuous"]
        env, steps = ("Pendulum-v1", 500) if continuous else ("CartPole-v1", 400)
        if "horizon_size" in defaults:
            params["horizon_size"] = 32
    if "start_training" in defaults:
        params.update(start_training=64, batch_size=32, buffer_size=1000)
    if "n_epochs" in defaults:
        params["n_epochs"] = 1
    if "world_model" in defaults:   # Dreamer: XuanCe's sizes take minutes for a few hundred steps
        from tests.workers.xuance_worker.test_xuance_algorithms import SMALL_DREAMER
        params.update(SMALL_DREAMER)
    return {"worker": "xuance", "algo": algo, "env": env, "steps": steps, "seed": 1, "params": params}


# the XuanCe walk: every config through the worker's runtime and the shared guard, as serve() calls
# them, XuanCe imported once (tests.helpers.walk_runs)
WALK = ("from workers.xuance_worker import WORKER, runtime\nfrom workers.sdk.guard import guarded\n"
        "from workers.sdk.stop import SIGNALS",
        "guarded(emitter, SIGNALS, lambda: runtime.train(WORKER.validate(config), emitter), 'walk')")


def walk_jobs(tmp_path, algorithms: list[str]) -> list[tuple[str, dict]]:
    """(run directory, config) of a walk over ``algorithms``, a directory each."""
    jobs = []
    for algo in algorithms:
        run_dir = tmp_path / algo
        run_dir.mkdir()
        jobs.append((str(run_dir), walk_config(algo)))
    return jobs


@pytest.mark.slow
@pytest.mark.long   # the breadth sweep (make test-long)
def test_every_algorithm_runs(tmp_path):
    algorithms = WORKER.capabilities()["algorithms"]
    jobs = walk_jobs(tmp_path, algorithms)
    results = walk_runs(jobs, *WALK)
    failed = {}
    for algo in algorithms:
        events = read_events(tmp_path / algo)
        kinds = [e["type"] for e in events]
        losses = {t for t in tags_of(events) if "loss" in t.lower()}
        ok = (results.get(algo) == 0 and kinds[0] == "run_started" and kinds[-1] == "run_completed"
              and "episode" in kinds and "checkpoint_saved" in kinds
              # PerDQN's agent drops its learner's loss (XuanCe 1.4.4): it logs epsilon only
              and (losses or algo == "perdqn") and tags_of(events))
        if not ok:
            failed[algo] = (results.get(algo), [e for e in events if e["type"] == "run_failed"][-1:],
                            sorted(tags_of(events)))
    assert not failed, failed


# each algorithm stopped at its first safe point, then continued to its end, in one process
WALK_STOP = (WALK[0] + "\nfrom workers.sdk.telemetry import Emitter\n"
             "def stop_and_continue(config, emitter, fd):\n"
             "    SIGNALS.stop_requested = True\n"
             "    code = guarded(emitter, SIGNALS, lambda: runtime.train(WORKER.validate(config), emitter), 'walk')\n"
             "    SIGNALS.stop_requested = False\n"
             "    stopped = [json.loads(l) for l in open('events.jsonl')][-1]\n"
             "    if code != 75 or stopped['type'] != 'run_stopped':\n"
             "        return f'not stopped: {code}'\n"
             "    config = {**config, 'continue_from': stopped['checkpoint']}\n"
             "    again = Emitter(fd)\n"
             "    return guarded(again, SIGNALS, lambda: runtime.train(WORKER.validate(config), again), 'walk')\n",
             "stop_and_continue(config, emitter, fd)")


@pytest.mark.slow
@pytest.mark.long   # the breadth sweep (make test-long)
def test_every_algorithm_stops_and_continues(tmp_path):
    """Every algorithm's resume state saves and loads (optimizers, schedulers, value normalizers,
    buffers of every kind), and the continued run ends at its steps."""
    algorithms = WORKER.capabilities()["algorithms"]
    jobs = walk_jobs(tmp_path, algorithms)
    results = walk_runs(jobs, *WALK_STOP)
    failed = {}
    for algo, (_, config) in zip(algorithms, jobs):
        events = read_events(tmp_path / algo)
        ok = (results.get(algo) == 0 and len(of_type(events, "run_stopped")) == 1
              and events[-1]["type"] == "run_completed" and events[-1]["step"] == config["steps"])
        if not ok:
            failed[algo] = (results.get(algo), [e for e in events if e["type"] == "run_failed"][-1:])
    assert not failed, failed


# -- through the daemon ------------------------------------------------------------
@pytest.mark.slow
def test_ppo_and_mappo_through_the_daemon(daemon, mosaic):
    ppo = mosaic.submit("--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1024",
                        "--set", "parallels=4", "--set", "horizon_size=64", "--set", "n_epochs=1")
    mappo = mosaic.submit("--worker", "xuance", "--algo", "mappo", "--env", "simple_spread_v3", "--steps", "1000",
                          "--set", "parallels=2", "--set", "buffer_size=100", "--name", "mappo-spread")
    for run_id, steps in ((ppo, 1024), (mappo, 1000)):
        waited = mosaic.run("wait", run_id, "--timeout", "300")
        assert waited.returncode == 0, waited.stdout + waited.stderr
        run = mosaic.show(run_id)
        assert run["state"] == "succeeded", run
        summary = run["summary"]
        assert summary["steps"] == steps and summary["total_steps"] == steps
        assert summary["episodes"] > 0 and summary["invalid"] == 0
        assert summary["checkpoints"] and summary["checkpoints"][-1].endswith("final_train_model.pth")
    assert "agent_0/actor_loss" in mosaic.show(mappo)["summary"]["tags"]
    # evaluate the MAPPO run's checkpoint by its name
    evaluation = mosaic.submit(_eval_config(mosaic, "run:mappo-spread"))
    mosaic.run("wait", evaluation, "--timeout", "300")
    run = mosaic.show(evaluation)
    assert run["state"] == "succeeded", run
    assert run["summary"]["episodes"] == 2


def _eval_config(mosaic, checkpoint: str) -> str:
    path = Path(mosaic.home.root) / "eval.json"
    path.write_text(json.dumps({"worker": "xuance", "algo": "mappo", "env": "simple_spread_v3", "mode": "eval",
                                "checkpoint": checkpoint, "eval_episodes": 2}))
    return str(path)


def test_bad_config_refused_at_submit(daemon, mosaic):
    out = mosaic.run("submit", "--worker", "xuance", "--algo", "qmix", "--env", "simple_spread_v3",
                     "--set", "training_mode=competitive")
    assert out.returncode != 0
    assert "params.training_mode" in out.stdout + out.stderr
    out = mosaic.run("submit", "--worker", "xuance", "--algo", "dqn", "--env", "Pendulum-v1")
    assert out.returncode != 0 and "env" in out.stdout + out.stderr


# -- stop and continue (through the daemon) --------------------------------------------
def events_of(home, run_id: str) -> list[dict]:
    return read_events(home.run_dir(run_id))


def steps_of(events: list[dict], tag: str) -> list[int]:
    return [e["step"] for e in events if worker_scalar(e) and e["tag"] == tag]


def values_of(events: list[dict], tag: str) -> list[float]:
    return [e["value"] for e in events if worker_scalar(e) and e["tag"] == tag]


def finish(mosaic, run_id: str, state: str = "succeeded") -> dict:
    mosaic.run("wait", run_id, "--timeout", "300")
    run = mosaic.show(run_id)
    if run["state"] != state:
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}), not {state}:\n"
                             f"{stderr_of(mosaic.home.run_dir(run_id))}")
    return run


def stop_and_continue(mosaic, run_id: str, after: int, total: int) -> tuple[dict, list[dict]]:
    """Stop the run once it has trained ``after`` steps, check the stop, continue it to its end:
    (where it stopped: summary["stopped"], its events)."""
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= after, 120, 0.1, what=f"{after} steps")
    out = mosaic.run("stop", run_id, "--timeout", "300")
    assert out.returncode == 0, out.stdout + out.stderr
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]
    checkpoint = Path(at["checkpoint"])
    assert checkpoint.name == f"stop_{at['step']}" and after <= at["step"] < total
    assert (checkpoint / "resume_state.pt").is_file() and (checkpoint / CHECKPOINT_META).is_file()
    assert Path(at["checkpoint"] + ".manifest.json").is_file()
    out = mosaic.run("continue", run_id, "--wait")
    assert out.returncode == 0, out.stdout + out.stderr
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] == run["summary"]["total_steps"] == total and run["restarts"] == 1
    events = events_of(mosaic.home, run_id)
    restarted = of_type(events, "restarted")
    assert len(restarted) == 1 and restarted[0]["step"] == at["step"] and len(of_type(events, "run_stopped")) == 1
    episodes = [e["step"] for e in of_type(events, "episode")]
    assert episodes == sorted(episodes) and episodes[-1] > at["step"]   # episodes go on after the seam, in order
    return at, events


def assert_resumed(mosaic, run_id: str, at: dict) -> None:
    """The worker's line in stderr.log: the checkpoint, and the step counter it restored."""
    assert f"resumed from {at['checkpoint']} at step {at['step']}" in stderr_of(mosaic.home.run_dir(run_id))


def resume_state(path) -> dict:
    import torch
    return torch.load(Path(path) / "resume_state.pt", map_location="cpu", weights_only=False)


def strictly_decreasing(values: list[float]) -> bool:
    return len(values) > 2 and all(b < a for a, b in zip(values, values[1:]))


@pytest.mark.slow
def test_ppo_stopped_after_an_update_and_continued_as_the_same_run(daemon, mosaic):
    """mosaic stop: PPO stops after the update that follows the request (its rollout buffer empty),
    saving model, optimizer, LR scheduler, step and episode counters, observation statistics and
    RNG states; mosaic continue trains the steps left: every update once, in order, across the
    seam, and the linearly decaying learning rate goes on decaying (the scheduler was restored)."""
    total = 40960
    run_id = mosaic.submit("--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1", "--steps", str(total),
                           "--set", "parallels=4", "--set", "horizon_size=128", "--set", "n_epochs=2",
                           "--set", "use_linear_lr_decay=true", "--set", "end_factor_lr_decay=0.1",
                           "--set", "checkpoint_interval=8192")
    at, events = stop_and_continue(mosaic, run_id, after=4096, total=total)
    assert at["step"] % 512 == 0    # at an update: 128 steps of 4 envs
    # an update is logged at the step counter before its vector step: 508, 1020, ...
    assert steps_of(events, "actor_loss") == list(range(508, total, 512))
    assert strictly_decreasing(values_of(events, "learning_rate"))
    # the periodic checkpoints are resume checkpoints too, each with its manifest; the home's
    # keep_checkpoints (3) keeps the newest three
    folder = mosaic.home.run_dir(run_id) / "checkpoints"
    for step in (16384, 24576, 32768):
        assert (folder / f"step_{step}" / "resume_state.pt").is_file()
        assert (folder / f"step_{step}.manifest.json").is_file()
    assert not (folder / "step_8192").exists() and not (folder / "step_8192.manifest.json").exists()
    assert resume_state(folder / "final")["agent"]["current_step"] == total
    assert_resumed(mosaic, run_id, at)


@pytest.mark.slow
def test_mappo_stopped_and_continued_as_the_same_run(daemon, mosaic):
    """The same for a multi-agent algorithm: MAPPO on simple_spread, env processes and all."""
    total = 6000
    run_id = mosaic.submit("--worker", "xuance", "--algo", "mappo", "--env", "simple_spread_v3",
                           "--steps", str(total), "--set", "parallels=2", "--set", "buffer_size=100",
                           "--set", "use_linear_lr_decay=true", "--set", "end_factor_lr_decay=0.1")
    at, events = stop_and_continue(mosaic, run_id, after=1500, total=total)
    assert at["step"] % 100 == 0    # at an update: the buffer holds 100 transitions of the 2 envs
    tag = "agent_0/actor_loss" if "agent_0/actor_loss" in tags_of(events) else "actor_loss"
    assert steps_of(events, tag) == list(range(98, total, 100))
    lr_tag = next(t for t in sorted(tags_of(events)) if t.endswith("learning_rate"))
    assert strictly_decreasing(values_of(events, lr_tag))
    final = resume_state(mosaic.home.run_dir(run_id) / "checkpoints" / "final")
    assert final["agent"]["current_step"] == total
    assert final["agent"]["current_episode"].sum() == len(of_type(events, "episode"))   # episode counters too
    assert_resumed(mosaic, run_id, at)


@pytest.mark.slow
def test_dqn_stopped_and_continued_keeps_its_replay_buffer(daemon, mosaic):
    """An off-policy algorithm stops at the end of any training step, its replay buffer saved with
    it: the continued run's buffer holds what it held at the stop plus what came after, its
    learner's iteration counter (target network syncs) and LR schedule go on."""
    total, start = 6000, 500
    run_id = mosaic.submit("--worker", "xuance", "--algo", "dqn", "--env", "CartPole-v1", "--steps", str(total),
                           "--set", "parallels=2", "--set", f"start_training={start}", "--set", "batch_size=32",
                           "--set", "end_factor_lr_decay=0.1")
    at, events = stop_and_continue(mosaic, run_id, after=1500, total=total)
    stopped = resume_state(at["checkpoint"])
    assert stopped["memory"]["size"] == at["step"] // 2    # every transition until the stop, per env
    final = resume_state(mosaic.home.run_dir(run_id) / "checkpoints" / "final")
    assert final["memory"]["size"] == total // 2           # ... and the continued run added to them
    losses = steps_of(events, "Qloss")
    assert losses == [s for s in range(0, total, 2) if s > start]   # every update once, in order
    assert final["learner"]["iterations"] == len(losses) * final["agent"]["n_epochs"]
    assert strictly_decreasing(values_of(events, "learning_rate"))
    assert_resumed(mosaic, run_id, at)


def test_stopped_in_the_second_curriculum_phase_continues_in_it(tmp_path):
    """The curriculum position is the step counter's: a run stopped in phase 1 continues in phase 1's
    environments, with phase 1's steps left, not from phase 0."""
    phase = 8192
    spec = dict(algo="ppo", env="CartPole-v1", steps=2 * phase,
                params={"parallels": 4, "horizon_size": 128, "n_epochs": 1,
                        "curriculum_schedule": [{"env_id": "CartPole-v1", "steps": phase},
                                                {"env_id": "CartPole-v0", "steps": phase}]})
    events = run_stopped_midway(tmp_path / "run", config_for(spec), stop_after=phase + 512)
    at = of_type(events, "run_stopped")[0]["step"]
    assert phase < at < 2 * phase
    phases = [(e["name"], e["step"], e["index"]) for e in of_type(events, "phase")]
    assert phases == [("CartPole-v1", 0, 0), ("CartPole-v0", phase, 1), ("CartPole-v0", at, 1)]
    meta = json.loads((tmp_path / "run" / "checkpoints" / "final" / CHECKPOINT_META).read_text())
    assert meta["env_id"] == "CartPole-v0" and meta["step"] == 2 * phase


# -- learning goes on as without the stop (long) ------------------------------------------
EQUIVALENCE = {
    # long enough for PPO to learn CartPole (returns near 500)
    "ppo": dict(algo="ppo", env="CartPole-v1", steps=100_000, params={"parallels": 8, "horizon_size": 128}),
    # MAPPO learns simple_spread with two agents in 60k steps (mean return of an episode -31 untrained,
    # -20 with uniformly random actions, ~-16 by 30k steps, ~-14.5 at 60k) with 10 epochs of 4
    # minibatches and a learning rate of 0.004; XuanCe's defaults (1 epoch, 1 minibatch, 0.0007) do not
    # learn in such a budget. The env processes (SubprocVecMultiAgentEnv, XuanCe's default) matter:
    # with DummyVecMultiAgentEnv XuanCe's MPE wrapper clips the action dicts in place, the rollout
    # buffer keeps the clipped actions, and returns fall (-31 to -50 in 30k steps; docs/workers/xuance.md)
    "mappo": dict(algo="mappo", env="simple_spread_v3", steps=60_000,
                  params={"parallels": 8, "buffer_size": 800, "n_epochs": 10, "n_minibatch": 4,
                          "learning_rate": 0.004, "vectorize": "SubprocVecMultiAgentEnv", "env_kwargs": {"N": 2}}),
}
# The mean return of the last 20 episodes before the stop must reach this, so that a continue that lost
# the training would show at the seam: CartPole three times a random policy's (~22), simple_spread
# (N=2) a uniformly random policy's (-20; MAPPO's untrained policy plays worse, -31)
LEARNED_BY_THE_STOP = {"ppo": 66.0, "mappo": -20.0}


def last_mean(events: list[dict], n: int = 20) -> float:
    returns = [e["return"] for e in of_type(events, "episode")]
    return sum(returns[-n:]) / len(returns[-n:])


def run_stopped_midway(run_dir: Path, config: dict, timeout: float = 900, stop_after: int | None = None) -> list[dict]:
    """The worker as the supervisor runs it, SIGUSR1 (mosaic stop) once an episode ended after
    ``stop_after`` steps (half-way by default), then again with ``continue_from`` set to the
    stop's checkpoint, as mosaic continue does."""
    stop_after = config["steps"] // 2 if stop_after is None else stop_after
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    with open(run_dir / "events.jsonl", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        proc = subprocess.Popen(CLI, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
    try:
        wait_for(lambda: any(e["step"] >= stop_after for e in of_type(read_events(run_dir), "episode")),
                 timeout, 0.1, what=f"{stop_after} steps")
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=300) == 75, stderr_of(run_dir)
    finally:
        if proc.poll() is None:
            proc.kill()
    stopped = of_type(read_events(run_dir), "run_stopped")[-1]
    returncode, events = run_worker(run_dir, {**config, "continue_from": stopped["checkpoint"]}, timeout)
    assert returncode == 0, stderr_of(run_dir)
    assert events[-1]["type"] == "run_completed" and events[-1]["step"] == config["steps"]
    return events


@pytest.mark.slow
@pytest.mark.long   # several minutes each: 4 runs of PPO (~1 min each), 4 of MAPPO (~1.5 min each)
@pytest.mark.parametrize("name", list(EQUIVALENCE))
def test_continued_run_learns_as_uninterrupted_ones(name, tmp_path):
    """Seed 1, stopped half-way and continued, learns as seeds 1, 2 and 3 trained without a stop:
    - at the seam, it plays as well as before the stop: the first 20 episodes after the continue keep
      at least half of what the last 20 before the stop had gained over the untrained policy (the
      first 20 episodes of the runs, all played before their first update), and by the stop the run
      must have learned clearly (LEARNED_BY_THE_STOP), so that a continue that lost the training
      (back to the untrained policy) fails;
    - at the end, the mean return of its last 20 episodes lies in the band of the runs never stopped
      (their range widened by their standard deviation each side: one run's noise)."""
    import statistics

    spec = EQUIVALENCE[name]
    whole, untrained = {}, []
    for seed in (1, 2, 3):
        returncode, events = run_worker(tmp_path / f"seed{seed}", config_for(spec, seed=seed), timeout=900)
        assert returncode == 0, stderr_of(tmp_path / f"seed{seed}")
        whole[seed] = last_mean(events)
        untrained += [e["return"] for e in of_type(events, "episode")][:20]
    events = run_stopped_midway(tmp_path / "stopped", config_for(spec, seed=1))
    stopped_at = of_type(events, "run_stopped")[-1]["step"]
    continued = last_mean(events)
    returns = [(e["step"], e["return"]) for e in of_type(events, "episode")]
    before = statistics.mean([r for step, r in returns if step <= stopped_at][-20:])
    after = statistics.mean([r for step, r in returns if step > stopped_at][:20])
    untrained_mean = statistics.mean(untrained)
    spread = statistics.stdev(whole.values())
    band = (min(whole.values()) - spread, max(whole.values()) + spread)
    figures = (f"xuance {name} {spec['env']} {spec['steps']} steps, mean return of the last 20 episodes: "
               f"seeds 1, 2, 3 never stopped {', '.join(f'{whole[s]:.1f}' for s in (1, 2, 3))} "
               f"(band {band[0]:.1f}..{band[1]:.1f}); seed 1 stopped at step {stopped_at} and continued "
               f"{continued:.1f}; at the seam, 20 episodes before {before:.1f}, 20 after {after:.1f}; "
               f"untrained (first 20 of each seed) {untrained_mean:.1f}")
    print("\n" + figures)
    (Path(os.environ.get("MOSAIC_FIGURES_DIR", tmp_path)) / f"xuance-{name}-learning.txt").write_text(figures + "\n")
    assert before >= LEARNED_BY_THE_STOP[name] and before > untrained_mean, \
        f"too little learned by the stop to tell a lost training: {figures}"
    assert after - untrained_mean >= (before - untrained_mean) / 2, figures
    assert band[0] <= continued <= band[1], figures
