"""daemon/pbt_decisions.py: the pbt block's checks, who is exploited by whom (never against a member
that trained longer), the seeded perturbation and the exploit record."""
from __future__ import annotations

import random

import pytest

from daemon.pbt_decisions import (
    check_pbt,
    exploit_pairs,
    exploit_record,
    generation_rng,
    initial_params,
    member_schedule,
    members_to_continue,
    mutable_reason,
    perturb,
    ready_to_decide,
    replay_spec,
)
from workers.sdk.config import ConfigError

SPACE = {"lr": {"kind": "loguniform", "low": 1e-4, "high": 1e-2, "log": False},
         "gamma": {"kind": "grid", "values": [0.9, 0.95, 0.99]},
         "hidden": {"kind": "int", "low": 32, "high": 256, "log": False}}
PROPS = {"lr": {"type": "number"}, "gamma": {"type": "number"}, "hidden": {"type": "integer"},
         "anneal": {"type": "boolean"}}


def member(mid: str, score, step: int = 1000) -> dict:
    return {"id": mid, "score": score, "step": step}


# -- the spec ------------------------------------------------------------------------------

def test_the_block_gets_its_defaults():
    checked = check_pbt({"interval": 500, "mutations": {"lr": {}, "gamma": {"neighbours": [0.9, 0.95, 0.99]}}},
                        SPACE, PROPS)
    assert checked == {"population": 4, "interval": 500, "quantile": 0.25, "mutations": {
        "lr": {"resample_probability": 0.0, "factors": [0.8, 1.2]},
        "gamma": {"resample_probability": 0.0, "neighbours": [0.9, 0.95, 0.99]}}}


@pytest.mark.parametrize("raw, field, says", [
    ({"interval": 0}, "sweep.pbt.interval", "integer >= 1"),
    ({"interval": 10, "population": 1}, "sweep.pbt.population", "from 2 to 256"),
    ({"interval": 10, "quantile": 0.6}, "sweep.pbt.quantile", "at most 0.5"),
    ({"interval": 10, "every": 3}, "sweep.pbt.every", "unknown key"),
    ({"interval": 10, "mutations": {"hidden": {}}}, "sweep.pbt.mutations.hidden", "cannot take a new value"),
    ({"interval": 10, "mutations": {"clip": {}}}, "sweep.pbt.mutations.clip", "not one of the sweep's params"),
    ({"interval": 10, "mutations": {"lr": {"factors": [0.8, -1]}}}, "sweep.pbt.mutations.lr.factors", "positive"),
    ({"interval": 10, "mutations": {"gamma": {"neighbours": [0.99, 0.9]}}}, "sweep.pbt.mutations.gamma.neighbours",
     "increasing order"),
    ({"interval": 10, "mutations": {"lr": {"resample_probability": 2}}},
     "sweep.pbt.mutations.lr.resample_probability", "probability"),
    ({"interval": 10, "mutations": {"lr": {"factors": [2], "neighbours": [1, 2]}}}, "sweep.pbt.mutations.lr",
     "not both"),
])
def test_each_mistake_is_one_line_naming_its_field(raw, field, says):
    with pytest.raises(ConfigError) as info:
        check_pbt(raw, SPACE, PROPS)
    assert info.value.field == field and says in info.value.message and "\n" not in str(info.value)


def test_only_real_valued_params_mutate():
    assert mutable_reason("lr", {"type": "number"}) is None
    assert mutable_reason("lr", {"type": ["number", "null"]}) is None
    for prop in ({"type": "integer"}, {"type": "boolean"}, {"type": "string"}, {}):
        assert "cannot take a new value" in mutable_reason("x", prop)


# -- who copies whom --------------------------------------------------------------------------

def test_the_bottom_quarter_copies_the_top_quarter():
    members = [member(f"m{i}", float(i)) for i in range(8)]   # m7 best, m0 worst
    pairs = exploit_pairs(members, 0.25, True, random.Random(0))
    assert sorted(r for r, _ in pairs) == ["m0", "m1"]
    assert all(d in ("m6", "m7") for _, d in pairs)
    # minimising: the other way round
    pairs = exploit_pairs(members, 0.25, False, random.Random(0))
    assert sorted(r for r, _ in pairs) == ["m6", "m7"] and all(d in ("m0", "m1") for _, d in pairs)


