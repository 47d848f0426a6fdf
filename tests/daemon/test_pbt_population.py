"""A PBT population through the real daemon and CLI: `mosaic stop SWEEP` stops every member with a
checkpoint and pauses the controller, `mosaic continue SWEEP` resumes them where they were (no
exploit lost or applied twice); a member whose worker is killed ends alone, the others go on."""
from __future__ import annotations

import json
import os
import signal
import time

from daemon import protocol as P
from tests.daemon.test_pbt import SPEC, _check_lineage, _finished
from tests.helpers import connect, wait_for


def _sweep(client, name: str) -> dict:
    return client.call(P.SWEEP_GET, sweep=name)


def test_mosaic_stop_stops_the_population_and_continue_resumes_it(daemon, mosaic):
    # slow enough that the stop falls inside the second generation (800..1600) on a loaded machine
    spec = {**SPEC, "name": "pbt-pause", "base": {**SPEC["base"], "params": {"rate": 120, "episode_every": 20}},
            "pbt": {**SPEC["pbt"], "interval": 800}}
    with connect(daemon) as client:
        sweep = client.call(P.SWEEP, spec=spec)
        state_file = daemon.root / "sweeps" / f"{sweep['id']}.pbt.json"
        # stopped inside a generation past the first exploit: the population is half way through its budget
        wait_for(lambda: min(m["step"] for m in _sweep(client, "pbt-pause")["members"] or [{"step": 0}]) > 900,
                 180, 0.2, "every member past the first boundary")
    proc = mosaic.run("stop", "pbt-pause", "--timeout", "120")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "sweep pbt-pause stopped: 4 stopped", proc.stdout
    with connect(daemon) as client:
        stopped = _sweep(client, "pbt-pause")
        assert stopped["state"] == "stopped" and all(m["state"] == P.STOPPED for m in stopped["members"])
        saved = json.loads(state_file.read_text())
        steps = {m["id"]: m["step"] for m in stopped["members"]}
        time.sleep(3)   # the controller is paused: no member continued, nothing decided meanwhile
        again = _sweep(client, "pbt-pause")
        assert again["state"] == "stopped" and {m["id"]: m["step"] for m in again["members"]} == steps
        assert all(m["state"] == P.STOPPED for m in again["members"])
        assert json.loads(state_file.read_text()) == saved
    proc = mosaic.run("continue", "pbt-pause")
    assert proc.returncode == 0 and proc.stdout.strip() == "sweep pbt-pause running", proc.stdout + proc.stderr
    with connect(daemon) as client:
        done = _finished(client, "pbt-pause", 240)
    assert all(m["state"] == P.SUCCEEDED for m in done["members"]) and done["generation"] == 2
    _check_lineage(daemon, done)   # each exploit applied once, none lost across the pause
    assert sorted({r["generation"] for r in done["lineage"]}) == [0, 1]
    # the members stopped short of a boundary went on from their own checkpoints, where they were
    boundary = (saved["generation"] + 1) * 800
    short = [m for m in done["members"] if steps[m["id"]] < boundary]
    assert short, (steps, boundary)
    for member in short:
        with open(daemon.run_dir(member["id"]) / "events.jsonl", encoding="utf-8") as f:
            seams = [json.loads(line) for line in f if '"restarted"' in line]
        assert any(abs(e["step"] - steps[member["id"]]) <= 1 for e in seams), (steps[member["id"]], seams)


def test_a_stop_of_a_sweep_that_is_no_pbt_sweep_says_so_in_one_line(daemon, mosaic, tmp_path):
    plain = {"name": "grid", "base": {**SPEC["base"], "steps": 50}, "params": {"gain": [0.1, 0.2]}}
    (tmp_path / "grid.json").write_text(json.dumps(plain))
    mosaic.run("sweep", str(tmp_path / "grid.json"), "--wait", "--timeout", "120", check=True)
    proc = mosaic.run("stop", "grid")
    assert proc.returncode != 0
    assert "sweep grid is no PBT sweep: its trials stop one run at a time" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_a_member_whose_worker_is_killed_ends_alone_and_the_population_goes_on(daemon):
    spec = {**SPEC, "name": "pbt-kill-one", "base": {**SPEC["base"], "params": {"rate": 150, "episode_every": 20}}}
    with connect(daemon) as client:
        sweep = client.call(P.SWEEP, spec=spec)

        def victim() -> dict | None:
            members = _sweep(client, "pbt-kill-one")["members"]
            runs = [client.call(P.GET, run=m["id"]) for m in members if m["member"] == 2]
            return runs[0] if runs and runs[0]["state"] == P.RUNNING and runs[0].get("pid") else None

        def killed_one() -> dict | None:
            run = victim()
            try:   # the worker: its supervisor's child
                with open(f"/proc/{run['pid']}/task/{run['pid']}/children") as f:
                    os.kill(int(f.read().split()[0]), signal.SIGKILL)
            except (TypeError, OSError, IndexError, ValueError):   # not running now: on its next start
                return None
            return run
        run = wait_for(killed_one, 120, 0.1, "member 2's worker to run and be killed")
        state_file = daemon.root / "sweeps" / f"{sweep['id']}.pbt.json"
        killed_in = json.loads(state_file.read_text())["generation"] if state_file.exists() else 0
        wait_for(lambda: client.call(P.GET, run=run["id"])["state"] in P.FINAL_STATES, 60, 0.2, "the member's end")
        killed = client.call(P.GET, run=run["id"])
        assert killed["state"] == P.FAILED, killed
        done = _finished(client, "pbt-kill-one", 300)
    states = {m["name"]: m["state"] for m in done["members"]}
    assert states == {"pbt-kill-one-m0": P.SUCCEEDED, "pbt-kill-one-m1": P.SUCCEEDED,
                      "pbt-kill-one-m2": P.FAILED, "pbt-kill-one-m3": P.SUCCEEDED}, states
    assert done["generation"] == 3   # the decisions went on among the three left
    assert done["lineage"] and all(run["id"] not in (r["recipient"], r["donor"]) for r in done["lineage"]
                                   if r["generation"] > killed_in)
    _check_lineage(daemon, done)
