"""The runs table's row model (mosaic_tui/runs_model.py): config-key columns, where they go, how
they sort, and a sweep's swept params read off its runs."""
from __future__ import annotations

from mosaic_tui.query import Keys
from mosaic_tui.runs_model import (
    COLUMN_KEYS,
    column_choices,
    column_order,
    config_cell,
    config_sort_value,
    fit_columns,
    swept_keys,
)


def _run(params, **config):
    return {"id": "x", "config": {"seed": 1, **config, "params": params}}


def test_swept_keys_are_the_params_that_differ():
    runs = [_run({"lr": 1e-3, "gamma": 0.99, "net": {"width": 64, "depth": 2}}, seed=1),
            _run({"lr": 1e-3, "gamma": 0.99, "net": {"width": 64, "depth": 2}}, seed=2),   # a seed: no param
            _run({"lr": 3e-4, "gamma": 0.99, "net": {"width": 128, "depth": 2}}),
            _run({"lr": 3e-4, "gamma": 0.99, "net": {"width": 128, "depth": 2}, "clip": 0.2})]
    assert swept_keys(runs) == ["params.lr", "params.net.width", "params.clip"]   # clip: some runs only
    assert swept_keys(runs[:2]) == []
    assert swept_keys([]) == []


def test_config_sort_value_numbers_then_text_and_none_last_both_ways():
    values = [3, None, "b", 1e-4, True, "a", float("nan"), 20]
    up = sorted(values, key=lambda v: config_sort_value(v, False))
    down = sorted(values, key=lambda v: config_sort_value(v, True), reverse=True)
    assert up[:3] == [1e-4, 3, 20] and up[3:6] == ["a", "b", True] and up[-1] is None
    assert down[:3] == [20, 3, 1e-4] and down[3:6] == [True, "b", "a"] and down[-1] is None
    assert up[-2] != up[-2] and down[-2] != down[-2]    # NaN: after the numbers and text, before none


def test_config_cells_and_choices():
    assert (config_cell(3e-4).text, config_cell(3e-4).right) == ("0.0003", True)
    assert (config_cell("tanh").text, config_cell("tanh").right) == ("tanh", False)
    assert config_cell(None).text == "-" and config_cell(True).text == "true"
    keys = Keys([_run({"learning-rate": 1e-3, "net": {"width": 64}}, device="cpu"),
                 _run({"learning_rate": 1e-4}, worker="cleanrl", name="n")])
    assert column_choices(keys) == ["params.learning-rate", "params.net.width", "config.seed", "config.device"]
    # the columns chosen first, in their order, even one no run has now
    assert column_choices(keys, ["params.net.width", "params.gone"]) == [
        "params.net.width", "params.gone", "params.learning-rate", "config.seed", "config.device"]


def test_config_columns_go_after_the_env_and_are_kept_before_the_rest():
    assert column_order(["params.lr"]) == COLUMN_KEYS[:5] + ["params.lr"] + COLUMN_KEYS[5:]
    natural = {key: 8 for key in COLUMN_KEYS} | {"sel": 1, "name": 12, "params.lr": 6}
    plain = fit_columns(natural, 80, 1)
    with_lr = fit_columns(natural, 80, 1, config=["params.lr"])
    assert "params.lr" in with_lr and list(with_lr).index("params.lr") == list(with_lr).index("state") - 1
    assert {"state", "progress", "return"} <= set(with_lr)
    assert sum(w + 2 for w in with_lr.values()) <= 80
    assert len(with_lr) <= len(plain)      # it took the room of a column wanted less
