"""Env families beyond classic control (issue 19): MOSAIC MultiGrid, Atari, MuJoCo, Box2D, ViZDoom.

Each family trains a few hundred steps through the real daemon and CLI with
telemetry and at least one live frame; a MultiGrid curriculum shows both
phases as events; bad env ids are refused at submit with the family's ids
suggested. docs/envs.md has the table of what runs where, with these tests'
wall times.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from daemon import protocol as P
from daemon.protocol import decode_frame as decode
from tests.helpers import connect, wait_state, walk_runs
from tests.workers.xuance_worker.test_xuance_worker import WALK, read_events, tags_of
from workers.sdk import envs
from workers.xuance_worker import WORKER as XUANCE
from workers.xuance_worker import catalog

SOCCER_1V1 = "MosaicMultiGrid-S-1v1-IndAgObs-v1"
COLLECT_1V1 = "MosaicMultiGrid-C-1v1-IndAgObs-v1"


# -- helpers ---------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def shared_numba_cache(monkeypatch, tmp_path_factory):
    """mosaic_multigrid's numba functions compile once per session, not once per test home
    (workers keep a NUMBA_CACHE_DIR they inherit; the daemon inherits the test's environment)."""
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "numba-cache"))


def first_frame(home, run_id: str, timeout: float = 120) -> np.ndarray:
    """One frame of a running run, relayed by the daemon over the socket."""
    wait_state(home, run_id, P.RUNNING, timeout=60)
    with connect(home) as c:
        c.call(P.FRAMES, run=run_id, fps=10, max_dim=512)
        for method, params in c.notifications(timeout=timeout):
            if method == P.NOTIFY_FRAME and params.get("run") in (None, run_id):
                return decode(params)
    raise AssertionError(f"no frame from run {run_id}")


def finished(mosaic, run_id: str, timeout: int = 600) -> dict:
    waited = mosaic.run("wait", run_id, "--timeout", str(timeout), timeout=timeout + 30)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (waited.stdout, waited.stderr, run)
    return run


def events_of(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# -- the shared table (workers/sdk/envs.py) ---------------------------------------------
def test_families_are_read_from_the_installed_packages():
    assert "ALE/Pong-v5" in envs.atari_envs() and "PongNoFrameskip-v4" in envs.atari_envs()
    assert "VizdoomBasic-v1" in envs.vizdoom_envs()
    grid = envs.multigrid_envs()
    assert len(grid) == 81
    assert grid["MosaicMultiGrid-S-2v2-IndAgObs-v1"]["teams"] == [2, 2]
    assert grid["MosaicMultiGrid-S-G-1v0-v1"]["competitive"] is False
    assert envs.resolve_alias("soccer_1vs1") == SOCCER_1V1
    assert envs.resolve_alias("Collect-1vs1") == COLLECT_1V1
    assert envs.resolve_alias("basketball_3vs3") == "MosaicMultiGrid-BB-3v3-IndAgObs-v1"
    for env, family in (("Hopper-v5", "mujoco"), ("CarRacing-v3", "box2d"), ("ALE/Breakout-v5", "atari"),
                        ("VizdoomBasic-v1", "vizdoom"), ("soccer_2vs2", "multigrid")):
        assert envs.env_family(env) == family, env


# -- MultiGrid on XuanCe -------------------------------------------------------------------
@pytest.mark.slow  # about two minutes: the curriculum, the frames and the refusal in one daemon
def test_multigrid_on_xuance_through_the_daemon(daemon, mosaic, tmp_path):
    """MAPPO with one shared network on a curriculum collect 1v1 -> soccer 1v1 (typed as aliases):
    the run is stored with the real ids, trains in one process with both phases as events,
    reports each agent and team, publishes frames; its parameter-shared checkpoint is refused
    for soccer 2v2 at submit, with one line."""
    config = {"worker": "xuance", "algo": "mappo", "env": "collect_1vs1", "name": "grid-curriculum",
              "frames": {"enabled": True, "fps": 20},
              "params": {"parallels": 2, "buffer_size": 200, "n_epochs": 1, "vectorize": "DummyVecMultiAgentEnv",
                         "training_mode": "cooperative", "use_parameter_sharing": True,
                         "env_kwargs": {"max_steps": 60},
                         "curriculum_schedule": [{"env_id": "collect_1vs1", "steps": 400},
                                                 {"env_id": "soccer_1vs1", "steps": 400}]}}
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(config))
    run_id = mosaic.submit(str(path))
    assert mosaic.show(run_id)["config"]["env"] == COLLECT_1V1  # the alias shown as the real id
    frame = first_frame(daemon, run_id)
    assert frame.ndim == 3 and frame.shape[2] == 3 and frame.std() > 0
    run = finished(mosaic, run_id)
    events = events_of(daemon, run_id)
    phases = [e for e in events if e["type"] == "phase"]
    assert [p["name"] for p in phases] == [COLLECT_1V1, SOCCER_1V1]
    assert phases[1]["step"] >= 400
    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes and set(episodes[-1]["agents"]) == {"green_0", "blue_0"}
    assert run["summary"]["steps"] == 800 and run["summary"]["invalid"] == 0
    assert any(t.startswith("returns/green") for t in run["summary"]["tags"])
    # the 1v1 shared network cannot play 2v2
    evaluation = {"worker": "xuance", "algo": "mappo", "env": "soccer_2vs2", "mode": "eval",
                  "checkpoint": "run:grid-curriculum", "eval_episodes": 1,
                  "params": {"use_parameter_sharing": True, "training_mode": "cooperative"}}
    path = tmp_path / "eval.json"
    path.write_text(json.dumps(evaluation))
    refused = mosaic.run("submit", str(path))
    line = refused.stderr.strip()
    assert refused.returncode != 0 and line.startswith("mosaic: error:") and "\n" not in line
    assert "shares one network among 2 agents" in line and "has 4" in line


