"""The CleanRL worker, run the way the supervisor runs it: ``python -m
workers.cleanrl_worker.cli --config config.json`` in a run directory, stdout
appending to events.jsonl, stderr to stderr.log.

Every algorithm trains a few thousand steps on CPU with small buffers and
batches, so an update happens and losses are logged. Trained runs are shared
between tests through ``trained()`` (each algorithm trains once per session).
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import wait_for
from workers.cleanrl_worker import WORKER, catalog
from workers.cleanrl_worker.argparse_schema import parse_script_args
from workers.sdk.config import ConfigError
from workers.sdk.telemetry import check_event

ALGORITHMS = ["ppo", "dqn", "c51", "ppo_continuous_action", "rpo_continuous_action",
              "sac_continuous_action", "td3_continuous_action", "ddpg_continuous_action", "dqn_atari"]

# Small runs where learning starts early, so every loss is logged at least once.
REPLAY = {"learning-starts": 300, "buffer-size": 2000, "batch-size": 32}
RUNS = {
    "ppo": dict(env="CartPole-v1", steps=2048, params={"num-steps": 128, "save-model": True}),
    "dqn": dict(env="CartPole-v1", steps=1500, params={**REPLAY, "train-frequency": 2, "save-model": True}),
    "c51": dict(env="Acrobot-v1", steps=1500, params={**REPLAY, "train-frequency": 2}),
    "ppo_continuous_action": dict(env="Pendulum-v1", steps=1024,
                                  params={"num-steps": 256, "num-minibatches": 4, "update-epochs": 2,
                                          "num-envs": 2, "save-model": True}),
    "rpo_continuous_action": dict(env="Pendulum-v1", steps=1024,
                                  params={"num-steps": 512, "num-minibatches": 4, "update-epochs": 2}),
    "sac_continuous_action": dict(env="Pendulum-v1", steps=800, params=REPLAY),
    "td3_continuous_action": dict(env="Pendulum-v1", steps=800, params=REPLAY),
    "ddpg_continuous_action": dict(env="MountainCarContinuous-v0", steps=1200, params=REPLAY),
}
# Every scalar tag each script logs during such a run.
EXPECTED_TAGS = {
    "ppo": {"losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl", "charts/SPS",
            "charts/episodic_return", "charts/episodic_length", "charts/learning_rate"},
    "dqn": {"losses/td_loss", "losses/q_values", "charts/SPS", "charts/episodic_return", "charts/epsilon",
            "eval/episodic_return"},
    "c51": {"losses/loss", "losses/q_values", "charts/SPS", "charts/episodic_return"},
    "ppo_continuous_action": {"losses/value_loss", "losses/policy_loss", "charts/SPS", "charts/episodic_return"},
    "rpo_continuous_action": {"losses/value_loss", "losses/policy_loss", "charts/SPS", "charts/episodic_return"},
    "sac_continuous_action": {"losses/qf1_loss", "losses/actor_loss", "losses/alpha", "losses/alpha_loss",
                              "charts/SPS", "charts/episodic_return"},
    "td3_continuous_action": {"losses/qf1_loss", "losses/qf2_loss", "losses/actor_loss", "charts/SPS",
                              "charts/episodic_return"},
    "ddpg_continuous_action": {"losses/qf1_loss", "losses/actor_loss", "charts/SPS", "charts/episodic_return"},
}


# -- running the worker like the supervisor does -------------------------------
# One torch thread per run: on a busy machine (two cores shared with other
# work), torch's OpenMP threads spin against each other and make the
# off-policy scripts several times slower. Behaviour is the same either way.
WORKER_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def start_worker(run_dir: Path, config: dict, **popen) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(config))
    # O_APPEND, as the supervisor opens them
    with open(run_dir / "events.jsonl", "ab") as out, open(run_dir / "stderr.log", "ab") as err:
        return subprocess.Popen([sys.executable, "-m", "workers.cleanrl_worker.cli", "--config", "config.json"],
                                cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                env=popen.pop("env", WORKER_ENV), **popen)


def read_events(run_dir: Path, complete_lines_only: bool = False) -> list[dict]:
    """The run's events; ``complete_lines_only``: while the run writes, its last line may be partial."""
    text = (run_dir / "events.jsonl").read_text()
    if complete_lines_only:
        text = text[:text.rfind("\n") + 1]
    return [check_event(json.loads(line)) for line in text.splitlines()]


def run_worker(run_dir: Path, config: dict, timeout: float = 300, env: dict | None = None) -> tuple[int, list[dict]]:
    # a session of its own, as under the supervisor: a test that times out kills the script too
    proc = start_worker(run_dir, config, start_new_session=True, env=env or WORKER_ENV)
    try:
        returncode = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return returncode, read_events(run_dir)


def stderr_of(run_dir: Path) -> str:
    return (run_dir / "stderr.log").read_text(errors="replace")[-3000:]


_trained: dict[str, tuple[Path, int, list[dict]]] = {}


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cleanrl-runs")


def trained(algo: str, runs_root: Path) -> tuple[Path, int, list[dict]]:
    """Train ``algo`` once per session: (run dir, exit code, events)."""
    if algo not in _trained:
        spec = RUNS[algo]
        config = {"worker": "cleanrl", "algo": algo, "env": spec["env"], "steps": spec["steps"], "seed": 1,
                  "device": "cpu", "params": spec["params"]}
        run_dir = runs_root / algo
        returncode, events = run_worker(run_dir, config)
        _trained[algo] = (run_dir, returncode, events)
    return _trained[algo]


# The scripts whose global_step is their loop's index (`for global_step in range(...)`): one
# less than the iterations done when an episode ends. The others (PPO's) add num_envs first.
LOOP_INDEX_SCRIPTS = {"dqn", "c51", "sac_continuous_action", "td3_continuous_action", "ddpg_continuous_action",
                      "dqn_atari", "c51_atari"}


def check_episode_accounting(episodes: list[dict], num_envs: int, algo: str | None = None) -> None:
    """Exactly one event per episode end: in each sub-env, episodes follow each
    other, so the lengths of its episodes add up to the iterations of the vector
    env, and the event's step is the script's own global_step then (what it logs
    charts/episodic_return with): the env steps taken, or the loop's index."""
    by_env = defaultdict(list)
    for event in episodes:
        by_env[event.get("env_index", 0)].append(event)
    for env_index, events in by_env.items():
        elapsed = 0
        for event in events:
            elapsed += event["length"]
            expected = elapsed - 1 if algo in LOOP_INDEX_SCRIPTS else elapsed * num_envs
            assert event["step"] == expected, (env_index, event)


