"""The app's link to the daemon: run records, telemetry series, reconnection.

Textual-independent. A ``Link`` owns an ``AsyncClient`` and keeps:

- ``runs``: every run record, kept current by ``run`` notifications (ordered
  by revision; tombstones remove runs), starting from ``list`` and resumed
  after a reconnect with ``subscribe(runs=True, rev=<last rev seen>)``;
- ``series``: per watched run, a ``RunSeries`` (numpy columns per tag) fed by
  ``events`` notifications, with the byte ``cursors`` that say how far each
  run's events file has been absorbed. A run first watched starts from its
  ``history`` (daemon/history.py: a long tag as a few thousand buckets) and its
  events are followed from the offset that covers. Only runs the UI looks at are watched
  (``watch``/``unwatch``), so a table of ten busy runs costs a few run records
  a second, not their telemetry. A chunk is absorbed only if it starts at the
  run's cursor: a repeat is dropped and a gap makes the link resubscribe from
  the cursor, so nothing is missed or counted twice, across reconnects too.

Absorbing is sliced: events go to a queue that a task works through
ABSORB_SLICE events at a time, giving the loop up in between, so a run
flooding telemetry keeps the app busy but never deaf to keys for more than a
slice (a daemon notification can carry ~10,000 events: ~50 ms in one piece).
``flush()`` drains the queue at once. The queue is bounded: past
ABSORB_BACKLOG events waiting, the client stops reading the socket until the
absorber is down to half of it, so a history of ten million points streams
through a few hundred thousand event dicts at a time, not all of them at once
(the daemon holds a congested client back and resumes from its cursor).

When the daemon goes away the link keeps everything, reports it, and retries
with exponential backoff. Changes are not reported one by one: they are
gathered into one ``Update`` delivered to ``on_update`` at most every
``interval`` seconds, so a burst of telemetry costs one redraw.
"""
from __future__ import annotations

import asyncio
import collections
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from daemon import protocol as P
from daemon.home import Home

log = logging.getLogger("mosaic.app.link")

BACKOFF_START = 0.25
BACKOFF_MAX = 5.0
ABSORB_SLICE = 2000        # events absorbed before the loop is given up (~5 ms)
ABSORB_REST = 0.002        # seconds between slices: telemetry waits (the daemon buffers), keys do not
ABSORB_BACKLOG = 30_000    # events waiting to be absorbed before the socket is not read (~15 MB of dicts; 2-3 notifications)


@dataclass
class Update:
    """What changed since the last update."""
    runs: set[str] = field(default_factory=set)        # ids whose record changed (or appeared)
    deleted: set[str] = field(default_factory=set)     # ids removed
    series: dict[str, set[str]] = field(default_factory=dict)  # run id -> tags with new points
    connection: bool = False                           # the connection state changed
    synced: bool = False                               # a backlog finished
    loaded: bool = False                               # a full run list arrived (maybe empty)

    def __bool__(self) -> bool:
        return bool(self.runs or self.deleted or self.series or self.connection or self.synced or self.loaded)


