"""daemon/pbt.py's application of a decision: each exploit applied once, whatever the moment the
daemon died. The run manager here only records the continues it is asked for (and counts the run's
restarts as the real one does): the fault injected is a daemon that died after a continue and
before it wrote that down."""
from __future__ import annotations

import json
import os
import time

from daemon import protocol as P
from daemon.home import Home
from daemon.pbt import PBTController
from daemon.store import Store


class ContinueRecorder:
    def __init__(self, store: Store):
        self.store = store
        self.continued: list[tuple[str, dict | None, dict | None]] = []
        self.refuse: dict[str, str] = {}   # run id -> why its continue fails
        self.prune_on_continue: dict[str, list[str]] = {}   # run id -> checkpoints its retention deletes

    def update_record(self, run_id, **fields):
        return self.store.update_run(run_id, **fields)

    def continue_run(self, run, requeued=False, point=None, params=None, seam_fields=None):
        if run["id"] in self.refuse:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} cannot continue: {self.refuse[run['id']]}")
        self.continued.append((run["id"], point, params))
        for path in self.prune_on_continue.get(run["id"], []):   # the donor's retention, once it trains on
            os.unlink(path)
        return self.store.update_run(run["id"], state=P.QUEUED, restarts=(run.get("restarts") or 0) + 1)


def setup(tmp_path):
    home = Home.resolve(tmp_path / "home")
    home.root.mkdir(parents=True)
    store = Store(home.db)
    sweep = store.create_sweep({"id": "S1", "name": "pop", "spec": {}, "state": "running",
                                "created_at": time.time()})
    donor_ckpt = tmp_path / "stop_700.json"
    donor_ckpt.write_text(json.dumps({"step": 700, "level": 3.0}))
    for i, rid in enumerate(("R", "D")):
        store.create_run({"id": rid, "name": f"pop-m{i}", "worker": "synthetic", "algo": "emit", "env": "none",
                          "config": {"params": {"gain": 0.1 * i}}, "state": P.STOPPED, "created_at": time.time(),
                          "sweep": "S1", "trial": i,
                          "summary": {"stopped": {"step": 650 + 50 * i, "checkpoint": str(donor_ckpt)}}})
    record = {"generation": 0, "recipient": "R", "donor": "D", "recipient_name": "pop-m0", "donor_name": "pop-m1",
              "donor_step": 700, "donor_checkpoint": str(donor_ckpt), "recipient_score": 0.0, "donor_score": 3.0,
              "donor_params": {"gain": 0.1}, "params": {"gain": 0.12},
              "changed": {"gain": {"old": 0.0, "new": 0.12}}, "restarts_before": 0, "applied": False}
    state = {"generation": 0, "decided": 0, "exploits": [record], "lineage": []}
    runs = ContinueRecorder(store)
    pbt = PBTController(home, store, runs)
    pbt.save("S1", state)
    return home, store, sweep, runs, pbt, donor_ckpt


def members(store):
    return {r["trial"]: r for r in store.sweep_runs("S1")}


def test_an_exploit_is_applied_from_a_copy_of_the_donors_checkpoint_then_the_rest_continue(tmp_path):
    """The donor's checkpoint is pinned until the copy is taken: the donor goes on (and its retention
    deletes that checkpoint) only after it."""
    home, store, sweep, runs, pbt, donor_ckpt = setup(tmp_path)
    runs.prune_on_continue["D"] = [str(donor_ckpt)]
    pbt._apply(sweep, pbt.load("S1"), members(store))
    assert not donor_ckpt.exists()
    (rid, point, params), (other, own, none) = runs.continued
    assert rid == "R" and params == {"gain": 0.12} and point["step"] == 700
    assert point["path"] == str(home.run_dir("R") / "checkpoints" / "pbt_g0_stop_700.json")
    assert json.loads(open(point["path"]).read()) == {"step": 700, "level": 3.0}   # the donor's, copied
    assert other == "D" and own is None and none is None   # the donor continues from its own, after the copy
    state = pbt.load("S1")
    assert state["generation"] == 1 and state["decided"] is None and len(state["lineage"]) == 1


def test_a_daemon_that_died_after_the_continue_never_applies_it_twice(tmp_path):
    home, store, sweep, runs, pbt, donor_ckpt = setup(tmp_path)
    before = pbt.load("S1")   # the file as it was when the daemon died: the exploit not yet marked applied
    pbt._apply(sweep, pbt.load("S1"), members(store))
    assert [c[0] for c in runs.continued] == ["R", "D"]
    pbt.save("S1", before)   # the next daemon reads the file from before its predecessor's last writes
    store.update_run("D", state=P.STOPPED)   # (the donor too had not continued yet)
    pbt._apply(sweep, pbt.load("S1"), members(store))
    assert [c[0] for c in runs.continued] == ["R", "D", "D"]   # R's exploit not applied a second time
    state = pbt.load("S1")
    assert len(state["lineage"]) == 1 and "skipped" not in state["lineage"][0] and state["generation"] == 1


