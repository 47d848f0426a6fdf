"""FastLane through the daemon: frames relayed over the socket, segments removed when a run ends."""
from __future__ import annotations

import json
import os
import signal

from daemon import protocol as P
from daemon.protocol import decode_frame as decode
from tests.helpers import connect, wait_for, wait_state
from workers.fastlane import layout


def _frames_run(c, steps=10_000_000, rate=500):
    return c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": steps,
                                    "params": {"rate": rate}, "frames": {"enabled": True, "fps": 20, "max_dim": 200}})


def test_frames_are_relayed_and_the_segment_goes_with_the_run(daemon):
    with connect(daemon) as c:
        run = _frames_run(c)
        wait_state(daemon, run["id"], P.RUNNING)
        wait_for(lambda: layout.run_files(run["id"]), 30, what="the run's segment")
        assert c.call(P.FRAMES, run=run["id"], fps=10, max_dim=64) == {"relaying": True, "fps": 10.0, "max_dim": 64}
        frames = []
        for method, params in c.notifications(timeout=10):
            if method == P.NOTIFY_FRAME:
                frames.append(params)
            if len(frames) >= 3:
                break
        assert len(frames) == 3
        numbers = [f["n"] for f in frames]
        assert numbers == sorted(numbers) and len(set(numbers)) == 3  # newer frames only
        pixels = decode(frames[-1])
        assert pixels.shape == (frames[-1]["height"], frames[-1]["width"], 3)
        assert max(pixels.shape[:2]) <= 64 and pixels.std() > 0
        assert c.call(P.FRAMES, run=run["id"], fps=0) == {"relaying": False}
        # SIGKILL: the worker cannot clean up; the daemon does
        sup = json.loads((daemon.run_dir(run["id"]) / "supervisor.json").read_text())
        os.kill(sup["worker_pid"], signal.SIGKILL)
        wait_state(daemon, run["id"], P.FAILED)
        assert layout.run_files(run["id"]) == []
        assert not any(run["id"] in name for name in os.listdir(layout.SHM_DIR))


def test_frames_of_a_finished_run_and_bad_parameters(daemon):
    with connect(daemon) as c:
        run = _frames_run(c, steps=300, rate=0)
        wait_state(daemon, run["id"], P.SUCCEEDED)
        assert layout.run_files(run["id"]) == []
        try:
            c.call(P.FRAMES, run=run["id"], max_dim=5)
            raise AssertionError("accepted max_dim=5")
        except P.RPCError as err:
            assert err.code == P.INVALID_PARAMS and "max_dim" in err.message
