"""mosaic_tui/sweep_explain.py: Optuna's own importances from a sweep's record, the best trials,
the slices and their text scatter."""
from __future__ import annotations

import pytest

from mosaic_tui import sweep_explain as X

optuna = pytest.importorskip("optuna")

SPACE = {"lr": {"kind": "loguniform", "low": 1e-4, "high": 1e-1, "log": False},
         "layers": {"kind": "int", "low": 1, "high": 4, "log": False},
         "act": {"kind": "categorical", "values": ["relu", "tanh"]}}


def _score(lr: float, layers: int, act: str) -> float:
    # the return rises with log lr, a little with layers; the activation does nothing
    import math
    return 100.0 * (math.log10(lr) + 4) + layers + 0.0 * (act == "relu")


def _study_and_sweep(direction: str = "maximize", n: int = 16):
    """A real Optuna study of the score and the sweep record the daemon gives for it (sweep_get)."""
    from daemon.sweeps import SweepController
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.RandomSampler(seed=4))
    dists = SweepController.distributions(SPACE)
    for k in range(n):
        trial = study.ask(dists)
        if k == 5:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        else:
            study.tell(trial, _score(**trial.params))
    trials = [{"trial": t.number, "state": t.state.name.lower(), "params": t.params, "value": t.value,
               "std": 0.0, "runs": [{"name": f"s-t{t.number}-s1"}]} for t in study.get_trials()]
    trials.sort(key=lambda t: -(t["value"] or 0))   # the daemon ranks them: the record's order is not Optuna's
    sweep = {"id": "01SWEEP", "name": "s", "state": "finished", "trials": trials,
             "spec": {"params": SPACE, "objective": {"tag": "episode/return", "last": 20, "agg": "mean",
                                                    "direction": direction},
                      "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 7,
                               "params": {"rate": 0, "lr": 0.5}}}}
    return study, sweep


@pytest.mark.parametrize("name, evaluator", [
    ("ped-anova", lambda: optuna.importance.PedAnovaImportanceEvaluator()),
    ("fanova", lambda: optuna.importance.FanovaImportanceEvaluator(seed=3)),
    ("mdi", lambda: optuna.importance.MeanDecreaseImpurityImportanceEvaluator(seed=3)),
])
def test_importances_equal_optunas_own_call_on_the_study(name, evaluator):
    study, sweep = _study_and_sweep()
    ours = X.importances(sweep, name, seed=3)
    theirs = optuna.importance.get_param_importances(study, evaluator=evaluator())
    assert list(ours) == list(theirs) and ours == pytest.approx(theirs, rel=1e-12, abs=1e-15)
    assert list(ours)[0] == "lr"


def test_the_study_explained_holds_the_distributions_the_daemon_asked_with():
    study, sweep = _study_and_sweep()
    asked = {t.number: t.distributions for t in study.get_trials() if t.state.name == "COMPLETE"}
    rebuilt = [t.distributions for t in X.study_of(sweep).get_trials()]
    assert rebuilt == [asked[t["trial"]] for t in X.finished_trials(sweep)]
    assert rebuilt[0]["lr"] == optuna.distributions.FloatDistribution(1e-4, 1e-1, log=True)


def test_best_trials_follow_the_direction_and_carry_the_config_they_trained_with():
    _, sweep = _study_and_sweep("minimize")
    best = X.best_trials(sweep, 2)
    done = X.finished_trials(sweep)
    assert [b["value"] for b in best] == sorted(t["value"] for t in done)[:2]
    b = best[0]
    assert b["rank"] == 1 and b["runs"] == [f"s-t{b['trial']}-s1"]
    # the base's params with the trial's over them (the base's lr 0.5 is the trial's)
    assert b["config"]["params"] == {"rate": 0, **b["params"]} and b["config"]["seed"] == 7
    assert all(t["state"] == "complete" for t in done) and len(done) == 15     # the pruned one has no value


def test_slices_hold_a_point_per_finished_trial_on_the_params_own_axis():
    _, sweep = _study_and_sweep()
    by_param = {s["param"]: s for s in X.slices(sweep)}
    assert {p: s["scale"] for p, s in by_param.items()} == {"lr": "log", "layers": "linear", "act": "categorical"}
    for s in by_param.values():
        assert sorted(p["trial"] for p in s["points"]) == [t["trial"] for t in X.finished_trials(sweep)]
    lr = by_param["lr"]
    assert X.x_position(lr, 1e-4) == 0.0 and X.x_position(lr, 1e-1) == 1.0
    assert X.x_position(lr, 1e-2) == pytest.approx(2 / 3)          # log: a decade a third
    assert [X.x_position(by_param["act"], v) for v in ("relu", "tanh")] == [0.25, 0.75]
    # the text scatter: every trial counted once (a digit where several share a cell)
    for s in by_param.values():
        drawn = "".join(line.split("│", 1)[1] for line in X.text_scatter(s, 30, 6)[:6])
        assert sum(1 if c == "•" else int(c) for c in drawn if c not in " ") == len(s["points"])


def test_a_sweep_with_fewer_than_two_finished_trials_is_one_line():
    _, sweep = _study_and_sweep(n=1)
    with pytest.raises(X.ExplainError) as err:
        X.importances(sweep)
    assert str(err.value) == ("sweep s has 1 finished trial (0 others, finished): importances need at least 2")
    sweep["trials"] = []
    with pytest.raises(X.ExplainError, match="has 0 finished trials"):
        X.explain(sweep)


def test_importance_bars_are_eighths_of_the_width():
    assert X.importance_bars({"lr": 0.75, "gamma": 0.25}, 8) == ["lr     0.75  ██████", "gamma  0.25  ██"]
    assert X.importance_bars({"a": 0.5 + 1 / 32}, 4)[0].endswith("██▏")