def test_a_donor_checkpoint_gone_before_the_copy_leaves_the_recipient_on_its_own(tmp_path):
    home, store, sweep, runs, pbt, donor_ckpt = setup(tmp_path)
    donor_ckpt.unlink()
    pbt._apply(sweep, pbt.load("S1"), members(store))
    assert [(c[0], c[1]) for c in runs.continued] == [("R", None), ("D", None)]
    assert pbt.load("S1")["lineage"][0]["skipped"] == "skipped: the donor's checkpoint was gone"


def test_a_member_that_cannot_continue_leaves_alone_and_the_others_go_on(tmp_path):
    home, store, sweep, runs, pbt, donor_ckpt = setup(tmp_path)
    runs.refuse["D"] = "its checkpoint is torn"
    pbt._apply(sweep, pbt.load("S1"), members(store))
    assert [c[0] for c in runs.continued] == ["R"]
    state = pbt.load("S1")
    assert state["generation"] == 1 and state["left"] == {"D": "left PBT sweep pop: run pop-m1 cannot continue: "
                                                                "its checkpoint is torn"}
    assert store.get("D")["reason"] == state["left"]["D"]


class Submitter:
    """Takes members as the run manager does (a queued run in the sweep), refusing member 1's values."""

    def __init__(self, store: Store):
        self.store = store
        self.asked: list[int] = []

    def submit(self, config, sweep=None, trial=None, checked=False):
        from workers.sdk.config import ConfigError
        self.asked.append(trial)
        if trial == 1:
            raise ConfigError("params.gain", "refused with these values together")
        return self.store.create_run({"id": f"M{trial}", "name": config["name"], "worker": "synthetic",
                                      "algo": "emit", "env": "none", "config": config, "state": P.QUEUED,
                                      "created_at": time.time(), "sweep": sweep, "trial": trial})


def test_a_member_refused_at_submit_is_asked_once_and_the_others_train(tmp_path):
    home = Home.resolve(tmp_path / "home")
    home.root.mkdir(parents=True)
    store = Store(home.db)
    spec = {"base": {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 1000, "params": {}},
            "params": {"gain": {"kind": "uniform", "low": -1.0, "high": 1.0, "log": False}}, "seed": 0,
            "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"},
            "pbt": {"population": 3, "interval": 100, "quantile": 0.25, "mutations": {}}}
    sweep = store.create_sweep({"id": "S2", "name": "pop", "spec": spec, "state": "running", "created_at": time.time()})
    runs = Submitter(store)
    pbt = PBTController(home, store, runs)
    for _ in range(3):
        pbt.advance(sweep)
    assert runs.asked == [0, 1, 2]
    assert pbt.load("S2")["refused"] == {"1": "params.gain: refused with these values together"}
    assert [r["name"] for r in store.sweep_runs("S2")] == ["pop-m0", "pop-m2"]


def test_a_donor_that_ended_keeps_its_pinned_checkpoint_from_retention_until_the_copy(tmp_path):
    """The decision pins the donor's checkpoint; the donor then trains on (continued by hand) and ends,
    its retention keeping only its newest checkpoint: the pinned one is still there for the copy, and
    retention may take it once the copy is taken."""
    from workers.sdk.rundir import prune_checkpoints, write_manifest
    home, store, sweep, runs, pbt, _ = setup(tmp_path)
    folder = home.run_dir("D") / "checkpoints"
    folder.mkdir(parents=True)

    def save(step):
        path = folder / f"iter_{step}.json"
        path.write_text(json.dumps({"step": step, "level": step / 100}))
        write_manifest(str(path), step)
        return path
    donated = save(700)
    state = pbt.load("S1")
    state["exploits"][0]["donor_checkpoint"] = str(donated)
    pbt.save("S1", state)
    pbt.pin(state["exploits"])   # what the decision does once it is written
    save(800), save(900)
    assert prune_checkpoints(str(folder), "iter_", keep=1) == [str(folder / "iter_800.json")]
    store.update_run("D", state=P.SUCCEEDED)   # the donor ended
    pbt._apply(sweep, pbt.load("S1"), members(store))
    (rid, point, params), = runs.continued   # the recipient alone: an ended donor is not continued
    assert rid == "R" and json.loads(open(point["path"]).read()) == {"step": 700, "level": 7.0}
    assert "skipped" not in pbt.load("S1")["lineage"][0]
    assert prune_checkpoints(str(folder), "iter_", keep=1) == [str(donated)]   # unpinned once copied
