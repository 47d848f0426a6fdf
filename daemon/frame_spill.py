"""Live frames of a run whose worker runs on another machine (a cluster node), through the run
directory on the filesystem both machines share.

FastLane's segments are in the node's /dev/shm, which the daemon on the login node cannot map.
So a cluster run with frames starts, inside its job, ``python -m daemon.frame_spill RUN_DIR``
beside its supervisor (daemon/runs.py wraps the job's command: the spiller is the supervisor's
child, ended with the run's tree like any other). Every 1/fps s it takes the newest frame of each
of the run's streams on the node (daemon.relay.Relay: downscaled, zlib, base64: the ``frame``
notification's own params) and replaces ``RUN_DIR/frames/stream-<k>.json`` with it (written
whole, then renamed). The daemon's relay for that run reads those files instead of shared memory
(``SpilledRelay``), and sends them on unchanged: the frames tab, ``mosaic watch`` and remote
clients see a node's frames as they see a local run's, at the spill's rate.

Both ends are here. The spiller imports numpy (through the relay); the daemon's side does not.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

FRAMES_DIR = "frames"     # in the run directory
SPILL_FPS = 5.0           # default rate: a shared filesystem is written a few times a second, no more
MAX_SPILL_FPS = 10.0


def spill_path(run_dir: str, stream: int) -> str:
    return os.path.join(run_dir, FRAMES_DIR, f"stream-{stream}.json")


def spill_command(python: str, run_dir: str, fps: float, max_dim: int) -> list[str]:
    """The spiller's command line, for the job."""
    return [python, "-m", "daemon.frame_spill", run_dir, "--fps", f"{min(fps, MAX_SPILL_FPS):g}",
            "--max-dim", str(max_dim)]


def with_spiller(spiller: list[str], command: list[str]) -> list[str]:
    """``command`` run by a shell that first starts ``spiller`` in the background and then becomes
    ``command`` (exec): the spiller is the command's child, in its process tree."""
    import shlex
    return ["/bin/sh", "-c", f"{shlex.join(spiller)} </dev/null >/dev/null 2>&1 & exec \"$@\"", "sh", *command]


class SpilledRelay:
    """The daemon's side: the newest spilled frame of one run and stream, as ``Relay.next_frame``
    gives a local run's (``max_dim`` is the spiller's, fixed in the job)."""

    def __init__(self, run_dir: str, stream: int):
        self.path = spill_path(run_dir, stream)
        self.last_mtime: int | None = None
        self.last_n: int | None = None

    def next_frame(self) -> dict[str, Any] | None:
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime == self.last_mtime:
                return None
            with open(self.path, "rb") as f:
                frame = json.loads(f.read())
        except (OSError, ValueError):
            return None
        self.last_mtime = mtime
        if frame.get("n") == self.last_n:
            return None
        self.last_n = frame.get("n")
        return frame

    def close(self) -> None:
        pass


def _streams_here(run_id: str) -> list[int]:
    from workers.fastlane import layout
    pattern = layout.name_pattern(run_id)
    found = []
    try:
        names = os.listdir(layout.SHM_DIR)
    except OSError:
        return []
    for name in names:
        m = pattern.match(name)
        if m and not m.group(2):
            found.append(int(m.group(1)))
    return sorted(found)


def spill(run_dir: str, fps: float, max_dim: int) -> int:
    from daemon.relay import Relay
    run_dir = os.path.abspath(run_dir)
    run_id = os.path.basename(run_dir.rstrip(os.sep))
    parent = os.getppid()   # the supervisor: when it is gone, so is the run
    os.makedirs(os.path.join(run_dir, FRAMES_DIR), exist_ok=True)
    relays: dict[int, Relay] = {}
    period = 1.0 / max(0.1, min(fps, MAX_SPILL_FPS))
    while os.getppid() == parent:
        for stream in _streams_here(run_id):
            if stream not in relays:
                relays[stream] = Relay(run_id, stream, max_dim)
        for stream, relay in relays.items():
            try:
                frame = relay.next_frame()
            except Exception:  # noqa: BLE001 -- a segment being replaced: the next pass reads the new one
                frame = None
            if frame is None:
                continue
            path = spill_path(run_dir, stream)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump(frame, f)
            os.replace(tmp, path)
        time.sleep(period)
    for relay in relays.values():
        relay.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon.frame_spill",
                                     description="spill a run's newest frames into its run directory")
    parser.add_argument("run_dir")
    parser.add_argument("--fps", type=float, default=SPILL_FPS)
    parser.add_argument("--max-dim", type=int, default=320)
    args = parser.parse_args(argv)
    return spill(args.run_dir, args.fps, args.max_dim)


if __name__ == "__main__":
    sys.exit(main())
