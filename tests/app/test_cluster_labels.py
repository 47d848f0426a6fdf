"""The scheduler's view of a cluster run (docs/cluster.md), from its record's resources: the state
every view shows ("pending (Priority)" while Slurm holds the job), its job, node and the wall time
left, in the runs table, its detail line, the run screen's header, `mosaic ls` and `mosaic show`.
A local run looks as it did."""
from __future__ import annotations

import copy

import pytest

from tests.app.conftest import FIXED_NOW, fixed_runs, load_fixed, make_app, screen_text, wait_until

NOW = FIXED_NOW


def cluster_run(queue: str = "PENDING", state: str = "starting", **resources) -> dict:
    run = copy.deepcopy(fixed_runs()[1])          # bravo: running, 4200/10000 steps
    run.update(state=state, name="on-slurm", id="01M8000000000000000000000S")
    run["resources"] = {"job": "slurm:123", "queue": queue, **resources}
    return run


def test_a_pending_job_says_pending_and_why():
    from mosaic_tui import fmt
    run = cluster_run(queue_reason="Priority")
    assert fmt.queue_label(run) == "pending (Priority)"
    assert fmt.state_label(run) == "pending (Priority)"
    assert fmt.state_label({**run, "cancel_requested": True}) == "pending (Priority)*"
    del run["resources"]["queue_reason"]
    assert fmt.state_label(run) == "pending"
    assert fmt.job_text(run, NOW) == "slurm:123"          # no node yet, no time running out


def test_a_job_on_its_node_says_the_daemons_state_node_and_time_left():
    from mosaic_tui import fmt
    # the reason Slurm gave while it was pending stays in resources: no longer shown
    run = cluster_run("RUNNING", "running", queue_reason="Priority", node="c1", ends_at=NOW + 7083,
                      time_limit="2:00:00")
    assert fmt.state_label(run) == "running"
    assert fmt.time_left(run, NOW) == 7083
    assert fmt.job_text(run, NOW) == "slurm:123 on c1 1:58:03 left"
    starting = cluster_run("RUNNING", "starting", node="c1")     # on its node, the worker starting
    assert fmt.state_label(starting) == "starting" and fmt.job_text(starting, NOW) == "slurm:123 on c1"
    ended = cluster_run("COMPLETED", "succeeded", node="c1", ends_at=NOW + 50)
    ended["ended_at"] = NOW - 10
    assert fmt.state_label(ended) == "succeeded" and fmt.time_left(ended, NOW) is None
    assert fmt.job_text(ended, NOW) == "slurm:123 on c1"
    late = cluster_run("RUNNING", "running", node="c1", ends_at=NOW - 5)
    assert fmt.job_text(late, NOW) == "slurm:123 on c1 0:00:00 left"
    assert fmt.hms(26 * 3600 + 61) == "26:01:01"
    assert fmt.derived(run, NOW)["time_left_s"] == 7083


def test_a_local_run_shows_nothing_of_a_scheduler():
    from mosaic_tui import fmt
    for run in fixed_runs():
        assert fmt.job(run) is None and fmt.job_text(run, NOW) == "" and fmt.queue_label(run) is None
        assert fmt.state_label(run) == run["state"]
        assert "time_left_s" not in fmt.derived(run, NOW)
    # the daemon's own resources of a local run (a GPU, CPU set) are no job
    local = {**fixed_runs()[1], "resources": {"gpu": "0", "cpus": [0, 1]}}
    assert fmt.job(local) is None and fmt.state_label(local) == "running"


def test_the_runs_table_row_and_filter():
    from mosaic_tui.runs_model import COLUMN_KEYS, matches, row_cells
    run = cluster_run(queue_reason="Resources")
    cells = dict(zip(COLUMN_KEYS, row_cells(run, False, NOW)))
    assert cells["state"].text == "pending (Resources)" and cells["state"].style == "yellow"
    assert cells["job"].text == "slurm:123"
    local = dict(zip(COLUMN_KEYS, row_cells(fixed_runs()[1], False, NOW)))
    assert local["job"].text == "" and local["state"].text == "running"
    running = cluster_run("RUNNING", "running", node="c1")
    assert matches(running, "slurm c1") and matches(running, "slurm:123") and not matches(fixed_runs()[1], "slurm")