def test_a_member_is_never_judged_against_one_that_trained_longer():
    members = [member("short", 0.0, step=1000), member("long", 9.0, step=1200), member("b", 5.0), member("c", 4.0)]
    # the best (long) trained further than the worst (short): no exploit
    assert exploit_pairs(members, 0.25, True, random.Random(0)) == []
    members[1]["step"] = 1000
    assert exploit_pairs(members, 0.25, True, random.Random(0)) == [("short", "long")]


def test_members_without_a_score_take_no_part_and_a_lone_member_is_left_alone():
    assert exploit_pairs([member("a", None), member("b", 1.0)], 0.5, True, random.Random(0)) == []
    assert exploit_pairs([member("a", None), member("b", 1.0), member("c", 2.0)], 0.5, True,
                         random.Random(0)) == [("b", "c")]


def test_the_same_seed_gives_the_same_pairs():
    members = [member(f"m{i}", float(i % 5)) for i in range(16)]
    assert exploit_pairs(members, 0.5, True, generation_rng(3, 2)) == \
        exploit_pairs(list(reversed(members)), 0.5, True, generation_rng(3, 2))


# -- the perturbation ---------------------------------------------------------------------------

def test_factors_multiply_within_bounds_and_neighbours_move_one_place():
    mutations = {"lr": {"resample_probability": 0.0, "factors": [0.5]},
                 "gamma": {"resample_probability": 0.0, "neighbours": [0.9, 0.95, 0.99]}}
    out = perturb({"lr": 1e-3, "gamma": 0.95, "hidden": 64}, mutations, SPACE, random.Random(1))
    assert out["lr"] == pytest.approx(5e-4) and out["gamma"] in (0.9, 0.99) and out["hidden"] == 64
    assert perturb({"lr": 1.5e-4, "gamma": 0.99, "hidden": 64}, mutations, SPACE, random.Random(1))["lr"] == 1e-4
    # at the end of the list a move outwards stays
    seen = {perturb({"lr": 1e-3, "gamma": 0.99, "hidden": 64}, mutations, SPACE, random.Random(s))["gamma"]
            for s in range(20)}
    assert seen == {0.95, 0.99}


def test_resampling_draws_from_the_params_distribution_and_is_seeded():
    mutations = {"lr": {"resample_probability": 1.0, "factors": [0.8, 1.2]}}
    draws = [perturb({"lr": 5e-3}, mutations, SPACE, random.Random(s))["lr"] for s in range(50)]
    assert all(1e-4 <= d <= 1e-2 for d in draws) and len(set(draws)) == 50
    assert perturb({"lr": 5e-3}, mutations, SPACE, random.Random(7)) == \
        perturb({"lr": 5e-3}, mutations, SPACE, random.Random(7))


def test_initial_values_are_each_members_own_seeded_draw():
    assert initial_params(SPACE, 0, 1) == initial_params(SPACE, 0, 1)
    assert initial_params(SPACE, 0, 1) != initial_params(SPACE, 0, 2)
    assert initial_params(SPACE, 0, 1)["gamma"] in (0.9, 0.95, 0.99)


def test_the_exploit_record_names_donor_step_and_each_changed_value():
    recipient = {"id": "r", "score": 1.0, "params": {"lr": 1e-3, "gamma": 0.9}}
    donor = {"id": "d", "score": 5.0, "stop_step": 2048, "checkpoint": "/x/stop_2048.pt",
             "params": {"lr": 2e-3, "gamma": 0.99}}
    record = exploit_record(3, recipient, donor, {"lr": 2.4e-3, "gamma": 0.99})
    assert record == {"generation": 3, "recipient": "r", "donor": "d", "donor_step": 2048,
                      "donor_checkpoint": "/x/stop_2048.pt", "recipient_score": 1.0, "donor_score": 5.0,
                      "donor_params": {"gamma": 0.99, "lr": 2e-3}, "params": {"gamma": 0.99, "lr": 2.4e-3},
                      "changed": {"gamma": {"old": 0.9, "new": 0.99}, "lr": {"old": 1e-3, "new": 2.4e-3}}}


