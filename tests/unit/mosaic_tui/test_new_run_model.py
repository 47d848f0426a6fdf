"""mosaic_tui/new_run_model.py: the new-run form's decisions, without the screen."""
from __future__ import annotations

import pytest

from mosaic_tui import new_run_model as M
from workers.sdk.config import ConfigError, parse_run_config

CLEANRL_CAPS = {"algorithms": ["ppo", "dqn"], "envs": ["CartPole-v1", "Acrobot-v1"], "frames": True,
                "checkpoints": True, "record": True}
OFFLINE_CAPS = {"algorithms": ["dqn", "cql"], "offline_algorithms": ["cql"], "envs": {"dqn": ["CartPole-v1"],
                                                                                      "cql": ["Pendulum-v1"]},
                "record": True}


# -- the form's start ---------------------------------------------------------------------------
def test_a_clone_starts_from_its_runs_whole_config_but_the_name():
    config = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "name": "ppo-1", "steps": 5000, "seed": 3,
              "device": "cpu", "mode": "eval", "checkpoint": "run:ppo-0", "eval_episodes": 4,
              "frames": {"enabled": True, "fps": 10, "scale": 2}, "record": {"episodes": 5},
              "dataset": "rec-1", "limits": {"wall_seconds": 60, "max_steps": 900}, "mirror": ["mlflow", "wandb"]}
    initial = M.initial_values(config)
    assert "name" not in initial
    assert initial == {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 5000, "seed": 3,
                       "device": "cpu", "mode": "eval", "checkpoint": "run:ppo-0", "eval_episodes": 4,
                       "frames": True, "fps": 10, "record": 5, "dataset": "rec-1", "wall_seconds": 60,
                       "max_steps": 900, "memory_mb": None, "mirror": "wandb+mlflow"}
    # what the form has no field for goes back as it came
    assert M.frames_extra(config) == {"scale": 2}


def test_a_new_run_starts_empty_and_mirrors_as_the_settings_say():
    initial = M.initial_values(None)
    assert initial["mirror"] == "settings"
    assert [k for k, v in initial.items() if v is not None] == ["mirror"]
    assert M.frames_extra(None) == {}


def test_the_mirror_choice_of_every_config_value():
    assert M.mirror_choice(None) == "settings"
    assert M.mirror_choice([]) == "none"
    assert M.mirror_choice(["wandb"]) == "wandb"
    assert M.mirror_choice(["mlflow", "wandb"]) == "wandb+mlflow"   # any order


def test_the_workers_offered_and_the_first_one():
    workers = [{"name": "synthetic", "available": True, "hidden": True, "capabilities": {"algorithms": ["emit"]}},
               {"name": "xuance", "available": False, "capabilities": {"algorithms": ["ppo"]}},
               {"name": "broken", "available": True, "capabilities": {}},
               {"name": "tianshou", "available": True, "capabilities": {"algorithms": ["dqn"]}},
               {"name": "cleanrl", "available": True, "capabilities": {"algorithms": ["ppo"]}}]
    names = lambda ws: [w["name"] for w in ws]  # noqa: E731
    assert names(M.offered_workers(workers, False, None)) == ["tianshou", "cleanrl"]
    assert names(M.offered_workers(workers, True, None)) == ["synthetic", "tianshou", "cleanrl"]
    assert names(M.offered_workers(workers, False, "synthetic")) == ["synthetic", "tianshou", "cleanrl"]
    assert M.first_worker(["tianshou", "cleanrl"], None) == "cleanrl"
    assert M.first_worker(["tianshou", "cleanrl"], "tianshou") == "tianshou"
    assert M.first_worker(["tianshou"], "gone") == "tianshou"


# -- what follows a change of worker or algorithm -----------------------------------------------
def test_the_algorithm_follows_the_worker():
    assert M.algo_choice(CLEANRL_CAPS, "dqn") == (["ppo", "dqn"], "dqn")       # the new worker has it
    assert M.algo_choice(CLEANRL_CAPS, "mappo") == (["ppo", "dqn"], "ppo")     # it has not: its first
    assert M.algo_choice({"algorithms": []}, "ppo") == ([], "")
    # a clone's algorithm wins on the first pass; a user's own script is offered by a worker that runs them
    assert M.algo_choice(CLEANRL_CAPS, "ppo", clone_algo="dqn") == (["ppo", "dqn"], "dqn")
    assert M.algo_choice({**CLEANRL_CAPS, "user_scripts": True}, "ppo", clone_algo="my_sac.py") == (
        ["ppo", "dqn", "my_sac.py"], "my_sac.py")
    assert M.algo_choice(CLEANRL_CAPS, "ppo", clone_algo="my_sac.py") == (["ppo", "dqn"], "ppo")