def test_multigrid_bad_ids_and_curricula_are_refused_at_submit(daemon, mosaic):
    proc = mosaic.run("submit", "--worker", "xuance", "--algo", "ippo", "--env", "soccer_1vs9", "--steps", "100")
    line = proc.stderr.strip()
    assert proc.returncode != 0 and "\n" not in line and "unknown environment 'soccer_1vs9'" in line
    assert "did you mean" in line and "soccer_1vs" in line  # the family's names
    proc = mosaic.run("submit", "--worker", "xuance", "--algo", "ippo", "--env", "soccer_1vs1", "--steps", "800",
                      "--set", 'curriculum_schedule=[{"env_id": "soccer_1vs1", "steps": 400}, '
                               '{"env_id": "soccer_2vs2", "steps": 400}]')
    assert proc.returncode != 0 and "has 4 agents, phase 0" in proc.stderr
    proc = mosaic.run("submit", "--worker", "xuance", "--algo", "maddpg", "--env", "soccer_1vs1")
    assert proc.returncode != 0 and "multigrid" not in XUANCE.capabilities()["env_families_by_algorithm"]["maddpg"]
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []
    # `mosaic workers` shows each worker's env families
    rows = {line.split()[0]: line for line in mosaic.run("workers", check=True).stdout.splitlines()[1:] if line}
    assert "ENV FAMILIES" in mosaic.run("workers", check=True).stdout.splitlines()[0]
    for worker, families in (("xuance", ("box2d", "mujoco", "atari", "mpe", "multigrid")),
                             ("ray", ("mujoco", "atari", "multigrid")), ("cleanrl", ("mujoco", "atari"))):
        assert all(family in rows[worker] for family in families), rows[worker]


def test_vizdoom_is_refused_where_no_script_takes_it(daemon, mosaic):
    """CleanRL has no script that trains on ViZDoom's frames unmodified: refused at submit, one line."""
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", "dqn_atari", "--env", "VizdoomBasic-v1",
                      "--steps", "300")
    line = proc.stderr.strip()
    assert proc.returncode != 0 and line.startswith("mosaic: error:") and "\n" not in line, proc.stderr
    assert "no CleanRL 1.2.0 script trains on ViZDoom" in line and "tianshou, xuance or ray" in line
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", "dqn", "--env", "VizdoomBasic-v1", "--steps", "300")
    assert proc.returncode != 0 and "not 84x84x4 frames" in proc.stderr
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []


