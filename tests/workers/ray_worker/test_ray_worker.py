"""The Ray RLlib worker, through the daemon (the real CLI, a per-test home) and, for the
algorithm walk, in one process with one Ray.

Ray is heavy on this machine (two shared cores): a run costs ~10 s of imports and
ray.init before its first iteration, so every run here is one to three small
iterations, and the tests run one at a time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from daemon import proctree, resources
from tests.helpers import ROOT, holds, wait_for
from tests.plugins.base import die_with_parent, free_port
from workers.ray_worker import WORKER, catalog
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event

pytestmark = pytest.mark.ray   # its runs start private Ray clusters: one at a time (tests/conftest.py)

RAY = str(Path(sys.executable).parent / "ray")
WAIT = "600"
# Small PPO iterations: 200 env steps, one epoch.
SMALL_PPO = ["--set", "train_batch_size_per_learner=200", "--set", "minibatch_size=100", "--set", "num_epochs=1",
             "--set", "fcnet_hiddens=[64]"]


# -- helpers --------------------------------------------------------------------------------
def events_of(home, run_id: str) -> list[dict]:
    lines = (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    return [check_event(json.loads(line)) for line in lines]


def trained(events: list[dict]) -> bool:
    """The worker reported a scalar (the daemon's own system/* samples come before Ray is up)."""
    return any(e["type"] == "scalar" and not e["tag"].startswith(resources.PREFIX) for e in events)


def scalars(events: list[dict]) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    for e in events:
        if e["type"] == "scalar":
            out.setdefault(e["tag"], []).append((e["step"], e["value"]))
    return out


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def finish(mosaic, run_id: str, state: str = "succeeded") -> dict:
    mosaic.run("wait", run_id, "--timeout", WAIT)
    run = mosaic.show(run_id)
    if run["state"] != state:
        stderr = (mosaic.home.run_dir(run_id) / "stderr.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"run {run_id} is {run['state']} ({run.get('reason')}), not {state}:\n{stderr}")
    return run


def processes_mentioning(text: str) -> dict[int, str]:
    """pid -> command line of every process whose command line contains ``text``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found[int(entry)] = cmdline
    return found


def alive(pid: int, start: int | None) -> bool:
    return proctree.is_alive(pid, start) and proctree.state(pid) != "Z"


def module_weights(checkpoint: Path, module_id: str) -> dict:
    """A module's weights from a checkpoint, by reading its pickled state (no Ray)."""
    code = textwrap.dedent(f"""
        import pickle, sys, json
        from ray.rllib.core.rl_module.rl_module import RLModule
        m = RLModule.from_checkpoint({str(checkpoint / 'learner_group' / 'learner' / 'rl_module' / module_id)!r})
        print(json.dumps({{k: v.detach().flatten()[:8].tolist() for k, v in m.state_dict().items()}}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the descriptor ----------------------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from workers.ray_worker import WORKER
        WORKER.capabilities()
        for algo in WORKER.algorithms():
            WORKER.schema(algo)
        WORKER.validate({"worker": "ray", "algo": "PPO", "env": "simple_spread_v3", "steps": 1000})
        heavy = sorted(m for m in ("ray", "torch", "gymnasium", "pettingzoo", "mpe2", "numpy") if m in sys.modules)
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=str(ROOT))
    assert out.stdout.strip() == ""


def test_capabilities_list_what_runs_here():
    caps = WORKER.capabilities()
    assert caps["algorithms"] == ["PPO", "APPO", "IMPALA", "DQN", "SAC"]
    assert caps["policy_configs"] == ["shared", "independent", "self_play", "shared_value"]
    assert caps["paradigms"] == ["single_agent", "multi_agent"]
    # pymunk and Box2D are pinned in the ray-rllib extra: every family installs
    assert caps["env_families"] == ["classic_control", "box2d", "mujoco", "atari", "vizdoom", "multigrid", "jumanji",
                                    "mpe", "classic", "butterfly", "sisl"]
    assert {"simple_spread_v3", "simple_adversary_v3", "simple_tag_v3", "connect_four_v3", "tictactoe_v3",
            "knights_archers_zombies_v11", "multiwalker_v9", "pursuit_v5", "CartPole-v1", "Pendulum-v1",
            "HalfCheetah-v5", "ALE/Pong-v5", "MosaicMultiGrid-S-2v2-IndAgObs-v1", "VizdoomBasic-v1",
            "jumanji/Snake-v1"} <= set(caps["envs"])
    assert caps["action_spaces"]["DQN"] == ["discrete"] and caps["action_spaces"]["SAC"] == ["continuous"]
    assert caps["self_play"] is True and caps["distributed"] is True and caps["gpu"] is False


def test_schemas_are_versioned_json_schemas_with_rllibs_defaults():
    for algo in catalog.ALGORITHMS:
        schema = WORKER.schema(algo)
        json.dumps(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["version"] == catalog.SCHEMA_VERSION and schema["additionalProperties"] is False
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{algo}.{name} has no help"
            assert "default" in prop, f"{algo}.{name} has no default"
    # The defaults are RLlib's own: read them from the installed AlgorithmConfig classes.
    code = textwrap.dedent("""
        import json
        from workers.ray_worker import catalog, rllib
        out = {}
        for algo, params in catalog.ALGO_PARAMS.items():
            c = rllib.config_class(algo)()
            row = {k: getattr(c, k) for k in params if k not in catalog.MAPPED_BY_HAND}
            if "replay_capacity" in params:
                row["replay_capacity"] = c.replay_buffer_config["capacity"]
            if "rollout_fragment_length" in params:
                row["rollout_fragment_length"] = c.rollout_fragment_length
            if "min_sample_timesteps_per_iteration" in params:
                row["min_sample_timesteps_per_iteration"] = c.min_sample_timesteps_per_iteration
            if algo == "DQN":
                (_, start), (row["epsilon_timesteps"], row["final_epsilon"]) = c.epsilon
            out[algo] = row
        print(json.dumps(out))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rllib = json.loads(proc.stdout.strip().splitlines()[-1])
    for algo, params in catalog.ALGO_PARAMS.items():
        for name, prop in params.items():
            want = rllib[algo][name]
            if want == "auto":  # RLlib's 'auto' is our null
                want = None
            assert prop["default"] == want, f"{algo}.{name}: schema says {prop['default']!r}, RLlib {want!r}"


def _config(**over) -> dict:
    config = {"worker": "ray", "algo": "PPO", "env": "simple_spread_v3", "steps": 1000, "params": {}}
    params = over.pop("params", {})
    config.update(over)
    config["params"].update(params)
    return config


@pytest.mark.parametrize("config, field", [
    (_config(algo="A2C"), "algo"),
    (_config(env="Pong-v5"), "env"),
    (_config(steps=None), "steps"),
    (_config(params={"lr": -1.0}), "params.lr"),
    (_config(params={"lr": "fast"}), "params.lr"),
    (_config(params={"num_epochs": 0}), "params.num_epochs"),
    (_config(params={"gamma": 1.5}), "params.gamma"),
    (_config(params={"minibatch_size": 8000}), "params.minibatch_size"),
    (_config(params={"no_such": 1}), "params.no_such"),
    (_config(params={"policy": "everyone"}), "params.policy"),
    (_config(params={"fcnet_hiddens": [64, 0]}), "params.fcnet_hiddens[1]"),
    (_config(params={"address": "not an address"}), "params.address"),
    (_config(params={"env_runners": 3, "num_cpus": 2}), "params.env_runners"),
    (_config(params={"num_gpus": 0.5}), "params.num_gpus"),
    (_config(params={"custom_resources_per_env_runner": {"sampler": -1}}),
     "params.custom_resources_per_env_runner.sampler"),
    (_config(env="CartPole-v1", params={"policy": "independent"}), "params.policy"),
    (_config(params={"policy": "self_play"}), "params.policy"),             # MPE is not a two-player game
    (_config(algo="APPO", params={"policy": "shared_value"}), "params.policy"),
    (_config(env="tictactoe_v3", params={"policy": "shared_value"}), "params.policy"),
    (_config(algo="DQN", env="tictactoe_v3"), "algo"),                     # no masking module for DQN
    (_config(algo="SAC"), "env"),                                          # discrete MPE actions
    (_config(algo="DQN", env="Pendulum-v1"), "env"),
    (_config(device="cuda"), "device"),
    (_config(mode="eval"), "checkpoint"),
    (_config(mode="eval", checkpoint="relative/path"), "checkpoint"),
    (_config(mode="eval", checkpoint="/nonexistent/checkpoint"), "checkpoint"),
    (_config(env="CartPole-v1", record={"episodes": 3}), "record"),   # training: the env runners' envs
])
def test_bad_configs_are_refused_naming_the_field(config, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate(config)
    assert err.value.field == field, str(err.value)


def test_good_configs_are_normalised():
    config = WORKER.validate(_config(algo="SAC", params={"env_kwargs": {"continuous_actions": True}}))
    assert config["params"]["actor_lr"] == 3e-05 and config["params"]["policy"] == "shared"
    config = WORKER.validate(_config(env="tictactoe_v3", algo="APPO", params={"policy": "self_play"}))
    assert config["params"]["league_size"] == 3 and config["params"]["snapshot_every"] == 5
    config = WORKER.validate(_config(params={"address": "127.0.0.1:6379", "env_runners": 8}))
    assert config["params"]["env_runners"] == 8  # a cluster has its own CPUs


def test_bad_config_refused_at_submit(daemon, mosaic):
    out = mosaic.run("submit", "--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "100",
                     "--set", "env_runners=4")
    assert out.returncode != 0 and "params.env_runners" in out.stderr + out.stdout
    out = mosaic.run("submit", "--worker", "ray", "--algo", "DQN", "--env", "connect_four_v3", "--steps", "100")
    assert out.returncode != 0 and "algo" in out.stderr + out.stdout


# -- every algorithm, every policy configuration, every env family, in one process ------------------
WALK = [
    # algo, env, params
    ("PPO", "CartPole-v1", {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1}),
    ("APPO", "CartPole-v1", {"train_batch_size_per_learner": 64, "rollout_fragment_length": 32}),
    ("IMPALA", "CartPole-v1", {"train_batch_size_per_learner": 64, "rollout_fragment_length": 32}),
    ("DQN", "CartPole-v1", {"num_steps_sampled_before_learning_starts": 32, "train_batch_size_per_learner": 16,
                            "replay_capacity": 1000, "min_sample_timesteps_per_iteration": 64,
                            "rollout_fragment_length": 16}),
    ("SAC", "Pendulum-v1", {"num_steps_sampled_before_learning_starts": 32, "train_batch_size_per_learner": 16,
                            "replay_capacity": 1000, "min_sample_timesteps_per_iteration": 64,
                            "rollout_fragment_length": 16}),
    ("APPO", "tictactoe_v3", {"policy": "self_play", "league_size": 2, "snapshot_every": 1,
                              "train_batch_size_per_learner": 64, "rollout_fragment_length": 32}),
    ("IMPALA", "connect_four_v3", {"train_batch_size_per_learner": 64, "rollout_fragment_length": 32}),
    ("DQN", "simple_spread_v3", {"policy": "independent", "num_steps_sampled_before_learning_starts": 32,
                                 "train_batch_size_per_learner": 16, "replay_capacity": 1000,
                                 "min_sample_timesteps_per_iteration": 64, "rollout_fragment_length": 16}),
    ("SAC", "simple_spread_v3", {"env_kwargs": {"continuous_actions": True},
                                 "num_steps_sampled_before_learning_starts": 32, "train_batch_size_per_learner": 16,
                                 "replay_capacity": 1000, "min_sample_timesteps_per_iteration": 64,
                                 "rollout_fragment_length": 16}),
    ("PPO", "simple_tag_v3", {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1}),
    ("PPO", "simple_spread_v3", {"policy": "shared_value", "train_batch_size_per_learner": 128,
                                 "minibatch_size": 64, "num_epochs": 1}),
    ("PPO", "multiwalker_v9", {"train_batch_size_per_learner": 128, "minibatch_size": 64, "num_epochs": 1}),
    ("PPO", "knights_archers_zombies_v11", {"policy": "independent", "train_batch_size_per_learner": 128,
                                            "minibatch_size": 64, "num_epochs": 1}),
]

WALK_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import ray, torch
    from workers.ray_worker import WORKER, rllib, modules
    torch.set_num_threads(1)
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=sys.argv[1], logging_level="ERROR")
    for algo, env, params in json.loads(sys.argv[2]):
        t = time.time()
        config = WORKER.validate({"worker": "ray", "algo": algo, "env": env, "steps": 64,
                                  "params": {"fcnet_hiddens": [32], **params}})
        setup = rllib.Setup(config)
        algorithm = setup.config.build_algo()
        learner = algorithm.learner_group._learner
        critic_before = None
        if modules.CRITIC_ID in learner.module.keys():
            critic_before = [p.detach().clone() for p in learner.module[modules.CRITIC_ID].parameters()]
        if setup.policy == "self_play":
            rllib.League(algorithm, params["league_size"], params["snapshot_every"]).fill()
        result = algorithm.train()
        row = {"algo": algo, "env": env, "policy": setup.policy, "seconds": round(time.time() - t, 1),
               "steps": rllib.env_steps(result), "tags": sorted(rllib.flatten(result)),
               "modules": sorted(learner.module.keys()),
               "optimizers": sorted(learner._named_optimizers)}
        if critic_before is not None:
            after = list(learner.module[modules.CRITIC_ID].parameters())
            row["critic_trained"] = any(bool((a != b).any()) for a, b in zip(after, critic_before))
            row["actor_holds_critic"] = any(p is q for p in learner.module["agent_0"].parameters()
                                            for q in after)
        print(json.dumps(row), flush=True)
        algorithm.stop()
    ray.shutdown()
""")


@pytest.mark.long   # the breadth sweep: every algorithm, every policy configuration (make test-long)
def test_every_algorithm_and_policy_configuration_trains(tmp_path):
    temp = tempfile.mkdtemp(prefix="mrw-", dir="/tmp")  # short: Ray's socket paths
    try:
        proc = subprocess.run([sys.executable, "-c", WALK_SCRIPT, temp, json.dumps(WALK)], capture_output=True,
                              text=True, cwd=str(ROOT), timeout=900,
                              env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
                                   # on loopback, as the worker keeps its private Ray (cli.ray_environment)
                                   "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"})
    finally:
        subprocess.run(["rm", "-rf", temp])
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and len(rows) == len(WALK), proc.stderr[-5000:]
    by = {(r["algo"], r["env"]): r for r in rows}
    for algo, env, _ in WALK:
        row = by[(algo, env)]
        assert row["steps"] > 0, row
        assert any(t.startswith("learners/") and "loss" in t for t in row["tags"]), (algo, env, row["tags"])
    # the five algorithms, single-agent
    assert {r["algo"] for r in rows if r["env"] in ("CartPole-v1", "Pendulum-v1")} == set(catalog.ALGORITHMS)
    # policy configurations: modules and what they train
    assert by[("APPO", "tictactoe_v3")]["modules"] == ["main", "snapshot_0", "snapshot_1"]
    assert by[("IMPALA", "connect_four_v3")]["modules"] == ["shared"]
    assert by[("DQN", "simple_spread_v3")]["modules"] == ["agent_0", "agent_1", "agent_2"]
    assert by[("PPO", "simple_tag_v3")]["modules"] == ["shared_adversary", "shared_agent"]  # one per kind
    assert by[("PPO", "knights_archers_zombies_v11")]["modules"] == ["archer_0", "archer_1", "knight_0", "knight_1"]
    mappo = by[("PPO", "simple_spread_v3")]
    assert mappo["modules"] == ["agent_0", "agent_1", "agent_2", "shared_critic"]
    assert "shared_critic_default_optimizer" in mappo["optimizers"]
    assert mappo["critic_trained"] is True and mappo["actor_holds_critic"] is False
    # per-agent and per-module returns of a multi-agent run
    tags = set(by[("PPO", "simple_tag_v3")]["tags"])
    assert "learners/shared_adversary/policy_loss" in tags and "learners/shared_agent/policy_loss" in tags


# -- through the daemon ----------------------------------------------------------------------
def test_ppo_cartpole_two_iterations_checkpoint_resume_and_evaluation(daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "400",
                           *SMALL_PPO, "--set", "checkpoint_every=1")
    run = finish(mosaic, run_id)
    events = events_of(home, run_id)
    tags = scalars(events)
    steps = [s for s, _ in tags["env_runners/num_env_steps_sampled_lifetime"]]
    assert steps == [200, 400]  # two iterations, counted in env steps
    for tag in ("env_runners/episode_return_mean", "env_runners/episode_return_min",
                "env_runners/episode_return_max", "env_runners/agent_episode_return_mean/default_agent",
                "env_runners/module_episode_return_mean/default_policy", "learners/default_policy/policy_loss",
                "learners/default_policy/vf_loss", "learners/default_policy/entropy", "time/iteration_s",
                "timers/training_iteration"):
        assert tag in tags, tag
    assert not any(t.startswith("config/") for t in tags)
    episodes = of_type(events, "episode")
    assert episodes and all(e["length"] > 0 and e["return"] == e["length"] for e in episodes)  # CartPole: +1/step
    assert sum(e["length"] for e in episodes if e["step"] == 200) <= 200
    saved = of_type(events, "checkpoint_saved")
    assert [Path(e["path"]).name for e in saved] == ["iter_000001", "final"]
    manifest = json.loads((Path(saved[0]["path"]).parent / "iter_000001.manifest.json").read_text())
    assert manifest["step"] == 200 and manifest["checkpoint"] == saved[0]["path"]   # a run that fails continues from it
    assert [e["step"] for e in saved] == [200, 400]
    final = Path(saved[-1]["path"])
    meta = json.loads((final / "mosaic_checkpoint.json").read_text())
    assert meta["algo"] == "PPO" and meta["steps"] == 400 and meta["agent_to_module"] == {"default_agent":
                                                                                           "default_policy"}
    assert of_type(events, "run_completed")[-1]["step"] == 400
    assert run["summary"]["steps"] == 400
    assert not Path(f"/tmp/mosaic-ray-{run_id}").exists()  # the short temp-dir link goes with the run
    # RLlib's own log directory (a Tune Trainable's) is in the run directory, not in ~/ray_results
    assert len(list((home.run_dir(run_id) / "ray_results").iterdir())) == 1

    # resume: training goes on from the checkpoint's 400 steps
    config = {"worker": "ray", "algo": "PPO", "env": "CartPole-v1", "steps": 600, "checkpoint": str(final),
              "params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                         "fcnet_hiddens": [64]}}
    path = Path(home.root) / "resume.json"
    path.write_text(json.dumps(config))
    resumed = mosaic.submit(str(path))
    finish(mosaic, resumed)
    steps = [s for s, _ in scalars(events_of(home, resumed))["env_runners/num_env_steps_sampled_lifetime"]]
    assert steps == [600]

    # evaluation: the checkpoint (the daemon resolves run:NAME to the run's latest) plays 3 episodes
    config = {"worker": "ray", "algo": "PPO", "env": "CartPole-v1", "mode": "eval",
              "checkpoint": f"run:{run['name']}", "eval_episodes": 3, "params": {}, "record": {"episodes": 3}}
    path.write_text(json.dumps(config))
    evaluation = mosaic.submit(str(path))
    finish(mosaic, evaluation)
    events = events_of(home, evaluation)
    episodes = of_type(events, "episode")
    assert len(episodes) == 3 and all(e["return"] == e["length"] >= 8 for e in episodes)
    # it recorded them: the dataset's transitions are the episodes' steps (workers/sdk/dataset.py)
    dataset = mosaic.show(evaluation)["summary"]["dataset"]
    assert dataset["episodes"] == 3 and dataset["transitions"] == sum(e["length"] for e in episodes)
    del config["record"]
    # an evaluation trains nothing: no worker scalars (the daemon's own system/* samples aside), no checkpoints
    assert not [e for e in of_type(events, "scalar") if not e["tag"].startswith(resources.PREFIX)]
    assert not of_type(events, "checkpoint_saved")
    assert mosaic.show(evaluation)["config"]["checkpoint"] == str(final)
    config["checkpoint"] = str(final)

    # evaluation with frames: FastLane carries the rendered CartPole while it plays
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader
    config.update(eval_episodes=100000, frames={"enabled": True, "fps": 30, "max_dim": 120})
    path.write_text(json.dumps(config))
    watched = mosaic.submit(str(path))
    wait_for(lambda: layout.run_files(watched), 120, what="the eval run's FastLane segment")
    with FrameReader(watched) as reader:
        latest = wait_for(reader.latest, 30, what="a frame")
    number, frame = latest
    assert number >= 1 and frame.shape == (80, 120, 3) and frame.std() > 0  # 400x600 scaled to max_dim
    mosaic.run("cancel", watched)
    finish(mosaic, watched, "cancelled")


def test_parameter_shared_ppo_on_simple_spread(daemon, mosaic):
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "simple_spread_v3", "--steps", "200",
                           *SMALL_PPO, "--set", "policy=shared")
    finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    tags = scalars(events)
    assert "learners/shared/policy_loss" in tags and "env_runners/module_episode_returns_mean/shared" in tags
    assert not any(t.startswith("learners/agent_") for t in tags)  # one policy, no per-agent learners
    for agent in ("agent_0", "agent_1", "agent_2"):
        assert f"env_runners/agent_episode_returns_mean/{agent}" in tags
    episodes = of_type(events, "episode")
    assert episodes and all(set(e["agents"]) == {"agent_0", "agent_1", "agent_2"} for e in episodes)
    assert all(e["length"] == 25 for e in episodes)  # MPE's max_cycles
    assert abs(sum(episodes[0]["agents"].values()) - episodes[0]["return"]) < 1e-6


@pytest.mark.long   # a policy configuration beside the parameter-shared one that stays in CI (CI's half hour)
def test_independent_policies_on_simple_adversary(daemon, mosaic):
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "simple_adversary_v3", "--steps", "200",
                           *SMALL_PPO, "--set", "policy=independent")
    finish(mosaic, run_id)
    tags = scalars(events_of(mosaic.home, run_id))
    for agent in ("adversary_0", "agent_0", "agent_1"):
        assert f"learners/{agent}/policy_loss" in tags
        assert f"env_runners/module_episode_returns_mean/{agent}" in tags
    final = mosaic.home.run_dir(run_id) / "checkpoints" / "final"
    meta = json.loads((final / "mosaic_checkpoint.json").read_text())
    assert meta["agent_to_module"] == {"adversary_0": "adversary_0", "agent_0": "agent_0", "agent_1": "agent_1"}


def test_self_play_league_on_tictactoe(daemon, mosaic):
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "tictactoe_v3", "--steps", "600",
                           *SMALL_PPO, "--set", "policy=self_play", "--set", "league_size=2",
                           "--set", "snapshot_every=1")
    finish(mosaic, run_id)
    events = events_of(mosaic.home, run_id)
    tags = scalars(events)
    assert [v for _, v in tags["self_play/snapshots_taken"]] == [1.0, 2.0, 3.0]
    assert [v for _, v in tags["self_play/snapshot_slot"]] == [0.0, 1.0, 0.0]  # round-robin over the league
    assert "env_runners/self_play_main_win_rate" in tags
    assert "learners/main/policy_loss" in tags
    # the league is frozen: no loss for a snapshot (RLlib still reports their parameter counts)
    assert not any(t.startswith("learners/snapshot_") and t.endswith("loss") for t in tags)
    assert "env_runners/module_episode_returns_mean/snapshot_0" in tags  # and plays
    episodes = of_type(events, "episode")
    # Illegal moves are masked out: no game ends before the shortest legal win (5 moves).
    assert episodes and min(e["length"] for e in episodes) >= 5
    assert all(set(e["agents"]) == {"player_1", "player_2"} for e in episodes)
    # The snapshot taken after the last iteration is main, weight for weight.
    final = mosaic.home.run_dir(run_id) / "checkpoints" / "final"
    main = module_weights(final, "main")
    assert module_weights(final, "snapshot_0") == main
    assert module_weights(final, "snapshot_1") != main


# -- Ray's processes: cancel, failure, a cluster --------------------------------------------------
def _run_processes(home, run_id: str) -> dict[int, tuple[int | None, str]]:
    """Every process of the run, the supervisor's descendants: pid -> (start time, command line)."""
    sup = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())
    out = {}
    for pid in proctree.descendants(sup["supervisor_pid"]):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[pid] = (proctree.start_time(pid), cmdline)
    return out


def _assert_no_ray_left(home, run_id: str, seen: dict[int, tuple[int | None, str]]) -> None:
    wait_for(lambda: not [p for p, (start, _) in seen.items() if alive(p, start)], 30,
             what="the run's processes to end")
    assert processes_mentioning(run_id) == {}  # nothing names the run's Ray session any more
    stderr = (home.run_dir(run_id) / "stderr.log").read_text(errors="replace")
    assert not Path(f"/tmp/mosaic-ray-{run_id}").is_symlink(), stderr[-3000:]


def test_ppo_stopped_between_iterations_continues_as_the_same_run(daemon, mosaic):
    """mosaic stop: the algorithm's whole state (save_to_path) between two iterations, Ray stopped,
    the run "stopped"; mosaic continue restores it into the same run: the lifetime step counter goes
    on from the stop, every iteration once, to the steps asked."""
    home = mosaic.home
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "4000",
                           *SMALL_PPO, "--name", "ppo-stop")
    wait_for(lambda: len(scalars(events_of(home, run_id)).get("env_runners/num_env_steps_sampled_lifetime", []))
             >= 2, 300, what="two iterations")
    assert mosaic.run("stop", run_id, "--timeout", "300").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", run
    at = run["summary"]["stopped"]
    assert Path(at["checkpoint"]).name.startswith("stop_") and 400 <= at["step"] < 4000
    assert (Path(at["checkpoint"]) / "mosaic_checkpoint.json").exists()
    assert mosaic.run("continue", run_id, "--wait", timeout=900).returncode == 0
    run = finish(mosaic, run_id)
    assert run["summary"]["steps"] == 4000 and run["restarts"] == 1
    events = events_of(home, run_id)
    steps = [s for s, _ in scalars(events)["env_runners/num_env_steps_sampled_lifetime"]]
    assert steps == list(range(200, 4001, 200))   # every iteration once, in order, across the seam
    assert len(of_type(events, "restarted")) == 1 and of_type(events, "restarted")[0]["step"] == at["step"]
    assert f"resumed from {at['checkpoint']}" in (home.run_dir(run_id) / "stderr.log").read_text()


def test_a_private_ray_that_does_not_start_in_time_is_started_again_once(tmp_path, monkeypatch, capfd):
    """Ray gives its raylet a fixed 30 s to register; a CI run's continued RLlib run failed on it when
    the two cores were busy. The first ray.init is made to fail as Ray's does (a fault injected), after
    starting a process under Ray's temp dir as a real attempt leaves its gcs_server: that process is
    killed, the second start is a real private Ray. Any other failure is not tried again."""
    import psutil

    from workers.ray_worker import rllib
    monkeypatch.setenv("RAY_AUTH_TOKEN", os.urandom(24).hex())   # what private_token would set
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    runtime = rllib.RayRuntime({"address": "", "num_cpus": 1}, run_dir, f"retry-{os.getpid()}")
    real_init, calls, left = rllib.ray.init, [], []

    def init(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            left.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)",
                                          f"--log_dir={kwargs['_temp_dir']}/session_0/logs"]))
            raise Exception("The current node timed out during startup. This could happen because some of "
                            "the raylet failed to startup or the GCS has become overloaded.")
        return real_init(**kwargs)

    monkeypatch.setattr(rllib.ray, "init", init)
    try:
        runtime.start()
        assert rllib.ray.is_initialized() and len(calls) == 2
        assert not psutil.pid_exists(left[0].pid)   # killed (and reaped) before the second start
        left[0].wait(timeout=5)
    finally:
        runtime.stop()
    assert not rllib.ray.is_initialized()
    # nothing of either start is left (this process may hold other tests' Ray clusters: only ours count)
    marks = (str(run_dir / "ray"), f"/tmp/{rllib.LINK_PREFIX}retry-{os.getpid()}")

    def ours() -> list:
        found = []
        for p in psutil.Process().children(recursive=True):
            try:
                if any(mark in " ".join(p.cmdline()) for mark in marks):
                    found.append(p)
            except psutil.Error:
                pass
        return found
    wait_for(lambda: not ours(), 30, 0.2, what="the retried Ray's processes to end")
    err = capfd.readouterr().err
    assert "Ray's node did not start within Ray's 30 s" in err and "1 of its processes stopped" in err

    def other_failure(**kwargs):
        calls.append(kwargs)
        raise RuntimeError("port 6379 is taken")

    calls.clear()
    monkeypatch.setattr(rllib.ray, "init", other_failure)
    with pytest.raises(RuntimeError, match="port 6379"):
        rllib.RayRuntime({"address": "", "num_cpus": 1}, run_dir, f"retry-{os.getpid()}").start()
    assert len(calls) == 1
    # the start that failed took its short link to the run's Ray dir with it: none dangles in /tmp
    assert not Path(f"/tmp/{rllib.LINK_PREFIX}retry-{os.getpid()}").is_symlink()