# -- the descriptor ---------------------------------------------------------------
def test_descriptor_imports_nothing_heavy():
    code = textwrap.dedent("""
        import sys
        from workers.cleanrl_worker import WORKER
        WORKER.capabilities()
        for algo in WORKER.algorithms():
            WORKER.schema(algo)
        WORKER.validate({"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 1000})
        heavy = sorted(m for m in ("torch", "gym", "gymnasium", "numpy", "stable_baselines3", "cleanrl")
                       if m in sys.modules)
        print(",".join(heavy))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_capabilities_list_exactly_what_runs_here():
    caps = WORKER.capabilities()
    assert caps["algorithms"] == ALGORITHMS
    assert caps["paradigms"] == ["single_agent"]
    # families follow what is installed (Box2D may be; MuJoCo is not)
    assert caps["env_families"] == ["classic_control"] + \
        [family for family, module in (("box2d", "Box2D"), ("mujoco", "mujoco"), ("atari", "ale_py"),
                                       ("jumanji", "jumanji"))
         if importlib.util.find_spec(module) is not None]
    assert caps["action_spaces"]["ppo"] == ["discrete"]
    assert caps["action_spaces"]["sac_continuous_action"] == ["continuous"]
    assert set(caps["action_spaces"]) == set(ALGORITHMS)
    assert caps["max_agents"] == 1 and caps["self_play"] is False
    assert caps["pause"] is True and caps["checkpoints"] is True
    assert caps["gpu"] is False  # torch is the +cpu build here
    assert set(caps["envs"]) == set(ALGORITHMS)
    assert {"CartPole-v1", "Acrobot-v1", "MountainCar-v0"} <= set(caps["envs"]["ppo"])
    assert {"Pendulum-v1", "MountainCarContinuous-v0"} <= set(caps["envs"]["sac_continuous_action"])
    assert "Pendulum-v1" not in caps["envs"]["dqn"] and "CartPole-v1" not in caps["envs"]["td3_continuous_action"]
    if "jumanji" in caps["env_families"]:  # jumanji/<Env>: gymnasium ids, not gym 0.23's
        assert "jumanji/Snake-v1" in caps["envs"]["dqn"] and "jumanji/Snake-v1" not in caps["envs"]["ppo"]
    if "box2d" in caps["env_families"]:  # gym 0.23 has LunarLander-v2, gymnasium v3
        assert "LunarLander-v2" in caps["envs"]["ppo"] and "LunarLander-v3" not in caps["envs"]["ppo"]
        assert "LunarLander-v3" in caps["envs"]["dqn"] and "LunarLander-v2" not in caps["envs"]["dqn"]
    if "jumanji" in caps["env_families"]:  # gymnasium's jumanji/<Env> (workers/sdk/jumanji_envs.py); not gym 0.23's
        assert "jumanji/TSP-v1" in caps["envs"]["dqn"] and "jumanji/TSP-v1" not in caps["envs"]["ppo"]
        assert "jumanji/BinPack-v2" not in caps["envs"]["dqn"]  # multi-discrete actions


def load_script_defaults(algo: str) -> dict:
    """The script's real argparse defaults: import it and call its parse_args()."""
    path = catalog.script_path(algo)
    spec = importlib.util.spec_from_file_location(f"_defaults_{algo}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    argv = sys.argv
    sys.argv = [path]
    try:
        return vars(module.parse_args())
    finally:
        sys.argv = argv


@pytest.mark.parametrize("algo", ALGORITHMS)
def test_schema_is_the_scripts_argparse(algo):
    schema = WORKER.schema(algo)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    json.dumps(schema)  # plain JSON
    props = schema["properties"]
    # the common config owns these
    for owned in ("env-id", "total-timesteps", "seed", "cuda"):
        assert owned not in props
    # uploading is offered only where huggingface_hub is installed (jumanji's stack brings it)
    from workers.sdk.packages import module_available
    hub = module_available("huggingface_hub")
    if algo in ("dqn", "c51", "dqn_atari"):  # the scripts that have the option at all
        assert ("upload-model" in props) == hub and ("hf-entity" in props) == hub
    else:
        assert "upload-model" not in props
    assert props["save-model"]["type"] == "boolean" and props["save-model"]["default"] is False
    assert props["track"] == {"type": "boolean", "default": False,
                              "description": "if toggled, this experiment will be tracked with Weights and Biases"}
    assert props["learning-rate" if "learning-rate" in props else "q-lr"]["type"] == "number"

    defaults = load_script_defaults(algo)
    for name, prop in props.items():
        dest = name.replace("-", "_")
        if name == "save-model" and dest not in defaults:
            continue  # mosaic's own --save-model for a script without one
        assert "default" in prop, name
        assert prop["default"] == defaults[dest], name
        assert prop.get("description"), name
        if prop["default"] is not None:
            # argparse keeps a non-string default as written: type=float, default=-100 stays an int,
            # type=int, default=25e3 a float
            real = defaults[dest]
            if isinstance(real, float):
                allowed = {"number", "integer"} if real.is_integer() else {"number"}
            else:
                allowed = {bool: {"boolean"}, int: {"integer", "number"}, str: {"string"}}[type(real)]
            assert prop["type"] in allowed, name
    # every option of the script is either a param or owned by the common config
    assert set(defaults) - {"batch_size", "minibatch_size"} <= \
        {n.replace("-", "_") for n in props} | {"env_id", "total_timesteps", "seed", "cuda", "upload_model",
                                                 "hf_entity"}


def test_schema_of_argparse_forms(tmp_path):
    source = textwrap.dedent('''
        import argparse, os
        def parse_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--exp-name", type=str, default=os.path.basename(__file__).rstrip(".py"))
            parser.add_argument("--flag", type=lambda x: bool(strtobool(x)), default=True, nargs="?", const=True)
            parser.add_argument("--verbose", action="store_true", help="say more")
            parser.add_argument("--quiet", action="store_false")
            parser.add_argument("--old-bool", type=bool, default=False)
            parser.add_argument("--mode", choices=["a", "b"], default="a")
            parser.add_argument("--sizes", type=int, nargs="+", default=[64, 64])
            parser.add_argument("--starts", type=int, default=25e3)
            parser.add_argument("--buffer", type=int, default=int(1e6))
            parser.add_argument("--v-min", type=float, default=-100)
            parser.add_argument("--opaque", type=int, default=some_function())
            parser.add_argument("-n", "--num", dest="count", type=int, default=2)
            parser.add_argument("positional")
            return parser.parse_args()
    ''')
    path = str(tmp_path / "copy.py")
    args = {a.name: a for a in parse_script_args(source, path)}
    assert list(args) == ["exp-name", "flag", "verbose", "quiet", "old-bool", "mode", "sizes", "starts",
                          "buffer", "v-min", "opaque", "num"]
    assert args["exp-name"].default == "co"  # "copy".rstrip(".py"), CleanRL's quirk reproduced
    assert (args["flag"].type, args["flag"].default) == ("boolean", True)
    assert args["flag"].to_argv(False) == ["--flag", "false"]
    assert (args["verbose"].type, args["verbose"].default) == ("boolean", False)
    assert args["verbose"].to_argv(True) == ["--verbose"] and args["verbose"].to_argv(False) == []
    assert args["quiet"].to_argv(False) == ["--quiet"] and args["quiet"].to_argv(True) == []
    assert args["old-bool"].to_argv(True) == ["--old-bool", "1"] and args["old-bool"].to_argv(False) == ["--old-bool", ""]
    assert args["mode"].choices == ["a", "b"]
    assert args["sizes"].to_argv([32, 16]) == ["--sizes", "32", "16"]
    assert args["starts"].default == 25000 and isinstance(args["starts"].default, int)
    assert args["buffer"].default == 1000000
    assert args["v-min"].default == -100.0 and isinstance(args["v-min"].default, float)
    assert args["opaque"].has_default is False
    assert args["num"].dest == "count"


# -- bad configs are refused before anything starts --------------------------------
BASE = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 10000}


@pytest.mark.parametrize("change, field", [
    ({"algo": "ppo_lstm"}, "algo"),
    ({"algo": "ppo_atari"}, "algo"),                                 # a gym 0.23 Atari script: not offered
    ({"algo": "dqn_atari"}, "env"),                                  # made for Atari, not CartPole
    ({"params": {"learning-rat": 0.001}}, "params.learning-rat"),    # unknown param
    ({"params": {"learning-rate": "fast"}}, "params.learning-rate"),  # mistyped
    ({"params": {"num-envs": 2.5}}, "params.num-envs"),
    ({"params": {"anneal-lr": "yes"}}, "params.anneal-lr"),
    ({"params": {"learning-rate": -0.1}}, "params.learning-rate"),
    ({"params": {"total-timesteps": 5000}}, "params.total-timesteps"),  # owned by 'steps'
    ({"params": {"env-id": "Acrobot-v1"}}, "params.env-id"),
    ({"steps": -100}, "steps"),
    ({"steps": 0}, "steps"),
    ({"env": "Pendulum-v1"}, "env"),                                  # discrete algorithm, continuous env
    ({"algo": "sac_continuous_action"}, "env"),                       # continuous algorithm, discrete env
    ({"algo": "ddpg_continuous_action", "env": "Acrobot-v1"}, "env"),
    ({"algo": "td3_continuous_action", "env": "HalfCheetah-v4"}, "env"),  # gym 0.23 has no v4 MuJoCo envs
    ({"env": "LunarLander-v3"}, "env"),                               # ppo uses gym 0.23: LunarLander-v2
    pytest.param({"algo": "ddpg_continuous_action", "env": "HalfCheetah-v4"}, "env",  # MuJoCo missing
                 marks=pytest.mark.skipif(importlib.util.find_spec("mujoco") is not None,
                                          reason="mujoco is installed")),
    ({"device": "cuda"}, "device"),                                   # CPU-only torch
    ({"mode": "eval"}, "checkpoint"),
    ({"mode": "eval", "checkpoint": "/nonexistent/ppo.cleanrl_model"}, "checkpoint"),
    ({"algo": "relative/script.py"}, "algo"),
    ({"algo": "/nonexistent/script.py"}, "algo"),
    ({"worker": "xuance"}, "worker"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_config_is_refused_naming_the_field(change, field):
    with pytest.raises(ConfigError) as err:
        WORKER.validate({**BASE, **change})
    assert err.value.field == field


def test_eval_checkpoint_references_are_left_to_the_daemon():
    # "run:NAME" and home-relative paths are resolved by the daemon after validate()
    for ref in ("run:ppo-cartpole-1", "runs/01ABC/checkpoints/ppo.cleanrl_model"):
        config = WORKER.validate({**BASE, "mode": "eval", "checkpoint": ref})
        assert config["checkpoint"] == ref


def test_good_config_is_normalised():
    config = WORKER.validate({**BASE, "params": {"learning-rate": 1, "anneal-lr": False}})
    assert config["params"]["learning-rate"] == 1.0 and isinstance(config["params"]["learning-rate"], float)
    assert config["params"]["anneal-lr"] is False
    assert config["params"]["num-envs"] == 4  # the script's default, filled in
    # an env of one's own, named as gym imports it (module:EnvId), is the script's to make
    WORKER.validate({**BASE, "env": "mypkg.envs:SomeCustomEnv-v0"})


def test_a_mistyped_env_is_refused_at_submit_with_the_closest_ids(daemon, mosaic):
    with pytest.raises(ConfigError) as err:
        WORKER.validate({**BASE, "env": "CartPol-v1"})
    assert err.value.field == "env" and "did you mean 'CartPole-v1'" in str(err.value)
    proc = mosaic.run("submit", "--worker", "cleanrl", "--algo", "dqn", "--env", "CartPol-v1")
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        "mosaic: error: env: unknown environment 'CartPol-v1' for worker 'cleanrl'; "
        "did you mean 'CartPole-v1' or 'CartPole-v0' or 'Acrobot-v1'?"]
    assert "CartPol" not in mosaic.run("ls").stdout     # no run was made
    # a sweep over it is refused up front, with the same line
    spec = mosaic.home.root / "typo.json"
    spec.write_text(json.dumps({"name": "typo", "base": {"worker": "cleanrl", "algo": "dqn", "env": "CartPol-v1",
                                                         "steps": 2000},
                                "params": {"learning-rate": [0.001, 0.0001]},
                                "objective": {"tag": "charts/episodic_return"}}))
    proc = mosaic.run("sweep", str(spec), "--wait", "--timeout", "60")
    assert proc.returncode != 0 and "did you mean 'CartPole-v1'" in proc.stderr, proc.stderr
    assert json.loads(mosaic.run("sweeps", "--json", check=True).stdout) == []


# -- training ------------------------------------------------------------------------
# dqn_atari trains in tests/workers/sdk/test_env_families.py (an Atari episode outlasts these short runs)
@pytest.mark.parametrize("algo", [a for a in ALGORITHMS if a != "dqn_atari"])
def test_training_emits_scalars_and_episodes(algo, runs_root):
    run_dir, returncode, events = trained(algo, runs_root)
    assert returncode == 0, stderr_of(run_dir)
    assert events[0]["type"] == "run_started"
    assert events[0]["algo"] == algo and events[0]["env"] == RUNS[algo]["env"]
    assert events[0]["total_steps"] == RUNS[algo]["steps"]
    assert events[-1]["type"] == "run_completed"
    assert not [e for e in events if e["type"] == "run_failed"]

    scalars = [e for e in events if e["type"] == "scalar"]
    tags = {e["tag"] for e in scalars}
    assert EXPECTED_TAGS[algo] <= tags, EXPECTED_TAGS[algo] - tags
    assert all(0 <= e["step"] <= RUNS[algo]["steps"] for e in scalars if not e["tag"].startswith("eval/"))

    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes
    num_envs = RUNS[algo]["params"].get("num-envs", WORKER.schema(algo)["properties"].get("num-envs", {})
                                        .get("default", 1))
    check_episode_accounting(episodes, num_envs, algo)
    # what the script logged as an episodic return is an episode event, at the same step
    ours = {(e["step"], e["return"]) for e in episodes}
    logged = [(e["step"], e["value"]) for e in scalars if e["tag"] == "charts/episodic_return"]
    assert logged and all(point in ours for point in logged), (logged[:5], sorted(ours)[:5])

    # TensorBoard files are still written, under tensorboard/ instead of runs/
    assert list((run_dir / "tensorboard").glob("*/events.out.tfevents.*"))
    assert not list(run_dir.glob("runs/*/events.out.tfevents.*"))
    # the script's prints went to stdout.log, never among the events
    assert "SPS:" in (run_dir / "stdout.log").read_text()


@pytest.mark.skipif(importlib.util.find_spec("Box2D") is None, reason="Box2D is not installed")
def test_box2d_env_when_installed(tmp_path):
    config = {**BASE, "algo": "dqn", "env": "LunarLander-v3", "steps": 600,
              "params": {"learning-starts": 300, "batch-size": 32, "buffer-size": 1000}}
    returncode, events = run_worker(tmp_path / "run", config)
    assert returncode == 0, stderr_of(tmp_path / "run")
    check_episode_accounting([e for e in events if e["type"] == "episode"], 1, "dqn")
    assert "losses/td_loss" in {e["tag"] for e in events if e["type"] == "scalar"}


def test_seed_is_honoured(runs_root, tmp_path):
    """Same config, same seed: the same episodes and losses (the script seeds everything from --seed)."""
    _, _, first = trained("rpo_continuous_action", runs_root)
    spec = RUNS["rpo_continuous_action"]
    returncode, again = run_worker(tmp_path / "again", {"worker": "cleanrl", "algo": "rpo_continuous_action",
                                                        "env": spec["env"],
                                                        "steps": spec["steps"], "seed": 1, "params": spec["params"]})
    assert returncode == 0

    def trace(events):
        return [(e["type"], e["step"], e.get("return"), e.get("tag"), e.get("value")) for e in events
                if e["type"] == "episode" or (e["type"] == "scalar" and e["tag"].startswith("losses/"))]

    assert trace(again) and trace(again) == trace(first)


@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_save_model_goes_to_checkpoints(algo, runs_root):
    run_dir, returncode, events = trained(algo, runs_root)
    assert returncode == 0, stderr_of(run_dir)
    saved = [e for e in events if e["type"] == "checkpoint_saved"]
    assert len(saved) == 1
    assert saved[0]["path"] == f"checkpoints/{algo}.cleanrl_model"  # relative to the run directory
    path = run_dir / saved[0]["path"]
    assert path.is_file()
    assert saved[0]["step"] == RUNS[algo]["steps"]
    if algo == "dqn":  # the script's own --save-model: a link is left where the script reloads it from
        links = list(run_dir.glob("runs/*/dqn.cleanrl_model"))
        assert len(links) == 1 and links[0].resolve() == path


def test_frames_go_to_fastlane(tmp_path, monkeypatch):
    from workers.fastlane import layout
    from workers.fastlane.reader import FrameReader

    shm = tmp_path / "shm"
    shm.mkdir()
    monkeypatch.setitem(WORKER_ENV, "MOSAIC_SHM_DIR", str(shm))
    monkeypatch.setattr(layout, "SHM_DIR", shm)
    config = {**BASE, "steps": 1024, "run_id": "cleanrl-frames-test",
              "frames": {"enabled": True, "fps": 60, "max_dim": 200, "grid": 2}}
    returncode, events = run_worker(tmp_path / "run", config)
    assert returncode == 0, stderr_of(tmp_path / "run")
    assert "frames disabled" not in stderr_of(tmp_path / "run")
    with FrameReader("cleanrl-frames-test") as reader:
        number, frame = reader.latest()
        assert number >= 1 and reader.state == layout.STATE_CLOSED
    height, width, channels = frame.shape
    assert channels == 3 and max(height, width) <= 200 and width > height  # two CartPoles side by side


# -- evaluation ------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["dqn", "ppo", "ppo_continuous_action"])
def test_evaluation_from_a_checkpoint(algo, runs_root, tmp_path):
    train_dir, returncode, _ = trained(algo, runs_root)
    assert returncode == 0, stderr_of(train_dir)
    checkpoint = train_dir / "checkpoints" / f"{algo}.cleanrl_model"
    config = {"worker": "cleanrl", "algo": algo, "env": RUNS[algo]["env"], "mode": "eval",
              "checkpoint": str(checkpoint), "eval_episodes": 3, "seed": 3}
    if algo == "dqn":  # an eval run records the episodes it plays (an offline algorithm's data)
        config["record"] = {"episodes": 3}
    returncode, events = run_worker(tmp_path / "eval", config)
    assert returncode == 0, stderr_of(tmp_path / "eval")
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_completed"
    episodes = [e for e in events if e["type"] == "episode"]
    assert len(episodes) == 3
    check_episode_accounting(episodes, 1)
    mean = [e for e in events if e["type"] == "scalar" and e["tag"] == "eval/mean_episodic_return"]
    assert mean and mean[0]["value"] == pytest.approx(sum(e["return"] for e in episodes) / 3)
    if algo == "dqn":
        from tianshou.data import ReplayBuffer
        saved = [e for e in events if e["type"] == "dataset_saved"]
        assert len(saved) == 1 and saved[0]["episodes"] == 3
        buf = ReplayBuffer.load_hdf5(saved[0]["path"])
        # the same three episodes: lengths and returns as the episode events report them
        ends = np.flatnonzero(buf.done[:len(buf)])
        lengths = np.diff(np.concatenate([[-1], ends]))
        assert sorted(int(n) for n in lengths) == sorted(int(e["length"]) for e in episodes)
        assert float(buf.rew[:len(buf)].sum()) == pytest.approx(sum(e["return"] for e in episodes))


def test_evaluation_refuses_another_algorithms_checkpoint(runs_root, tmp_path):
    train_dir, _, _ = trained("ppo", runs_root)
    config = {"worker": "cleanrl", "algo": "c51", "env": "CartPole-v1", "mode": "eval",
              "checkpoint": str(train_dir / "checkpoints" / "ppo.cleanrl_model"), "eval_episodes": 1}
    returncode, events = run_worker(tmp_path / "eval", config)
    assert returncode == 1
    assert events[-1]["type"] == "run_failed" and "saved by ppo" in events[-1]["reason"]


# -- failures and cancelling -------------------------------------------------------------
def test_script_failure_is_reported_with_its_exception(tmp_path):
    # dqn asserts num-envs == 1: the script fails after it starts
    config = {**BASE, "algo": "dqn", "params": {"num-envs": 2}}
    returncode, events = run_worker(tmp_path / "run", config)
    assert returncode == 1
    assert events[-1]["type"] == "run_failed"
    assert events[-1]["reason"].startswith("dqn exited with code 1: AssertionError: vectorized envs")


def test_invalid_config_file_fails_before_starting(tmp_path):
    returncode, events = run_worker(tmp_path / "run", {**BASE, "algo": "nope"})
    assert returncode == 2
    assert [e["type"] for e in events] == ["run_failed"]
    assert "algo: unknown algorithm 'nope'" in events[0]["reason"]


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


def test_sigterm_is_forwarded_to_the_script(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_worker(run_dir, {**BASE, "steps": 10_000_000}, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(e["type"] == "scalar" for e in read_events(run_dir)):  # training is under way
            assert proc.poll() is None and time.monotonic() < deadline, stderr_of(run_dir)
            time.sleep(0.2)
        (script_pid,) = _children(proc.pid)
        proc.send_signal(signal.SIGTERM)  # to the worker only: it must pass it on
        assert proc.wait(timeout=60) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not os.path.exists(f"/proc/{script_pid}")
    events = read_events(run_dir)
    assert events[-1]["type"] == "run_failed"
    assert events[-1]["reason"] == "cancelled (SIGTERM)"


# -- a user's own CleanRL-style script -----------------------------------------------------
USER_SCRIPT = '''
"""A tiny CleanRL-style script: argparse, a gymnasium vector env, RecordEpisodeStatistics, TensorBoard."""
import argparse
import os
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical
from torch.utils.tensorboard import SummaryWriter


def strtobool(value):
    return value.lower() in ("1", "true", "yes", "on")


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--exp-name", type=str, default=os.path.basename(__file__).rstrip(".py"),
        help="the name of this experiment")
    parser.add_argument("--seed", type=int, default=1, help="seed of the experiment")
    parser.add_argument("--cuda", type=lambda x: bool(strtobool(x)), default=True, nargs="?", const=True,
        help="if toggled, cuda will be enabled by default")
    parser.add_argument("--env-id", type=str, default="CartPole-v1", help="the id of the environment")
    parser.add_argument("--total-timesteps", type=int, default=1000, help="total timesteps")
    parser.add_argument("--num-envs", type=int, default=2, help="the number of parallel environments")
    parser.add_argument("--temperature", type=float, default=1.0, help="softmax temperature of the policy")
    parser.add_argument("--policy", choices=["sample", "greedy"], default="sample", help="how to act")
    parser.add_argument("--verbose", action="store_true", help="print every episode")
    return parser.parse_args()


def make_env(env_id, seed, idx, capture_video, run_name):
    def thunk():
        env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env.action_space.seed(seed)
        return env
    return thunk


class Agent(nn.Module):
    def __init__(self, envs, temperature=1.0):
        super().__init__()
        self.temperature = temperature
        self.actor = nn.Linear(int(np.prod(envs.single_observation_space.shape)), envs.single_action_space.n)

    def get_action_and_value(self, x, action=None):
        probs = Categorical(logits=self.actor(x) / self.temperature)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), torch.zeros(len(x))


if __name__ == "__main__":
    args = parse_args()
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    writer = SummaryWriter(f"runs/{run_name}")
    torch.manual_seed(args.seed)
    envs = gym.vector.SyncVectorEnv(
        [make_env(args.env_id, args.seed + i, i, False, run_name) for i in range(args.num_envs)])
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action space is supported"
    agent = Agent(envs, args.temperature)
    writer.add_scalar("charts/temperature", args.temperature, 0)
    writer.add_scalar("charts/verbose", float(args.verbose), 0)
    obs, _ = envs.reset(seed=args.seed)
    global_step = 0
    while global_step < args.total_timesteps:
        global_step += args.num_envs
        with torch.no_grad():
            action = agent.get_action_and_value(torch.Tensor(obs))[0]
        obs, reward, terminations, truncations, infos = envs.step(action.numpy())
        if "final_info" in infos:
            for info in infos["final_info"]:
                if info is None:
                    continue
                if args.verbose:
                    print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
                writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
        if global_step % 100 == 0:
            writer.add_scalar("losses/nothing", 0.0, global_step)
    envs.close()
    writer.close()
'''


@pytest.fixture
def user_script(tmp_path) -> str:
    path = tmp_path / "my_agent.py"
    path.write_text(USER_SCRIPT)
    return str(path)


def test_user_script_schema_and_validation(user_script):
    props = WORKER.schema(user_script)["properties"]
    assert props["exp-name"]["default"] == "my_agent"
    assert props["temperature"] == {"type": "number", "default": 1.0, "description": "softmax temperature of the policy"}
    assert props["policy"]["enum"] == ["sample", "greedy"]
    assert props["verbose"]["type"] == "boolean" and props["verbose"]["default"] is False
    assert props["num-envs"]["minimum"] == 1
    assert "save-model" in props  # mosaic's, the script has none
    config = WORKER.validate({"worker": "cleanrl", "algo": user_script, "env": "Acrobot-v1",
                              "params": {"temperature": 0.5}})
    assert config["params"]["temperature"] == 0.5
    with pytest.raises(ConfigError) as err:  # the script asserts a discrete action space
        WORKER.validate({"worker": "cleanrl", "algo": user_script, "env": "Pendulum-v1"})
    assert err.value.field == "env"
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "cleanrl", "algo": user_script, "env": "CartPole-v1",
                         "params": {"policy": "random"}})
    assert err.value.field == "params.policy"


def test_user_script_trains_and_evaluates(user_script, tmp_path):
    config = {"worker": "cleanrl", "algo": user_script, "env": "CartPole-v1", "steps": 600, "seed": 2,
              "params": {"temperature": 0.5, "verbose": True, "save-model": True}}
    returncode, events = run_worker(tmp_path / "train", config)
    assert returncode == 0, stderr_of(tmp_path / "train")
    scalars = {e["tag"]: e["value"] for e in events if e["type"] == "scalar"}
    assert scalars["charts/temperature"] == 0.5 and scalars["charts/verbose"] == 1.0  # params reached the script
    assert "losses/nothing" in scalars and "charts/episodic_return" in scalars
    episodes = [e for e in events if e["type"] == "episode"]
    check_episode_accounting(episodes, 2)
    assert "episodic_return=" in (tmp_path / "train" / "stdout.log").read_text()
    saved = [e for e in events if e["type"] == "checkpoint_saved"]
    assert [Path(e["path"]).name for e in saved] == ["my_agent.cleanrl_model"]

    eval_config = {"worker": "cleanrl", "algo": user_script, "env": "CartPole-v1", "mode": "eval",
                   "checkpoint": str(tmp_path / "train" / saved[0]["path"]), "eval_episodes": 2}
    returncode, events = run_worker(tmp_path / "eval", eval_config)
    assert returncode == 0, stderr_of(tmp_path / "eval")
    assert len([e for e in events if e["type"] == "episode"]) == 2


# -- stop and continue (resume.py) ---------------------------------------------------------
def _events_of(home, run_id: str) -> list[dict]:
    return [check_event(json.loads(line)) for line in (home.run_dir(run_id) / "events.jsonl").read_text().splitlines()]


def _scalar_steps(events: list[dict], tag: str) -> list[int]:
    return [e["step"] for e in events if e["type"] == "scalar" and e["tag"] == tag]


def _finish(mosaic, run_id: str) -> dict:
    mosaic.run("wait", run_id, "--timeout", "600")
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (run.get("reason"), stderr_of(mosaic.home.run_dir(run_id)))
    return run


STOPPABLE = {
    # PPO: 64 updates of 128 steps in each of 4 envs; the loop is `for update in range(1, num_updates + 1)`
    "ppo": (32768, ["--set", "num-steps=128", "--set", "update-epochs=1"], "losses/value_loss", "charts/SPS"),
    # DQN: the loop is `for global_step in range(args.total_timesteps)`, its buffer restored
    "dqn": (6000, ["--set", "learning-starts=300", "--set", "buffer-size=5000", "--set", "batch-size=32",
                   "--set", "train-frequency=2"], "losses/td_loss", "losses/td_loss"),
}


@pytest.mark.parametrize("algo", sorted(STOPPABLE))
def test_a_stopped_script_continues_as_the_same_run(algo, daemon, mosaic):
    """mosaic stop: the script, unmodified, saves everything it holds between two passes of its main
    loop and exits "stopped"; mosaic continue loads it into the same run, which trains only the
    passes left: every logged step once and in order across the seam, the full step count."""
    from workers.cleanrl_worker import resume

    steps, params, tag, every_pass = STOPPABLE[algo]
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", algo, "--env", "CartPole-v1", "--steps", str(steps),
                           *params, "--set", "save-model=true", "--name", f"{algo}-stop")
    home = mosaic.home
    wait_for(lambda: len(_scalar_steps(_events_of(home, run_id), tag)) >= 3, 300, 0.05, what="three updates")
    assert mosaic.run("stop", run_id, "--timeout", "300").returncode == 0
    run = mosaic.show(run_id)
    assert run["state"] == "stopped", (run, stderr_of(home.run_dir(run_id)))
    at = run["summary"]["stopped"]
    checkpoint = Path(at["checkpoint"])
    assert checkpoint.name == f"resume-{at['step']}" and 0 < at["step"] < steps
    assert (checkpoint.parent / (checkpoint.name + ".manifest.json")).exists()
    held = resume.describe(str(checkpoint))
    networks = {"ppo": ["agent"], "dqn": ["q_network", "target_network"]}[algo]
    assert held["modules"] == networks and held["optimizers"] == ["optimizer"] and not held["buffers_dropped"]
    assert held["buffers"] == (["rb"] if algo == "dqn" else [])
    before = _events_of(home, run_id)
    assert not [e for e in before if e["type"] == "checkpoint_saved" and e["path"].endswith(".cleanrl_model")]

    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    run = _finish(mosaic, run_id)
    assert run["restarts"] == 1
    events = _events_of(home, run_id)
    assert len([e for e in events if e["type"] == "restarted"]) == 1
    logged = _scalar_steps(events, every_pass)
    assert logged == sorted(set(logged)), logged            # every step once, in order, across the seam
    assert max(logged) >= steps - 130 and any(s > at["step"] for s in logged)
    if algo == "ppo":   # one SPS per update: all 64, and the learning rate annealed as in one run
        assert logged == list(range(512, steps + 1, 512))
        rates = [e["value"] for e in events if e["type"] == "scalar" and e["tag"] == "charts/learning_rate"]
        assert len(rates) == 64 and rates == sorted(rates, reverse=True) and rates[-1] < 2.5e-4 / 63
    else:               # learning went on at once: the buffer came back with the run, all of it
        assert f"replay buffer rb with {held['transitions']['rb']} transitions" in stderr_of(home.run_dir(run_id))
        assert held["transitions"]["rb"] == min(at["step"] + 1, 5000)
        first_after = min(s for s in _scalar_steps(events, "losses/td_loss") if s > at["step"])
        assert first_after <= at["step"] + 300
    episodes = [e["step"] for e in events if e["type"] == "episode"]
    assert episodes == sorted(episodes)
    stderr = (home.run_dir(run_id) / "stderr.log").read_text()
    assert f"resumed from {at['checkpoint']}" in stderr
    # the continued run ends with its model, which mosaic eval plays
    assert [e for e in events if e["type"] == "checkpoint_saved" and e["path"].endswith(f"{algo}.cleanrl_model")]
    if algo == "ppo":   # and so does a resume checkpoint's directory
        played = mosaic.submit("--worker", "cleanrl", "--algo", algo, "--env", "CartPole-v1", "--mode", "eval",
                               "--checkpoint", at["checkpoint"], "--episodes", "2")
        _finish(mosaic, played)
        assert len([e for e in _events_of(home, played) if e["type"] == "episode"]) == 2


def _stop_and_continue_directly(run_dir: Path, config: dict, after_scalars: int, env: dict | None = None,
                                stop_when=None) -> tuple[dict, list[dict], str]:
    """The worker as the supervisor runs it: SIGUSR1 once ``after_scalars`` scalars were logged, then a
    second process with continue_from the stop's checkpoint; (the stop's note, all events, stderr)."""
    from workers.cleanrl_worker import resume

    environ = {**WORKER_ENV, **(env or {})}
    proc = start_worker(run_dir, config, start_new_session=True, env=environ)
    try:
        deadline = time.monotonic() + 300
        if stop_when is None:
            def stop_when(events):
                return sum(e["type"] == "scalar" for e in events) >= after_scalars
        while not stop_when(read_events(run_dir, complete_lines_only=True)):
            assert proc.poll() is None and time.monotonic() < deadline, stderr_of(run_dir)
            time.sleep(0.05)
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait(timeout=120) == 75, stderr_of(run_dir)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    note = json.loads((run_dir / resume.STOP_NOTE).read_text())
    proc = start_worker(run_dir, {**config, "continue_from": note["checkpoint"]}, start_new_session=True,
                        env=environ)
    try:
        assert proc.wait(timeout=900) == 0, stderr_of(run_dir)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return note, read_events(run_dir), (run_dir / "stderr.log").read_text(errors="replace")


def test_sac_continues_with_its_entropy_temperature_and_buffer(tmp_path):
    """SAC trains a tensor outside its networks (log_alpha, with its own optimizer) and a float
    (alpha): both come back, in place, with the buffer, the networks' targets and the step."""
    from workers.cleanrl_worker import resume

    config = {"worker": "cleanrl", "algo": "sac_continuous_action", "env": "Pendulum-v1", "steps": 1400,
              "seed": 1, "device": "cpu", "params": {**REPLAY, "learning-starts": 200}}
    note, events, stderr = _stop_and_continue_directly(tmp_path / "run", config, after_scalars=12)
    held = resume.describe(note["checkpoint"])
    assert held["tensors"] == ["log_alpha"] and "alpha" in held["numbers"]
    assert held["optimizers"] == ["a_optimizer", "actor_optimizer", "q_optimizer"]
    assert held["modules"] == ["actor", "qf1", "qf1_target", "qf2", "qf2_target"]
    assert "tensors log_alpha" in stderr and f"replay buffer rb with {held['transitions']['rb']} transitions" in stderr
    alphas = [(e["step"], e["value"]) for e in events if e["type"] == "scalar" and e["tag"] == "losses/alpha"]
    steps = [s for s, _ in alphas]
    assert steps == sorted(set(steps)) and steps[-1] >= 1300
    seam = [value for step, value in alphas if step > note["step"]][0]
    last = [value for step, value in alphas if step <= note["step"]][-1]
    # the temperature goes on from where it was (it moves a little each step), not from its start, 1.0
    assert abs(seam - last) < 0.1 and abs(seam - 1.0) > 0.15, (last, seam)


def test_continuous_ppo_continues_with_its_normalization_statistics(tmp_path):
    from workers.cleanrl_worker import resume

    config = {"worker": "cleanrl", "algo": "ppo_continuous_action", "env": "Pendulum-v1", "steps": 6144,
              "seed": 1, "device": "cpu", "params": {"num-steps": 256, "num-minibatches": 4, "update-epochs": 1,
                                                       "num-envs": 2}}
    note, events, stderr = _stop_and_continue_directly(tmp_path / "run", config, after_scalars=16)
    state = resume.load_state(note["checkpoint"])
    stats = state["running_stats"]
    assert [[key for key, _ in chain] for chain in stats] == [["return_rms", "obs_rms"]] * 2
    assert all(chain[1][1]["count"] > 512 for chain in stats)     # learned from every step so far
    for index, chain in enumerate(stats):                         # and back in the wrappers of the envs
        for key, saved in chain:
            assert f"env {index} {key} over {saved['count']:.0f} steps" in stderr
    sps = [e["step"] for e in events if e["type"] == "scalar" and e["tag"] == "charts/SPS"]
    assert sps == list(range(512, 6145, 512))


def test_periodic_checkpoints_keep_the_newest_and_the_best(tmp_path):
    """checkpoint_minutes and keep_checkpoints (settings.json, passed by the daemon): resume checkpoints
    on the way, each with its manifest; only the 2 newest and the best by mean return stay."""
    from workers.sdk import rundir

    config = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 20480, "seed": 1,
              "device": "cpu", "params": {"num-steps": 128, "update-epochs": 1}}
    run_dir = tmp_path / "run"
    returncode, events = run_worker(run_dir, config, env={**WORKER_ENV, rundir.CHECKPOINT_MINUTES_ENV: "0.004",
                                                         rundir.KEEP_CHECKPOINTS_ENV: "2"})
    assert returncode == 0, stderr_of(run_dir)
    saved = [e for e in events if e["type"] == "checkpoint_saved" and "/resume-" in "/" + e["path"]]
    assert len(saved) >= 5, saved
    manifests = sorted((run_dir / "checkpoints").glob("resume-*.manifest.json"))
    kept = {json.loads(m.read_text())["checkpoint"]: json.loads(m.read_text()) for m in manifests}
    on_disk = sorted(p for p in (run_dir / "checkpoints").glob("resume-*") if p.is_dir())
    assert sorted(kept) == [str(p) for p in on_disk] and 2 <= len(kept) <= 3
    newest = sorted(kept.values(), key=lambda m: m["step"])[-2:]
    assert [m["step"] for m in newest] == sorted(e["step"] for e in saved)[-2:]
    # the objective of every checkpoint saved: the mean of the last 20 returns before it
    returns, objective = [], {}
    for e in events:
        if e["type"] == "episode":
            returns.append(e["return"])
        elif e in saved:
            objective[str(run_dir / e["path"])] = sum(returns[-20:]) / len(returns[-20:])
    best = max(objective, key=lambda path: (objective[path], kept.get(path, {}).get("step", 0)))
    assert best in kept and kept[best]["objective"] == pytest.approx(objective[best])
    run = {"id": None, "worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1"}
    assert all(rundir.check_manifest(path, run) is None for path in kept)   # whole, and this run's
    from importlib import metadata
    versions = next(iter(kept.values()))["versions"]    # what made it
    assert versions["torch"] == metadata.version("torch") and versions["gym"] == metadata.version("gym")

    # a new run starts from one (checkpoint=): its steps go on from the checkpoint's, to its own total
    start = max(kept.values(), key=lambda m: m["step"])
    fresh = {**config, "steps": start["step"] + 4096, "checkpoint": start["checkpoint"]}
    assert WORKER.validate(fresh)["checkpoint"] == start["checkpoint"]
    returncode, events = run_worker(tmp_path / "from-checkpoint", fresh)
    assert returncode == 0, stderr_of(tmp_path / "from-checkpoint")
    assert _scalar_steps(events, "charts/SPS") == list(range(start["step"] + 512, start["step"] + 4097, 512))
    # annealed over this run's own updates (its num_updates, not the checkpoint's run's): down to ~0, never below
    rates = [e["value"] for e in events if e["type"] == "scalar" and e["tag"] == "charts/learning_rate"]
    assert rates == sorted(rates, reverse=True) and 0 < rates[-1] < 2.5e-4 / 40
    # what it cannot start from, refused by name before anything runs
    with pytest.raises(ConfigError, match="is a checkpoint of ppo, not dqn"):
        WORKER.validate({**fresh, "algo": "dqn"})
    with pytest.raises(ConfigError, match="is not a resume checkpoint"):
        WORKER.validate({**fresh, "checkpoint": str(tmp_path)})


def test_every_script_has_a_main_loop_to_stop_in(user_script, tmp_path):
    """Each of CleanRL's scripts here has the loop resume.py stops and continues in; a user's script
    that trains in a while loop has none, and the descriptor refuses to stop it, saying why."""
    from workers.cleanrl_worker.resume import find_main_loop

    targets = {algo: find_main_loop(catalog.script_path(algo)) for algo in catalog.installed_scripts()}
    assert {algo: loop.target for algo, loop in targets.items()} == {
        algo: "update" if algo.startswith(("ppo", "rpo")) else "global_step" for algo in catalog.installed_scripts()}
    source = Path(catalog.script_path("ppo")).read_text().splitlines()
    assert source[targets["ppo"].first_line - 1].strip() == "for update in range(1, num_updates + 1):"
    assert find_main_loop(user_script) is None
    assert "has no training loop mosaic can find" in WORKER.stop_refusal({"algo": user_script, "mode": "train"})
    assert WORKER.stop_refusal({"algo": "dqn", "mode": "train"}) is None
    assert "cannot stop an evaluation" in WORKER.stop_refusal({"algo": "dqn", "mode": "eval"})


# The learning of a stopped and continued run against runs never stopped: real learning, so long runs
# (MOSAIC_LONG=1; docs/workers/cleanrl.md has the figures of the last time).
LEARNING = {
    "ppo": dict(env="CartPole-v1", steps=60000, params={}),
    "dqn": dict(env="CartPole-v1", steps=20000,
                params={"learning-starts": 1000, "buffer-size": 10000, "train-frequency": 4,
                        "exploration-fraction": 0.5, "target-network-frequency": 500}),
}


def _last_20(events: list[dict]) -> float:
    returns = [e["return"] for e in events if e["type"] == "episode"]
    return sum(returns[-20:]) / len(returns[-20:])


@pytest.mark.long
@pytest.mark.parametrize("algo", sorted(LEARNING))
def test_a_continued_run_learns_as_one_never_stopped(algo, tmp_path):
    """Seed 1, stopped half-way and continued, learns as seeds 1, 2 and 3 trained without a stop:
    - at the seam, it plays as well as before the stop: the mean return of its first 20 episodes
      after the continue is at least half that of its last 20 before the stop, which must be well
      above a random policy's (CartPole: ~22), so that a continue that lost the training (back to
      a random policy) fails;
    - at the end, the mean return of its last 20 episodes lies in the band of the runs never stopped
      (their range widened by their standard deviation each side: one run's noise)."""
    import statistics

    spec = LEARNING[algo]
    base = {"worker": "cleanrl", "algo": algo, "env": spec["env"], "steps": spec["steps"], "device": "cpu",
            "params": spec["params"]}
    whole = {}
    for seed in (1, 2, 3):
        returncode, events = run_worker(tmp_path / f"seed{seed}", {**base, "seed": seed}, timeout=900)
        assert returncode == 0, stderr_of(tmp_path / f"seed{seed}")
        whole[seed] = _last_20(events)
    updates = sum(1 for e in events if e["type"] == "scalar" and e["tag"] == "charts/SPS")
    note, events, _ = _stop_and_continue_directly(
        tmp_path / "stopped", {**base, "seed": 1}, after_scalars=0,
        stop_when=lambda evs: sum(e["type"] == "scalar" and e["tag"] == "charts/SPS" for e in evs) >= updates // 2)
    continued = _last_20(events)
    returns = [(e["step"], e["return"]) for e in events if e["type"] == "episode"]
    before = [r for step, r in returns if step <= note["step"]][-20:]
    after = [r for step, r in returns if step > note["step"]][:20]
    spread = statistics.stdev(whole.values())
    band = (min(whole.values()) - spread, max(whole.values()) + spread)
    figures = (f"cleanrl {algo} {spec['env']} {spec['steps']} steps, mean return of the last 20 episodes: "
               f"seeds 1, 2, 3 never stopped {', '.join(f'{whole[s]:.1f}' for s in (1, 2, 3))} "
               f"(band {band[0]:.1f}..{band[1]:.1f}); seed 1 stopped at step {note['step']} and continued "
               f"{continued:.1f}; at the seam, 20 episodes before {statistics.mean(before):.1f}, "
               f"20 after {statistics.mean(after):.1f}")
    print(figures)
    (Path(os.environ.get("MOSAIC_FIGURES_DIR", tmp_path)) / f"cleanrl-{algo}-learning.txt").write_text(figures + "\n")
    assert statistics.mean(before) >= 66, f"too little learned by the stop to tell a lost training: {figures}"
    assert statistics.mean(after) >= statistics.mean(before) / 2, figures
    assert band[0] <= continued <= band[1], figures


def test_a_crashed_run_continues_from_its_last_periodic_checkpoint_logging_each_step_once(home, mosaic):
    """A script killed (SIGKILL: a node lost, the OOM killer) after its last periodic checkpoint: the
    run fails; mosaic continue goes on from that checkpoint, trains the steps after it again, and
    does not log them again (logged_until): every update's steps once, in order, to the end."""
    home.root.mkdir(parents=True, exist_ok=True)
    (home.root / "settings.json").write_text(json.dumps({"checkpoint_minutes": 0.03}))   # every 1.8 s
    mosaic.run("daemon", "start", check=True)
    try:
        steps = 65536
        run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", str(steps),
                               "--set", "num-steps=128", "--set", "update-epochs=1", "--name", "crashed")
        checkpoints = home.run_dir(run_id) / "checkpoints"
        def newest_kept() -> int:
            return max((json.loads(m.read_text())["step"] for m in checkpoints.glob("resume-*.manifest.json")),
                       default=-1)

        def four_updates_past_a_checkpoint() -> bool:   # steps logged that the checkpoint does not hold
            kept = newest_kept()
            sps = _scalar_steps(read_events(home.run_dir(run_id), complete_lines_only=True), "charts/SPS")
            return kept > 0 and bool(sps) and sps[-1] >= kept + 4 * 512

        wait_for(four_updates_past_a_checkpoint, 300, 0.02, what="four updates past a periodic checkpoint")
        started = next(e for e in read_events(home.run_dir(run_id), complete_lines_only=True)
                       if e["type"] == "run_started")
        os.kill(_children(started["pid"])[0], signal.SIGKILL)   # the script, under the worker
        mosaic.run("wait", run_id, "--timeout", "120")
        run = mosaic.show(run_id)
        assert run["state"] == "failed" and "SIGKILL" in run["reason"], run
        logged = run["summary"]["steps"]
        kept = newest_kept()
        assert kept < logged < steps
        assert mosaic.run("continue", run_id, "--wait").returncode == 0
        run = _finish(mosaic, run_id)
        events = _events_of(home, run_id)
        seam = next(e for e in events if e["type"] == "restarted")
        assert seam["step"] <= kept and seam["logged_until"] == logged
        sps = _scalar_steps(events, "charts/SPS")
        assert sps == list(range(512, steps + 1, 512))            # each update once, across the crash
        episodes = [e["step"] for e in events if e["type"] == "episode"]
        assert episodes == sorted(episodes)
    finally:
        mosaic.run("daemon", "stop")
