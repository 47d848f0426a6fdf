"""The new-sweep form's choices into the spec the CLI takes (mosaic_tui/sweep_form.py)."""
from __future__ import annotations

from mosaic_tui import sweep_form as F

SPEC = {"name": "s", "base": {"worker": "synthetic", "steps": 2400}, "params": {"gain": {"uniform": [-1, 1]}},
        "trials": 8, "seeds": 3, "parallel": 2, "sampler": "tpe", "pruner": {"type": "none"},
        "objective": {"tag": "episode/return"}}


def test_a_pbt_block_from_the_forms_texts():
    block, errors = F.pbt_block("4", "600", "0.25", {
        "gain": {"kind": "factors", "values": "0.8, 1.2", "resample_probability": "0.1"},
        "lr": {"kind": "neighbours", "values": "1e-4 3e-4 1e-3", "resample_probability": ""}})
    assert errors == []
    assert block == {"population": 4, "interval": 600, "quantile": 0.25,
                     "mutations": {"gain": {"factors": [0.8, 1.2], "resample_probability": 0.1},
                                   "lr": {"neighbours": [1e-4, 3e-4, 1e-3]}}}


def test_empty_texts_leave_the_daemons_defaults():
    block, errors = F.pbt_block("4", "600", " ", {"gain": {"kind": "factors", "values": "", "resample_probability": ""}})
    assert errors == [] and block == {"population": 4, "interval": 600, "mutations": {"gain": {}}}


def test_each_mistake_is_one_line_naming_its_field():
    block, errors = F.pbt_block("four", "6e2", "a quarter", {
        "gain": {"kind": "factors", "values": "0.8 x", "resample_probability": "often"},
        "lr": {"kind": "neighbours", "values": "", "resample_probability": ""}})
    assert errors == ["sweep.pbt.population: an integer, not 'four'",
                      "sweep.pbt.interval: an integer, not '6e2'",
                      "sweep.pbt.quantile: a number, not 'a quarter'",
                      "sweep.pbt.mutations.gain.factors: numbers separated by spaces, not 'x'",
                      "sweep.pbt.mutations.gain.resample_probability: a number, not 'often'",
                      "sweep.pbt.mutations.lr.neighbours: the values to move between, e.g. 1e-4 3e-4 1e-3"]
    assert all("\n" not in e for e in errors)


def test_pbt_replaces_the_keys_a_population_replaces_and_another_sampler_drops_pbt():
    pbt = {"population": 4, "interval": 600}
    out = F.apply_method(SPEC, "pbt", pbt)
    assert out == {"name": "s", "base": SPEC["base"], "params": SPEC["params"], "objective": SPEC["objective"],
                   "pbt": pbt}
    assert F.apply_method({**SPEC, "pbt": pbt}, "random")["sampler"] == "random"
    assert "pbt" not in F.apply_method({**SPEC, "pbt": pbt}, "random")
    assert F.apply_method(SPEC, F.FROM_SPEC) == SPEC


def test_the_swept_params_of_a_specs_text_and_a_first_interval():
    assert F.swept_params("params:\n  gain: [1, 2]\n  lr: {uniform: [0, 1]}\n") == ["gain", "lr"]
    assert F.swept_params("params: [unclosed") == []
    assert F.default_interval(2400) == 480 and F.default_interval(None) == 10000