def test_cancel_leaves_no_ray_process(daemon, mosaic):
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "100000000",
                           *SMALL_PPO, "--set", "env_runners=1")
    home = mosaic.home
    wait_for(lambda: trained(events_of(home, run_id)), 300, what="the first training iteration")
    seen = _run_processes(home, run_id)
    commands = " ".join(cmd for _, cmd in seen.values())
    for name in ("raylet", "gcs_server", "default_worker.py"):  # Ray's daemons and the env-runner actor
        assert name in commands, f"no {name} among the run's processes: {commands[:2000]}"
    assert processes_mentioning(run_id), "the run's Ray processes do not name its session"
    mosaic.run("cancel", run_id)
    finish(mosaic, run_id, "cancelled")
    _assert_no_ray_left(home, run_id, seen)
    stderr = (home.run_dir(run_id) / "stderr.log").read_text(errors="replace")
    assert "stopped by SIGTERM" in stderr, stderr[-3000:]   # it stopped itself, inside the grace period


def test_failure_leaves_no_ray_process(daemon, mosaic):
    # Accepted at submit (env_kwargs is free-form), refused by gymnasium once Ray is up.
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "1000",
                           *SMALL_PPO, "--set", 'env_kwargs={"no_such_argument": 1}')
    home = mosaic.home
    wait_for(lambda: any(e["type"] == "phase" and e["name"] == "build" for e in events_of(home, run_id)), 300,
             what="Ray to start")
    seen = _run_processes(home, run_id)
    run = finish(mosaic, run_id, "failed")
    assert "no_such_argument" in run["reason"]
    assert any("raylet" in cmd for _, cmd in seen.values())
    _assert_no_ray_left(home, run_id, seen)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _live(pid: int) -> bool:
    return proctree.state(pid) not in (None, "Z", "X")


