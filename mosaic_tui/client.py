"""Clients of the daemon: a blocking one for the CLI, an asyncio one for the app.

Both speak the wire defined in ``daemon.protocol`` and find the socket through
``daemon.home``; ``connect`` starts a daemon for the home when none answers (``start_daemon``).
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import os
import socket
import subprocess
import sys
import time
from typing import Any, AsyncIterator, Callable, Iterator

from daemon import protocol as P
from daemon.home import Home
from daemon.version import version

log = logging.getLogger("mosaic.app.client")

START_TIMEOUT = 20.0
READ_SLICE = 0.005        # seconds of notification handling before the loop is let go


class DaemonUnavailable(ConnectionError):
    """No daemon answers on the home's socket."""


def older_daemon(home: Home, info: dict[str, Any], method: str) -> P.RPCError:
    """What a client says when the daemon lacks a method this one knows: a daemon started before
    an upgrade (a `git pull`) runs the old code until it is restarted, its runs with it."""
    theirs = f"version {info['version']}" if info.get("version") else "a version from before daemons said theirs"
    how = ("`mosaic daemon restart` starts it again as this version" if home.own_daemon
           else "restart it where it runs (`mosaic daemon restart` there)")
    return P.RPCError(P.METHOD_NOT_FOUND, f"the daemon for {home.where} (pid {info.get('pid', '?')}, {theirs}) is older "
                                          f"than this mosaic ({version()}) and has no {method!r}: {how}; its runs keep "
                                          f"training and are re-adopted")


def knows(info: dict[str, Any], method: str) -> bool:
    """Whether the daemon that answered hello with ``info`` has ``method`` (one from before hello
    listed them is asked, and its METHOD_NOT_FOUND answers)."""
    methods = info.get("methods")
    return methods is None or method in methods or method not in P.METHODS


