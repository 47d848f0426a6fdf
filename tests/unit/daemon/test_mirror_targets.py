"""daemon/mirror_targets.py's pure pieces: W&B's rows, MLflow's parameters, a URI without its secret."""
from __future__ import annotations

import json

from daemon.mirror_targets import ROW_SECONDS, WANDB_STEP_METRIC, _config_of, _flat_params, public_uri, wandb_rows


def test_points_of_one_step_written_together_share_a_wandb_row():
    t = 100.0
    points = [("loss", 1, 0.5, t), ("sps", 1, 900.0, t + ROW_SECONDS / 2),
              ("loss", 2, 0.4, t + 1), ("loss", 2, 0.3, t + 1),           # the same tag again: a row of its own
              ("sps", 2, 950.0, t + 1 + 2 * ROW_SECONDS)]                 # later than the row's first: its own
    assert wandb_rows(points) == [
        {WANDB_STEP_METRIC: 1, "_timestamp": t, "loss": 0.5, "sps": 900.0},
        {WANDB_STEP_METRIC: 2, "_timestamp": t + 1, "loss": 0.4},
        {WANDB_STEP_METRIC: 2, "_timestamp": t + 1, "loss": 0.3},
        {WANDB_STEP_METRIC: 2, "_timestamp": t + 1 + 2 * ROW_SECONDS, "sps": 950.0}]
    assert wandb_rows([]) == []


def test_mlflows_parameters_are_the_config_flattened_without_the_daemons_bookkeeping():
    config = {"worker": "cleanrl", "seed": 3, "run_id": "01J", "continue_from": "x", "logged_until": 9,
              "algo_params": {"lr": 0.0003, "net": {"sizes": [64, 64]}}, "env": "CartPole-v1",
              "bad key!": True, "empty": {}}
    params = _flat_params(config)
    assert params == {"worker": "cleanrl", "seed": "3", "algo_params.lr": "0.0003",
                      "algo_params.net.sizes": "[64, 64]", "env": "CartPole-v1", "bad key_": "true", "empty": "{}"}
    assert "run_id" not in _config_of(config) and _config_of(config)["seed"] == 3


def test_a_long_parameter_is_cut_to_what_mlflow_takes():
    params = _flat_params({"note": "n" * 7000, "grid": list(range(3000))})
    assert len(params["note"]) == 6000 and len(params["grid"]) == 6000
    assert params["grid"] == json.dumps(list(range(3000)))[:6000]


def test_a_tracking_uri_is_written_without_its_user_and_password():
    assert public_uri("https://alice:s3cret@mlflow.example.org:5000/path?x=1") == "https://mlflow.example.org:5000/path?x=1"
    assert public_uri("https://token@mlflow.example.org/") == "https://mlflow.example.org/"
    assert public_uri("sqlite:////home/u/mlflow.db") == "sqlite:////home/u/mlflow.db"
