"""A PBT sweep whose members are placed on a real Slurm cluster (tests/plugins/slurm_cluster.py): each
member a job, stopped at its interval through scancel's signal, the worse continued as the same run
(a new job) from a copy of the better's checkpoint, with the perturbed value."""
from __future__ import annotations

import pytest

from daemon import protocol as P
from tests.daemon.test_pbt import BASE, SPEC, _check_lineage, _finished
from tests.helpers import connect

pytest_plugins = ["tests.plugins.slurm_cluster"]
pytestmark = [pytest.mark.xdist_group("slurm")]


def test_a_pbt_sweep_on_slurm_places_its_members_there_and_applies_an_exploit(slurm_daemon, home):
    spec = {**SPEC, "name": "pbt-slurm",
            "base": {**BASE, "steps": 1200, "params": {"rate": 200, "episode_every": 20},
                     "placement": {"backend": "slurm", "cpus": 1}},
            "pbt": {"population": 2, "interval": 600, "quantile": 0.5, "mutations": {"gain": {"factors": [0.8, 1.2]}}}}
    with connect(home) as client:
        client.call(P.SWEEP, spec=spec)
        done = _finished(client, "pbt-slurm", 400)
        runs = [client.call(P.GET, run=m["id"]) for m in done["members"]]
    assert all(r["state"] == P.SUCCEEDED for r in runs), [(r["name"], r["state"], r["reason"]) for r in runs]
    for run in runs:   # each member a Slurm job on the cluster's node, continued as a new job of the same run
        assert run["config"]["placement"]["backend"] == "slurm" and run["resources"]["job"].startswith("slurm:")
        assert run["resources"]["node"] == slurm_daemon.node and run["restarts"] >= 1
    assert len(done["lineage"]) == 1 and "skipped" not in done["lineage"][0]   # one boundary: one exploit
    _check_lineage(home, done)
    record = done["lineage"][0]
    recipient = next(r for r in runs if r["id"] == record["recipient"])
    assert recipient["config"]["params"]["gain"] == record["params"]["gain"]
    assert recipient["config"]["continue_from"].endswith(f"pbt_g0_{record['donor_checkpoint'].rsplit('/', 1)[-1]}")
