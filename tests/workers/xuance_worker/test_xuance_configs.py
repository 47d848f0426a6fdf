"""A XuanCe user's own YAML config (``mosaic submit --xuance-config FILE``, params.xuance_config):
merged under the run's params and over XuanCe's defaults, checked at submit, kept with the run,
and what XuanCe itself trained with (workers/xuance_worker/user_config.py)."""
from __future__ import annotations

import json

from workers.xuance_worker import user_config

# learning_rate: XuanCe's default for PPO on CartPole is 0.0004; gamma is given by --set too (the --set wins)
USER_YAML = """\
# my XuanCe settings
agent: "PPO"            # what the file is for: must agree with the run
logger: "wandb"         # the worker's own: left out
learning_rate: 0.00123
gamma: 0.93
"""


def test_user_yaml_sets_what_xuance_trains_with(daemon, mosaic, tmp_path):
    path = tmp_path / "my_ppo.yaml"
    path.write_text(USER_YAML)
    run_id = mosaic.submit("--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "256",
                           "--set", "parallels=2", "--set", "horizon_size=64", "--set", "n_epochs=1",
                           "--set", "gamma=0.9", "--xuance-config", str(path))
    waited = mosaic.run("wait", run_id, "--timeout", "300")
    run_dir = mosaic.home.run_dir(run_id)
    assert waited.returncode == 0, waited.stdout + (run_dir / "stderr.log").read_text(errors="replace")[-3000:]
    params = json.loads((run_dir / "config.json").read_text())["params"]
    assert params["learning_rate"] == 0.00123      # the file's, over XuanCe's default
    assert params["gamma"] == 0.9                  # --set wins over the file
    assert "logger" not in params
    assert (run_dir / user_config.FILE_NAME).read_text() == USER_YAML
    # XuanCe's own config of the run, as XuanCe merged its YAML files with what the worker passed
    used = json.loads((run_dir / "xuance_args.json").read_text())
    assert used["learning_rate"] == 0.00123 and used["gamma"] == 0.9
    assert used["agent"] == "PPO" and used["logger"] == "tensorboard"


def test_bad_user_yaml_refused_at_submit(daemon, mosaic, tmp_path):
    typo = tmp_path / "typo.yaml"
    typo.write_text("learnig_rate: 0.001\ngamma: 0.9\n")
    out = mosaic.run("submit", "--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1",
                     "--xuance-config", str(typo))
    said = (out.stdout + out.stderr).strip()
    assert out.returncode != 0
    assert "unknown key 'learnig_rate' (did you mean 'learning_rate'" in said and len(said.splitlines()) == 1, said
    syntax = tmp_path / "syntax.yaml"
    syntax.write_text("learning_rate: [0.001\n")
    out = mosaic.run("submit", "--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1",
                     "--xuance-config", str(syntax))
    said = (out.stdout + out.stderr).strip()
    assert out.returncode != 0 and "is not valid YAML" in said and len(said.splitlines()) == 1, said
    other = tmp_path / "dqn.yaml"
    other.write_text('agent: "DQN"\n')
    out = mosaic.run("submit", "--worker", "xuance", "--algo", "ppo", "--env", "CartPole-v1",
                     "--xuance-config", str(other))
    assert out.returncode != 0 and "agent is 'DQN' in the file, 'PPO' in the run" in out.stdout + out.stderr
    assert "no runs" in mosaic.run("ls", check=True).stdout      # nothing was made
