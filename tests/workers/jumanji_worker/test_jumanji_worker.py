"""The Jumanji worker: jumanji.training's A2C through the daemon, checkpoints and resume, frames,
configs refused at submit; Jumanji envs (jumanji/<Env>) for CleanRL, XuanCe, RLlib and Tianshou.

JIT compilation dominates a short run (10-40 s an env on this machine), so each
run is a couple of epochs with tiny batches (``TINY``), and the runs of a test
go through one daemon at once.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT, wait_for
from workers.jumanji_worker import WORKER, catalog
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event

WAIT = "600"  # a run is mostly JIT compilation; on two shared cores it can take minutes
# a couple of epochs of a few A2C updates on 8 envs; evaluations of 4 episodes
TINY = {"training.num_learner_steps_per_epoch": 4, "training.n_steps": 10, "training.total_batch_size": 8,
        "evaluation.eval_total_batch_size": 4, "evaluation.greedy_eval_total_batch_size": 4}


def config_file(mosaic, name: str, **config) -> str:
    path = mosaic.home.root / f"{name}.json"
    path.write_text(json.dumps({"worker": "jumanji", "algo": "a2c", "name": name, **config}))
    return str(path)


def events_of(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [check_event(json.loads(line)) for line in lines]


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def tags(events: list[dict]) -> set[str]:
    return {e["tag"] for e in of_type(events, "scalar")}


def finish(mosaic, run_id: str, state: str = "succeeded", wait: str = WAIT) -> dict:
    mosaic.run("wait", run_id, "--timeout", wait, timeout=float(wait) + 30)
    run = mosaic.show(run_id)
    if run["state"] != state:
        stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}), not {state}:\n{stderr}")
    return run


def check_a2c_run(mosaic, run_id: str, epochs: int, first_epoch: int = 0, wait: str = WAIT) -> list[dict]:
    """An A2C run's telemetry: phases, per-epoch training metrics and evaluations, checkpoints."""
    run = finish(mosaic, run_id, wait=wait)
    events = events_of(mosaic.home, run_id)
    per_epoch = TINY["training.num_learner_steps_per_epoch"] * TINY["training.n_steps"] * \
        TINY["training.total_batch_size"]
    assert run["summary"]["steps"] == run["summary"]["total_steps"] == epochs * per_epoch
    assert run["summary"]["invalid"] == 0
    assert [e["name"] for e in of_type(events, "phase")] == ["setup", "compiling", "train"]
    assert {"train/total_loss", "train/policy_loss", "train/critic_loss", "train/entropy", "train/value",
            "eval_stochastic/episode_return", "eval_greedy/episode_return", "time/compile_s",
            "train/steps_per_second"} <= tags(events)
    epochs_done = [e["value"] for e in of_type(events, "scalar") if e["tag"] == "train/epoch"]
    assert epochs_done == [float(n) for n in range(first_epoch + 1, epochs + 1)]
    episodes = of_type(events, "episode")
    assert len(episodes) == epochs - first_epoch and all(e["length"] >= 1 for e in episodes)
    saved = of_type(events, "checkpoint_saved")
    assert saved and saved[-1]["path"].endswith("final/training_state.pkl") and saved[-1]["step"] == run["summary"]["steps"]
    return events


# -- the descriptor ---------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from workers.jumanji_worker import WORKER
        caps = WORKER.capabilities()
        for algo in caps["algorithms"]:
            for env in caps["envs"][algo]:
                WORKER.schema(algo, env)
        WORKER.validate({"worker": "jumanji", "algo": "a2c", "env": "TSP-v1", "steps": 1000})
        heavy = sorted(m for m in ("jax", "jumanji", "haiku", "optax", "numpy", "matplotlib", "gymnasium")
                       if m in sys.modules)
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""