def test_a_generation_is_decided_only_once_every_live_member_stopped_at_its_boundary():
    assert ready_to_decide([{"state": "stopped", "step": 600}, {"state": "stopped", "step": 612}], 600)
    # one stopped short of it (mosaic stop on it or the population) is waited for
    assert not ready_to_decide([{"state": "stopped", "step": 600}, {"state": "stopped", "step": 450}], 600)
    assert not ready_to_decide([{"state": "stopped", "step": 600}, {"state": "running", "step": 640}], 600)
    assert not ready_to_decide([], 600)


def test_continue_starts_the_members_stopped_short_of_the_boundary_and_leaves_the_rest_to_the_decision():
    members = [{"id": "A", "state": "stopped", "step": 450}, {"id": "B", "state": "stopped", "step": 610},
               {"id": "C", "state": "queued", "step": 300}]
    assert members_to_continue(members, 600, 2400, decision_pending=False) == ["A"]
    # a decision written and not applied: the controller continues every member, each exploit once
    assert members_to_continue(members, 600, 2400, decision_pending=True) == []
    # the last generation runs to the budget's end: every stopped member goes on
    assert members_to_continue(members, 2400, 2400, decision_pending=False) == ["A", "B"]


LINEAGE = [
    {"generation": 0, "recipient": "A", "donor": "B", "donor_name": "pop-m1", "donor_step": 610,
     "params": {"gain": 0.5}},
    {"generation": 1, "recipient": "A", "donor": "C", "donor_name": "pop-m2", "donor_step": 1215,
     "params": {"gain": 0.6}, "skipped": "skipped: the donor's checkpoint was gone"},
    {"generation": 2, "recipient": "A", "donor": "B", "donor_name": "pop-m1", "donor_step": 1820,
     "params": {"gain": 0.4}},
    {"generation": 0, "recipient": "D", "donor": "B", "donor_name": "pop-m1", "donor_step": 610,
     "params": {"gain": 0.45}},
]


def test_a_members_schedule_is_its_starting_values_then_each_copy_it_took():
    schedule = member_schedule({"gain": -0.3}, list(reversed(LINEAGE)), "A")
    assert [(c["step"], c["params"]["gain"], c.get("donor")) for c in schedule] == [
        (0, -0.3, None), (610, 0.5, "B"), (1820, 0.4, "B")]   # the skipped copy changed nothing
    assert member_schedule({"gain": 0.2}, LINEAGE, "B") == [{"step": 0, "params": {"gain": 0.2}}]


def test_a_replay_spec_is_the_members_base_seed_and_start_then_its_changes_and_it_checks():
    spec = {"base": {"worker": "synthetic", "steps": 2400, "seed": 1}, "seed": 5,
            "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"}}
    schedule = member_schedule({"gain": -0.3}, LINEAGE, "A")
    replay = replay_spec(spec, 2, schedule, "pop-m2-replay")
    assert replay["base"]["seed"] == 3 and replay["params"] == {"gain": {"grid": [-0.3]}}
    assert replay["pbt"] == {"replay": [{"step": 610, "params": {"gain": 0.5}}, {"step": 1820, "params": {"gain": 0.4}}]}
    space = {"gain": {"kind": "grid", "values": [-0.3]}}
    props = {"gain": {"type": "number"}}
    assert check_pbt(replay["pbt"], space, props)["replay"] == replay["pbt"]["replay"]
    for bad, message in (
            ({"replay": [{"step": 600, "params": {"gain": 0.5}}], "interval": 10}, "sweep.pbt.interval: not with replay"),
            ({"replay": [{"step": 600, "params": {"gain": 0.5}}, {"step": 600, "params": {"gain": 0.1}}]},
             "sweep.pbt.replay.1.step: an env step after the one before (600)"),
            ({"replay": [{"step": 600, "params": {"lr": 0.5}}]}, "sweep.pbt.replay.0.params.lr: not one of"),
            ({"replay": []}, "sweep.pbt.replay: a list of changes")):
        with pytest.raises(ConfigError) as info:
            check_pbt(bad, space, props)
        assert str(info.value).startswith(message), str(info.value)
    with pytest.raises(ConfigError, match="one starting value"):
        check_pbt(replay["pbt"], {"gain": {"kind": "uniform", "low": 0.0, "high": 1.0}}, props)