def test_pause_stops_every_ray_process_and_resume_continues(daemon, mosaic):
    """SIGSTOP reaches the worker, raylet, gcs_server and Ray's worker processes; none escapes."""
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "100000000",
                           *SMALL_PPO, "--set", "env_runners=1")
    home = mosaic.home
    events = home.run_dir(run_id) / "events.jsonl"
    sup_file = home.run_dir(run_id) / "supervisor.json"
    sup = wait_for(lambda: sup_file.exists() and json.loads(sup_file.read_text())["supervisor_pid"], 60,
                   what="supervisor.json")
    wait_for(lambda: trained(events_of(home, run_id)), 300, what="the first training iteration")
    seen = _run_processes(home, run_id)
    commands = " ".join(cmd for _, cmd in seen.values())
    for name in ("raylet", "gcs_server", "default_worker.py"):
        assert name in commands, f"no {name} among the run's processes: {commands[:2000]}"

    def escaped() -> dict[int, str]:
        """Processes of the run's Ray session that are not in the supervisor's tree."""
        tree = set(proctree.descendants(sup)) | {sup}
        return {p: c for p, c in processes_mentioning(run_id).items() if p not in tree and _live(p)}

    assert escaped() == {}
    assert mosaic.run("pause", run_id).returncode == 0

    def not_stopped() -> dict[int, str]:
        """Live processes of the run (its tree and its Ray session) that are not stopped."""
        pids = set(proctree.descendants(sup)) | set(processes_mentioning(run_id)) - {sup}
        return {p: _cmdline(p)[:120] for p in pids if _live(p) and proctree.state(p) != "T"}

    def all_stopped():
        return not not_stopped()

    try:
        wait_for(all_stopped, 10, what="every process of the run stopped")
    except AssertionError:
        raise AssertionError(f"still running after pause: {not_stopped()}") from None
    paused = [p for p in proctree.descendants(sup) if _live(p)]
    stopped = " ".join(_cmdline(p) for p in paused)
    # the worker (the driver), Ray's daemons and its worker processes (env-runner actor, idle workers)
    for name in ("workers.ray_worker.cli", "raylet", "gcs_server", "ray::"):
        assert name in stopped, f"no {name} among the stopped processes: {stopped[:2000]}"
    assert proctree.state(sup) != "T"  # the supervisor stays free to act on a cancel
    assert mosaic.show(run_id)["state"] == "paused"
    size = events.stat().st_size
    # looked at over 3 s: no telemetry written, no process of the run running
    try:
        holds(lambda: events.stat().st_size == size and all_stopped(), 3.0, interval=0.2,
              what="the paused run standing still")
    except AssertionError:
        raise AssertionError(f"while paused: {events.stat().st_size - size} bytes of telemetry written, "
                             f"running: {not_stopped()}") from None

    assert mosaic.run("resume", run_id).returncode == 0
    wait_for(lambda: all(proctree.state(p) != "T" for p in paused if _live(p)), 10,
             what="every process of the run continued")
    assert mosaic.show(run_id)["state"] == "running"
    # training goes on: a new iteration's metrics are written after the pause
    wait_for(lambda: b'"type":"scalar"' in events.read_bytes()[size:], 120, what="metrics after resume")
    assert escaped() == {}

    everything = {**seen, **_run_processes(home, run_id)}
    mosaic.run("cancel", run_id)
    finish(mosaic, run_id, "cancelled")
    _assert_no_ray_left(home, run_id, everything)


