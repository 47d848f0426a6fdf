"""Every bundled worker runs on the real Slurm fixture (tests/plugins/slurm_cluster.py) as it runs here:
a short training or episode each, submitted together (the node runs two at a time, one CPU each),
each run's telemetry read back through `mosaic metrics`. CleanRL's run is in
test_slurm_placement.py (test_a_cleanrl_run_trains_on_slurm)."""
from __future__ import annotations

import importlib.util

import pytest

pytest_plugins = ["tests.plugins.slurm_cluster"]
pytestmark = [pytest.mark.xdist_group("slurm")]

# (name, submit arguments): small runs of each, as the workers' own tests submit them
WORKER_RUNS = [
    ("tianshou", ["--worker", "tianshou", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "600"]),
    ("xuance", ["--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "512",
                "--set", "parallels=2", "--set", "horizon_size=64", "--set", "n_epochs=1"]),
    ("ray", ["--worker", "ray", "--algo", "PPO", "--env", "CartPole-v1", "--steps", "200",
             "--set", "train_batch_size_per_learner=200", "--set", "minibatch_size=100", "--set", "num_epochs=1",
             "--set", "fcnet_hiddens=[64]"]),
    ("jumanji", ["--worker", "jumanji", "--algo", "a2c", "--env", "Snake-v1", "--steps", "320",
                 "--set", "training.num_learner_steps_per_epoch=4", "--set", "training.n_steps=10",
                 "--set", "training.total_batch_size=8", "--set", "evaluation.eval_total_batch_size=4",
                 "--set", "evaluation.greedy_eval_total_batch_size=4"]),
    ("balrog", ["--worker", "balrog", "--algo", "naive", "--env", "BabyAI-GoToRedBallGrey-v0",
                "--set", "max_steps_per_episode=2", "--set", "max_text_history=2", "--set", "n_threads=1"]),
    ("mosaic_llm", ["--worker", "mosaic_llm", "--algo", "play", "--env", "tictactoe_v3",
                    "--set", 'seats=["llm", "random"]', "--set", "episodes=1", "--set", "max_steps=2"]),
]


@pytest.mark.long   # breadth: one more worker or family on a path another test here proves (make test-long)
@pytest.mark.timeout(900)
def test_every_worker_trains_or_plays_on_slurm(slurm_daemon, mosaic):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not built yet (BALROG and MOSAIC LLM play with the local model)")
    runs = {name: mosaic.submit(*args, "--placement", "slurm", "--cpus", "1", "--name", f"{name}-on-slurm")
            for name, args in WORKER_RUNS}
    problems = {}
    for name, run_id in runs.items():
        mosaic.run("wait", run_id, "--timeout", "600")
        run = mosaic.show(run_id)
        if run["state"] != "succeeded":
            problems[name] = (run["state"], run.get("reason"),
                              (mosaic.home.run_dir(run_id) / "stderr.log").read_text()[-1500:])
            continue
        assert run["resources"]["job"].startswith("slurm:") and run["resources"]["node"] == slurm_daemon.node
        csv = mosaic.run("metrics", run_id, "--csv", check=True).stdout.splitlines()
        if len(csv) < 2:
            problems[name] = ("no metrics", csv[:3])
    assert not problems, problems
