"""The daemon's socket server: clients, method dispatch. Delivery to subscribers is
daemon/delivery.py; the human seats are daemon/seats.py.
"""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import re
import socket
import struct
import time
from typing import Any

from daemon import discovery
from daemon import protocol as P
from daemon.delivery import BACKLOG_CHUNK, Client, Delivery
from daemon.frame_spill import SpilledRelay
from daemon.home import EVENTS_FILE, STDERR_FILE, STDOUT_FILE, Home
from daemon.ingest import read_range, read_verbatim_range
from daemon.runs import CLUSTER_GONE_SECONDS, RunManager, on_cluster
from daemon.seats import Seats
from daemon.stalls import STALLS
from daemon.store import Store, StoreError
from daemon.sweeps import SweepController
from daemon.version import version as mosaic_version
from workers.sdk.config import ConfigError, parse_run_config
from workers.sdk.rundir import CHECKPOINT_MINUTES_DEFAULT, KEEP_CHECKPOINTS_DEFAULT
from workers.sdk.telemetry import EPISODE, SCALAR, episode_scalars

log = logging.getLogger("mosaic.daemon")

READ_SIZE = 65536
LOG_STREAMS = {"stderr": STDERR_FILE, "stdout": STDOUT_FILE, "supervisor": "supervisor.log"}
# read as the daemon starts: what it says it is must not change with a `git pull` under it
VERSION = mosaic_version()


def peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


RELAY_POLL_S = 0.01   # how often a frames relay looks for a new frame (docs/protocol.md, frames)