def test_the_run_header_and_the_detail_line():
    from mosaic_tui.screens.run import header_text
    from mosaic_tui.screens.runs import detail_text
    run = cluster_run(queue_reason="Priority")
    assert "on-slurm  pending (Priority)  return" in header_text(run, NOW).plain
    assert "slurm:123" in header_text(run, NOW).plain
    assert "pending (Priority)  slurm:123" in detail_text(run, NOW, 20).plain
    running = cluster_run("RUNNING", "running", node="c1", ends_at=NOW + 60)
    assert "slurm:123 on c1 0:01:00 left" in header_text(running, NOW).plain
    local = fixed_runs()[1]
    assert "slurm" not in header_text(local, NOW).plain + detail_text(local, NOW, 20).plain


def test_mosaic_shows_job_lines_only_for_a_cluster_run():
    from mosaic_tui.cli.runs import _job_fields
    assert _job_fields(fixed_runs()[1]) == []
    run = cluster_run(queue_reason="Resources", time_limit="2:00:00")
    assert _job_fields(run) == [("job", "slurm:123"), ("queue", "PENDING (Resources)"), ("node", None),
                                ("wall time", "2:00:00")]
    import time
    running = cluster_run("RUNNING", "running", node="c1", ends_at=time.time() + 3600.5, time_limit="2:00:00")
    fields = dict(_job_fields(running))
    assert fields["queue"] == "RUNNING" and fields["node"] == "c1"
    assert fields["wall time"] in ("1:00:00 left of 2:00:00", "0:59:59 left of 2:00:00")


@pytest.mark.anyio
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_runs_table_shows_the_job_and_a_local_table_is_unchanged(home, size):
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        await load_fixed(pilot, app)
        header = next(line for line in screen_text(app).splitlines() if "progress" in line)
        assert " job " not in header                               # no cluster run: no job column
        running = cluster_run("RUNNING", "running", node="c1", ends_at=NOW + 7083)
        pending = cluster_run(queue_reason="Resources")
        pending.update(id="01M8000000000000000000000T", name="waits")
        app.link.load(fixed_runs() + [running, pending], rev=30)
        app.link.flush()
        await wait_until(pilot, lambda: "waits" in screen_text(app), what="the cluster runs")
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        row = next(line for line in lines if "waits" in line)
        assert "pending (Resources)" in row and len(row) == size[0]
        bravo = next(line for line in lines if "bravo" in line)
        assert "running" in bravo and "42%" in bravo               # the local rows keep their figures
        if size[0] >= 120:
            assert " job " in next(line for line in lines if "progress" in line)
            assert "slurm:123 on c1 1:58:03 left" in next(line for line in lines if "on-slurm" in line)


def test_a_ray_job_pending_on_resources_is_short_in_the_state_and_whole_in_the_header_and_show():
    from mosaic_tui.cli.runs import _job_fields
    from mosaic_tui.screens.run import header_text
    from mosaic_tui.screens.runs import detail_text
    message = ("Job has not started yet. It may be waiting for resources (CPUs, GPUs, memory, custom resources) "
               "to become available. It may be waiting for the runtime environment to be set up.")
    run = cluster_run(queue_reason="resources", queue_message=message)
    run["resources"]["job"] = "ray:mosaic-01M8-a1b2c3"
    header = header_text(run, NOW).plain
    assert "on-slurm  pending (resources)  return" in header and header.endswith(message), header
    assert "pending (resources)  ray:" in detail_text(run, NOW, 20).plain
    assert dict(_job_fields(run))["queue says"] == message
    assert ("queue says", message) == _job_fields(run)[2]