def test_the_env_follows_the_algorithm():
    assert M.envs_for(OFFLINE_CAPS, "cql") == ["Pendulum-v1"]
    assert M.envs_for(CLEANRL_CAPS, "anything") == ["CartPole-v1", "Acrobot-v1"]
    assert M.env_after(["CartPole-v1", "Acrobot-v1"], CLEANRL_CAPS, "Acrobot-v1") is None     # offered: kept
    assert M.env_after(["Pendulum-v1"], OFFLINE_CAPS, "CartPole-v1") == "Pendulum-v1"          # not offered
    assert M.env_after(["Acrobot-v1", "CartPole-v1"], CLEANRL_CAPS, "") == "CartPole-v1"       # empty: CartPole
    assert M.env_after([], {"env_families": ["gym"]}, "MyEnv-v0") is None       # nothing to check it against
    assert M.env_after([], {"env_families": ["none"]}, None) == "none"          # a worker without envs


def test_the_fields_shown_follow_the_capabilities():
    shown = M.shown_fields(CLEANRL_CAPS, "ppo")
    assert shown == {"frames": True, "fps": True, "mode": True, "checkpoint": True, "eval_episodes": True,
                     "record": True, "dataset": False}
    # an offline algorithm chooses a dataset instead of recording one
    assert M.shown_fields(OFFLINE_CAPS, "cql") == {"frames": False, "fps": False, "mode": False,
                                                   "checkpoint": False, "eval_episodes": False,
                                                   "record": False, "dataset": True}
    assert M.shown_fields(OFFLINE_CAPS, "dqn")["record"] and not M.shown_fields(OFFLINE_CAPS, "dqn")["dataset"]


# -- parameter values kept across schemas ---------------------------------------------------------
def test_values_the_user_chose_are_remembered_and_defaults_forget_them():
    typed = {"gamma": (0.9, "dqn"), "lr": (0.01, "dqn")}
    after = M.remember_typed(typed, [("gamma", 0.99, True), ("lr", 0.02, False), ("tau", 0.5, False)], "ppo")
    assert after == {"lr": (0.02, "ppo"), "tau": (0.5, "ppo")}
    assert typed == {"gamma": (0.9, "dqn"), "lr": (0.01, "dqn")}     # the caller's dict is left as it was
    assert M.kept_from(("cleanrl", "ppo"), "cleanrl") == "ppo"
    assert M.kept_from(("cleanrl", "ppo"), "tianshou") == "cleanrl ppo"


def test_a_new_schemas_field_starts_from_the_clone_then_a_kept_value_that_fits():
    """Kept values are as their editors held them: text, or a choice."""
    spec = {"type": "number", "default": 0.99}
    typed = {"gamma": ("0.9", "dqn"), "policy": ("Categorical_AC", "ppo")}
    assert M.param_value("gamma", spec, None, typed) == ("0.9", "kept from dqn (default 0.99)")
    assert M.param_value("gamma", spec, {"gamma": 0.5}, typed) == (0.5, None)     # a clone's own value first
    assert M.param_value("gamma", spec, {}, typed) == (None, None)                # the clone left it default
    assert M.param_value("lr", spec, None, typed) == (None, None)                 # never typed
    # a value the new field does not take is not carried (PPO's policy into MAPPO's choices)
    enum = {"type": "string", "enum": ["MAPPO_AC"], "default": "MAPPO_AC"}
    assert M.param_value("policy", enum, None, typed) == (None, None)
    assert M.param_value("policy", {"type": "string", "enum": ["Categorical_AC", "MAPPO_AC"]}, None, typed) == (
        "Categorical_AC", "kept from ppo (default none)")


# -- what is submitted --------------------------------------------------------------------------
def _values(**changes):
    values = {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "name": None, "steps": 3000, "seed": 1,
              "device": "cpu", "mode": "train", "checkpoint": None, "eval_episodes": 10, "frames": False,
              "fps": 15, "record": None, "dataset": None, "wall_seconds": None, "max_steps": None,
              "memory_mb": None, "mirror": "settings"}
    return {**values, **changes}


def test_a_plain_form_submits_only_what_was_given():
    config = M.run_config(_values(), True, {}, None, {"gamma": 0.9})
    assert config == {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 3000, "seed": 1,
                      "device": "cpu", "mode": "train", "params": {"gamma": 0.9}}
    parse_run_config(config)   # what the daemon takes