class Client:
    """Blocking client. Notifications that arrive while waiting for a reply are kept."""

    def __init__(self, home: Home, timeout: float | None = 30.0, name: str = "mosaic-cli"):
        self.home = home
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        for attempt in range(50):
            try:
                self.sock.connect(str(home.socket_path))
                break
            except BlockingIOError:  # the daemon's accept queue is full for a moment
                time.sleep(0.02 * (attempt + 1))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                self.sock.close()
                raise DaemonUnavailable(f"no daemon for {home.where}") from exc
        else:
            self.sock.close()
            raise DaemonUnavailable(f"the daemon for {home.where} accepts no connection")
        self._ids = itertools.count(1)
        self._partial = b""
        self._lines: collections.deque[bytes] = collections.deque()
        self.pending: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self.info = self.call(P.HELLO, protocol=P.PROTOCOL_VERSION, client=name)

    def close(self) -> None:
        """Close the socket (the daemon forgets this client's subscriptions)."""
        self.sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_line(self) -> bytes:
        # A large answer (the list of 10,000 runs is ~20 MB, a page of a long run 4 MB)
        # arrives in many reads: its pieces are joined once, when its newline has come
        # (a newline ends a message: JSON text holds none).
        if self._lines:
            return self._lines.popleft()
        pieces = [self._partial]
        while True:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the daemon closed the connection")
            nl = data.find(b"\n")
            if nl < 0:
                pieces.append(data)
                continue
            pieces.append(data[:nl])
            line = b"".join(pieces)
            rest = data[nl + 1:].split(b"\n")
            self._partial = rest.pop()
            self._lines.extend(rest)
            return line

    def _read_message(self) -> dict[str, Any]:
        return P.loads(self._read_line())

    def call(self, method: str, **params: Any) -> Any:
        """Send one request and wait for its result (notifications meanwhile wait in ``pending``); an
        error reply is raised as RPCError, a method the daemon does not know says the daemon is older."""
        info = getattr(self, "info", None) or {}
        if not knows(info, method):
            raise older_daemon(self.home, info, method)
        try:
            return self.result(self.request(method, **params))
        except P.RPCError as err:
            if err.code == P.METHOD_NOT_FOUND and method in P.METHODS:
                raise older_daemon(self.home, info, method) from None
            raise

    def request(self, method: str, **params: Any) -> int:
        """Send a request without waiting for its answer (``result`` reads it): a caller
        that pages through a long run asks for the next page before it works on this one."""
        req_id = next(self._ids)
        self.sock.sendall(P.request(req_id, method, params))
        return req_id

    def result(self, req_id: int, events_raw: bool = False) -> Any:
        """The answer to request ``req_id`` (answers to earlier requests are skipped).

        ``events_raw``: the answer to a ``read_events`` page with ``raw``, whose events the
        daemon splices in as the file's lines (they come last): they stay undecoded, as
        ``events_raw``, the bytes between the list's brackets, and the rest is decoded."""
        while True:
            line = self._read_line()
            if events_raw:
                page = P.split_raw_events_result(line, req_id)
                if page is not None:
                    return page
            msg = P.loads(line)
            if "id" not in msg and "method" in msg:
                self.pending.append((msg["method"], msg.get("params", {})))
                continue
            if msg.get("id") != req_id:
                if msg.get("id") is None and "error" in msg:
                    err = msg["error"]
                    raise P.RPCError(err.get("code", P.INTERNAL_ERROR), err.get("message", "error"), err.get("data"))
                continue
            if "error" in msg:
                err = msg["error"]
                raise P.RPCError(err.get("code", P.INTERNAL_ERROR), err.get("message", "error"), err.get("data"))
            return msg.get("result")

    def notifications(self, timeout: float | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield (method, params) of server pushes; stops after timeout seconds of silence."""
        self.sock.settimeout(timeout)
        while True:
            while self.pending:
                yield self.pending.popleft()
            try:
                msg = self._read_message()
            except (socket.timeout, TimeoutError):
                return
            if "method" in msg and "id" not in msg:
                yield msg["method"], msg.get("params", {})


# -P: the working directory is not put first on sys.path, so a file there named like a module
# (an inspect.py, a json.py of the user's) cannot shadow it in the processes started from here
PYTHON = [sys.executable, "-P"]


def cli_command(home: Home, *args: str) -> list[str]:
    """argv of `mosaic ARGS` for this home, as the app runs it in a process of its own."""
    cmd = [*PYTHON, "-m", "mosaic_tui.cli", "--home", str(home.root)]
    if home.socket is not None:
        cmd += ["--socket", str(home.socket)]
    return cmd + list(args)


def daemon_command(home: Home, max_runs: int | None = None) -> list[str]:
    cmd = [*PYTHON, "-m", "daemon", "--home", str(home.root)]
    if home.socket is not None:
        cmd += ["--socket", str(home.socket)]
    if max_runs:
        cmd += ["--max-runs", str(max_runs)]
    return cmd


def start_daemon(home: Home, max_runs: int | None = None, timeout: float = START_TIMEOUT) -> dict[str, Any]:
    """Start a detached daemon for home (own session, output to logs/daemon.log)
    and wait until it answers. If another daemon wins the race, use that one."""
    home.ensure()
    with open(home.daemon_log, "ab") as out:
        log_start = out.seek(0, os.SEEK_END)
        proc = subprocess.Popen(daemon_command(home, max_runs), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                cwd=str(home.root))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with Client(home, timeout=5) as client:
                return client.info
        except (DaemonUnavailable, ConnectionError, OSError):
            pass
        code = proc.poll()
        if code is not None and code != 3:  # 3: another daemon holds the lock; wait for it
            raise DaemonUnavailable(_refusal(home, log_start)
                                    or f"the daemon exited with code {code}; see {home.daemon_log}")
        time.sleep(0.05)
    raise DaemonUnavailable(f"the daemon did not answer within {timeout:.0f}s; see {home.daemon_log}")


def _refusal(home: Home, log_start: int) -> str | None:
    """The one-line reason a daemon that refused to start gave (a bad setting), if it wrote one
    to its log after log_start."""
    try:
        with open(home.daemon_log, "rb") as f:
            f.seek(log_start)
            lines = f.read(65536).decode(errors="replace").splitlines()
    except OSError:
        return None
    last = lines[-1] if lines else ""
    return last.removeprefix("mosaic: error: ") if last.startswith("mosaic: error: ") else None


def connect(home: Home, autostart: bool = True, name: str = "mosaic-cli", timeout: float | None = 30.0) -> Client:
    try:
        return Client(home, timeout=timeout, name=name)
    except DaemonUnavailable:
        if not autostart:
            raise
        if home.socket is not None:
            # a socket given by the user may be a forwarded one: its daemon is not ours to start
            raise DaemonUnavailable(f"no daemon answers on {home.where}") from None
    start_daemon(home)
    return Client(home, timeout=timeout, name=name)


class AsyncClient:
    """asyncio client: requests are awaited, notifications go to ``on_notify``."""

    def __init__(self, home: Home, on_notify: Callable[[str, dict[str, Any]], None] | None = None,
                 name: str = "mosaic-app"):
        self.home = home
        self.name = name
        self.on_notify = on_notify or (lambda method, params: None)
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future] = {}
        self._reader_task: asyncio.Task | None = None
        self.info: dict[str, Any] = {}
        self.closed = asyncio.Event()
        self._reading = asyncio.Event()    # cleared: the reader holds off (the app is behind)
        self._reading.set()

    def pause_reading(self) -> None:
        """Read nothing more until ``resume_reading``: what the daemon sends waits in the socket and
        then in the daemon, which holds a congested client's backlog back (it keeps its cursor).
        The transport stops too: the stream's own buffer would otherwise take in up to twice its
        limit (128 MB) before it paused itself."""
        self._reading.clear()
        if self.writer is not None:
            self.writer.transport.pause_reading()

    def resume_reading(self) -> None:
        """Read again after ``pause_reading``."""
        self._reading.set()
        if self.writer is not None and not self.writer.transport.is_closing():
            self.writer.transport.resume_reading()

    async def connect(self) -> dict[str, Any]:
        """Open the socket, start the read loop and say hello; the daemon's hello (DaemonUnavailable
        if none answers)."""
        try:
            self.reader, self.writer = await asyncio.open_unix_connection(str(self.home.socket_path),
                                                                          limit=64 * 1024 * 1024)
        except (FileNotFoundError, ConnectionRefusedError) as exc:
            raise DaemonUnavailable(f"no daemon for {self.home.where}") from exc
        self.closed.clear()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())
        self.info = await self.call(P.HELLO, protocol=P.PROTOCOL_VERSION, client=self.name)
        return self.info

    async def _read_loop(self) -> None:
        # readline() does not give the loop up while lines are buffered: under a
        # telemetry flood this loop could run for seconds and starve the app's
        # key handling. Every READ_SLICE seconds of work it lets others run.
        slice_start = time.monotonic()
        try:
            while True:
                if time.monotonic() - slice_start > READ_SLICE:
                    await asyncio.sleep(0)
                    slice_start = time.monotonic()
                if not self._reading.is_set():
                    await self._reading.wait()
                line = await self.reader.readline()
                if not line:
                    break
                msg = P.loads(line)
                if "id" in msg and msg["id"] in self._waiting:
                    fut = self._waiting.pop(msg["id"])
                    if fut.done():
                        continue
                    if "error" in msg:
                        err = msg["error"]
                        fut.set_exception(P.RPCError(err.get("code", P.INTERNAL_ERROR),
                                                     err.get("message", "error"), err.get("data")))
                    else:
                        fut.set_result(msg.get("result"))
                elif "method" in msg:
                    self.on_notify(msg["method"], msg.get("params", {}))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:   # a line that is not JSON, a notification handler's bug: not silently
            log.exception("the daemon's connection is given up")
        finally:
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the daemon went away"))
            self._waiting.clear()
            if self.writer is not None:
                # nobody reads this socket any more: close it, or it stays open (paused, when the
                # link held it) with the daemon's bytes piling up unread in it
                self.writer.close()
            self.closed.set()

    async def call(self, method: str, **params: Any) -> Any:
        """One request's result, awaited (notifications go to ``on_notify`` meanwhile); an error reply
        is raised as RPCError, a method the daemon does not know says the daemon is older."""
        if self.writer is None or self.closed.is_set() and self._reader_task is not None and self._reader_task.done():
            raise ConnectionError("not connected to the daemon")
        if not knows(self.info, method):
            raise older_daemon(self.home, self.info, method)
        try:
            return await self._call(method, params)
        except P.RPCError as err:
            if err.code == P.METHOD_NOT_FOUND and method in P.METHODS:
                raise older_daemon(self.home, self.info, method) from None
            raise

    async def _call(self, method: str, params: dict[str, Any]) -> Any:
        req_id = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._waiting[req_id] = fut
        try:
            self.writer.write(P.request(req_id, method, params))
            await self.writer.drain()
        except BaseException:
            # the request never went (the daemon died mid-write, or we were
            # cancelled): no one will await this future, so it must not get the
            # read loop's "went away" exception ("exception never retrieved")
            self._waiting.pop(req_id, None)
            fut.cancel()
            raise
        return await fut

    async def close(self) -> None:
        """Close the connection and stop the read loop."""
        if self.writer is not None:
            self.writer.close()
        if self._reader_task is not None:
            self._reader_task.cancel()


async def read_all_metrics(client: AsyncClient, run: str, tags: list[str] | None = None) -> AsyncIterator[dict]:
    """Page through a run's scalars from the start of its file."""
    offset = 0
    while True:
        page = await client.call(P.METRICS, run=run, tags=tags, **{"from": offset})
        yield page
        if page["next"] >= page["end"] or page["next"] == offset:
            return
        offset = page["next"]
