"""Delivery to the socket's clients: each connection (``Client``), subscribing, broadcasting
run records and events, and serving a client that is behind (its catch-up).

Delivery to a subscriber is driven by cursors, not queues. For each run a
client follows, the daemon remembers the byte offset up to which it has sent
that run's events. A live chunk [from, to) goes straight to every client whose
cursor is ``from``; a client that is behind (it subscribed from an old cursor,
or it stopped reading and its socket buffer passed HIGH_WATER) is served from
the file by its own catch-up task, which waits for the socket to drain. So a
slow client costs a bounded buffer and never stalls the daemon or the others,
and it resyncs by itself when it reads again.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from daemon import protocol as P
from daemon.home import EVENTS_FILE
from daemon.ingest import read_range, read_verbatim_range

log = logging.getLogger("mosaic.daemon")

HIGH_WATER = 4 * 1024 * 1024       # a client's unsent bytes above this: it is served from disk instead
HARD_LIMIT = 64 * 1024 * 1024      # unsent replies above this: the client is dropped
BACKLOG_CHUNK = 1024 * 1024        # bytes read per backlog step


class Client:
    """One connection to the socket: what it follows (run records, events of which runs, from which
    byte offsets), its frame relays and the human seats it holds. Writes never block the loop: a
    client past HIGH_WATER is fed at its pace, one past HARD_LIMIT is dropped."""

    _ids = 0

    def __init__(self, writer: asyncio.StreamWriter):
        Client._ids += 1
        self.id = Client._ids
        self.writer = writer
        self.transport = writer.transport
        self.closed = False
        self.name = "?"
        self.follow_runs = False               # run-record notifications
        self.follow_all_events = False         # events of every run
        self.event_runs: set[str] = set()      # events of these runs
        self.cursors: dict[str, int] = {}      # run -> next byte offset to send
        self.sync_due = False                  # a subscribe that needed no backlog still gets "synced"
        self.behind: set[str] = set()          # runs served by the catch-up task
        self.pending_records: dict[str, Any] = {}  # coalesced run records while congested
        self.wakeup = asyncio.Event()
        self.catchup_task: asyncio.Task | None = None
        self.relays: dict[tuple[str, int], asyncio.Task] = {}  # (run, stream) -> frame relay

    @property
    def congested(self) -> bool:
        """More unsent bytes than HIGH_WATER: its run records are coalesced and its events wait for it."""
        return self.transport.get_write_buffer_size() > HIGH_WATER

    @property
    def label(self) -> str:
        """How other clients are told who this is (a seat's holder): hello's name and a number."""
        return f"{self.name}#{self.id}"

    def follows_events(self, run_id: str) -> bool:
        """Whether this client subscribed to the run's events (or to every run's)."""
        return self.follow_all_events or run_id in self.event_runs

    def write(self, data: bytes) -> None:
        """Queue bytes to the client; one that leaves HARD_LIMIT bytes unread is dropped."""
        if self.closed:
            return
        if self.transport.get_write_buffer_size() > HARD_LIMIT:
            log.warning("client %s does not read its replies; dropping it", self.id)
            self.close()
            return
        self.writer.write(data)

    def close(self) -> None:
        """Drop the connection at once (its catch-up task wakes to end)."""
        if not self.closed:
            self.closed = True
            self.wakeup.set()
            self.transport.abort()


class Delivery:
    """The Daemon's (daemon/server.py) subscriptions and pushes, by cursor."""

    def m_subscribe(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Follow run records (from a revision) and/or events (from per-run cursors).

        params: runs (bool): run-record notifications; rev (int): also send every
        change after this revision first; events ("*" or [run refs]); cursors
        ({run id: byte offset}) where to start each run's events (default 0, the
        whole history; "end" skips history).
        """
        result: dict[str, Any] = {"rev": self.store.rev}
        if P.param(params, "runs", bool, False):
            client.follow_runs = True
            since = P.param(params, "rev", int, None)
            if since is not None:
                rows, tombs = self.store.changed_since(since, wire=True)
                items = [(r["rev"], r, r["id"]) for r in rows] + [(rev, None, rid) for rid, rev in tombs]
                for rev, row, rid in sorted(items, key=lambda x: x[0]):
                    client.write(self._run_note(row, rid, rev))
        events = params.get("events")
        cursors = P.param(params, "cursors", dict, {})
        from_end = P.param(params, "from_end", bool, False)
        if events is not None:
            if events == "*":
                client.follow_all_events = True
                runs = self.store.list()
            elif isinstance(events, list) and all(isinstance(e, str) for e in events):
                runs = [self._run({"run": ref}) for ref in events]
                client.event_runs.update(r["id"] for r in runs)
            else:
                raise P.RPCError(P.INVALID_PARAMS, "parameter 'events' must be \"*\" or a list of runs")
            for run in runs:
                cursor = cursors.get(run["id"], 0)
                if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
                    raise P.RPCError(P.INVALID_PARAMS, f"cursor of {run['id']} must be a byte offset >= 0")
                end = self.runs.ingested_offset(run)
                client.cursors[run["id"]] = end if from_end else min(cursor, end)
                if client.cursors[run["id"]] < end:
                    client.behind.add(run["id"])
                else:   # nothing to send (a client that took the run's history): synced as it is
                    client.sync_due = True
            result["cursors"] = dict(client.cursors)
        self._kick(client)
        return result

    def m_unsubscribe(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Stop following: everything, or only the events of the runs in ``events``."""
        events = P.param(params, "events", list, None)
        if events is not None:
            for ref in events:
                if not isinstance(ref, str):
                    raise P.RPCError(P.INVALID_PARAMS, "parameter 'events' must be a list of runs")
                matches = self.store.resolve(ref)
                for run_id in [m["id"] for m in matches[:1]] or [ref]:
                    client.event_runs.discard(run_id)
                    client.behind.discard(run_id)
                    client.cursors.pop(run_id, None)
            return {"ok": True}
        client.follow_runs = False
        client.follow_all_events = False
        client.event_runs.clear()
        client.behind.clear()
        return {"ok": True}

    def _run_note(self, run: dict[str, Any] | None, run_id: str, rev: int) -> bytes:
        if run is None:
            return P.notification(P.NOTIFY_RUN, {"rev": rev, "deleted": run_id})
        return P.notification(P.NOTIFY_RUN, {"rev": rev, "run": run})

    def _broadcast_run(self, run: dict[str, Any] | None, run_id: str, rev: int) -> None:
        note = None
        for client in self.clients:
            if not client.follow_runs:
                continue
            if client.congested or client.pending_records:
                # coalesce: only the newest record of each run waits; while any
                # waits, later ones queue behind it so revisions arrive in order
                client.pending_records.pop(run_id, None)
                client.pending_records[run_id] = (run, rev)
                self._kick(client)
                continue
            if note is None:
                note = self._run_note(run, run_id, rev)
            client.write(note)

    def _broadcast_events(self, run_id: str, start: int, end: int, raws: list[bytes]) -> None:
        note = None
        for client in self.clients:
            if not client.follows_events(run_id):
                continue
            cursor = client.cursors.setdefault(run_id, 0 if client.follow_all_events else start)
            if cursor == start and run_id not in client.behind and not client.congested:
                if note is None:
                    note = P.events_notification(run_id, start, end, raws)
                client.write(note)
                client.cursors[run_id] = end
            elif cursor < end:
                client.behind.add(run_id)
                self._kick(client)

    def _kick(self, client: Client) -> None:
        if client.catchup_task is None or client.catchup_task.done():
            client.catchup_task = asyncio.get_running_loop().create_task(self._catch_up(client))
        client.wakeup.set()

    async def _catch_up(self, client: Client) -> None:
        """Serve a client that is behind from the files, at the pace it reads."""
        try:
            while not client.closed:
                client.wakeup.clear()
                worked = False
                if client.pending_records:
                    records, client.pending_records = client.pending_records, {}
                    for run_id, (run, rev) in sorted(records.items(), key=lambda item: item[1][1]):
                        client.write(self._run_note(run, run_id, rev))
                    worked = True
                for run_id in list(client.behind):
                    run = self.store.get(run_id)
                    if run is None:
                        client.behind.discard(run_id)
                        continue
                    end = self.runs.ingested_offset(run)
                    cursor = client.cursors.get(run_id, 0)
                    if cursor >= end:
                        client.behind.discard(run_id)
                        continue
                    path = str(self.home.run_dir(run_id) / EVENTS_FILE)
                    nxt, raws = read_verbatim_range(path, cursor, min(end, self.runs.verbatim_until(run)),
                                                    BACKLOG_CHUNK)
                    if nxt == cursor:  # an irregular stretch (or one line wider than a chunk): parse it
                        nxt, raws, _ = read_range(path, cursor, end, BACKLOG_CHUNK)
                    if nxt > cursor:
                        client.write(P.events_notification(run_id, cursor, nxt, raws))
                        client.cursors[run_id] = nxt
                        worked = True
                    if nxt >= end:
                        client.behind.discard(run_id)
                    await client.writer.drain()  # the client's pace
                if not client.behind and not client.pending_records:
                    if worked or client.sync_due:
                        client.sync_due = False
                        client.write(P.notification(P.NOTIFY_SYNCED, {"rev": self.store.rev,
                                                                       "cursors": client.cursors}))
                    await client.wakeup.wait()
                elif client.congested:
                    await client.writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