# Ray replaces 127.0.0.1 (and localhost) by the machine's outward address, and
# refuses a second node when told to stay on 127.0.0.1; 127.0.0.2 is loopback
# too and taken as given, so the whole cluster talks over lo.
CLUSTER_IP = "127.0.0.2"


@pytest.fixture
def two_node_cluster():
    """A head and a second node on loopback, each with 1 CPU and one 'sampler' slot.

    Started with `ray start --block` in sessions of their own and stopped by
    signalling those two processes (then, by pid, whatever still names the
    cluster's temp dir): `ray stop` would stop every Ray on the machine.
    `ray start` turns token authentication on (the token of ~/.ray/auth_token);
    drivers that join by address use it only with RAY_AUTH_MODE=token.
    """
    temp = tempfile.mkdtemp(prefix="mrc-", dir="/tmp")
    port = free_port()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    common = ["--block", f"--node-ip-address={CLUSTER_IP}", "--num-cpus=1", '--resources={"sampler": 1}',
              "--disable-usage-stats"]
    logs = open(Path(temp) / "cluster.log", "ab")
    nodes = []
    try:
        nodes.append(subprocess.Popen([RAY, "start", "--head", f"--port={port}", f"--temp-dir={temp}",
                                       "--include-dashboard=false", *common], stdout=logs, stderr=logs, env=env,
                                      start_new_session=True, preexec_fn=die_with_parent))
        address = f"{CLUSTER_IP}:{port}"
        wait_for(lambda: _cluster_nodes(address, env) >= 1, 180, 1.0, what="the head node")
        nodes.append(subprocess.Popen([RAY, "start", f"--address={address}", *common], stdout=logs, stderr=logs,
                                      env=env, start_new_session=True, preexec_fn=die_with_parent))
        wait_for(lambda: _cluster_nodes(address, env) >= 2, 180, 1.0, what="the second node")
        yield address, env
    finally:
        started = time.monotonic()
        for node in reversed(nodes):  # the second node first: it would wait for a head that is gone
            try:
                os.killpg(node.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                node.wait(timeout=5)
            except subprocess.TimeoutExpired:  # a worker node's `ray start` can take 20 s and more
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        # What `ray start` did not stop, by pid: Ray's processes name the cluster's
        # temp dir or its GCS address on their command lines.
        leftovers = {**processes_mentioning(temp), **processes_mentioning(f"{CLUSTER_IP}:{port}")}
        for pid in leftovers:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for(lambda: not {**processes_mentioning(temp), **processes_mentioning(f"{CLUSTER_IP}:{port}")},
                 30, what="the cluster's processes to end")
        print(f"cluster stopped in {time.monotonic() - started:.1f}s ({len(leftovers)} killed by pid)")
        logs.close()
        subprocess.run(["rm", "-rf", temp])


_CLUSTER_QUERY = textwrap.dedent("""
    import json, sys, ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    from ray._private import state
    actors = list(state.actors().values())
    print(json.dumps({"nodes": [n["NodeID"] for n in nodes],
                      "alive_actors": [a["ActorClassName"] for a in actors if a["State"] != "DEAD"],
                      "dead_actors": [a["ActorClassName"] for a in actors if a["State"] == "DEAD"]}))
""")


def _cluster_state(address: str, env: dict) -> dict | None:
    proc = subprocess.run([sys.executable, "-c", _CLUSTER_QUERY, address], capture_output=True, text=True,
                          env=env, timeout=120)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cluster_nodes(address: str, env: dict) -> int:
    state = _cluster_state(address, env)
    return len(state["nodes"]) if state else 0


@pytest.mark.long   # ~40-75 s (two Ray nodes started for it): CI's half hour; Jobs API placement on a second
# node stays in CI (tests/daemon/placement/test_ray_placement.py, tests/plugins/test_ray_cluster.py)
def test_two_node_cluster(daemon, mosaic, two_node_cluster):
    address, env = two_node_cluster
    run_id = mosaic.submit("--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "200",
                           *SMALL_PPO, "--set", f"address={address}", "--set", "auth_mode=token",
                           "--set", "env_runners=2", "--set", 'custom_resources_per_env_runner={"sampler": 1}')
    finish(mosaic, run_id)
    placement = json.loads((mosaic.home.run_dir(run_id) / "ray_placement.json").read_text())
    cluster = _cluster_state(address, env)
    assert sorted(placement["cluster_nodes"]) == sorted(cluster["nodes"]) and len(cluster["nodes"]) == 2
    # one sampler slot per node: the two env runners sit on different nodes
    assert len(placement["env_runner_nodes"]) == 2
    assert sorted(placement["env_runner_nodes"]) == sorted(cluster["nodes"])
    tags = scalars(events_of(mosaic.home, run_id))
    assert tags["ray/env_runner_nodes"][-1][1] == 2.0
    # the cluster stays up; only the run's own actors are gone
    assert cluster["alive_actors"] == []
    assert cluster["dead_actors"].count("SingleAgentEnvRunner") == 2
    # a cluster's Ray keeps its own temp dir: nothing of it in the run dir
    assert not (mosaic.home.run_dir(run_id) / "ray").exists()


def test_invalid_config_file_fails_before_starting_ray(tmp_path):
    """The worker validates its config.json again, as every worker does (workers/sdk/worker_cli.start):
    an edited file is refused with one run_failed naming the field, before any Ray process starts."""
    (tmp_path / "config.json").write_text(json.dumps(_config(env="CartPol-v1")))
    proc = subprocess.run([sys.executable, "-m", "workers.ray_worker.cli", "--config", "config.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert [e["type"] for e in events] == ["run_failed"]
    assert "env: unknown environment 'CartPol-v1'" in events[0]["reason"] and "'CartPole-v1'" in events[0]["reason"]
    assert not (tmp_path / "ray").exists() and "ray" not in proc.stderr.lower()
