"""Shared model servers: the local LLM served once for the runs that ask for it (``served: shared``).

A run whose LLM spec says ``served: shared`` gets, before its supervisor starts, the llama.cpp
server of its key (model file, context size, threads: workers/sdk/llm/served.py): the one already
running, or a new one. Runs survive the daemon, so the server does too: it runs detached, in its
own session, and its record, ``<home>/model_servers/<key>.json``, holds its pid, port, key and the
runs using it; a new daemon reads the records and goes on from them. Once no live run uses a
server, it stops after ``GRACE_SECONDS`` (a continue does not load the model again). A server
that died is forgotten: its runs' calls say so in one line, and the next run start starts it again.

The daemon never imports llama_cpp: the server is a subprocess. The decisions (who still uses a
server, when it stops) are the pure functions at the top, unit-tested in
tests/unit/daemon/test_model_server.py.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Iterable

from daemon import proctree
from daemon.shim import write_json_atomic
from workers.sdk.llm import served

log = logging.getLogger("mosaic.model_server")

GRACE_SECONDS = 20.0      # a server no live run uses lives this long (a continue finds it loaded)
KILL_AFTER_SECONDS = 10.0  # a server asked to stop that is still there then is killed


# -- decisions ----------------------------------------------------------------------------------

def live_users(record: dict[str, Any], live: set[str]) -> list[str]:
    """The runs of a record that still run (a run that ended while no daemon watched drops out)."""
    return sorted(run for run in record.get("users", []) if run in live)


def with_users(record: dict[str, Any], users: Iterable[str], now: float) -> dict[str, Any]:
    """The record with these users; idle from ``now`` when it has none (or since it already was)."""
    users = sorted(set(users))
    idle = None if users else (record.get("idle_since") or now)
    return {**record, "users": users, "idle_since": idle}


def should_stop(record: dict[str, Any], live: set[str], now: float, grace: float = GRACE_SECONDS) -> bool:
    """Whether a server stops now: no live run uses it, and none has for ``grace`` seconds."""
    if live_users(record, live):
        return False
    idle = record.get("idle_since")
    return idle is not None and now - idle >= grace


def is_running(record: dict[str, Any]) -> bool:
    """Whether the record's server process is still the one it started (its pid and start time)."""
    pid = record.get("pid")
    return bool(pid) and proctree.is_alive(int(pid), record.get("pid_start"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the servers of one home ------------------------------------------------------------------

class ModelServers:
    """The shared model servers of one daemon home: started for runs, adopted, stopped when unused."""

    def __init__(self, home: str, grace_seconds: float = GRACE_SECONDS, nice: int = 10):
        self.home = home
        self.dir = os.path.join(home, served.SERVERS_DIR)
        self.grace_seconds = grace_seconds
        self.nice = nice
        self.children: dict[int, subprocess.Popen] = {}   # servers this daemon started: reaped here
        self.stopping: dict[int, tuple[int | None, float]] = {}   # pid -> (its start time, kill deadline)

    def records(self) -> dict[str, dict[str, Any]]:
        """key -> record, for every server on record."""
        out = {}
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return out
        for name in names:
            if name.endswith(".json"):
                record = served.read_record(self.home, name[:-5])
                if record is not None:
                    out[name[:-5]] = record
        return out

    def _write(self, key: str, record: dict[str, Any]) -> None:
        os.makedirs(self.dir, exist_ok=True)
        write_json_atomic(served.record_path(self.home, key), record)

    def _forget(self, key: str) -> None:
        try:
            os.unlink(served.record_path(self.home, key))
        except FileNotFoundError:
            pass

    def use(self, run_id: str, params: dict[str, Any]) -> str | None:
        """The servers a run's params ask for, running, with the run among their users; None, or
        the one line saying why a server could not start."""
        now = time.time()
        for key, what in served.servers_for(params).items():
            record = served.read_record(self.home, key)
            if record is None or not is_running(record):
                try:
                    record = self._start(key, what)
                except OSError as exc:
                    return f"cannot start the shared model server {key}: {exc}"
            self._write(key, with_users(record, [*record.get("users", []), run_id], now))
        return None

    def _start(self, key: str, what: dict[str, Any]) -> dict[str, Any]:
        port = free_port()
        command = served.server_command(sys.executable, what["model"], what["n_ctx"], what["n_threads"], port)
        os.makedirs(self.dir, exist_ok=True)
        with open(os.path.join(self.dir, f"{key}.log"), "ab") as out:
            popen = subprocess.Popen(["nice", "-n", str(self.nice), *command], stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                     cwd=self.dir)
        self.children[popen.pid] = popen
        log.info("shared model server %s started (pid %s, port %s)", key, popen.pid, port)
        return {"key": key, "pid": popen.pid, "pid_start": proctree.start_time(popen.pid), "port": port,
                "model": what["model"], "n_ctx": what["n_ctx"], "n_threads": what["n_threads"],
                "started_at": time.time(), "users": [], "idle_since": None}

    def release(self, run_id: str) -> None:
        """A run ended: it no longer holds its servers (each stops once idle for the grace period)."""
        now = time.time()
        for key, record in self.records().items():
            if run_id in record.get("users", []):
                self._write(key, with_users(record, [u for u in record["users"] if u != run_id], now))

    def sweep(self, live: set[str]) -> None:
        """Every few seconds, and on adoption: users that no longer run drop out, idle servers past
        their grace stop, dead servers are forgotten (their runs' calls say so), stopped ones reaped."""
        now = time.time()
        for key, record in self.records().items():
            if not is_running(record):
                users = live_users(record, live)
                if users:
                    log.warning("shared model server %s (pid %s) ended; runs %s lost their model", key,
                                record.get("pid"), ", ".join(users))
                self._forget(key)
                continue
            updated = with_users(record, live_users(record, live), now)
            if should_stop(updated, live, now, self.grace_seconds):
                self._stop(key, updated)
            elif updated != record:
                self._write(key, updated)
        self._reap(now)

    def _stop(self, key: str, record: dict[str, Any]) -> None:
        log.info("shared model server %s (pid %s) stopped: no run used it for %.0f s", key, record["pid"],
                 self.grace_seconds)
        self._forget(key)   # first: a run starting now starts a new one rather than find this one ending
        try:
            os.killpg(int(record["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            return
        self.stopping[int(record["pid"])] = (record.get("pid_start"), time.time() + KILL_AFTER_SECONDS)

    def _reap(self, now: float) -> None:
        for pid, popen in list(self.children.items()):
            if popen.poll() is not None:
                del self.children[pid]
        for pid, (start, deadline) in list(self.stopping.items()):
            if not proctree.is_alive(pid, start):
                del self.stopping[pid]
            elif now >= deadline:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                del self.stopping[pid]

    def close(self, live: set[str]) -> None:
        """The daemon ends: servers its surviving runs use run on; the others stop now."""
        for key, record in self.records().items():
            if is_running(record) and not live_users(record, live):
                self._stop(key, with_users(record, [], time.time()))
