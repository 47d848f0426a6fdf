"""A run placed on Slurm from the new-run form, in the real app in tmux, against a daemon whose
cluster runs go to the real single-node Slurm cluster (tests/plugins/slurm_cluster.py).

A first job holds every CPU of the node, so the form's run waits in Slurm's queue: the app says
`pending (Resources)` and the job's id, in the run's header and the runs table (at 80x24 too),
as `mosaic ls` and `mosaic show` do. Once the node is free, the run trains on it: `running`, the
node's name, the plot. `x` then `y` cancels it, and no process of the run is left."""
from __future__ import annotations

import os
import shutil
import uuid

import psutil
import pytest

from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import wait_for

pytest_plugins = ["tests.plugins.slurm_cluster"]
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("slurm"),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]

NAME = "ppo-on-slurm"


def row_of(screen: str, name: str) -> str:
    return next((line for line in screen.splitlines() if name in line), "")


def redrawn(pane: Tmux, height: int) -> str | None:
    """The pane's screen once the app has drawn itself at a new height: its title on the first line
    and its key bar on the last (tmux's cut or stretch of the old screen has one of them out of place)."""
    screen = pane.screen()
    lines = screen.splitlines()
    if len(lines) == height and lines[0].strip().startswith("mosaic") and lines[-1].strip():
        return screen
    return None


def processes_of(run_dir: str) -> list[psutil.Process]:
    """Live processes of the run: whose command line holds its directory, or that run in it (the
    job's supervisor and worker have it as their cwd)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status", "cwd"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(run_dir in part for part in proc.info["cmdline"] or []) or proc.info["cwd"] == run_dir:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_a_run_placed_on_slurm_from_the_form_waits_trains_and_is_cancelled(slurm_daemon, mosaic):  # noqa: F811
    cluster, home = slurm_daemon, mosaic.home
    # every CPU of the node taken: the form's run (one CPU) waits for resources
    blocker = cluster.sbatch(f"--cpus-per-task={cluster.cpus}", "--output=/dev/null", "--job-name=blocker",
                             "--wrap", "sleep 600")
    cluster.wait_job(blocker, states={"RUNNING"})
    pane = Tmux(f"mosaic-slurm-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(home))
        pane.wait_for("0 runs", timeout=60)
        pane.keys("n")
        pane.wait_for("Parameters of cleanrl ppo", "ready: ctrl+s submits", timeout=60)
        pane.keys("Tab", "Tab", "Tab")                 # worker -> algo -> env -> name
        pane.type(NAME)
        pane.keys("Tab")                               # -> steps
        pane.type("100000")                            # long enough to be cancelled while it trains
        pane.wait_for(NAME, "100000", "ready: ctrl+s submits")
        # back past the worker (the form, Back, Submit) to the last field: Placement's backend
        pane.keys(*["BTab"] * 8)
        pane.keys("Enter")                             # its choices: local, slurm, ray
        pane.keys("Down")
        pane.keys("Enter")
        screen = pane.wait_for("sbatch --partition", "sbatch --time", timeout=10)
        assert "slurm" in row_of(screen, "backend"), screen
        pane.keys(*["Tab"] * 6)                        # partition, account, cpus, mem, gpus -> time
        pane.type("30")
        # "ready" is on the screen already: wait for the typed value itself (a CI run caught the "3" alone)
        screen = wait_for(lambda: next((s for s in [pane.screen()] if "30" in row_of(s, " time ")), None), 10, 0.1,
                          what="the typed time in its row")
        assert "ready: ctrl+s submits" in screen, screen
        pane.keys("C-s")

        # the run's screen: Slurm holds it in its queue, and says why
        screen = pane.wait_for(NAME, "pending (", "slurm:", timeout=60)
        run = mosaic.show(NAME)
        assert run["config"]["placement"]["backend"] == "slurm" and run["config"]["placement"]["time"] == "30"
        assert run["state"] == "starting" and run["resources"]["queue"] == "PENDING"
        job = run["resources"]["job"]
        wait_for(lambda: mosaic.show(NAME)["resources"].get("queue_reason"), 30, 0.2, what="the pending reason")
        reason = mosaic.show(NAME)["resources"]["queue_reason"]
        assert reason in ("Resources", "Priority"), reason
        screen = pane.wait_for(f"pending ({reason})", job, timeout=30)
        # the CLI says the same
        listed = mosaic.run("ls", check=True).stdout
        assert f"pending ({reason})" in row_of(listed, NAME) and job in row_of(listed, NAME), listed
        shown = mosaic.run("show", NAME, check=True).stdout
        assert f"state: pending ({reason})" in shown and f"job: {job}" in shown, shown
        assert f"queue: PENDING ({reason})" in shown, shown

        # the runs table, at 80x24 too: the row keeps its state whole
        pane.keys("Escape")
        screen = pane.wait_for("1 run ", timeout=10)
        assert f"pending ({reason})" in row_of(screen, NAME) and job in row_of(screen, NAME), screen
        pane.tmux("resize-window", "-t", pane.name, "-x", "80", "-y", "24")
        screen = wait_for(lambda: redrawn(pane, 24), 20, 0.1, what="the app drawn again at 80x24")
        row = row_of(screen, NAME)
        assert f"pending ({reason})" in row and len(row.rstrip()) <= 80, screen
        assert all(len(line) <= 80 for line in screen.splitlines()), screen
        pane.tmux("resize-window", "-t", pane.name, "-x", "120", "-y", "40")
        wait_for(lambda: redrawn(pane, 40), 20, 0.1, what="the app drawn again at 120x40")
        pane.keys("Enter")                             # the run's screen again

        # the node is free: the run trains on it, and its plot comes
        cluster.run("scancel", blocker)
        screen = pane.wait_for(NAME, "running", f"{job} on {cluster.node}", timeout=120)
        screen = pane.wait_for("charts/episodic_return", "┤", timeout=180)
        run = mosaic.show(NAME)
        assert run["state"] == "running" and run["resources"]["node"] == cluster.node
        if run["resources"].get("ends_at"):            # the scheduler's end of the wall time: what is left
            assert " left" in pane.screen()
        shown = mosaic.run("show", NAME, check=True).stdout
        assert f"node: {cluster.node}" in shown and "state: running" in shown, shown
        run_dir = str(home.run_dir(run["id"]))
        assert processes_of(run_dir), "the run's processes are not found: the check after the cancel would prove nothing"

        # cancelled from the app: x, then y
        pane.keys("x")
        pane.wait_for(f"Cancel {NAME}?", "(y)", timeout=10)
        pane.keys("y")
        pane.wait_for("cancelled", timeout=120)
        wait_for(lambda: mosaic.show(NAME)["state"] == "cancelled", 60, 0.2, what="the run cancelled")
        wait_for(lambda: not processes_of(run_dir), 60, 0.5, what=f"no process of {run_dir} left")
        wait_for(lambda: cluster.job_state(job.split(":", 1)[1]) in ("COMPLETED", "CANCELLED"), 60, 0.5,
                 what="the job ended")
        assert os.path.exists(os.path.join(run_dir, "exit.json"))
    finally:
        pane.kill()
        cluster.run("scancel", blocker, check=False)
