"""daemon/record.py: a run record's placement, resources and cluster job, old records among them."""
from __future__ import annotations

from daemon.record import Job, backend_of, job_of, placement_of, resources_of

# a record as a daemon from before placements, cluster jobs and resources stored it
OLD_RECORD = {"id": "01J0", "name": "old-otter", "config": {"worker": "cleanrl", "algo": "ppo"},
              "resources": {}}


def slurm_run(job: str = "slurm:4242") -> dict:
    return {"id": "01J1", "config": {"placement": {"backend": "slurm", "partition": "gpu", "cpus": 4}},
            "resources": {"job": job, "queue": "RUNNING", "node": "n1"}}


def test_an_old_record_has_no_placement_no_resources_and_no_job():
    assert placement_of(OLD_RECORD) == {}
    assert backend_of(OLD_RECORD) == "local"
    assert resources_of(OLD_RECORD) == {}
    assert job_of(OLD_RECORD) is None


def test_a_record_whose_columns_are_null_or_missing_reads_as_empty():
    for run in ({"config": {"placement": None}, "resources": None}, {"config": None}, {},
                {"config": {"placement": "slurm"}, "resources": ["gpu"]}):
        assert (placement_of(run), backend_of(run), resources_of(run), job_of(run)) == ({}, "local", {}, None)


def test_a_cluster_record_gives_its_placement_resources_and_job():
    run = slurm_run()
    assert placement_of(run) == {"backend": "slurm", "partition": "gpu", "cpus": 4}
    assert backend_of(run) == "slurm"
    assert resources_of(run)["node"] == "n1"
    assert job_of(run) == Job("slurm", "4242")


def test_a_job_is_parsed_once_and_stored_as_it_always_was():
    job = Job.parse("ray:raysubmit_AbC:9")          # an id may hold a colon: the engine is the first part
    assert (job.engine, job.id) == ("ray", "raysubmit_AbC:9")
    assert str(job) == "ray:raysubmit_AbC:9"
    assert str(Job("slurm", "17")) == "slurm:17" and Job.parse(str(Job("slurm", "17"))) == Job("slurm", "17")


def test_a_stored_job_that_names_no_engine_and_id_is_no_job():
    for text in (None, "", "slurm", "slurm:", ":17", 17, {"engine": "slurm"}):
        assert Job.parse(text) is None, text
    assert job_of(slurm_run(job="")) is None
