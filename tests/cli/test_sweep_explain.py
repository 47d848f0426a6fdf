"""`mosaic explain SWEEP` through the real daemon and CLI, with the synthetic worker: Optuna's own
importances on the sweep's own study, the param that matters ranked first, a slice point per
finished trial, and one line for a sweep that cannot be explained."""
from __future__ import annotations

import json

import pytest

from tests.daemon.test_sweeps import BASE, write_spec

optuna = pytest.importorskip("optuna")


def _study(daemon, sweep_id: str):
    """The daemon's own study of the sweep, from its SQLite file (daemon/sweeps.py)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=sweep_id, storage=f"sqlite:///{daemon.root / 'sweeps' / f'{sweep_id}.db'}")


def test_explain_ranks_the_param_that_matters_first_as_optuna_does_on_the_sweeps_own_study(daemon, mosaic, tmp_path):
    # a trial's value is return_offset + the mean of the last 3 multiples of episode_every up to 40 (28 to 36):
    # the offset (0 to 100) matters, the episodes a little, the frame pattern not at all
    spec = {"name": "why", "base": BASE, "sampler": "random", "trials": 8, "parallel": 4, "seed": 2,
            "params": {"return_offset": {"uniform": [0, 100]}, "episode_every": {"int": [4, 10]},
                       "frame_pattern": {"categorical": ["noise", "cartpole"]}},
            "objective": {"tag": "episode/return", "last": 3}}
    assert mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "240").returncode == 0
    sweep = json.loads(mosaic.run("sweeps", "why", "--json", check=True).stdout)
    study = _study(daemon, sweep["id"])
    complete = study.get_trials(states=[optuna.trial.TrialState.COMPLETE])
    # a run that fails on a crowded machine costs its trial, not the comparison: Optuna reads the complete ones
    assert len(complete) >= 5, mosaic.run("sweeps", "why").stdout
    for name, evaluator in (("ped-anova", optuna.importance.PedAnovaImportanceEvaluator()),
                            ("fanova", optuna.importance.FanovaImportanceEvaluator(seed=5)),
                            ("mdi", optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=5))):
        out = json.loads(mosaic.run("explain", "why", "--evaluator", name, "--seed", "5", "--json", check=True).stdout)
        theirs = optuna.importance.get_param_importances(study, evaluator=evaluator)
        assert list(out["importances"]) == list(theirs), name
        assert out["importances"] == pytest.approx(theirs, rel=1e-12, abs=1e-15), name
        assert list(out["importances"])[0] == "return_offset", (name, out["importances"])
    # the best trials: Optuna's best first, with the config its run trained with
    best = out["best"][0]
    assert best["trial"] == study.best_trial.number and best["value"] == study.best_value
    run = mosaic.show(best["runs"][0])
    assert {k: run["config"][k] for k in ("worker", "algo", "env", "steps", "seed")} == \
        {k: best["config"][k] for k in ("worker", "algo", "env", "steps", "seed")}
    given = best["config"]["params"]          # the run's config has the worker's defaults too
    assert {k: run["config"]["params"][k] for k in given} == given and given["rate"] == 0
    # a slice point per finished trial, each at the trial's param and value
    assert [s["param"] for s in out["slices"]] == list(sweep["spec"]["params"])
    for s in out["slices"]:
        assert sorted((p["trial"], p["x"], p["value"]) for p in s["points"]) == \
            sorted((t.number, t.params[s["param"]], t.value) for t in complete)
    # the text: bars most important first, the best trial's config, a scatter per param
    text = mosaic.run("explain", "why", check=True).stdout
    assert "param importances (Optuna, PED-ANOVA):\n  return_offset" in text
    assert f"#1 trial {best['trial']}  " in text and '"return_offset": ' in text
    assert f"episode/return against return_offset: {len(complete)} trials" in text
    assert f"episode/return against frame_pattern: {len(complete)} trials" in text


def test_an_unknown_sweep_or_one_finished_trial_is_one_line(daemon, mosaic, tmp_path):
    proc = mosaic.run("explain", "nope")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "mosaic: error: no sweep named or with an id starting with 'nope'\n"
    spec = {"name": "lonely", "base": BASE, "params": {"return_offset": [5]}}
    assert mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "120").returncode == 0
    proc = mosaic.run("explain", "lonely", "--json")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == ("mosaic: error: sweep lonely has 1 finished trial (0 others, finished): "
                           "importances need at least 2\n")
    proc = mosaic.run("explain", "lonely", "--top", "0")
    assert proc.returncode == 2 and proc.stderr == "mosaic: error: --top must be at least 1, not 0\n"
