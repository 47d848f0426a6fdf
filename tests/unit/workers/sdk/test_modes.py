"""What a run does (workers/sdk/modes.py): train, eval or play; an older record's or an older
client's "train" of a worker that plays read as play, the record never rewritten."""
from __future__ import annotations

import copy
import importlib

import pytest

from mosaic_tui import fmt, report
from mosaic_tui.new_run_model import run_config
from mosaic_tui.query import Keys, compile_query
from workers.sdk.config import ConfigError
from workers.sdk.modes import PLAYED_AS_TRAIN, plays, run_mode, submitted_mode, worker_modes

PLAYING = ["human", "balrog", "mosaic_llm"]
TRAINING = ["cleanrl", "ray", "xuance", "tianshou", "jumanji"]


def _record(worker, mode=None, name="r"):
    config = {"worker": worker, "algo": "a", "env": "e", "seed": 1, "params": {}}
    if mode is not None:
        config["mode"] = mode
    return {"id": name.upper().ljust(26, "0"), "name": name, "worker": worker, "algo": "a", "env": "e",
            "state": "succeeded", "config": config, "summary": {}}


@pytest.mark.parametrize("worker", PLAYING)
def test_an_old_record_of_a_worker_that_plays_reads_as_play(worker):
    old = _record(worker, "train")
    kept = copy.deepcopy(old)
    assert run_mode(old) == "play"
    assert run_mode(_record(worker)) == "play"          # no mode at all: the default was train
    assert run_mode(_record(worker, "play")) == "play"  # a new record
    assert run_mode(old["config"]) == "play"            # a config.json read alone names its worker too
    assert old == kept                                  # read, never rewritten


@pytest.mark.parametrize("worker", TRAINING)
def test_a_training_worker_keeps_its_modes(worker):
    assert run_mode(_record(worker, "train")) == "train"
    assert run_mode(_record(worker)) == "train"
    assert run_mode(_record(worker, "eval")) == "eval"


def test_a_brief_listing_row_reads_the_same():
    # daemon/store.py's brief rows carry only the config's mode and steps, the worker beside them
    assert run_mode({"worker": "balrog", "config": {"mode": "train", "steps": None}}) == "play"
    assert run_mode({"worker": "cleanrl", "config": {"mode": None, "steps": 5}}) == "train"


def test_submitted_mode_takes_an_older_clients_train_as_play():
    assert submitted_mode("train", True) == "play"
    assert submitted_mode(None, True) == "play"
    assert submitted_mode("play", True) == "play"
    assert submitted_mode("eval", True) == "eval"     # refused by the worker, in its own words
    assert submitted_mode("train", False) == "train"
    assert submitted_mode("play", False) == "play"    # refused by validation


def test_worker_modes_from_capabilities():
    assert worker_modes({"modes": ["play"]}) == ["play"] and plays({"modes": ["play"]})
    assert worker_modes({"checkpoints": True}) == ["train", "eval"]
    assert worker_modes({}) == ["train"] and not plays({})


def test_the_workers_read_as_play_are_the_ones_that_declare_it():
    descriptors = {name: importlib.import_module(f"workers.{name}_worker").WORKER for name in PLAYING + TRAINING}
    assert {name for name, worker in descriptors.items() if "play" in worker.modes} == PLAYED_AS_TRAIN
    for name in PLAYING:   # and say so to clients (the form submits their runs as play)
        assert plays(descriptors[name].capabilities()), name


HUMAN = {"worker": "human", "algo": "play", "env": "CartPole-v1"}


@pytest.mark.parametrize("given", [None, "train", "play"])
def test_a_worker_that_plays_validates_train_as_play(given):
    from workers.human_worker import WORKER
    config = dict(HUMAN) if given is None else {**HUMAN, "mode": given}
    assert WORKER.validate(config)["mode"] == "play"


def test_a_training_worker_refuses_play_in_one_line():
    from workers.cleanrl_worker import WORKER
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "mode": "play"})
    assert err.value.field == "mode" and "not play" in str(err.value) and "\n" not in str(err.value)


def test_the_form_submits_play_for_a_worker_that_plays():
    values = {"worker": "balrog", "algo": "naive", "env": "BabyAI-GoToRedBallGrey-v0"}
    assert run_config(values, True, {}, None, {}, {"modes": ["play"]})["mode"] == "play"
    assert run_config(values, True, {}, None, {}, {"checkpoints": True})["mode"] == "train"
    assert run_config({**values, "mode": "eval", "eval_episodes": 3}, True, {}, None, {})["mode"] == "eval"


def test_tables_labels_queries_and_report_groups_show_play():
    old, new, trained = _record("balrog", "train", "old"), _record("balrog", "play", "new"), _record("cleanrl", "train", "ppo")
    runs = [old, new, trained]
    assert [fmt.run_label(r) for r in runs] == ["old [play]", "new [play]", "ppo"]
    assert [fmt.derived(r, 0.0)["mode"] for r in runs] == ["play", "play", "train"]
    keys = Keys(runs)
    assert [r["name"] for r in compile_query("mode = play", keys, now=0.0).filter(runs)] == ["old", "new"]
    assert [r["name"] for r in compile_query("config.mode = play", keys, now=0.0).filter(runs)] == ["old", "new"]
    # an older play and a new one are one config's seeds, apart from the trained run
    assert report._config_key(old) == report._config_key(new) != report._config_key(trained)