def test_envs_and_schemas_come_from_jumanjis_configs():
    envs = catalog.known_envs()
    # every env with networks in jumanji/training/networks/ (and a config), by its registered id
    for env in ("BinPack-v2", "TSP-v1", "CVRP-v1", "MultiCVRP-v0", "Knapsack-v1", "JobShop-v0", "FlatPack-v0",
                "Cleaner-v0", "Connector-v3", "Maze-v0", "MMST-v0", "Snake-v1", "Game2048-v1", "GraphColoring-v1",
                "Minesweeper-v0", "RubiksCube-partly-scrambled-v0", "SlidingTilePuzzle-v0", "Sudoku-very-easy-v0",
                "Tetris-v0", "RobotWarehouse-v0", "LevelBasedForaging-v0", "Sokoban-v0", "PacMan-v1"):
        assert env in envs
    networks = os.path.join(catalog.jumanji_dir(), "training", "networks")
    assert len(envs) == len([d for d in os.listdir(networks) if os.path.isdir(os.path.join(networks, d))
                             and d != "__pycache__"])
    tsp = WORKER.schema("a2c", "TSP-v1")["properties"]
    assert tsp["a2c.learning_rate"]["default"] == 1e-4 and tsp["training.total_batch_size"]["default"] == 32
    assert tsp["network.transformer_mlp_units"]["default"] == [512]
    snake = WORKER.schema("a2c", "Snake-v1")["properties"]
    assert snake["a2c.learning_rate"]["default"] == 3e-4 and snake["network.num_channels"]["default"] == 32
    random = WORKER.schema("random", "Snake-v1")["properties"]
    assert "training.n_steps" in random and not any(k.startswith(("a2c.", "network.")) for k in random)


def test_steps_are_trained_as_asked_not_a_whole_default_epoch():
    """20,000 steps with the default config trained one epoch of 500 x 20 x 128 = 1,280,000 (64 times
    what was asked): the updates per epoch are fitted to the steps, to one update's 2,560 steps."""
    from workers.jumanji_worker.run_setup import total_steps
    for steps, epochs, updates in ((20_000, 1, 8), (2_000_000, 2, 391), (1_280_000, 1, 500)):
        config = WORKER.validate({"worker": "jumanji", "algo": "a2c", "env": "Snake-v1", "steps": steps})
        assert (config["params"]["training.num_epochs"], config["params"]["training.num_learner_steps_per_epoch"]) \
            == (epochs, updates)
        assert steps <= total_steps(config) < steps + 20 * 128
        assert WORKER.validate(config) == config     # the daemon's config.json validates to itself
    # updates per epoch set by the user: whole epochs, or the nearest named
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "jumanji", "algo": "a2c", "env": "Snake-v1", "steps": 20_000,
                         "params": {"training.num_learner_steps_per_epoch": 500}})
    assert err.value.field == "steps" and str(err.value) == (
        "steps: 20,000 is not a whole number of epochs of 1,280,000 env steps (training.num_learner_steps_per_epoch "
        "500 x n_steps 20 x total_batch_size 128): give 1,280,000, or leave training.num_learner_steps_per_epoch "
        "unset and it is fitted to the steps")


@pytest.mark.parametrize("config,field", [
    ({"env": "Snak-v1"}, "env"),
    ({"env": "Snake-v1", "params": {"training.n_steps": 0}}, "params.training.n_steps"),
    ({"env": "Snake-v1", "params": {"a2c.learning_rat": 0.1}}, "params.a2c.learning_rat"),
    ({"env": "Snake-v1", "params": {"network.policy_layers": [64, 0]}}, "params.network.policy_layers[1]"),
    ({"env": "Snake-v1", "steps": 1000, "params": {"training.num_epochs": 3}}, "steps"),
    ({"env": "Snake-v1", "device": "cuda"}, "device"),
    ({"env": "Snake-v1", "mode": "eval", "checkpoint": "/nonexistent/final"}, "checkpoint"),
])
def test_bad_config_is_refused_naming_the_field(config, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "jumanji", "algo": "a2c", **config})
    assert err.value.field == field


