"""Population-based training through the real daemon: members stopped at their interval, continued
from their own or a donor's checkpoint as the same run, the lineage, and a daemon SIGKILL mid-exploit.

The synthetic worker's ``gain``: each episode's return is a level that climbs by gain an episode and
is carried in a stop's checkpoint, so the score is a known function of the param, and a copy of a
donor's checkpoint shows in the recipient's next returns."""
from __future__ import annotations

import json
import os
import signal

import pytest

from daemon import protocol as P
from daemon.pbt_decisions import initial_params
from tests.helpers import connect, wait_for

SPACE = {"gain": {"kind": "uniform", "low": -1.0, "high": 1.0, "log": False}}
BASE = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 2400, "seed": 1,
        "params": {"rate": 400, "episode_every": 20}}
SPEC = {"name": "pbt-gain", "base": BASE, "params": {"gain": {"uniform": [-1.0, 1.0]}}, "seed": 5,
        "objective": {"tag": "episode/return", "last": 3},
        "pbt": {"population": 4, "interval": 600, "mutations": {"gain": {"factors": [0.8, 1.2]}}}}


def _events(home, run_id: str) -> list[dict]:
    with open(home.run_dir(run_id) / "events.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _finished(client, name: str, timeout: float) -> dict:
    wait_for(lambda: next(s for s in client.call(P.SWEEPS) if s["name"] == name)["state"] == "finished",
             timeout, 0.3, f"PBT sweep {name} to finish")
    return client.call(P.SWEEP_GET, sweep=name)


def _check_lineage(home, sweep: dict) -> None:
    """Each exploit: the worse copied the better, the new value is the donor's times a factor, and the
    recipient's seam (its restarted event) says so, once."""
    assert sweep["lineage"], "no exploit in four generations"
    for record in sweep["lineage"]:
        assert record["donor_score"] > record["recipient_score"]
        old = record["changed"]["gain"]["old"] if "gain" in record["changed"] else record["params"]["gain"]
        assert old is not None
        seams = [e for e in _events(home, record["recipient"])
                 if e["type"] == "restarted" and e.get("pbt", {}).get("generation") == record["generation"]]
        assert len(seams) == 1, seams   # applied once
        assert seams[0]["pbt"]["donor"] == record["donor"] and seams[0]["step"] == record["donor_step"]
        assert seams[0]["checkpoint"].endswith(os.path.basename(record["donor_checkpoint"]))


def test_pbt_with_the_synthetic_worker_converges_on_the_good_gain(daemon, mosaic, tmp_path):
    initial = [initial_params(SPACE, 5, i)["gain"] for i in range(4)]
    (tmp_path / "pbt.json").write_text(json.dumps(SPEC))
    proc = mosaic.run("sweep", str(tmp_path / "pbt.json"), "--wait", "--timeout", "240")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "sweep pbt-gain finished: 4 runs in 4 trials", \
        proc.stdout + proc.stderr
    with connect(daemon) as client:
        sweep = client.call(P.SWEEP_GET, sweep="pbt-gain")
    members = sweep["members"]
    assert len(members) == 4 and all(m["state"] == P.SUCCEEDED for m in members)
    assert sweep["generation"] == 3   # boundaries 600, 1200, 1800; the last generation runs to 2400
    _check_lineage(daemon, sweep)
    donors = {r["donor"] for r in sweep["lineage"]}
    best = max(range(4), key=lambda i: initial[i])
    worst = min(range(4), key=lambda i: initial[i])
    assert members[best]["id"] in donors
    assert members[worst]["id"] in {r["recipient"] for r in sweep["lineage"]}
    final = [m["params"]["gain"] for m in members]
    # the worst starting value is gone, replaced by a perturbed copy of a good one
    assert min(final) > min(initial) and sum(final) > sum(initial), (initial, final)
    for record in sweep["lineage"]:   # the donor's value times a factor, within the range
        donor_gain = record["donor_params"]["gain"]
        assert any(record["params"]["gain"] == pytest.approx(max(-1.0, min(1.0, donor_gain * f))) for f in (0.8, 1.2))
    # the members ranked as one-run trials, then each exploit in a line
    shown = mosaic.run("sweeps", "pbt-gain", check=True).stdout.splitlines()
    exploits = [line for line in shown if line.startswith("generation ")]
    assert len(exploits) == len(sweep["lineage"]) and " copied pbt-gain-m" in exploits[0] and "gain " in exploits[0]
    assert len(sweep["trials"]) == 4 and all(len(t["runs"]) == 1 for t in sweep["trials"])
    # an exploited member's config carries the new value, and it continued from the donor's step
    last = sweep["lineage"][-1]
    recipient = client_get(daemon, last["recipient"])
    assert recipient["config"]["params"]["gain"] == last["params"]["gain"] and recipient["restarts"] >= 1


def client_get(home, run_id: str) -> dict:
    with connect(home) as client:
        return client.call(P.GET, run=run_id)


def test_a_spec_asking_to_mutate_what_a_checkpoint_cannot_take_is_refused_in_one_line(daemon):
    with connect(daemon) as client:
        bad = {**SPEC, "params": {"tags": {"int": [1, 4]}}, "pbt": {"interval": 600, "mutations": {"tags": {}}}}
        with pytest.raises(P.RPCError) as info:
            client.call(P.SWEEP, spec=bad)
        assert "sweep.pbt.mutations.tags: a integer parameter" in str(info.value)
        assert "\n" not in str(info.value)
        assert client.call(P.SWEEPS) == []


def test_a_daemon_sigkill_mid_exploit_loses_no_member_and_applies_no_exploit_twice(daemon):
    """Killed as soon as the first decision is written (its exploits not yet all applied): the next
    daemon applies what is left once, and the population finishes whole."""
    state_file = None
    with connect(daemon) as client:
        sweep = client.call(P.SWEEP, spec={**SPEC, "name": "pbt-kill"})
        state_file = daemon.root / "sweeps" / f"{sweep['id']}.pbt.json"

        def decided() -> bool:
            try:
                return json.loads(state_file.read_text()).get("decided") == 0
            except (OSError, ValueError):
                return False
        wait_for(decided, 120, 0.01, "the first generation's decision")
    os.kill(int(daemon.pid_file.read_text()), signal.SIGKILL)
    restarted_before = json.loads(state_file.read_text())
    # killed between the decision and its application (the decision is applied from the next tick on)
    assert restarted_before["exploits"] and not any(r["applied"] for r in restarted_before["exploits"])
    from tests.helpers import Mosaic
    Mosaic(daemon).run("daemon", "start", check=True)
    with connect(daemon) as client:
        sweep = _finished(client, "pbt-kill", 240)
    assert len(sweep["members"]) == 4 and all(m["state"] == P.SUCCEEDED for m in sweep["members"])
    _check_lineage(daemon, sweep)
    first = [r for r in sweep["lineage"] if r["generation"] == 0]
    assert len(first) == len(restarted_before["exploits"]) == 1


@pytest.mark.slow
def test_a_real_cleanrl_member_continues_from_its_donors_weights_with_the_new_learning_rate(daemon, tmp_path):
    """CleanRL's PPO on CartPole, a population of two: at the interval the worse copies the better.
    The copy's networks and optimizer equal the donor's checkpoint, the recipient's config carries the
    perturbed learning rate, and its annealed learning rate after the seam follows the new value."""
    import torch

    from workers.cleanrl_worker.resume import load_state

    spec = {"name": "pbt-ppo",
            "base": {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 8192, "seed": 1,
                     "params": {"num-steps": 128, "update-epochs": 1}},
            "params": {"learning-rate": {"grid": [1e-5, 2.5e-3]}}, "seed": 0,
            "objective": {"tag": "episode/return", "last": 5},
            "pbt": {"population": 2, "interval": 2048, "quantile": 0.5,
                    "mutations": {"learning-rate": {"factors": [0.5, 2.0]}}}}
    with connect(daemon) as client:
        client.call(P.SWEEP, spec=spec)
        wait_for(lambda: (lambda s: s["lineage"] or s["state"] != "running")(client.call(P.SWEEP_GET, sweep="pbt-ppo")),
                 600, 0.5, "the first exploit")
        got = client.call(P.SWEEP_GET, sweep="pbt-ppo")
        assert got["lineage"], got   # (three boundaries: a loaded machine may run past one before it is seen)
        record = got["lineage"][0]
        assert "skipped" not in record
        recipient = client.call(P.GET, run=record["recipient"])
        copy = recipient["config"]["continue_from"]
        # taken before the donor went on: compared now, before the donor's retention may prune its own
        donor, taken = load_state(record["donor_checkpoint"]), load_state(copy)
        assert donor["next"] == taken["next"] and set(donor["modules"]) == set(taken["modules"]) == {"agent"}
        for name, weights in donor["modules"]["agent"].items():
            assert torch.equal(weights, taken["modules"]["agent"][name]), name
        assert donor["optimizers"]["optimizer"]["state"].keys() == taken["optimizers"]["optimizer"]["state"].keys()
        new_lr = record["params"]["learning-rate"]
        assert recipient["config"]["params"]["learning-rate"] == new_lr
        assert new_lr in (record["donor_params"]["learning-rate"] * 0.5, record["donor_params"]["learning-rate"] * 2.0)
        sweep = _finished(client, "pbt-ppo", 600)
    assert all(m["state"] == P.SUCCEEDED for m in sweep["members"])
    events = _events(daemon, record["recipient"])
    seam = next(i for i, e in enumerate(events) if e["type"] == "restarted" and "pbt" in e)
    assert events[seam]["checkpoint"] == copy and events[seam]["pbt"]["donor"] == record["donor"]
    rates = [e for e in events[seam:] if e["type"] == "scalar" and e["tag"] == "charts/learning_rate"]
    # PPO anneals from args.learning_rate: lr = (1 - (update - 1) / updates) * learning-rate
    updates = 8192 // 512
    first = rates[0]
    frac = 1.0 - (first["step"] // 512 - 1) / updates
    assert first["value"] == pytest.approx(frac * new_lr, rel=1e-3), (first, new_lr)
    stderr = (daemon.run_dir(record["recipient"]) / "stderr.log").read_text()
    assert f"resumed from {copy}" in stderr
