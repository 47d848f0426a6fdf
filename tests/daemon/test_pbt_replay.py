"""A PBT member's schedule exported (`mosaic sweeps NAME --schedule`) and replayed on a new run
(`--replay MEMBER`, then `mosaic sweep`): the new run's params change at the recorded steps, through
a stop and a continue from its own checkpoint.

The synthetic worker's return climbs by ``gain`` an episode, so the gain in force at any step reads
off the returns: each episode's return less the one before."""
from __future__ import annotations

import json

import pytest

from daemon import protocol as P
from tests.daemon.test_pbt import SPEC, _events
from tests.helpers import connect


def test_a_members_schedule_is_exported_and_replayed_on_a_new_run(daemon, mosaic, tmp_path):
    (tmp_path / "pbt.json").write_text(json.dumps({**SPEC, "name": "pbt-rp"}))
    mosaic.run("sweep", str(tmp_path / "pbt.json"), "--wait", "--timeout", "300", check=True)
    with connect(daemon) as client:
        sweep = client.call(P.SWEEP_GET, sweep="pbt-rp")
    exported = json.loads(mosaic.run("sweeps", "pbt-rp", "--schedule", "--json", check=True).stdout)
    assert [m["name"] for m in exported] == [f"pbt-rp-m{i}" for i in range(4)]
    copies = [(m["id"], c["donor"], c["donor_step"], c["params"]) for m in exported for c in m["schedule"][1:]]
    applied = [r for r in sweep["lineage"] if "skipped" not in r]
    assert sorted(copies, key=str) == sorted(((r["recipient"], r["donor"], r["donor_step"], r["params"])
                                              for r in applied), key=str)
    table = mosaic.run("sweeps", "pbt-rp", "--schedule", check=True).stdout.splitlines()
    assert table[0].split() == ["MEMBER", "FROM", "STEP", "GAIN", "COPIED"]
    assert len(table) == 1 + sum(len(m["schedule"]) for m in exported)
    # the member that copied most, replayed
    member = max(exported, key=lambda m: len(m["schedule"]))
    assert len(member["schedule"]) >= 2, exported
    proc = mosaic.run("sweeps", "pbt-rp", "--replay", member["name"], check=True)
    spec = json.loads(proc.stdout)
    assert spec["pbt"]["replay"] == [{"step": c["step"], "params": c["params"]} for c in member["schedule"][1:]]
    # slower than the sweep: each change's stop lands before the run's end, however loaded the machine
    spec["base"]["params"]["rate"] = 100
    (tmp_path / "replay.json").write_text(json.dumps(spec))
    mosaic.run("sweep", str(tmp_path / "replay.json"), "--wait", "--timeout", "240", check=True)
    with connect(daemon) as client:
        replay = client.call(P.SWEEP_GET, sweep=spec["name"])
    (run,) = replay["members"]
    assert run["state"] == P.SUCCEEDED and run["params"] == member["schedule"][-1]["params"]
    events = _events(daemon, run["id"])
    seams = [e for e in events if e["type"] == "restarted"]
    changes = member["schedule"][1:]
    assert [s["pbt"]["replay"] for s in seams] == list(range(len(changes)))
    # each change made at the first stop at or past its step (the interval between ticks), never before
    for seam, change in zip(seams, changes):
        assert change["step"] <= seam["step"] <= change["step"] + 300, (seam, change)
    # the gain in force, read off the returns, is the schedule's between the seams
    returns = [(e["step"], e["return"]) for e in events if e["type"] == "episode"]
    bounds = [0] + [s["step"] for s in seams] + [10 ** 9]
    values = [member["schedule"][0]["params"]["gain"]] + [c["params"]["gain"] for c in changes]
    for (a, ra), (b, rb) in zip(returns, returns[1:]):
        k = next(i for i in range(len(values)) if bounds[i] < b <= bounds[i + 1])
        if bounds[k] < a:   # both episodes in one segment
            assert rb - ra == pytest.approx(values[k]), (a, b, k)


def test_a_replay_spec_with_a_search_space_is_refused_in_one_line(daemon):
    with connect(daemon) as client:
        bad = {**SPEC, "pbt": {"replay": [{"step": 600, "params": {"gain": 0.5}}]}}
        try:
            client.call(P.SWEEP, spec=bad)
            raise AssertionError("accepted")
        except P.RPCError as exc:
            assert str(exc).startswith("sweep.pbt.replay: params.gain: one starting value") and "\n" not in str(exc)
