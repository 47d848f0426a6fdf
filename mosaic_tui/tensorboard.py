"""`mosaic tensorboard RUN... | --sweep S`: the runs' telemetry as TensorBoard event files, and TensorBoard over them.

The daemon's store is the source: each run's scalars and episode tags (the same
points as `mosaic metrics`) are written as classic scalars with TensorBoard's own event
file writer under ``<home>/tensorboard/<run name>/``, one
directory a run, so TensorBoard names each run by its name. A run's directory
is written afresh each time (a finished run's file is complete; a live run's is
what it has logged so far). What a worker wrote itself into its run directory's
``tensorboard/`` (CleanRL's SummaryWriter) is served beside it as
``<run name>/worker``. TensorBoard is imported in this command's process only,
never in the daemon or the app.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemon import protocol as P
from daemon.home import TENSORBOARD_DIR, Home


def export_run(client, home: Home, run: dict[str, Any]) -> tuple[Path, int]:
    """Write one run's scalars as an event file; returns its directory and the number of points.

    Classic ``simple_value`` scalars, as torch's SummaryWriter (CleanRL's) writes them: every
    reader takes those (TensorBoard, ``EventAccumulator.Scalars``, tbparse, pandas exports),
    where the scalars plugin's tensors of ``tensorboard.summary.Writer`` are invisible to
    ``Scalars()`` and sampled down to 10 points by ``Tensors()``'s default size guidance."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    out = home.root / "tensorboard" / run["name"]
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    writer = EventFileWriter(str(out))
    points = 0
    offset = 0
    try:
        while True:
            page = client.call(P.METRICS, run=run["id"], **{"from": offset})
            for tag, series in page["points"].items():
                for step, value, wall in series:
                    if isinstance(value, (int, float)) and isinstance(step, int):
                        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
                        writer.add_event(Event(wall_time=wall, step=step, summary=summary))
                        points += 1
            if page["next"] >= page["end"] or page["next"] == offset:
                break
            offset = page["next"]
    finally:
        writer.close()
    return out, points


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def logdir_spec(home: Home, runs: list[dict[str, Any]]) -> str:
    """name:dir pairs: the exported scalars of each run, and the worker's own event files when there are some."""
    parts = []
    for run in runs:
        parts.append(f"{run['name']}:{home.root / 'tensorboard' / run['name']}")
        own = home.run_dir(run["id"]) / TENSORBOARD_DIR
        if own.is_dir() and any(own.iterdir()):
            parts.append(f"{run['name']}/worker:{own}")
    return ",".join(parts)


def launch(spec: str, port: int, tmp_dir: Path) -> subprocess.Popen:
    """TensorBoard on 127.0.0.1:port (the venv's own `tensorboard`). Its temp dir is ``tmp_dir`` (in
    the home): TensorBoard keeps a .tensorboard-info folder of its servers in the temp dir, which it
    never removes, and a killed one's info file in it."""
    exe = Path(sys.executable).with_name("tensorboard")
    command = [str(exe)] if exe.exists() else [sys.executable, "-P", "-m", "tensorboard.main"]
    tmp_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(command + ["--logdir_spec", spec, "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp_dir)})


def ssh_line(port: int) -> str:
    host = socket.gethostname()
    return f"ssh -N -L {port}:127.0.0.1:{port} {os.environ.get('USER', 'you')}@{host}"


def wait_http(port: int, timeout: float = 60.0) -> bool:
    import urllib.request
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/data/runs", timeout=2) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False