def multigrid_walk_config(algo: str) -> dict:
    defaults = {key: prop.get("default") for key, prop in XUANCE.schema(algo, COLLECT_1V1)["properties"].items()}
    params: dict = {"parallels": 2, "vectorize": "DummyVecMultiAgentEnv", "env_kwargs": {"max_steps": 50}}
    if "n_minibatch" in defaults:
        params["buffer_size"] = 4 if defaults.get("use_rnn") else 100
    if "start_training" in defaults:
        params.update(start_training=64, batch_size=32, buffer_size=1000)
    if "n_epochs" in defaults:
        params["n_epochs"] = 1
    return {"worker": "xuance", "algo": algo, "env": COLLECT_1V1, "steps": 300, "seed": 1, "params": params}


@pytest.mark.long
@pytest.mark.slow
def test_every_multigrid_algorithm_runs(tmp_path):
    jobs = []
    for algo in catalog.MULTIGRID_ALGORITHMS:
        run_dir = tmp_path / algo
        run_dir.mkdir()
        jobs.append((str(run_dir), multigrid_walk_config(algo)))
    results = walk_runs(jobs, *WALK)
    failed = {}
    for algo in catalog.MULTIGRID_ALGORITHMS:
        events = read_events(tmp_path / algo)
        kinds = [e["type"] for e in events]
        ok = (results.get(algo) == 0 and kinds[-1] == "run_completed" and "episode" in kinds
              and any("loss" in t.lower() for t in tags_of(events)))
        if not ok:
            failed[algo] = (results.get(algo), [e for e in events if e["type"] == "run_failed"][-1:])
    assert not failed, failed