class Daemon(Delivery, Seats):
    """The daemon: the socket's JSON-RPC server (docs/protocol.md) over the run manager (daemon/runs.py),
    the store, the sweeps and the histories; it sends each client the run records and events it
    follows. ``serve`` runs until a ``shutdown`` request or SIGTERM; the runs go on without it."""

    def __init__(self, home: Home, max_concurrent: int | None = None, grace_seconds: float = 10.0,
                 gpus: list[str] | None = None, cpu_sets: list[list[int]] | None = None,
                 worker_nice: int = 10, resource_seconds: float = 5.0, stop_grace_seconds: float = 120.0,
                 stop_runs_on_shutdown: bool = False, continue_after_shutdown: bool = False,
                 checkpoint_minutes: float = CHECKPOINT_MINUTES_DEFAULT,
                 keep_checkpoints: int = KEEP_CHECKPOINTS_DEFAULT, cluster_poll_seconds: float = 2.0,
                 default_placement: dict | None = None, cluster_gone_seconds: float = CLUSTER_GONE_SECONDS):
        self.home = home
        self.stop_runs_on_shutdown = stop_runs_on_shutdown
        self.continue_after_shutdown = continue_after_shutdown
        self.epoch = f"{int(time.time() * 1000):x}-{os.getpid()}"
        self.started = time.time()
        self.store = Store(home.db)
        self.workers, self.worker_errors = discovery.discover()
        self.runs = RunManager(home, self.store, self.workers, max_concurrent or os.cpu_count() or 2,
                               grace_seconds, gpus=gpus, cpu_sets=cpu_sets, worker_nice=worker_nice,
                               resource_seconds=resource_seconds, stop_grace_seconds=stop_grace_seconds,
                               checkpoint_minutes=checkpoint_minutes, keep_checkpoints=keep_checkpoints,
                               cluster_poll_seconds=cluster_poll_seconds, default_placement=default_placement,
                               cluster_gone_seconds=cluster_gone_seconds)
        self.sweeps = SweepController(home, self.store, self.runs)
        self.histories = None   # daemon.history.Histories, made (numpy imported) when a client first asks
        self.runs.on_events = self._broadcast_events
        self.runs.on_run = self._broadcast_run
        self.clients: set[Client] = set()
        self.seats: dict[tuple[str, str], Client] = {}   # (run, seat) -> the client holding that human seat
        self.server: asyncio.AbstractServer | None = None
        self.stopping = asyncio.Event()

    # -- lifecycle -----------------------------------------------------------
    async def serve(self, sock: socket.socket) -> None:
        """Serve on a bound, listening Unix socket until stopped; then close the clients, the runs'
        watches and the store."""
        loop = asyncio.get_running_loop()
        self.runs.start(loop)
        self.sweeps.start(loop)
        self.server = await asyncio.start_unix_server(self._handle, sock=sock, limit=READ_SIZE)
        # What start-up made (imports, the store's runs) lives as long as the daemon: frozen, a
        # full collection never walks it again (it took 15-19 ms a pass here, each pass a stall
        # of every client's telemetry). The collector's passes are timed with the rest.
        self.runs.resources.load()
        gc.collect()
        gc.freeze()
        STALLS.watch_collections()
        log.info("daemon %s serving %s for home %s", self.epoch, self.home.socket_path, self.home.root)
        if self.continue_after_shutdown:
            self.runs.continue_after_shutdown()
        await self.stopping.wait()
        self.server.close()
        for client in list(self.clients):
            client.close()
        self.sweeps.close()
        self.runs.close()
        self.store.close()

    # -- connections -----------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            uid = peer_uid(sock)
        except OSError:
            uid = -1
        if uid != os.getuid():
            # Nothing is read from a stranger, nothing executed.
            log.warning("refused a connection from uid %s", uid)
            writer.write(P.error(None, P.RPCError(P.INVALID_REQUEST, "permission denied: not the daemon's user")))
            try:
                await asyncio.wait_for(writer.drain(), 1)
            except (asyncio.TimeoutError, ConnectionError):
                pass
            writer.transport.abort()
            return
        client = Client(writer)
        self.clients.add(client)
        try:
            await self._serve_client(client, reader)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            client.close()
            self.clients.discard(client)
            if client.catchup_task is not None:
                client.catchup_task.cancel()
            for task in client.relays.values():
                task.cancel()
            self._leave_seats(client)

    async def _serve_client(self, client: Client, reader: asyncio.StreamReader) -> None:
        buf = b""
        skipping = False  # inside a request line over MAX_LINE
        while not client.closed:
            data = await reader.read(READ_SIZE)
            if not data:
                return
            buf += data
            while True:
                nl = buf.find(b"\n")
                if nl < 0:
                    if len(buf) > P.MAX_LINE:
                        if not skipping:
                            client.write(P.error(None, P.RPCError(
                                P.LINE_TOO_LONG, f"request line longer than {P.MAX_LINE} bytes")))
                        skipping = True
                        buf = b""
                    break
                line, buf = buf[:nl], buf[nl + 1:]
                if skipping:
                    skipping = False
                    continue
                if len(line) > P.MAX_LINE:
                    client.write(P.error(None, P.RPCError(
                        P.LINE_TOO_LONG, f"request line longer than {P.MAX_LINE} bytes")))
                    continue
                if line.strip():
                    await self._dispatch(client, line)
            # a client that does not read its replies stops being read
            await client.writer.drain()

    async def _dispatch(self, client: Client, line: bytes) -> None:
        req_id = None
        try:
            req_id, method, params = P.parse_request(line)
            handler = getattr(self, f"m_{method}", None) if method in P.METHODS else None
            if handler is None:
                raise P.RPCError(P.METHOD_NOT_FOUND, f"unknown method {method!r}")
            with STALLS.timed(f"request {method}"):
                value = handler(client, params)
            if asyncio.iscoroutine(value):
                value = await value
            if req_id is not None:
                client.write(P.result(req_id, value))
        except P.RPCError as err:
            if req_id is None and isinstance(err.data, dict) and "id" in err.data:
                req_id = err.data.pop("id")
                err.data = err.data or None
            client.write(P.error(req_id, err))
        except ConfigError as err:
            client.write(P.error(req_id, P.RPCError(P.INVALID_CONFIG, str(err), {"field": err.field})))
        except StoreError as err:
            log.error("store error: %s", err)
            client.write(P.error(req_id, P.RPCError(P.INTERNAL_ERROR, str(err))))
        except Exception as err:  # a bug must cost one request, not the daemon
            log.exception("request failed: %r", line[:200])
            client.write(P.error(req_id, P.RPCError(P.INTERNAL_ERROR, f"{type(err).__name__}: {err}")))

    # -- helpers -----------------------------------------------------------
    def _run(self, params: dict[str, Any], key: str = "run") -> dict[str, Any]:
        ref = P.param(params, key, str)
        matches = self.store.resolve(ref)
        if not matches:
            raise P.RPCError(P.NOT_FOUND, f"no run named or with an id starting with {ref!r}")
        if len(matches) > 1:
            names = ", ".join(f"{m['id']} ({m['name']})" for m in matches[:5])
            raise P.RPCError(P.AMBIGUOUS, f"{ref!r} matches several runs: {names}")
        return matches[0]

    def _worker(self, name: str):
        try:
            return discovery.resolve_worker(self.workers, name)
        except ConfigError as err:
            raise P.RPCError(P.NOT_FOUND, err.message) from None

    # -- methods -----------------------------------------------------------
    def m_hello(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``hello``: the client's name taken, its protocol checked; what this daemon is (version, methods,
        pid, epoch, home, revision) and the home's default placement."""
        version = P.param(params, "protocol", int, P.PROTOCOL_VERSION)
        client.name = str(params.get("client", "?"))[:64]
        if version != P.PROTOCOL_VERSION:
            raise P.RPCError(P.INVALID_REQUEST, f"protocol {version} not supported; daemon speaks {P.PROTOCOL_VERSION}")
        # placement: the home's default (settings.json), which the new-run form starts from;
        # version and methods: what this daemon is and can do, which a newer client compares with
        # its own (one that met a daemon from before a pull says so and how to restart it)
        return {"protocol": P.PROTOCOL_VERSION, "epoch": self.epoch, "pid": os.getpid(),
                "home": str(self.home.root), "rev": self.store.rev,
                "placement": self.runs.default_placement or None,
                "version": VERSION, "methods": sorted(P.METHODS)}

    def m_status(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``status``: runs by state, the daemon's memory, uptime and its loop's longest stall."""
        counts = self.store.count_by_state()
        rss = 0
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
        return {"pid": os.getpid(), "version": VERSION, "epoch": self.epoch,
                "uptime": round(time.time() - self.started, 3),
                "home": str(self.home.root), "socket": str(self.home.socket_path), "runs": counts,
                "active": self.runs.local_active(), "max_concurrent": self.runs.max_concurrent,
                "cluster": len(self.runs.active) - self.runs.local_active(),
                "clients": len(self.clients), "rss_bytes": rss, "rev": self.store.rev,
                "stalls": STALLS.wire(reset=P.param(params, "reset_stalls", bool, False))}

    def m_workers(self, client: Client, params: dict[str, Any]) -> list[dict[str, Any]]:
        """``workers``: every installed worker, its algorithms and env families (and the ones that failed to load)."""
        return discovery.describe(self.workers, self.worker_errors)

    def m_schema(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``schema``: an algorithm's parameters as JSON schema (for an env, where they differ by env)."""
        desc = self._worker(P.param(params, "worker", str))
        algo = P.param(params, "algo", str)
        env = P.param(params, "env", str, None)
        try:
            # the same names as at submit: `mosaic schema cleanrl sac` is sac_continuous_action's
            algo = desc.resolve_algo(algo)
            schema = desc.schema(algo, env)
        except ConfigError as err:  # an unknown algorithm, a script path that is no CleanRL-style script
            raise P.RPCError(P.NOT_FOUND, str(err)) from None
        if env:
            # what submit would say of this env for this algorithm (unknown, with the closest ids; the
            # wrong action space; a family not installed): the form shows it as the env is typed
            try:
                desc.check_env(parse_run_config({"worker": desc.name, "algo": algo, "env": env}))
            except ConfigError as err:
                if err.field == "env":
                    schema = {**schema, "env_problem": err.message}
            except Exception:  # a descriptor's bug costs the hint, not the schema
                log.exception("check_env of %s %s %s failed", desc.name, algo, env)
        return schema

    async def m_submit(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``submit``: validate a run config with its worker, record the run and queue it; the new record."""
        config = P.param(params, "config", dict)
        # a cluster run: whether its scheduler takes it is asked off the loop (a controller that is
        # down answers after many seconds, and every other client would wait)
        ask = self.runs.placement_check(config)
        if ask is not None:
            await asyncio.to_thread(ask)
        return self.runs.submit(config, checked=True)

    def m_datasets(self, client: Client, params: dict[str, Any]) -> list[dict[str, Any]]:
        """``datasets``: the runs that recorded a dataset (for ``env``, when given)."""
        return self.runs.datasets(P.param(params, "env", str, None))

    def m_list(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Runs, oldest first; ``brief``: only what a listing shows (Store.list_brief),
        with the mean of the last ``returns`` episode returns of each."""
        states = P.param(params, "states", list, None)
        if P.param(params, "brief", bool, False):
            returns = P.param(params, "returns", int, 0)
            return {"rev": self.store.rev, "runs": self.store.list_brief(states, returns)}
        return {"rev": self.store.rev, "runs": self.store.list(states, wire=True)}

    def m_get(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``get``: one run's record, by name or id prefix."""
        return self._run(params)

    def m_cancel(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``cancel``: end a run's whole process tree (SIGTERM, SIGKILL after the grace)."""
        return self.runs.cancel(self._run(params))

    def _run_or_sweep(self, params: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """The run named, or else the sweep of that name or id (a PBT population stops and continues whole)."""
        try:
            return self._run(params), None
        except P.RPCError as err:
            if err.code != P.NOT_FOUND:
                raise
            matches = self.store.resolve_sweep(P.param(params, "run", str))
            if len(matches) != 1:
                raise
            return None, matches[0]

    def m_stop(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``stop``: ask a run to checkpoint at its next safe point and end ``stopped``; a PBT sweep's
        name or id: its whole population (the sweep's record, with ``problems``)."""
        run, sweep = self._run_or_sweep(params)
        return self.runs.stop(run) if sweep is None else self.sweeps.stop(sweep)

    def m_continue(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``continue``: start a stopped (or failed, cancelled, lost) run again as the same run, from its
        checkpoint; a stopped PBT sweep's name or id: its population, where it was."""
        run, sweep = self._run_or_sweep(params)
        return self.runs.continue_run(run) if sweep is None else self.sweeps.continue_(sweep)

    def m_pause(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``pause``: SIGSTOP a local run's process tree, all but its supervisor."""
        return self.runs.pause(self._run(params))

    def m_resume(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``resume``: SIGCONT a paused run's process tree."""
        return self.runs.resume(self._run(params))

    def m_delete(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``delete``: remove a run that is not active, its directory and its record (a tombstone for clients)."""
        run = self._run(params)
        rev = self.runs.delete(run)
        if self.histories is not None:
            self.histories.forget(run["id"])
        return {"deleted": run["id"], "rev": rev}

    def m_tag(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Add and remove tags of a run (any state); returns the new record."""
        run = self._run(params)
        add = P.param(params, "add", list, [])
        remove = P.param(params, "remove", list, [])
        for tag in add + remove:
            if not isinstance(tag, str) or not re.fullmatch(P.TAG_PATTERN, tag):
                raise P.RPCError(P.INVALID_PARAMS, f"tag {tag!r}: a tag is 1-40 letters, digits or . _ / - "
                                                   "(starting with a letter or digit)")
        tags = sorted((set(run.get("tags") or []) - set(remove)) | set(add))
        if len(tags) > P.MAX_TAGS:
            raise P.RPCError(P.INVALID_PARAMS, f"a run has at most {P.MAX_TAGS} tags")
        return self.runs.update_record(run["id"], tags=tags)

    def m_note(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Set (or with an empty text, clear) a run's note."""
        run = self._run(params)
        text = P.param(params, "text", str)
        if len(text) > P.MAX_NOTE:
            raise P.RPCError(P.INVALID_PARAMS, f"a note is at most {P.MAX_NOTE} characters, not {len(text)}")
        return self.runs.update_record(run["id"], note=text.strip())

    def _sweep(self, params: dict[str, Any]) -> dict[str, Any]:
        ref = P.param(params, "sweep", str)
        matches = self.store.resolve_sweep(ref)
        if not matches:
            raise P.RPCError(P.NOT_FOUND, f"no sweep named or with an id starting with {ref!r}")
        if len(matches) > 1:
            raise P.RPCError(P.AMBIGUOUS, f"{ref!r} matches several sweeps: "
                                          + ", ".join(f"{m['id']} ({m['name']})" for m in matches[:5]))
        return matches[0]

    async def m_sweep(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``sweep``: check a sweep spec (daemon/sweeps.py) and start it; the sweep."""
        spec = P.param(params, "spec", dict)
        if isinstance(spec.get("base"), dict):
            # trials placed on a cluster: its scheduler is asked once, here, off the loop (the trials
            # are then submitted unasked); a base that is not a run config is the sweep's to refuse
            try:
                ask = self.runs.placement_check(spec["base"])
            except ConfigError:
                ask = None
            if ask is not None:
                await asyncio.to_thread(ask)
        return self.sweeps.submit(spec)

    def m_sweeps(self, client: Client, params: dict[str, Any]) -> list[dict[str, Any]]:
        """``sweeps``: every sweep, summarised."""
        return [self.sweeps.describe(s) for s in self.store.list_sweeps()]

    def m_sweep_get(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``sweep_get``: one sweep with its trials ranked, their runs and the param importances."""
        return self.sweeps.describe(self._sweep(params), details=True)

    def m_sweep_cancel(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``sweep_cancel``: stop a sweep and cancel its runs."""
        return self.sweeps.cancel(self._sweep(params))

    def terminate(self) -> None:
        """SIGTERM (the host shutting down): with stop_runs_on_shutdown, the runs that can stop
        save a checkpoint first (up to stop_grace_seconds); then the daemon stops."""
        if not self.stop_runs_on_shutdown or self.stopping.is_set():
            self.stopping.set()
            return
        asyncio.get_running_loop().create_task(self._stop_runs_then_exit())

    async def _stop_runs_then_exit(self) -> None:
        ids = self.runs.stop_all_for_shutdown()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.runs.stop_grace_seconds + 5
        while any(run_id in self.runs.active for run_id in ids) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        log.info("stopped %d run(s) for the shutdown", len(ids))
        self.stopping.set()

    def m_shutdown(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """``shutdown``: stop the daemon after this reply; the runs keep training under their supervisors."""
        # Runs keep going: their supervisors do not depend on the daemon.
        asyncio.get_running_loop().call_soon(self.stopping.set)
        return {"stopping": True, "active_runs": len(self.runs.active)}

    def m_read_events(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """A page of a run's events from byte offset ``from``. ``raw``: the event lines
        spliced in as the file has them (no types filter), not parsed where the run's
        file is known to hold only valid events (below ``irregular_from``): the
        cheapest way through a long run (`mosaic metrics --csv`)."""
        run = self._run(params)
        start = P.param(params, "from", int, 0)
        max_bytes = min(P.param(params, "max_bytes", int, BACKLOG_CHUNK), 16 * BACKLOG_CHUNK)
        end = self.runs.ingested_offset(run)
        if P.param(params, "raw", bool, False):
            if start < 0:
                raise P.RPCError(P.INVALID_PARAMS, "parameter 'from' must be >= 0")
            path = str(self.home.run_dir(run["id"]) / EVENTS_FILE)
            nxt, raws = read_verbatim_range(path, start, min(end, self.runs.verbatim_until(run)), max_bytes)
            if nxt == start:  # an irregular stretch (or one line wider than the page): validated
                nxt, raws, _ = read_range(path, start, end, max_bytes)
            return P.raw_events_result({"run": run["id"], "from": start, "next": nxt, "end": end}, raws)
        nxt, raws, parsed = self._read(run, start, end, max_bytes)
        types = P.param(params, "types", list, None)
        if types is not None:
            parsed = [e for e in parsed if e.get("type") in types]
        return {"run": run["id"], "from": start, "next": nxt, "end": end, "events": parsed}

    def m_metrics(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Scalars of a run as {tag: [[step, value, t], ...]}, paged by byte offset;
        episodes as their tags (episode/return, episode/length, episode/return/<agent>).
        ``to``: stop at this byte offset (the end of a history the client holds as buckets)."""
        run = self._run(params)
        start = P.param(params, "from", int, 0)
        tags = P.param(params, "tags", list, None)
        max_bytes = min(P.param(params, "max_bytes", int, 4 * BACKLOG_CHUNK), 16 * BACKLOG_CHUNK)
        if tags:
            known = self.runs.tags_of(run)
            unknown = [t for t in tags if t not in known]
            if unknown:
                raise P.RPCError(P.NOT_FOUND, f"run {run['name']} has no metric {unknown[0]!r}; its metrics: "
                                              f"{', '.join(sorted(known)) or 'none yet'}")
        end = self.runs.ingested_offset(run)
        to = P.param(params, "to", int, None)     # a line boundary to stop at (a history's offset)
        if to is not None:
            end = min(end, max(0, to))
        nxt, _raws, parsed = self._read(run, start, end, max_bytes)
        wanted = set(tags) if tags else None
        points: dict[str, list] = {}
        for ev in parsed:
            kind = ev.get("type")
            if kind == SCALAR:
                if wanted is None or ev.get("tag") in wanted:
                    points.setdefault(ev["tag"], []).append([ev.get("step"), ev.get("value"), ev.get("t")])
            elif kind == EPISODE:
                for tag, value in episode_scalars(ev):
                    if wanted is None or tag in wanted:
                        points.setdefault(tag, []).append([ev.get("step"), value, ev.get("t")])
        return {"run": run["id"], "from": start, "next": nxt, "end": end, "points": points}

    async def m_history(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """A run's scalars at a bounded size (daemon/history.py): per tag, the points while
        there are under MAX_BUCKETS, else buckets of consecutive points (count, mean, min,
        max, last). ``offset``: the byte offset they cover, where to subscribe from."""
        run = self._run(params)
        tags = P.param(params, "tags", list, None)
        if self.histories is None:
            from daemon.history import Histories
            self.histories = Histories()
        active = self.runs.active.get(run["id"])
        history = await self.histories.get(run["id"], str(self.home.run_dir(run["id"])),
                                           self.runs.ingested_offset(run), active.tail if active else None)
        return {"run": run["id"], **history.wire(tags)}

    def _read(self, run: dict[str, Any], start: int, end: int, max_bytes: int):
        if start < 0:
            raise P.RPCError(P.INVALID_PARAMS, "parameter 'from' must be >= 0")
        return read_range(str(self.home.run_dir(run["id"]) / EVENTS_FILE), start, end, max_bytes)

    def m_logs(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """A byte range of one of a run's log files; a negative 'from' counts from the end."""
        run = self._run(params)
        stream = P.param(params, "stream", str, "stderr")
        if stream not in LOG_STREAMS:
            raise P.RPCError(P.INVALID_PARAMS, f"parameter 'stream' must be one of {', '.join(LOG_STREAMS)}")
        start = P.param(params, "from", int, 0)
        max_bytes = max(1, min(P.param(params, "max_bytes", int, 256 * 1024), 4 * 1024 * 1024))
        path = self.home.run_dir(run["id"]) / LOG_STREAMS[stream]
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return {"run": run["id"], "stream": stream, "from": 0, "next": 0, "size": 0, "data": ""}
        if start < 0:
            start = max(0, size + start)
        start = min(start, size)
        with open(path, "rb") as f:
            f.seek(start)
            data = f.read(min(max_bytes, size - start))
        return {"run": run["id"], "stream": stream, "from": start, "next": start + len(data), "size": size,
                "data": data.decode("utf-8", errors="replace")}

    # -- frames ----------------------------------------------------------------
    def m_frames(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Relay a run's FastLane frames to this client (fps 0 stops)."""
        run = self._run(params)
        stream = P.param(params, "stream", int, 0)
        fps = float(P.param(params, "fps", (int, float), 5.0))
        max_dim = P.param(params, "max_dim", int, 320)
        if not 16 <= max_dim <= 4096:
            raise P.RPCError(P.INVALID_PARAMS, "parameter 'max_dim' must be between 16 and 4096")
        key = (run["id"], stream)
        old = client.relays.pop(key, None)
        if old is not None:
            old.cancel()
        if fps <= 0:
            return {"relaying": False}
        fps = min(fps, 30.0)
        client.relays[key] = asyncio.get_running_loop().create_task(
            self._relay(client, run["id"], stream, fps, max_dim))
        return {"relaying": True, "fps": fps, "max_dim": max_dim}

    async def _relay(self, client: Client, run_id: str, stream: int, fps: float, max_dim: int) -> None:
        run = self.store.get(run_id)
        if run is not None and on_cluster(run):   # its frames are on a node: spilled into its directory
            relay = SpilledRelay(str(self.home.run_dir(run_id)), stream)
        else:
            from daemon.relay import Relay  # only once someone wants frames
            relay = Relay(run_id, stream, max_dim)
        # Looked at every RELAY_POLL_S, sent at most fps a second: a frame after a quiet spell (a
        # play's step after a key) leaves within a poll, not within a whole 1/fps
        period = 1.0 / fps
        last_sent = -period
        try:
            while not client.closed:
                # a congested client skips frames: only the newest is ever worth sending
                now = time.monotonic()
                if not client.congested and now - last_sent >= period:
                    frame = relay.next_frame()
                    if frame is not None:
                        client.write(P.notification(P.NOTIFY_FRAME, frame))
                        last_sent = now
                await asyncio.sleep(RELAY_POLL_S)
        except asyncio.CancelledError:
            pass
        finally:
            relay.close()

    # -- human seats (docs/play.md) --------------------------------------------
