"""The frames of a run on a Slurm node reach the Frames tab: inside the job, daemon.frame_spill
spills the newest frame of each stream into the run directory (the filesystem the node shares
with the login node), and the daemon's relay for a cluster run reads them from there, not from
shared memory. Real Slurm (tests/plugins/slurm_cluster.py), the real app through Pilot."""
from __future__ import annotations

import json
import re

import numpy as np
import psutil
import pytest

from tests.app.conftest import wait_until
from tests.helpers import wait_for

pytest_plugins = ["tests.plugins.slurm_cluster"]
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("slurm")]


def spillers(run_dir) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmd = proc.info["cmdline"] or []
        if "daemon.frame_spill" in cmd and str(run_dir) in cmd:
            found.append(proc)
    return found


async def test_a_slurm_runs_frames_are_spilled_by_the_job_and_drawn_in_the_frames_tab(slurm_daemon, mosaic,
                                                                                       tmp_path):
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.widgets.frames_view import FramesView
    home = mosaic.home
    # the "node" keeps its FastLane segments where the daemon does not look, as a real node's
    # /dev/shm is out of the login node's reach
    node_shm = tmp_path / "node-shm"
    node_shm.mkdir()
    config = tmp_path / "frames.json"
    config.write_text(json.dumps({"worker": "synthetic", "algo": "emit", "env": "none", "steps": 100000000,
                                  "params": {"rate": 100}, "frames": {"enabled": True, "fps": 20, "max_dim": 120},
                                  "placement": {"backend": "slurm", "cpus": 1,
                                                "extra_args": [f"--export=ALL,MOSAIC_SHM_DIR={node_shm}"]}}))
    rid = mosaic.submit(str(config))
    run_dir = home.run_dir(rid)
    spilled = run_dir / "frames" / "stream-0.json"
    try:
        wait_for(lambda: spilled.exists(), 90, 0.2, what="the job's first spilled frame")
        assert any(node_shm.iterdir()), "the worker's segment is in the node's shm dir"
        first = json.loads(spilled.read_text())["n"]
        wait_for(lambda: json.loads(spilled.read_text())["n"] > first, 10, 0.1, what="the spill going on")
        # the spiller runs in the job, a child of the run's supervisor (the batch step's process)
        supervisor = json.loads((run_dir / "supervisor.json").read_text())["supervisor_pid"]
        assert [p.ppid() for p in spillers(run_dir)] == [supervisor]
        app = MosaicApp(home, restore=False, remember=False, cursor_blink=False)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: rid in app.link.runs and app.link.connected, what="run listed")
            app.open_run(rid, tab="frames")
            # the tab's own view: no segment of the node's run here, so it asks the daemon's relay
            await wait_until(pilot, lambda: app.screen.query(FramesView) and
                             app.screen.query(FramesView).first().current is not None,
                             timeout=30, what="a frame from the node in the Frames tab")
            view = app.screen.query(FramesView).first()
            assert "relay" in str(view.header_text()), view.header_text()
            n, frame = view.current
            assert frame.dtype == np.uint8 and frame.ndim == 3 and max(frame.shape[:2]) <= 120
            assert n <= json.loads(spilled.read_text())["n"] and re.search(r"frame \d+", str(view.header_text()))
            await wait_until(pilot, lambda: view.current[0] > n, timeout=10, what="frames keep coming")
    finally:
        mosaic.run("cancel", rid)
    mosaic.run("wait", rid, "--timeout", "60")
    assert mosaic.show(rid)["state"] == "cancelled"
    wait_for(lambda: not spillers(run_dir), 10, 0.2, what="the spiller ended with the run")