# -- every family x worker: a few hundred steps through the daemon, with a frame ----------------
# (run id, worker, algo, env, steps, params, frame shape: Atari 210x160, MuJoCo 480x480, ViZDoom 240x320)
ATARI_FRAME, MUJOCO_FRAME, VIZDOOM_FRAME = (210, 160, 3), (480, 480, 3), (240, 320, 3)
slow = pytest.mark.slow
long = [pytest.mark.slow, pytest.mark.long]
ray = pytest.mark.ray   # starts a private Ray cluster: such tests run one at a time (tests/conftest.py)
FAMILY_RUNS = [
    pytest.param("xuance", "ppo", "ALE/Pong-v5", 256, {"parallels": 2, "horizon_size": 64, "n_epochs": 1},
                 ATARI_FRAME, id="xuance-atari"),
    # ViZDoom: not a XuanCe family; workers/xuance_worker/vizdoom.py registers it, from atari.yaml's CNNs
    pytest.param("xuance", "ppo", "VizdoomBasic-v1", 256, {"parallels": 2, "horizon_size": 64, "n_epochs": 1},
                 VIZDOOM_FRAME, id="xuance-vizdoom-ppo"),
    pytest.param("xuance", "dqn", "VizdoomBasic-v1", 300,
                 {"parallels": 2, "start_training": 100, "batch_size": 32, "buffer_size": 1000},
                 VIZDOOM_FRAME, id="xuance-vizdoom-dqn", marks=long),   # ppo on ViZDoom stays in CI
    pytest.param("xuance", "ppo", "HalfCheetah-v5", 256, {"parallels": 1, "horizon_size": 128, "n_epochs": 1},
                 MUJOCO_FRAME, id="xuance-mujoco"),
    pytest.param("xuance", "dqn", "LunarLander-v3", 300,
                 {"parallels": 2, "start_training": 100, "batch_size": 32, "buffer_size": 1000},
                 None, id="xuance-box2d"),
    # dqn_atari logs its losses every 100 steps once past learning-starts: step 200 is the first
    pytest.param("cleanrl", "dqn_atari", "PongNoFrameskip-v4", 300,
                 {"learning-starts": 100, "buffer-size": 500, "batch-size": 32, "train-frequency": 4},
                 ATARI_FRAME, id="cleanrl-atari"),
    pytest.param("cleanrl", "ppo_continuous_action", "HalfCheetah-v5", 256,
                 {"num-envs": 1, "num-steps": 128, "update-epochs": 1, "num-minibatches": 2},
                 MUJOCO_FRAME, id="cleanrl-mujoco"),
    pytest.param("cleanrl", "dqn", "LunarLander-v3", 300,
                 {"learning-starts": 100, "buffer-size": 1000, "batch-size": 32},
                 None, id="cleanrl-box2d"),
    # Tianshou on the vector families (classic control: tests/workers/tianshou_worker/test_tianshou_worker.py); over a minute
    # here under load, so slow
    pytest.param("tianshou", "dqn", "LunarLander-v3", 300,
                 {"training_envs": 2, "test_envs": 0, "buffer_size": 2000, "batch_size": 32}, None,
                 id="tianshou-box2d", marks=long),
    pytest.param("tianshou", "ppo", "HalfCheetah-v5", 256,
                 {"training_envs": 1, "test_envs": 0, "collection_step_num_env_steps": 128, "batch_size": 64},
                 MUJOCO_FRAME, id="tianshou-mujoco", marks=long),
    # Tianshou: Atari through its own wrap_deepmind and Atari CNNs (no test episodes: a Pong one is
    # thousands of steps); ViZDoom through workers/sdk/vizdoom.py into the same CNNs
    pytest.param("tianshou", "dqn", "PongNoFrameskip-v4", 300,
                 {"training_envs": 1, "test_envs": 0, "buffer_size": 2000, "batch_size": 32},
                 ATARI_FRAME, id="tianshou-atari"),
    pytest.param("tianshou", "ppo", "VizdoomBasic-v1", 256,
                 {"training_envs": 2, "test_envs": 1, "test_step_num_episodes": 1,
                  "collection_step_num_env_steps": 128, "batch_size": 64, "hidden_sizes": [64]},
                 VIZDOOM_FRAME, id="tianshou-vizdoom", marks=long),   # Tianshou's image CNNs: atari stays
    # Ray starts in ~40 s before the first step: each of these takes over a minute
    pytest.param("ray", "PPO", "ALE/Pong-v5", 200,
                 {"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1},
                 ATARI_FRAME, id="ray-atari", marks=[*long, ray]),   # RLlib's CNN: pistonball stays in CI
    pytest.param("ray", "PPO", "VizdoomBasic-v1", 200,
                 {"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1},
                 VIZDOOM_FRAME, id="ray-vizdoom", marks=[*long, ray]),
    pytest.param("ray", "PPO", "HalfCheetah-v5", 200,
                 {"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1},
                 MUJOCO_FRAME, id="ray-mujoco", marks=[*long, ray]),
    pytest.param("ray", "PPO", "LunarLander-v3", 200,
                 {"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1},
                 None, id="ray-box2d", marks=[*long, ray]),
]


@pytest.mark.parametrize("worker, algo, env, steps, params, frame_shape", FAMILY_RUNS)
def test_family_trains_through_the_daemon(daemon, mosaic, tmp_path, worker, algo, env, steps, params,
                                          frame_shape):
    config = {"worker": worker, "algo": algo, "env": env, "steps": steps, "seed": 1, "params": params,
              "frames": {"enabled": True, "fps": 5, "max_dim": 512}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    run_id = mosaic.submit(str(path))
    frame = first_frame(daemon, run_id)
    assert frame.std() > 0
    if frame_shape is not None:
        assert frame.shape == frame_shape
    run = finished(mosaic, run_id)
    summary = run["summary"]
    assert summary["invalid"] == 0 and any("loss" in tag for tag in summary["tags"]), summary["tags"]
    if worker == "cleanrl":  # the step of its last logged scalar; it saves only with --save-model
        assert summary["steps"] > 0 or "losses/td_loss" in summary["tags"]
    else:
        assert summary["steps"] >= steps and summary["checkpoints"]


@pytest.mark.long
@slow
@ray
def test_multigrid_self_play_between_teams_on_rllib(daemon, mosaic, tmp_path):
    """RLlib PPO on soccer 2v2: the learner plays one whole team against league snapshots on the
    other, sides alternating; every agent's return is reported; frames come from the training env."""
    config = {"worker": "ray", "algo": "PPO", "env": "soccer_2vs2", "steps": 400, "seed": 1,
              "frames": {"enabled": True, "fps": 5, "max_dim": 512},
              "params": {"policy": "self_play", "train_batch_size_per_learner": 200, "minibatch_size": 100,
                         "num_epochs": 1, "fcnet_hiddens": [32], "env_kwargs": {"max_steps": 50}}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    run_id = mosaic.submit(str(path))
    assert mosaic.show(run_id)["config"]["env"] == "MosaicMultiGrid-S-2v2-IndAgObs-v1"
    frame = first_frame(daemon, run_id, timeout=180)
    assert frame.shape == (352, 512, 3)
    run = finished(mosaic, run_id)
    assert "env_runners/self_play_main_win_rate" in run["summary"]["tags"]
    episodes = [e for e in events_of(daemon, run_id) if e["type"] == "episode"]
    assert episodes and set(episodes[0]["agents"]) == {"green_0", "green_1", "blue_0", "blue_1"}


@pytest.mark.long
@slow
@ray
@pytest.mark.parametrize("policy", ["shared", "independent", "shared_value"])
def test_multigrid_policy_configurations_on_rllib(daemon, mosaic, policy):
    """The other three policy configurations of the ray worker on soccer 2v2 (self_play: above)."""
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "soccer_2vs2", "--steps", "200",
                           "--set", f"policy={policy}", "--set", "train_batch_size_per_learner=100",
                           "--set", "minibatch_size=50", "--set", "num_epochs=1", "--set", "fcnet_hiddens=[32]",
                           "--set", 'env_kwargs={"max_steps": 25}')
    run = finished(mosaic, run_id)
    assert run["summary"]["steps"] >= 200 and run["summary"]["episodes"] > 0
    modules = {"shared": {"shared_green", "shared_blue"}, "shared_value": {"shared_critic"},
               "independent": {"green_0", "green_1", "blue_0", "blue_1"}}[policy]
    tags = run["summary"]["tags"]
    assert all(any(f"/{module}/" in tag or tag.startswith(f"{module}/") for tag in tags) for module in modules), \
        sorted(tags)[:40]


# -- MultiGrid on Tianshou -------------------------------------------------------------------
@pytest.mark.slow  # about four minutes on 2 shared cores: three runs, torch + tianshou + numba each
@pytest.mark.long  # ~50 s here (CI's half hour): Tianshou's multi-agent dispatcher on MultiGrid
@pytest.mark.timeout(1200)
def test_multigrid_on_tianshou_through_the_daemon(daemon, mosaic, tmp_path):
    """Independent DQN per agent on soccer 1v1 (typed as an alias), all agents moving at once
    through Tianshou's multi-agent dispatcher: episodes with each agent's return, returns per
    team, every agent's losses, frames 352x512 from the training game, a checkpoint that an
    eval run plays; QRDQN per agent on collect 1v1 in the same daemon; an on-policy or offline
    algorithm, a recording and a bad id refused at submit."""
    dqn = {"worker": "tianshou", "algo": "dqn", "env": "soccer_1vs1", "steps": 300, "seed": 1,
           "frames": {"enabled": True, "fps": 20, "max_dim": 512}, "name": "ts-soccer",
           "params": {"training_envs": 2, "test_envs": 1, "test_step_num_episodes": 1, "hidden_sizes": [32],
                      "epoch_num_steps": 150, "batch_size": 32, "env_kwargs": {"max_steps": 50}}}
    qrdqn = {"worker": "tianshou", "algo": "qrdqn", "env": "collect_1vs1", "steps": 300, "seed": 1,
             "params": {"training_envs": 2, "test_envs": 0, "hidden_sizes": [32], "batch_size": 32,
                        "env_kwargs": {"max_steps": 50}}}
    runs = []
    for index, config in enumerate((dqn, qrdqn)):
        path = tmp_path / f"run{index}.json"
        path.write_text(json.dumps(config))
        runs.append(mosaic.submit(str(path)))
    assert mosaic.show(runs[0])["config"]["env"] == SOCCER_1V1
    wait_state(daemon, runs[0], P.RUNNING, timeout=300)  # torch, tianshou and numba's first compile
    frame = first_frame(daemon, runs[0], timeout=240)
    assert frame.shape == (352, 512, 3) and frame.std() > 0
    for run_id in runs:
        run = finished(mosaic, run_id)
        summary = run["summary"]
        assert summary["steps"] >= 300 and summary["invalid"] == 0 and summary["checkpoints"]
        events = events_of(daemon, run_id)
        episodes = [e for e in events if e["type"] == "episode"]
        # two games sharing 300 game steps, 50 steps an episode: 6 episodes
        assert len(episodes) == 6 and all(e["length"] == 50 for e in episodes), episodes
        assert all(set(e["agents"]) == {"green_0", "blue_0"} for e in episodes)
        tags = set(summary["tags"])
        assert {"returns/green", "returns/blue"} <= tags, sorted(tags)
        for agent in ("green_0", "blue_0"):  # each agent's own learner
            assert any(f"/{agent}/loss" in tag for tag in tags), sorted(tags)
    # the checkpoint of the DQN run plays soccer in an eval run (each agent's policy), and a
    # training run resumes from it: its counters and episodes go on from step 300
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"worker": "tianshou", "algo": "dqn", "env": "soccer_1vs1", "mode": "eval",
                                "checkpoint": "run:ts-soccer", "eval_episodes": 2,
                                "params": {"hidden_sizes": [32], "env_kwargs": {"max_steps": 30}}}))
    evaluation = mosaic.submit(str(path))
    path = tmp_path / "resume.json"
    path.write_text(json.dumps({**dqn, "name": "ts-soccer-resumed", "steps": 400, "checkpoint": "run:ts-soccer",
                                "frames": {"enabled": False}, "params": {**dqn["params"], "test_envs": 0}}))
    resumed = mosaic.submit(str(path))
    run = finished(mosaic, resumed)
    episodes = [e for e in events_of(daemon, resumed) if e["type"] == "episode"]
    assert run["summary"]["steps"] >= 400 and len(episodes) == 2 and min(e["step"] for e in episodes) > 300, \
        episodes
    finished(mosaic, evaluation)
    episodes = [e for e in events_of(daemon, evaluation) if e["type"] == "episode"]
    assert len(episodes) == 2 and all(e["length"] == 30 and set(e["agents"]) == {"green_0", "blue_0"}
                                      for e in episodes), episodes
    record = tmp_path / "record.json"
    record.write_text(json.dumps({"worker": "tianshou", "algo": "dqn", "env": "soccer_1vs1", "steps": 100,
                                  "record": {"episodes": 2}}))
    for argv, said in ((("--algo", "ppo", "--env", "soccer_1vs1"), "is a multi-agent game"),
                       (("--algo", "discrete_cql", "--env", "soccer_1vs1"), "is a multi-agent game"),
                       (("--algo", "dqn", "--env", "soccer_1vs7"), "did you mean")):
        out = mosaic.run("submit", "--worker", "tianshou", "--steps", "100", *argv)
        assert out.returncode != 0 and out.stderr.startswith("mosaic: error:") and said in out.stderr, out.stderr
    out = mosaic.run("submit", str(record))
    assert out.returncode != 0 and "a dataset holds single-agent transitions" in out.stderr, out.stderr
