"""The two-node Ray cluster the placement tests use (tests/plugins/ray_cluster.py): it starts, asks for
its token, places a job by a custom resource on its second node, and leaves no process behind."""
from __future__ import annotations

import urllib.error
import urllib.request

import pytest

pytest_plugins = ["tests.plugins.ray_cluster"]
pytestmark = [pytest.mark.xdist_group("ray")]


def test_two_nodes_a_token_and_a_job_on_the_second_node(ray_cluster):
    print(f"two-node Ray cluster up in {ray_cluster.startup_seconds:.1f} s")
    assert ray_cluster.startup_seconds < 60
    nodes = {n["node_id"]: n for n in ray_cluster.nodes() if n["state"] == "ALIVE"}
    assert set(ray_cluster.node_ids.values()) <= set(nodes)
    assert ray_cluster.resource in nodes[ray_cluster.node_ids["second"]]["resources_total"]
    # token auth is on: the Jobs API refuses a request without the cluster's token
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(ray_cluster.address + "/api/jobs/", timeout=10)
    assert refused.value.code == 401
    job = ray_cluster.request("POST", "/api/jobs/", {"entrypoint": "echo on-the-second-node",
                                                     "entrypoint_resources": {ray_cluster.resource: 1}})
    ended = ray_cluster.wait_job(job["submission_id"])
    assert ended["status"] == "SUCCEEDED", ended
    assert ended["driver_node_id"] == ray_cluster.node_ids["second"]


def test_stop_ends_every_process_of_the_cluster():
    from tests.plugins.ray_cluster import RayCluster, missing_reason
    if missing_reason():
        pytest.skip(missing_reason())
    cluster = RayCluster(head_cpus=1, node_cpus=1).start()
    root = cluster.root
    assert cluster.own_pids()
    cluster.stop()
    assert not root.exists()
    cluster.root = root   # own_pids looks for the marker of this root
    assert not cluster.own_pids()
    cluster.root = None