# -- through the daemon ------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.timeout(1500)  # three runs, each mostly JIT compilation (minutes when the cores are busy)
def test_a2c_snake_telemetry_frames_checkpoint_and_resume(daemon, mosaic):
    snake = mosaic.submit(config_file(mosaic, "snake", env="Snake-v1",
                                      params={**TINY, "training.num_epochs": 6, "checkpoint_every": 3},
                                      frames={"enabled": True, "fps": 30, "max_dim": 160}))
    # a frame of the training envs, drawn by Snake's viewer, while the run trains
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    # (the segment opens once the epoch function is compiled)
    wait_for(lambda: layout.run_files(snake), float(WAIT), 0.2, what="the run's FastLane segment")
    with FrameReader(snake) as reader:
        number, frame = wait_for(reader.latest, float(WAIT), 0.2, what="a frame")
    assert number >= 1 and frame.shape == (160, 160, 3) and frame.std() > 0
    events = check_a2c_run(mosaic, snake, epochs=6)
    saved = of_type(events, "checkpoint_saved")
    assert [e["path"].split("/")[-2] for e in saved] == ["epoch_000003", "final"]
    manifest = json.loads((mosaic.home.run_dir(snake) / "checkpoints" / "epoch_000003.manifest.json").read_text())
    assert manifest["step"] == saved[0]["step"]     # checked when a run that failed continues from it
    # the app shows the phase: it is in the run's summary while it lasts
    assert mosaic.show(snake)["summary"]["phase"] == "train"

    # resume from the epoch-3 checkpoint: epochs 4..8, steps counted on from it
    middle = saved[0]["path"]
    resumed = mosaic.submit(config_file(mosaic, "snake-resumed", env="Snake-v1", checkpoint=middle,
                                        params={**TINY, "training.num_epochs": 8, "checkpoint_every": 0}))
    check_a2c_run(mosaic, resumed, epochs=8, first_epoch=3)
    stderr = (mosaic.home.run_dir(resumed) / "stderr.log").read_text()
    assert "resumed from" in stderr and "epoch 3" in stderr

    # eval mode: the final checkpoint's greedy policy plays one episode (Snake ends at its time limit
    # or when the snake dies), with frames on
    final = saved[-1]["path"]
    evaluation = mosaic.submit(config_file(mosaic, "snake-eval", env="Snake-v1", mode="eval", checkpoint=final,
                                           eval_episodes=1, params=TINY,
                                           frames={"enabled": True, "fps": 1, "max_dim": 96}))
    run = finish(mosaic, evaluation)
    events = events_of(mosaic.home, evaluation)
    episodes = of_type(events, "episode")
    assert len(episodes) == 1 and 1 <= episodes[0]["length"] <= 4000
    assert run["summary"]["steps"] == episodes[0]["length"]
    assert [e["name"] for e in of_type(events, "phase")] == ["setup", "compiling", "eval"]
    assert not of_type(events, "checkpoint_saved") and "frames disabled" not in \
        (mosaic.home.run_dir(evaluation) / "stderr.log").read_text()

    # refused at submit, naming the field: another env's checkpoint, a bad param
    out = mosaic.run("submit", config_file(mosaic, "wrong-env", env="Game2048-v1", checkpoint=middle))
    assert out.returncode != 0 and "checkpoint" in out.stdout + out.stderr and "Snake-v1" in out.stdout + out.stderr
    out = mosaic.run("submit", "--worker", "jumanji", "--algo", "a2c", "--env", "Snake-v1",
                     "--set", "training.n_steps=0")
    assert out.returncode != 0 and "training.n_steps" in out.stdout + out.stderr
    out = mosaic.run("submit", "--worker", "jumanji", "--algo", "a2c", "--env", "TPS-v1")
    assert out.returncode != 0 and "TSP-v1" in out.stdout + out.stderr


# One transformer layer instead of the configs' two: XLA's compile time grows with the
# layers (BinPack's epoch function took more than 8 minutes to compile with two, on busy cores).
SMALLER = {"TSP-v1": {"network.transformer_num_blocks": 1},
           "BinPack-v2": {"network.num_transformer_layers": 1}, "Game2048-v1": {}}


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.timeout(2400)  # three JIT compilations at once (transformers: minutes on two busy cores)
def test_a2c_on_tsp_binpack_and_2048(daemon, mosaic):
    runs = {env: mosaic.submit(config_file(mosaic, env.lower(), env=env,
                                           params={**TINY, **network, "training.num_epochs": 2,
                                                   "checkpoint_every": 0}))
            for env, network in SMALLER.items()}
    for env, run_id in runs.items():
        check_a2c_run(mosaic, run_id, epochs=2, wait="1800")


