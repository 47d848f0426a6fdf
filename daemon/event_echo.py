"""A Ray run whose home the nodes do not share (``placement.shared_home: false``): the job's
entrypoint, on the node; daemon/placement/ray_relay.py is the daemon's end of what it writes.

    python -m daemon.event_echo RUN_ID HOME_RUN_DIR -- python -m daemon.shim HOME_RUN_DIR ... -- worker...

It makes a node-local run directory, ``$MOSAIC_NODE_RUNS`` (else the node's temp dir's
``mosaic-runs``) ``/RUN_ID`` (one left there by an earlier job of the run is moved aside, so the
node's events file of a job always starts empty), writes the run's ``config.json`` there from the
job's ``MOSAIC_RUN_CONFIG_B64`` (the daemon carries it in the job's runtime_env), and runs the
supervisor command there: ``HOME_RUN_DIR`` in its arguments and environment (``MOSAIC_RUN_DIR``)
becomes the node directory, so nothing of the run writes to the home's path.

Meanwhile it follows the node's ``events.jsonl`` and writes each whole line to its stdout, which
is the job's log (Ray's ``job-driver-<id>.log`` on the node), as one log line::

    \\x1emosaic-event <byte offset of the line in the node's events.jsonl> <the line, without its newline>

When the supervisor has ended: the rest of the file (a last line without its newline, if the
worker died mid-line, as ``\\x1emosaic-eventpart <offset> <bytes>``), then the end of the
worker's stderr (``\\x1emosaic-stderr <base64>``, the bytes the daemon's failure reasons read)
and the supervisor's exit record (``\\x1emosaic-exit <exit.json, one line>``); it exits with the
supervisor's status. Ray's stop signals every process of the job: the supervisor gets its
SIGTERM and ends the worker's tree within its grace; this process passes the signal on to it and
goes on echoing until the supervisor has written its record, so a cancelled run's end reaches
the daemon too.

Standard library only.
"""
from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import tempfile
import time

MARK = b"\x1emosaic-"
EVENT = b"\x1emosaic-event "            # a whole line: offset, space, the line without its newline
EVENT_PART = b"\x1emosaic-eventpart "   # the file's last bytes, with no newline after them
STDERR = b"\x1emosaic-stderr "          # base64 of the end of the worker's stderr
EXIT = b"\x1emosaic-exit "              # the supervisor's exit record (JSON)
CONFIG_ENV = "MOSAIC_RUN_CONFIG_B64"    # the run's config.json, base64, in the job's env_vars
NODE_RUNS_ENV = "MOSAIC_NODE_RUNS"      # where the node's run directories go (else its temp dir)
STDERR_TAIL_BYTES = 16384               # what the daemon's stderr_tail reads of stderr.log
FOLLOW_SECONDS = 0.2


def node_runs_root() -> str:
    return os.environ.get(NODE_RUNS_ENV) or os.path.join(tempfile.gettempdir(), "mosaic-runs")


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(1, view)
        view = view[n:]


class Echo:
    def __init__(self, events_path: str):
        self.path = events_path
        self.offset = 0
        self.f = None

    def pump(self, final: bool = False) -> None:
        """Echo the whole lines written since the last call (``final``: and a last partial one)."""
        if self.f is None:
            try:
                self.f = open(self.path, "rb")
            except FileNotFoundError:
                return
        self.f.seek(self.offset)
        data = self.f.read()
        end = data.rfind(b"\n") + 1
        out = []
        start = 0
        while start < end:
            nl = data.index(b"\n", start)
            out.append(b"%s%d %s\n" % (EVENT, self.offset + start, data[start:nl]))
            start = nl + 1
        if final and end < len(data):
            out.append(b"%s%d %s\n" % (EVENT_PART, self.offset + end, data[end:]))
            end = len(data)
        if out:
            _write_all(b"".join(out))
        self.offset += end


def _moved_aside(path: str) -> None:
    if os.path.lexists(path):
        os.replace(path, f"{path}.{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")


def run(run_id: str, home_run_dir: str, command: list[str]) -> int:
    node_dir = os.path.join(node_runs_root(), run_id)
    os.makedirs(os.path.dirname(node_dir), exist_ok=True)
    _moved_aside(node_dir)
    for sub in ("", "checkpoints", "tensorboard"):
        os.makedirs(os.path.join(node_dir, sub), exist_ok=True)
    env = dict(os.environ)
    config = base64.b64decode(env.pop(CONFIG_ENV, "") or b"")
    with open(os.path.join(node_dir, "config.json"), "wb") as f:
        f.write(config)
    open(os.path.join(node_dir, "events.jsonl"), "ab").close()

    def here(value: str) -> str:
        if value == home_run_dir or value.startswith(home_run_dir.rstrip("/") + "/"):
            return node_dir + value[len(home_run_dir.rstrip("/")):]
        return value
    argv = [here(a) for a in command]
    env = {k: here(v) for k, v in env.items()}
    print(f"mosaic: run {run_id} in {node_dir} on this node (its home is not shared)", flush=True)
    with open(os.path.join(node_dir, "supervisor.log"), "ab") as out:
        shim = subprocess.Popen(argv, cwd=node_dir, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)

    def passed_on(signum, frame) -> None:   # Ray's stop: the supervisor ends the run; this echoes its end
        try:
            os.kill(shim.pid, signum)
        except ProcessLookupError:
            pass
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, passed_on)

    echo = Echo(os.path.join(node_dir, "events.jsonl"))
    while shim.poll() is None:
        echo.pump()
        time.sleep(FOLLOW_SECONDS)
    echo.pump(final=True)
    try:
        with open(os.path.join(node_dir, "stderr.log"), "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - STDERR_TAIL_BYTES))
            _write_all(STDERR + base64.b64encode(f.read()) + b"\n")
    except OSError:
        pass
    try:
        with open(os.path.join(node_dir, "exit.json"), "rb") as f:
            record = f.read().replace(b"\n", b" ").strip()
        _write_all(EXIT + record + b"\n")
    except OSError:
        pass
    return shim.returncode if shim.returncode >= 0 else 128 - shim.returncode


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or argv.index("--") != 2 or len(argv) < 4:
        print("usage: python -m daemon.event_echo RUN_ID HOME_RUN_DIR -- SUPERVISOR...", file=sys.stderr)
        return 2
    return run(argv[0], argv[1], argv[3:])


if __name__ == "__main__":
    sys.exit(main())