def test_an_empty_seed_asks_the_daemon_to_draw_one_only_when_the_field_is_shown():
    assert M.run_config(_values(seed=None), True, {}, None, {})["seed"] is None
    assert "seed" not in M.run_config(_values(seed=None), False, {}, None, {})


def test_the_optional_sections_go_into_the_config():
    config = M.run_config(_values(mode="eval", checkpoint="run:ppo-1", eval_episodes=4, frames=True, fps=5,
                                  record=3, dataset=M.NO_DATASET, wall_seconds=60, memory_mb=512,
                                  mirror="wandb"),
                          True, {"scale": 2}, {"backend": "slurm", "cpus": 2}, {})
    assert config["mode"] == "eval" and config["checkpoint"] == "run:ppo-1" and config["eval_episodes"] == 4
    assert config["frames"] == {"scale": 2, "enabled": True, "fps": 5}
    assert config["record"] == {"episodes": 3}
    assert "dataset" not in config                       # none recorded: none chosen
    assert config["limits"] == {"wall_seconds": 60, "memory_mb": 512}
    assert config["mirror"] == ["wandb"]
    assert config["placement"] == {"backend": "slurm", "cpus": 2}
    # a training run carries no eval settings; a chosen dataset and "none" mirrors go as given
    train = M.run_config(_values(dataset="rec-1", mirror="none"), True, {}, None, {})
    assert "eval_episodes" not in train and train["dataset"] == "rec-1" and train["mirror"] == []
    assert "frames" not in train and "limits" not in train and "placement" not in train


def test_the_status_line_names_the_first_problem_or_the_kept_values():
    assert M.status_line(["env: is required"], [], {}) == ("1 field to fix: env: is required", True)
    assert M.status_line(["a: x", "b: y"], [], {})[0] == "2 fields to fix: a: x"
    assert M.status_line([], [], {}) == ("ready: ctrl+s submits", False)
    typed = {"gamma": (0.9, "dqn"), "lr": (0.1, "dqn")}
    assert M.status_line([], ["gamma", "lr"], typed) == (
        "ready: ctrl+s submits · 2 values kept from dqn: gamma, lr", False)


def test_the_daemons_refusal_lands_under_the_field_it_names():
    assert M.refused_field("params.gamma") == ("param", "gamma")
    assert M.refused_field("params") is None
    assert M.refused_field("") is None
    assert M.refused_field("env") == ("common", "f-env")
    assert M.refused_field("frames.enabled") == ("common", "f-frames")
    assert M.refused_field("frames.fps") == ("common", "f-fps")
    assert M.refused_field("limits.memory_mb") == ("common", "f-memory_mb")
    assert M.refused_field("placement.mem") == ("common", "f-placement-mem")
    assert M.refused_field("placement") == ("common", "f-placement-backend")
    assert M.refusal_text("env", "env: unknown id") == "unknown id"
    assert M.refusal_text("env", "the worker is gone") == "the worker is gone"


# -- the placement section ------------------------------------------------------------------------
def test_each_backend_shows_the_fields_the_model_takes_for_it():
    fields = M.placement_fields()
    assert fields["local"] == []
    assert {"partition", "cpus", "mem", "time"} <= set(fields["slurm"]) and "address" not in fields["slurm"]
    assert "address" in fields["ray"] and "partition" not in fields["ray"]
    assert M.placement_names()[0] == "backend"


def test_a_placement_is_checked_as_the_daemon_checks_it():
    assert M.check_placement({"backend": "slurm", "mem": "8g"})["mem"] == "8G"
    with pytest.raises(ConfigError) as caught:
        M.check_placement({"backend": "local", "cpus": 2})
    assert caught.value.field.startswith("placement")
    assert M.placement_text("extra_args", ["--qos=high", "--comment=a b"]) == "--qos=high '--comment=a b'"


def test_a_text_file_param_takes_the_files_text(tmp_path):
    spec = {"type": "string", "x-text-file": True}
    path = tmp_path / "mine.yaml"
    path.write_text("learning_rate: 0.001\n")
    assert M.file_text(spec, str(path)) == "learning_rate: 0.001\n"
    assert M.file_text(spec, "{learning_rate: 0.001}") == "{learning_rate: 0.001}"    # one line of YAML
    assert M.file_text({"type": "string"}, str(path)) == str(path)                    # not a file param
    with pytest.raises(ConfigError):
        M.file_text(spec, str(tmp_path / "missing.yaml"))