class Link:
    def __init__(self, home: Home | None, on_update: Callable[[Update], None] | None = None,
                 interval: float = 0.25, client_factory: Callable[..., Any] | None = None):
        self.home = home
        self.on_update = on_update or (lambda update: None)
        self.interval = interval
        self._client_factory = client_factory
        self.client = None
        self.runs: dict[str, dict[str, Any]] = {}
        self.rev: int | None = None
        self.series: dict[str, Any] = {}          # run id -> RunSeries
        self.cursors: dict[str, int] = {}
        self.watched: set[str] = set()
        self._watchers: dict[str, int] = {}        # run id -> how many views watch it
        self.synced_runs: set[str] = set()         # watched runs whose backlog has arrived
        self.connected = False
        self.loaded = False                         # a run list has been received
        self.error: str | None = None
        self.attempts = 0
        self.info: dict[str, Any] = {}
        self._pending = Update()
        self._flush_handle: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._sub_lock: asyncio.Lock | None = None
        self._resub_needed = False
        self._resynced: set[str] = set()         # the watched runs the last _resync subscribed
        self._no_history: set[str] = set()        # runs whose history the daemon refused: events from 0
        self.history_offsets: dict[str, int] = {}  # run id -> the byte offset its history covered
        self.frame_listeners: dict[tuple[str, int], Callable[[dict[str, Any]], None]] = {}
        self._absorb_queue: collections.deque = collections.deque()   # (run id, events) or (None, synced params)
        self.queued = 0                 # events in the queue
        self._holding = False           # the client was told to stop reading (queued > ABSORB_BACKLOG)
        self._absorber: asyncio.Task | None = None

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Connect in the background (and keep reconnecting) on the running loop."""
        if self._task is None:
            self._sub_lock = asyncio.Lock()
            self._task = asyncio.get_running_loop().create_task(self._main())

    async def stop(self) -> None:
        self._stopping = True
        if self._absorber is not None:
            self._absorber.cancel()
            self._absorber = None
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None
        if self.client is not None:
            await self.client.close()

    def _make_client(self):
        if self._client_factory is not None:
            return self._client_factory(self.home, self.feed)
        from mosaic_tui.client import AsyncClient
        return AsyncClient(self.home, self.feed, name="mosaic-app")

    async def _main(self) -> None:
        backoff = BACKOFF_START
        while not self._stopping:
            client = self._make_client()
            try:
                self.info = await client.connect()
                self.client = client
                self._holding = False       # a new client reads; a backlog past the bound holds it again
                await self._resync()
            except (OSError, ConnectionError, P.RPCError) as exc:
                self.attempts += 1
                self.error = str(exc) or type(exc).__name__
                if self.connected:
                    self.connected = False
                    self._notify_connection()
                elif self.attempts == 1:
                    self._notify_connection()
                try:
                    await client.close()
                except Exception:
                    pass
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)
                continue
            backoff = BACKOFF_START
            self.attempts = 0
            self.error = None
            self.connected = True
            # A view that started watching while _resync awaited the daemon (the
            # first run list reaches the views before the subscribe returns) was
            # neither in that subscribe nor able to send its own: take it now.
            late = [r for r in self.watched if r not in self._resynced]
            if late:
                asyncio.get_running_loop().create_task(self._subscribe_more(late))
            self._notify_connection()
            await client.closed.wait()
            await client.close()        # a reader that ended on an error leaves its socket open
            self.client = None
            self.connected = False
            self.error = "the daemon went away"
            self._notify_connection()

    async def _resync(self) -> None:
        """(Re)subscribe: run records after the last revision, events from the cursors."""
        if self.rev is None:
            listing = await self.client.call(P.LIST)
            self._load(listing["runs"], listing["rev"])
        params: dict[str, Any] = {"runs": True, "rev": self.rev}
        await self._histories([r for r in self.watched if r in self.runs])
        watched = [r for r in self.watched if r in self.runs]
        self._resynced = set(watched)
        if watched:
            params["events"] = watched
            params["cursors"] = {r: self.cursors.get(r, 0) for r in watched}
        await self.client.call(P.SUBSCRIBE, **params)

    # -- requests --------------------------------------------------------------
    async def call(self, method: str, **params: Any) -> Any:
        if self.client is None or not self.connected:
            raise ConnectionError(self.error or "not connected to the daemon")
        return await self.client.call(method, **params)

    # -- watching runs' telemetry ----------------------------------------------
    def watch(self, run_id: str) -> None:
        """Follow a run's events (history first, then live). Counted: call unwatch as often."""
        self._watchers[run_id] = self._watchers.get(run_id, 0) + 1
        if run_id in self.watched:
            return
        self.watched.add(run_id)
        self.series_of(run_id)
        if self.connected and self.client is not None:
            asyncio.get_running_loop().create_task(self._subscribe_more([run_id]))

    def unwatch(self, run_id: str) -> None:
        """Stop following a run's events once no view watches it; what was received is kept."""
        count = self._watchers.get(run_id, 0) - 1
        if count > 0:
            self._watchers[run_id] = count
            return
        self._watchers.pop(run_id, None)
        if run_id not in self.watched:
            return
        self.watched.discard(run_id)
        if self.connected and self.client is not None:
            asyncio.get_running_loop().create_task(self._resubscribe())

    async def _subscribe_more(self, run_ids: list[str]) -> None:
        async with self._sub_lock:
            ids = [r for r in run_ids if r in self.watched and r in self.runs]
            if not ids:
                return
            try:
                await self._histories(ids)
                await self.client.call(P.SUBSCRIBE, events=ids, cursors={r: self.cursors.get(r, 0) for r in ids})
            except P.RPCError as exc:
                log.warning("subscribe failed: %s", exc.message)
            except ConnectionError:
                pass

    async def _histories(self, run_ids: list[str]) -> None:
        """Start each run nothing was absorbed of from its history (daemon/history.py): a
        long run's tags arrive as a few thousand buckets instead of every point, and the
        events are then followed from the offset the history covers."""
        for rid in run_ids:
            if self.cursors.get(rid, 0) or rid in self._no_history:
                continue
            try:
                reply = await self.client.call(P.HISTORY, run=rid)
            except P.RPCError as exc:
                # a daemon from before histories (or the run went): the events from the start
                log.info("no history of %s: %s", rid, exc.message)
                self._no_history.add(rid)
                continue
            if self.cursors.get(rid, 0) or rid not in self.runs:
                continue
            offset = reply.get("offset")
            if not isinstance(offset, int) or offset <= 0:
                continue
            tags = self.series_of(rid).load_history(reply)
            self.cursors[rid] = offset
            self.history_offsets[rid] = offset
            self._pending.series.setdefault(rid, set()).update(tags)
            self._schedule_flush()

    async def _resubscribe(self) -> None:
        """Drop every subscription and take the wanted ones back from our own state."""
        async with self._sub_lock:
            self._resub_needed = False
            try:
                await self.client.call(P.UNSUBSCRIBE)
                await self._resync()
            except P.RPCError as exc:
                log.warning("resubscribe failed: %s", exc.message)
            except (ConnectionError, AttributeError):
                pass

    def _schedule_resubscribe(self) -> None:
        if not self._resub_needed and self.connected and self.client is not None:
            self._resub_needed = True
            asyncio.get_running_loop().create_task(self._resubscribe())

    def series_of(self, run_id: str):
        s = self.series.get(run_id)
        if s is None:
            from mosaic_tui.series import RunSeries
            s = self.series[run_id] = RunSeries()
        return s

    # -- incoming --------------------------------------------------------------
    def _load(self, runs: list[dict[str, Any]], rev: int) -> None:
        for run in runs:
            self.runs[run["id"]] = run
            self._pending.runs.add(run["id"])
        self.rev = rev if self.rev is None else max(self.rev, rev)
        first = not self.loaded
        self.loaded = True
        self._pending.loaded = True
        if first:
            # the first run list is the first screen: no coalescing delay
            try:
                asyncio.get_running_loop().call_soon(self._flush)
            except RuntimeError:
                pass
        else:
            self._schedule_flush()

    def load(self, runs: list[dict[str, Any]], rev: int | None = None) -> None:
        """Take a run list as if the daemon had sent it (tests, snapshots)."""
        self._load(runs, rev if rev is not None else max((r.get("rev", 0) for r in runs), default=0))

    def feed(self, method: str, params: dict[str, Any]) -> None:
        """A notification from the daemon (the AsyncClient's on_notify)."""
        if method == P.NOTIFY_RUN:
            self._on_run(params)
        elif method == P.NOTIFY_EVENTS:
            self._on_events(params)
        elif method == P.NOTIFY_FRAME:
            listener = self.frame_listeners.get((params.get("run"), params.get("stream", 0)))
            if listener is not None:
                listener(params)
        elif method == P.NOTIFY_SYNCED:
            # after the events queued before it, so "synced" never precedes its data
            self._enqueue(None, params)

    def _synced(self, params: dict[str, Any]) -> None:
        cursors = params.get("cursors") or {}
        for rid in self.watched:
            if rid in cursors and self.cursors.get(rid, 0) >= cursors[rid]:
                self.synced_runs.add(rid)
        self._pending.synced = True
        self._schedule_flush()

    def _on_run(self, params: dict[str, Any]) -> None:
        rev = params.get("rev")
        if isinstance(rev, int):
            self.rev = rev if self.rev is None else max(self.rev, rev)
        if "deleted" in params:
            rid = params["deleted"]
            if self.runs.pop(rid, None) is not None or rid in self.series:
                self._pending.deleted.add(rid)
            self.series.pop(rid, None)
            self.cursors.pop(rid, None)
            self.history_offsets.pop(rid, None)
            self.watched.discard(rid)
            self._pending.runs.discard(rid)
        else:
            run = params.get("run") or {}
            rid = run.get("id")
            if not rid:
                return
            old = self.runs.get(rid)
            if old is not None and old.get("rev", 0) >= run.get("rev", 0):
                return  # a repeat after a resubscribe
            self.runs[rid] = run
            self._pending.runs.add(rid)
            self._pending.deleted.discard(rid)
        self._schedule_flush()

    def _on_events(self, params: dict[str, Any]) -> None:
        rid = params.get("run")
        start, end = params.get("from"), params.get("to")
        if not isinstance(rid, str) or not isinstance(start, int) or not isinstance(end, int):
            return
        cursor = self.cursors.get(rid, 0)
        if end <= cursor:
            return  # already absorbed
        if start != cursor:
            # A gap (or an overlap we cannot split): ask again from our cursor.
            if rid in self.watched:
                self._schedule_resubscribe()
            return
        self.cursors[rid] = end
        self._enqueue(rid, params.get("events") or [])

    def _enqueue(self, rid: str | None, item: Any) -> None:
        self._absorb_queue.append((rid, item))
        if rid is not None:
            self.queued += len(item)
            if self.queued > ABSORB_BACKLOG and self.client is not None and not self._holding:
                self._holding = True
                self.client.pause_reading()
        if self._absorber is not None and not self._absorber.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._drain()           # no loop (a synchronous caller): at once
            return
        self._absorber = loop.create_task(self._absorb_sliced())

    def _absorb(self, rid: str, events: list[dict[str, Any]]) -> None:
        if rid not in self.cursors:
            return                  # deleted meanwhile
        tags = self.series_of(rid).absorb(events)
        self._pending.series.setdefault(rid, set()).update(tags)
        self._schedule_flush()

    async def _absorb_sliced(self) -> None:
        # Nothing here may end this task early: while the link holds the socket (past
        # ABSORB_BACKLOG) only this task's _absorbed() reads it again, so an exception that
        # escaped it left the app deaf to the daemon for good, with no trace (the task's
        # exception went unretrieved).
        try:
            while self._absorb_queue:
                rid, item = self._absorb_queue.popleft()
                if rid is None:
                    try:
                        self._synced(item)
                    except Exception:
                        log.exception("a synced notification was not taken in")
                    continue
                for i in range(0, len(item), ABSORB_SLICE):
                    piece = item[i:i + ABSORB_SLICE]
                    try:
                        self._absorb(rid, piece)
                    except Exception:
                        log.exception("%d events of %s were not taken in", len(piece), rid)
                    self._absorbed(len(piece))
                    # a short rest, not just a turn: a key passes through several
                    # messages, each of which would otherwise wait behind a slice
                    await asyncio.sleep(ABSORB_REST)
        finally:
            # the loop ends only on an empty queue (no await between the check
            # and here) or when stop() cancels it
            self._absorber = None

    def _absorbed(self, count: int) -> None:
        """``count`` queued events are in: read the socket again once half the backlog is."""
        self.queued = max(0, self.queued - count)
        if self._holding and self.queued <= ABSORB_BACKLOG // 2:
            self._holding = False
            if self.client is not None:
                self.client.resume_reading()

    def _drain(self) -> None:
        """Absorb everything queued, now."""
        while self._absorb_queue:
            rid, item = self._absorb_queue.popleft()
            if rid is None:
                self._synced(item)
            else:
                self._absorb(rid, item)
                self._absorbed(len(item))

    def feed_events(self, run_id: str, events: list[dict[str, Any]]) -> None:
        """Absorb events as if the daemon had sent them (tests, snapshots)."""
        cursor = self.cursors.get(run_id, 0)
        self._on_events({"run": run_id, "from": cursor, "to": cursor + 1 + len(events), "events": events})

    # -- delivery --------------------------------------------------------------
    def _notify_connection(self) -> None:
        self._pending.connection = True
        self._flush()

    def _schedule_flush(self) -> None:
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return  # no loop (a synchronous test): flush() delivers
            self._flush_handle = loop.call_later(self.interval, self._flush)

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        update, self._pending = self._pending, Update()
        if update:
            self.on_update(update)

    def flush(self) -> None:
        """Absorb what is queued and deliver what is pending, now."""
        self._drain()
        self._flush()

    # -- queries -----------------------------------------------------------
    def newest_run(self) -> dict[str, Any] | None:
        if not self.runs:
            return None
        return max(self.runs.values(), key=lambda r: (r.get("created_at") or 0, r["id"]))