# -- Jumanji envs for the other workers ------------------------------------------------
def test_gymnasium_ids_flattened_with_frames():
    code = textwrap.dedent("""
        import gymnasium, numpy as np
        from workers.sdk import jumanji_envs
        from workers.sdk.envs import JUMANJI_GYM_ENVS
        ids = jumanji_envs.register_gymnasium()
        assert sorted(ids) == sorted(JUMANJI_GYM_ENVS), set(ids) ^ set(JUMANJI_GYM_ENVS)
        env = gymnasium.make("jumanji/Snake-v1", render_mode="rgb_array")
        obs, _ = env.reset(seed=3)
        assert env.observation_space.shape == obs.shape and obs.ndim == 1 and env.action_space.n == 4
        assert obs.dtype == env.observation_space.dtype == np.float32  # what torch networks take
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        frame = env.render()
        assert frame.shape == (1000, 1000, 3) and frame.dtype == np.uint8 and frame.std() > 0
        print(type(env.action_space).__name__, env.spec.max_episode_steps)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["Discrete", "10000"]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_xuance_ppo_on_a_jumanji_env(daemon, mosaic):
    """PPO of another worker (XuanCe) on Jumanji's TSP through gymnasium's jumanji/TSP-v1."""
    run_id = mosaic.submit("--worker", "xuance", "--algo", "ppo", "--env", "classic_control:jumanji/TSP-v1",
                           "--steps", "1024", "--set", "parallels=4", "--set", "horizon_size=128",
                           "--set", "n_epochs=1")
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] == 1024 and run["summary"]["episodes"] > 0
    episodes = of_type(events_of(mosaic.home, run_id), "episode")
    # TSP-v1: 20 cities; an episode ends at the tour's end or at a city visited twice
    assert all(1 <= e["length"] <= 20 for e in episodes)


@pytest.mark.slow  # 100-112 s: two runs, each importing torch, tianshou and jax
@pytest.mark.long  # the same gym wrapper as CleanRL's and XuanCe's tests, which stay in CI
@pytest.mark.timeout(900)
def test_tianshou_ppo_on_a_jumanji_env(daemon, mosaic):
    """Tianshou PPO trains on jumanji/Snake-v1 (registered in the worker's process), with telemetry
    and a checkpoint; an eval of that checkpoint draws Snake's frames with Jumanji's viewer; an env
    whose actions Tianshou's networks cannot take, or a mistyped one, is refused at submit."""
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    from workers.tianshou_worker import WORKER as TIANSHOU

    params = {"epoch_num_steps": 300, "collection_step_num_env_steps": 100, "training_envs": 2, "test_envs": 0,
              "hidden_sizes": [32]}
    trained = mosaic.submit(config_file(mosaic, "ts-snake", worker="tianshou", algo="ppo", env="jumanji/Snake-v1",
                                        steps=300, params=params))
    run = finish(mosaic, trained)
    events = events_of(mosaic.home, trained)
    assert run["summary"]["steps"] >= 300 and run["summary"]["checkpoints"][-1].endswith("final.pt")
    assert {"update/loss/mean", "train/n_collected_steps"} <= tags(events), sorted(tags(events))
    # a Snake episode ends when the snake hits a wall or itself: short for an untrained policy
    episodes = of_type(events, "episode")
    assert episodes and all(1 <= e["length"] <= 4000 for e in episodes)
    watched = mosaic.submit(config_file(mosaic, "ts-snake-eval", worker="tianshou", algo="ppo",
                                        env="jumanji/Snake-v1", mode="eval", checkpoint="run:ts-snake",
                                        eval_episodes=100000, params=params,
                                        frames={"enabled": True, "fps": 5, "max_dim": 100}))
    wait_for(lambda: layout.run_files(watched), 300, what="the eval run's FastLane segment")
    with FrameReader(watched) as reader:
        number, frame = wait_for(reader.latest, 300, 0.2, what="a frame")
    assert number >= 1 and frame.shape == (100, 100, 3) and frame.std() > 0
    mosaic.run("cancel", watched)
    finish(mosaic, watched, "cancelled")
    assert "jumanji" in TIANSHOU.capabilities()["env_families"]
    assert "jumanji/Snake-v1" in TIANSHOU.capabilities()["envs"]["dqn"]
    for env, said in (("jumanji/BinPack-v2", "jumanji/BinPack-v2 has multi_discrete actions"),
                      ("jumanji/Snak-v1", "did you mean")):
        out = mosaic.run("submit", "--worker", "tianshou", "--algo", "ppo", "--env", env, "--steps", "100")
        assert out.returncode != 0 and said in out.stderr and out.stderr.count("\n") == 1, out.stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cleanrl_dqn_on_a_jumanji_env(daemon, mosaic):
    """CleanRL's dqn.py, unmodified, on jumanji/Snake-v1: the make hook of its sitecustomize
    registers Jumanji's ids; frames of the training env come from Snake's viewer; gym 0.23's
    ppo.py is refused at submit (it cannot see gymnasium's registry)."""
    from tests.workers.sdk.test_env_families import first_frame

    config = config_file(mosaic, "cleanrl-snake", worker="cleanrl", algo="dqn", env="jumanji/Snake-v1", steps=300,
                         seed=1, frames={"enabled": True, "fps": 5, "max_dim": 128},
                         params={"learning-starts": 100, "buffer-size": 1000, "batch-size": 32,
                                 "train-frequency": 4})
    run_id = mosaic.submit(config)
    frame = first_frame(mosaic.home, run_id, timeout=300)
    assert frame.shape == (128, 128, 3) and frame.std() > 0
    run = finish(mosaic, run_id)
    assert "losses/td_loss" in run["summary"]["tags"] and run["summary"]["episodes"] > 0, run["summary"]
    out = mosaic.run("submit", "--worker", "cleanrl", "--algo", "ppo", "--env", "jumanji/Snake-v1", "--steps", "100")
    assert out.returncode != 0 and "makes its envs with gym 0.23" in out.stderr, out.stderr


def test_rllib_makes_jumanji_envs_with_its_env_creator():
    """Without frames too, a jumanji/ run's env runners make their envs with the worker's env creator
    (which registers Jumanji's ids in their process), not with gymnasium's registry by id."""
    code = textwrap.dedent("""
        from workers.ray_worker import WORKER, envs, rllib
        config = WORKER.validate({"worker": "ray", "algo": "PPO", "env": "jumanji/Snake-v1", "steps": 64})
        print(rllib.Setup(config).config.env)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "mosaic_env"


@pytest.mark.slow  # Ray starts in ~40 s before the first step
@pytest.mark.long  # Ray's env creator for jumanji ids is tested without training (test_rllib_makes_jumanji_envs...)
@pytest.mark.ray
@pytest.mark.timeout(900)
def test_rllib_ppo_on_a_jumanji_env(daemon, mosaic):
    """RLlib PPO on jumanji/Snake-v1: the env creator registers Jumanji's ids in the env runner,
    frames of the training env come from Snake's viewer; multi-discrete envs are refused at submit."""
    from tests.workers.sdk.test_env_families import first_frame

    config = config_file(mosaic, "ray-snake", worker="ray", algo="PPO", env="jumanji/Snake-v1", steps=200, seed=1,
                         frames={"enabled": True, "fps": 5, "max_dim": 128},
                         params={"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1,
                                 "fcnet_hiddens": [32]})
    run_id = mosaic.submit(config)
    frame = first_frame(mosaic.home, run_id, timeout=300)
    assert frame.shape == (128, 128, 3) and frame.std() > 0
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] >= 200 and run["summary"]["checkpoints"]
    assert any("loss" in tag for tag in run["summary"]["tags"]), run["summary"]["tags"]
    out = mosaic.run("submit", "--worker", "ray", "--algo", "PPO", "--env", "jumanji/BinPack-v2", "--steps", "100")
    assert out.returncode != 0 and "jumanji/BinPack-v2 has multi_discrete actions" in out.stderr, out.stderr


def test_every_view_shows_the_compiling_phase(daemon, mosaic):
    """The runs table, the run's header, `mosaic ls` and `mosaic show` say the same state."""
    from mosaic_tui.runs_model import COLUMNS, row_cells
    from mosaic_tui.screens.run import header_text
    state = [key for key, _ in COLUMNS].index("state")
    run = {"id": "r1", "name": "snake", "worker": "jumanji", "algo": "a2c", "env": "Snake-v1", "state": "running",
           "started_at": 1.0, "summary": {"phase": "compiling", "steps": 0}}
    assert row_cells(run, False, 2.0)[state].text == "compiling…"
    assert header_text(run, 2.0).plain.startswith("snake  compiling…  return")
    run["summary"]["phase"] = "train"
    assert row_cells(run, False, 2.0)[state].text == "running"
    assert header_text(run, 2.0).plain.startswith("snake  running  return")
    # the CLI: a real run's phase event makes the daemon's summary say it
    run_id = mosaic.synthetic(100000, "rate=20", "phase=compiling", name="phased")
    wait_for(lambda: "compiling…" in mosaic.run("ls", check=True).stdout, 60, 0.2, "ls to say compiling…")
    assert "state: compiling…" in mosaic.run("show", run_id, check=True).stdout
    mosaic.run("cancel", run_id, check=True)


@pytest.mark.slow
@pytest.mark.long   # two A2C runs compiled and trained side by side (70 s here): CI's half hour (make test-long)
def test_a2c_stopped_and_continued_trains_exactly_as_without_the_stop(daemon, mosaic):
    """mosaic stop saves the whole training state (params, optimiser, env states, keys) between two
    epochs; mosaic continue loads it into the same run: every epoch once, in order, and the same
    numbers as a run of the same seed that was never stopped (JAX on the CPU is deterministic)."""
    params = {**TINY, "training.num_epochs": 120, "eval_every": 1000, "checkpoint_every": 0}
    whole = mosaic.submit(config_file(mosaic, "whole", env="Snake-v1", params=params))
    finish(mosaic, whole)
    stopped = mosaic.submit(config_file(mosaic, "stopped", env="Snake-v1", params=params))
    per_epoch = TINY["training.num_learner_steps_per_epoch"] * TINY["training.n_steps"] * \
        TINY["training.total_batch_size"]
    wait_for(lambda: mosaic.show(stopped)["summary"].get("steps", 0) >= 2 * per_epoch, float(WAIT), 0.05,
             what="two epochs")
    assert mosaic.run("stop", stopped, "--timeout", WAIT).returncode == 0
    run = mosaic.show(stopped)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]
    assert at["checkpoint"].endswith("/training_state.pkl") and "/stop_" in at["checkpoint"]
    assert 2 * per_epoch <= at["step"] < 120 * per_epoch and at["step"] % per_epoch == 0
    assert mosaic.run("continue", stopped, "--wait").returncode == 0
    run = finish(mosaic, stopped)
    assert run["summary"]["steps"] == run["summary"]["total_steps"] == 120 * per_epoch and run["restarts"] == 1

    events = events_of(mosaic.home, stopped)
    assert len(of_type(events, "restarted")) == 1 and len(of_type(events, "run_stopped")) == 1
    epochs = [e["value"] for e in of_type(events, "scalar") if e["tag"] == "train/epoch"]
    assert epochs == [float(n) for n in range(1, 121)]            # every epoch once, in order
    stderr = (mosaic.home.run_dir(stopped) / "stderr.log").read_text()
    assert f"resumed from {at['checkpoint']} at epoch {at['step'] // per_epoch}" in stderr

    def losses(events):
        return [(e["step"], e["value"]) for e in of_type(events, "scalar") if e["tag"] == "train/total_loss"]
    assert losses(events) == losses(events_of(mosaic.home, whole))   # the same training, step for step
