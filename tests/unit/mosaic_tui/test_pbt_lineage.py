"""The PBT lineage model: schedules, copies, lanes and bands from a sweep reply (mosaic_tui/pbt_lineage.py)."""
from __future__ import annotations

import copy

from mosaic_tui import pbt_lineage as L

IDS = ["R0", "R1", "R2", "R3"]
SPEC = {"name": "pbt-gain", "base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 2400},
        "params": {"gain": {"kind": "uniform", "low": -1.0, "high": 1.0, "log": False},
                   "lr": {"kind": "loguniform", "low": 1e-4, "high": 1e-2, "log": False}},
        "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"},
        "pbt": {"population": 4, "interval": 600, "quantile": 0.25,
                "mutations": {"lr": {"factors": [0.8, 1.2], "resample_probability": 0.0},
                              "gain": {"factors": [0.8, 1.2], "resample_probability": 0.0}}}}


def record(generation, recipient, donor, step, old, new, **extra):
    return {"generation": generation, "recipient": IDS[recipient], "donor": IDS[donor], "donor_step": step,
            "donor_checkpoint": "/ckpt", "recipient_score": -3.0, "donor_score": 5.0,
            "donor_params": {"gain": new / 1.2, "lr": 1e-3}, "params": {"gain": new, "lr": 1e-3},
            "changed": {"gain": {"old": old, "new": new}}, **extra}


def sweep(lineage=None, steps=(1500, 1450, 1400, 1420), gains=(0.9, 0.6, 0.96, -0.2)) -> dict:
    return {"name": "pbt-gain", "state": "running", "spec": copy.deepcopy(SPEC), "generation": 2,
            "members": [{"member": i, "id": IDS[i], "name": f"pbt-gain-m{i}", "state": "running", "step": s,
                         "params": {"gain": g, "lr": 1e-3}} for i, (s, g) in enumerate(zip(steps, gains))],
            "lineage": [record(0, 1, 0, 610, -0.7, 0.6), record(1, 3, 2, 1220, 0.1, -0.2)]
            if lineage is None else lineage}


def test_a_reply_without_members_and_lineage_has_no_lineage():
    old = sweep()
    del old["members"], old["lineage"]
    assert not L.has_lineage(old) and L.has_lineage(sweep())


def test_a_members_schedule_starts_with_the_values_its_first_copy_replaced_then_follows_each_copy():
    plan = L.schedules(sweep())
    assert plan[0] == [{"start": 0, "end": 1500, "params": {"gain": 0.9, "lr": 1e-3}, "donor": None, "generation": None}]
    first, second = plan[1]
    assert first["params"]["gain"] == -0.7 and (first["start"], first["end"]) == (0, 610)
    assert second == {"start": 610, "end": 1450, "params": {"gain": 0.6, "lr": 1e-3}, "donor": 0, "generation": 0}
    assert [s["params"]["gain"] for s in plan[3]] == [0.1, -0.2] and plan[3][1]["donor"] == 2


def test_a_skipped_exploit_changes_no_schedule_but_is_marked():
    s = sweep([record(0, 1, 0, 610, -0.7, 0.6, skipped="skipped: the donor's checkpoint was gone")],
              gains=(0.9, -0.7, 0.96, 0.1))
    assert [seg["params"]["gain"] for seg in L.schedules(s)[1]] == [-0.7]
    row = L.lanes(s, "gain", 48)[1]
    assert [c["char"] for c in row["cells"]].count(L.SKIPPED_MARK) == 1
    assert "skipped: the donor's checkpoint was gone" in L.copy_lines(s)[0]


def test_lanes_mark_each_copy_in_the_recipients_lane_by_its_donor_and_connect_the_lanes_between():
    s = sweep([record(0, 3, 0, 1200, 0.1, 0.6)], steps=(1500, 1450, 1400, 2000))
    rows = L.lanes(s, "gain", 48)
    x = L.column(1200, 2400, 48)
    assert x == 24
    assert rows[3]["cells"][x]["char"] == "0" and rows[3]["cells"][x].get("copy")
    assert rows[0]["cells"][x]["char"] == L.DONOR_MARK
    assert rows[1]["cells"][x]["char"] == rows[2]["cells"][x]["char"] == L.CONNECTOR
    # the new value written after the mark, the band's shade following it
    assert "".join(c["char"] for c in rows[3]["cells"][x + 2:x + 5]) == "0.6"
    assert rows[3]["cells"][x - 1]["level"] == L.level(0.1, L.value_range(s, "gain"))
    assert rows[3]["cells"][x + 1]["level"] == L.level(0.6, L.value_range(s, "gain"))


def test_a_lane_is_banded_up_to_the_members_step_and_dotted_past_it():
    rows = L.lanes(sweep([]), "gain", 24)
    m2 = rows[2]["cells"]   # at 1400 of 2400 steps: cells 0..14 trained
    assert all(c["level"] is not None for c in m2[:15]) and all(c["char"] == L.PAST_END for c in m2[15:])
    assert rows[2]["value"] == 0.96 and rows[2]["step"] == 1400


def test_a_bands_shade_scales_with_the_params_range_and_log_for_loguniform():
    s = sweep([])
    assert L.level(-1.0, L.value_range(s, "gain")) == 0 and L.level(1.0, L.value_range(s, "gain")) == L.LEVELS - 1
    bounds = L.value_range(s, "lr")
    assert bounds == (1e-4, 1e-2, True)
    assert L.level(1e-3, bounds) == L.LEVELS // 2   # halfway on a log scale
    assert L.level("relu", bounds) is None


def test_the_axis_ticks_each_boundary_and_the_copy_lines_put_the_latest_first():
    s = sweep()
    assert L.boundaries(s) == [600, 1200, 1800]
    assert L.axis(s, 24) == "──────┴─────┴─────┴─────"
    lines = L.copy_lines(s)
    assert lines == ["g1 @1.22k  m3 copied m2 (-3 < 5)  gain 0.1→-0.2", "g0 @610  m1 copied m0 (-3 < 5)  gain -0.7→0.6"]


def test_the_band_params_are_the_mutated_ones_first():
    assert L.mutated_params(sweep()) == ["lr", "gain"]


def test_a_replay_sweeps_member_follows_the_changes_it_has_taken():
    s = sweep([], steps=(2000,), gains=(0.5,))
    s["members"] = s["members"][:1]
    s["spec"]["params"] = {"gain": {"kind": "grid", "values": [0.1]}}
    s["spec"]["pbt"] = {"population": 1, "interval": 0, "quantile": 0.25, "mutations": {},
                        "replay": [{"step": 600, "params": {"gain": 0.3}}, {"step": 1200, "params": {"gain": 0.5}},
                                   {"step": 1800, "params": {"gain": 0.7}}]}
    s["replay"] = s["spec"]["pbt"]["replay"]
    s["replayed"] = [{"change": 0, "step": 640, "at": 1.0}, {"change": 1, "step": 1230, "at": 2.0}]
    plan = L.schedules(s)[0]
    assert [(seg["start"], seg["end"], seg["params"]["gain"]) for seg in plan] == [
        (0, 600, 0.1), (600, 1200, 0.3), (1200, 2000, 0.5)]   # the third change not taken yet
    cells = L.lanes(s, "gain", 24)[0]["cells"]
    assert [c["char"] for c in cells].count(L.REPLAY_MARK) == 2
    assert L.boundaries(s) == [] and L.copies(s) == []
