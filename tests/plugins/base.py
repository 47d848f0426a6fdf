"""What the tests' private servers share: free ports on 127.0.0.1, a child that dies with the test
process, and `LocalCluster`, the start/wait/stop of a set of daemons under one temp dir whose
processes carry a marker in their environment (so stop() finds all of them, and only them)."""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from tests.helpers import kill_until_gone, processes_marked

PR_SET_PDEATHSIG = 1


def free_ports(n: int) -> list[int]:
    """n distinct free ports on 127.0.0.1 (bound together, so none repeats)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    """A free port on 127.0.0.1 (free now: a server started later may find it taken, rarely)."""
    return free_ports(1)[0]


def die_with_parent() -> None:
    """A ``preexec_fn``: the child gets SIGTERM when the test process dies without stopping it
    (killed by a timeout, SIGKILL). It holds for the process exec'd, so it must stay in the
    foreground (a daemon that forks away drops it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def tail(path: Path, lines: int = 30, title: str | None = None) -> str:
    """The end of a log file, headed by ``title`` (by default its name)."""
    title = title or path.name
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"--- {title}: none"
    body = "\n".join(text.splitlines()[-lines:])
    return f"--- {title} (last {lines} lines) ---\n{body or '(empty)'}"


class ClusterError(RuntimeError):
    pass


class LocalCluster:
    """Daemons started in the foreground under one temp dir (``root``), each in its own session,
    each with ``MARKER=root`` in its environment, which whatever they start inherits.

    A subclass names its ``MARKER``, ``error`` and ``prefix``, and writes ``_prepare_root`` (config
    files), ``_start_processes`` (``spawn`` and ``wait``), ``log_path`` and ``logs_tail``; its stop()
    ends its daemons its own way, then calls ``_forget`` (leftovers by marker, the temp dir)."""

    MARKER = "MOSAIC_LOCAL_CLUSTER"
    error: type[ClusterError] = ClusterError
    prefix = "cluster-"
    start_attempts = 2       # a port taken between choosing it and a daemon binding it: once more
    wait_interval = 0.1

    def __init__(self, start_timeout: float, parent_dir: str = "/tmp"):
        self.start_timeout = start_timeout
        self.parent_dir = parent_dir
        self.root: Path | None = None
        self.last_root: Path | None = None
        self.env: dict[str, str] = {}
        self.procs: dict[str, subprocess.Popen] = {}
        self.startup_seconds: float | None = None

    # -- what a subclass writes ------------------------------------------------------------
    def missing_reason(self) -> str | None:
        return None

    def foreign(self, name: str) -> bool:
        """An environment variable of the caller's that must not reach the cluster's processes."""
        return name == self.MARKER

    def _prepare_root(self) -> None:
        pass

    def _start_processes(self) -> None:
        raise NotImplementedError

    def _retry(self, error: ClusterError) -> bool:
        return True

    def log_path(self, name: str) -> Path:
        """Where process ``name``'s stdout and stderr go."""
        return self.root / f"{name}.out"

    def label(self, name: str) -> str:
        return name

    def logs_tail(self, lines: int = 30) -> str:
        return "\n".join(tail(self.log_path(name), lines, self.label(name)) for name in self.procs)

    def stop(self) -> None:
        self._forget()

    # -- start -------------------------------------------------------------------------------
    def start(self):
        reason = self.missing_reason()
        if reason:
            raise self.error(reason)
        t0 = time.monotonic()
        for attempt in range(self.start_attempts):
            self._prepare()
            try:
                self._start_processes()
                break
            except ClusterError as e:
                self.stop()
                if attempt == self.start_attempts - 1 or not self._retry(e):
                    raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def _prepare(self) -> None:
        # short: Unix sockets live under it (sun_path is 108 bytes)
        self.root = Path(tempfile.mkdtemp(prefix=self.prefix, dir=self.parent_dir))
        self.env = {k: v for k, v in os.environ.items() if not self.foreign(k)}
        self.env[self.MARKER] = str(self.root)
        self._prepare_root()

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Start a daemon in the foreground, in a session of its own, its output in ``log_path(name)``."""
        out = open(self.log_path(name), "wb")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env=self.env, cwd=self.root, start_new_session=True,
                                    preexec_fn=die_with_parent)
        finally:
            out.close()
        self.procs[name] = proc
        return proc

    def wait(self, what: str, ready: Callable[[], bool], timeout: float,
             last: Callable[[], str] = lambda: "") -> None:
        """Until ``ready()``; fails at once, with the logs, when a daemon exits meanwhile."""
        deadline = time.monotonic() + timeout
        while True:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise self.error(f"{self.label(name)} exited with status {proc.returncode} while waiting for "
                                     f"{what}\n" + self.logs_tail())
            if ready():
                return
            if time.monotonic() > deadline:
                raise self.error(f"timed out after {timeout:.0f}s waiting for {what} ({self.describe()}) "
                                 f"{last()}\n" + self.logs_tail())
            time.sleep(self.wait_interval)

    def describe(self) -> str:
        return f"root {self.root}"

    # -- stop --------------------------------------------------------------------------------
    def own_pids(self) -> set[int]:
        """Live processes of this cluster: its daemons and whatever carries its marker."""
        pids = {p.pid for p in self.procs.values() if p.poll() is None}
        if self.root is None:
            return pids
        return pids | processes_marked(self.MARKER, str(self.root))

    def _forget(self, rounds: int = 3) -> set[int]:
        """SIGKILL what is left of the cluster (by marker), remove its temp dir; the pids killed."""
        killed = kill_until_gone(self.own_pids, rounds)
        self.procs = {}
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
        self.last_root, self.root = self.root, None
        return killed

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
