"""The run store: SQLite (WAL) at <home>/mosaic.db.

One row a run. Telemetry is not here: each run's ``events.jsonl`` is the source
of truth for it; the row keeps a summary (steps, last return, ...) and the byte
offset up to which the daemon has read the file, so a restarted daemon resumes
exactly where it stopped.

Every change to a row takes the next value of a global revision counter, and a
deleted run leaves a tombstone with its revision: a client that remembers the
last revision it saw asks for everything after it and misses nothing.
"""
from __future__ import annotations

import json
import os
import random
import sqlite3
import time
from typing import Any, Iterable

from daemon.protocol import dumps, loads, mean_return, raw_fragment, raw_json

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    worker        TEXT NOT NULL,
    algo          TEXT NOT NULL,
    env           TEXT NOT NULL,
    config        TEXT NOT NULL,
    state         TEXT NOT NULL,
    created_at    REAL NOT NULL,
    started_at    REAL,
    ended_at      REAL,
    pid           INTEGER,          -- the per-run supervisor
    pid_start     INTEGER,          -- its start time in clock ticks (pid reuse check)
    worker_pid    INTEGER,
    exit_code     INTEGER,
    exit_signal   TEXT,
    reason        TEXT,
    stderr_tail   TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    resources     TEXT NOT NULL DEFAULT '{}',  -- {"gpu": "0", "cpus": [0]} handed to the run
    summary       TEXT NOT NULL DEFAULT '{}',
    ingest_offset INTEGER NOT NULL DEFAULT 0,
    rev           INTEGER NOT NULL,
    paused_at     REAL,             -- when the pause going on began (kept if the run ends paused)
    paused_seconds REAL NOT NULL DEFAULT 0,  -- pauses that ended, in all
    tags          TEXT NOT NULL DEFAULT '[]',  -- the user's labels of the run (mosaic tag), sorted
    note          TEXT NOT NULL DEFAULT '',    -- the user's free text about the run (mosaic note)
    sweep         TEXT,             -- the sweep the run belongs to (daemon/sweeps.py)
    trial         INTEGER,          -- its trial in that sweep: the runs of one trial (seeds) are a group
    stop_requested INTEGER NOT NULL DEFAULT 0,  -- mosaic stop: checkpoint, then end "stopped"
    restarts      INTEGER NOT NULL DEFAULT 0    -- times the run was continued (mosaic continue)
);
CREATE TABLE IF NOT EXISTS sweeps (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    spec       TEXT NOT NULL,      -- the checked spec (JSON)
    state      TEXT NOT NULL,      -- running, finished, cancelled
    created_at REAL NOT NULL,
    ended_at   REAL
);
CREATE INDEX IF NOT EXISTS runs_rev ON runs(rev);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE TABLE IF NOT EXISTS tombstones (id TEXT PRIMARY KEY, rev INTEGER NOT NULL);
"""

_COLUMNS = ("id", "name", "worker", "algo", "env", "config", "state", "created_at", "started_at",
            "ended_at", "pid", "pid_start", "worker_pid", "exit_code", "exit_signal", "reason",
            "stderr_tail", "cancel_requested", "resources", "summary", "ingest_offset", "rev",
            "paused_at", "paused_seconds", "tags", "note", "sweep", "trial", "stop_requested", "restarts")
# Columns added after a store was first made: added to an older mosaic.db on open.
_ADDED_COLUMNS = {"paused_at": "REAL", "paused_seconds": "REAL NOT NULL DEFAULT 0",
                  "tags": "TEXT NOT NULL DEFAULT '[]'", "note": "TEXT NOT NULL DEFAULT ''",
                  "sweep": "TEXT", "trial": "INTEGER", "stop_requested": "INTEGER NOT NULL DEFAULT 0",
                  "restarts": "INTEGER NOT NULL DEFAULT 0"}
_JSON_COLUMNS = ("config", "summary", "resources", "tags")
_JSON_EMPTY = {"tags": []}
# what list_brief keeps of a run: what a listing shows
BRIEF_COLUMNS = ("id", "name", "worker", "algo", "env", "state", "started_at", "ended_at", "paused_at",
                 "paused_seconds", "rev", "note", "sweep")
BRIEF_SUMMARY_KEYS = ("steps", "total_steps", "sps", "episodes", "best_return", "best_step", "system", "phase")


def _parse(text: str) -> Any:
    """A stored JSON column; text from before the store wrote strict JSON may hold NaN, which only json reads."""
    try:
        return loads(text)
    except ValueError:
        return json.loads(text)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


_last_ulid = [0, 0]  # [ms, random part] of the last id this process made


def new_ulid(now: float | None = None) -> str:
    """A ULID: 48-bit millisecond time + 80 random bits, Crockford base32.

    Sorts by creation time, so `ls` order and id order agree. Two ids made in
    the same millisecond by this process follow the spec's monotonic mode (the
    second is the first's random part plus one): otherwise their order would be
    a coin toss, and so would the order of runs created together by a sweep.
    """
    ms = int((time.time() if now is None else now) * 1000)
    last_ms, last_rand = _last_ulid
    if ms == last_ms and last_rand + 1 < (1 << 80):
        rand = last_rand + 1
    else:
        rand = random.SystemRandom().getrandbits(79)  # headroom for increments
    _last_ulid[:] = [ms, rand]
    value = (ms << 80) | rand
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def read_run(db_path: os.PathLike | str, run_id: str, columns: tuple[str, ...]) -> dict[str, Any] | None:
    """Some columns of one run, read from another process without opening the store for writing
    (the run's mirror, beside the daemon): None when there is no such run; sqlite3.Error when the
    database is busy or unreadable this time."""
    unknown = set(columns) - set(_COLUMNS)
    if unknown:
        raise ValueError(f"no column {', '.join(sorted(unknown))} in runs")
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        row = db.execute(f"SELECT {', '.join(columns)} FROM runs WHERE id = ?", (run_id,)).fetchone()
    finally:
        db.close()
    if row is None:
        return None
    out = dict(zip(columns, row))
    for col in set(columns) & set(_JSON_COLUMNS):
        out[col] = _parse(out[col]) if out[col] else _JSON_EMPTY.get(col, {})
    return out


class StoreError(RuntimeError):
    """The database could not be written (disk full, read-only home...)."""


class Store:
    """The daemon's records in SQLite (``<home>/mosaic.db``, WAL): runs, their tombstones and sweeps.

    Every change to a run bumps a global revision (``rev``): a client that saw revision R asks for
    what changed since (``changed_since``) and gets the rows and the deletions, nothing else. Other
    processes (the CLI's reads, a test) open the same file read-only beside the daemon. A write
    that fails (a full disk) raises StoreError, and the caller decides what that run's record does.
    """

    def __init__(self, path: os.PathLike | str):
        self.path = str(path)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self._brief_cache: dict[str, tuple[int, int, bytes]] = {}  # run id -> (rev, returns, brief row)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.db.executescript(_SCHEMA)
        have = {r[1] for r in self.db.execute("PRAGMA table_info(runs)")}
        for col, decl in _ADDED_COLUMNS.items():
            if col not in have:
                self.db.execute(f"ALTER TABLE runs ADD COLUMN {col} {decl}")
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None:
            self.db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            self.db.execute("INSERT OR IGNORE INTO meta VALUES ('rev', '0')")
        elif int(row[0]) != SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema version {row[0]}, this daemon knows {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the database (the daemon's last act)."""
        self.db.close()

    # -- helpers -----------------------------------------------------------
    def _next_rev(self) -> int:
        self.db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key='rev'")
        return int(self.db.execute("SELECT value FROM meta WHERE key='rev'").fetchone()[0])

    @property
    def rev(self) -> int:
        """The latest revision: every run change so far, counted."""
        return int(self.db.execute("SELECT value FROM meta WHERE key='rev'").fetchone()[0])

    @staticmethod
    def _row(row: sqlite3.Row | None, wire: bool = False) -> dict[str, Any] | None:
        """A row as a dict; ``wire``: its JSON columns left as text for protocol.dumps
        (an answer listing 10,000 runs is not parsed and encoded again on its way out)."""
        if row is None:
            return None
        out = dict(row)
        for col in _JSON_COLUMNS:
            text = out[col]
            out[col] = _JSON_EMPTY.get(col, {}) if not text else raw_json(text) if wire else json.loads(text)
        out["cancel_requested"] = bool(out["cancel_requested"])
        if "stop_requested" in out:
            out["stop_requested"] = bool(out["stop_requested"])
        return out

    def _write(self, fn, *args):
        try:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                value = fn(*args)
                self.db.execute("COMMIT")
                return value
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            raise StoreError(f"cannot write {self.path}: {exc}") from exc

    # -- runs --------------------------------------------------------------
    def create_run(self, run: dict[str, Any]) -> dict[str, Any]:
        """Insert a new run (its id, name, config, state...) at a new revision; the stored row."""
        def op():
            rev = self._next_rev()
            values = {col: run.get(col) for col in _COLUMNS}
            values.update(rev=rev, cancel_requested=int(bool(run.get("cancel_requested"))),
                          stop_requested=int(bool(run.get("stop_requested"))), restarts=run.get("restarts") or 0,
                          ingest_offset=run.get("ingest_offset", 0), paused_seconds=run.get("paused_seconds") or 0.0,
                          note=run.get("note") or "")
            for col in _JSON_COLUMNS:
                values[col] = json.dumps(run.get(col) or _JSON_EMPTY.get(col, {}))
            cols = ",".join(_COLUMNS)
            marks = ",".join("?" for _ in _COLUMNS)
            self.db.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", [values[c] for c in _COLUMNS])
            return self.get(run["id"])
        return self._write(op)

    def update_run(self, run_id: str, **fields: Any) -> dict[str, Any] | None:
        """Change fields of a run; bumps its revision. Returns the new row."""
        def op():
            rev = self._next_rev()
            sets, values = ["rev = ?"], [rev]
            for key, value in fields.items():
                if key not in _COLUMNS or key in ("id", "rev"):
                    raise KeyError(key)
                if key in _JSON_COLUMNS:
                    value = json.dumps(value)
                if key in ("cancel_requested", "stop_requested"):
                    value = int(bool(value))
                sets.append(f"{key} = ?")
                values.append(value)
            values.append(run_id)
            cur = self.db.execute(f"UPDATE runs SET {', '.join(sets)} WHERE id = ?", values)
            return self.get(run_id) if cur.rowcount else None
        return self._write(op)

    def set_ingest(self, run_id: str, offset: int, summary: dict[str, Any]) -> None:
        """Persist ingest progress without bumping the revision (clients get
        summaries through the throttled run notifications)."""
        def op():
            self.db.execute("UPDATE runs SET ingest_offset = ?, summary = ? WHERE id = ?",
                            (offset, json.dumps(summary), run_id))
        self._write(op)

    def delete_run(self, run_id: str) -> int:
        """Delete a run's row and leave a tombstone at a new revision (clients learn of the deletion); that revision."""
        def op():
            rev = self._next_rev()
            self.db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
            self.db.execute("INSERT OR REPLACE INTO tombstones VALUES (?, ?)", (run_id, rev))
            return rev
        return self._write(op)

    def get(self, run_id: str) -> dict[str, Any] | None:
        """A run's row by its exact id, or None."""
        return self._row(self.db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())

    def list(self, states: Iterable[str] | None = None, wire: bool = False) -> list[dict[str, Any]]:
        """Runs, oldest first; ``wire``: only to be sent (see _row)."""
        if states is None:
            rows = self.db.execute("SELECT * FROM runs ORDER BY id").fetchall()
        else:
            states = list(states)
            marks = ",".join("?" for _ in states)
            rows = self.db.execute(f"SELECT * FROM runs WHERE state IN ({marks}) ORDER BY id", states).fetchall()
        return [self._row(r, wire) for r in rows]

    def list_brief(self, states: Iterable[str] | None = None, returns: int = 0) -> Any:
        """Runs, oldest first, with only what a listing shows (``mosaic ls``): the
        run's names, state and times, tags and note, the config's mode and steps, the
        summary's progress, best and system sample, and the mean of its last
        ``returns`` episode returns (``mean_return``: fmt.smoothed_return takes
        it as it is). An answer ready to send (raw JSON).

        10,000 full runs are ~20 MB on the socket, most of it configs and the
        100 returns each summary keeps; the brief rows are a fifth of that.
        Each run's brief row is kept encoded until its revision changes: a
        finished run is read and encoded once, not at every listing.
        """
        returns = max(0, returns)
        query = "SELECT id, rev FROM runs"
        args: list[Any] = []
        if states is not None:
            args = list(states)
            query += f" WHERE state IN ({','.join('?' for _ in args) or 'NULL'})"
        cache = self._brief_cache
        stale = []
        ids = []
        for run_id, rev in self.db.execute(query + " ORDER BY id", args):
            ids.append(run_id)
            hit = cache.get(run_id)
            if hit is None or hit[0] != rev or hit[1] != returns:
                stale.append(run_id)
        for start in range(0, len(stale), 500):
            batch = stale[start:start + 500]
            cols = ", ".join(BRIEF_COLUMNS)
            for row in self.db.execute(f"SELECT {cols}, cancel_requested, tags, config, summary, resources FROM runs "
                                       f"WHERE id IN ({','.join('?' for _ in batch)})", batch):
                run = dict(zip(BRIEF_COLUMNS, row))
                cancel, tags, config, summary, resources = row[len(BRIEF_COLUMNS):]
                if resources and '"orphans"' in resources:   # a lost run still running: the listing says so
                    run["resources"] = {"orphans": _parse(resources).get("orphans")}
                config = _parse(config) if config else {}
                summary = _parse(summary) if summary else {}
                run["cancel_requested"] = bool(cancel)
                run["tags"] = _parse(tags) if tags else []
                run["config"] = {"mode": config.get("mode"), "steps": config.get("steps")}
                brief = {key: summary[key] for key in BRIEF_SUMMARY_KEYS if key in summary}
                brief["mean_return"] = mean_return(summary.get("returns") or [], returns) if returns else None
                run["summary"] = brief
                cache[run["id"]] = (run["rev"], returns, dumps(run))
        if len(cache) > len(ids) + 1000:  # deleted runs: forget them
            keep = set(ids)
            for run_id in [r for r in cache if r not in keep]:
                del cache[run_id]
        return raw_fragment(b"[" + b",".join([cache[run_id][2] for run_id in ids]) + b"]")

    def count_by_state(self) -> dict[str, int]:
        """How many runs are in each state (``status``)."""
        return dict(self.db.execute("SELECT state, COUNT(*) FROM runs GROUP BY state").fetchall())

    def changed_since(self, rev: int, wire: bool = False) -> tuple[list[dict[str, Any]], list[tuple[str, int]]]:
        """Rows and tombstones with a revision above rev, oldest first; ``wire`` as in list."""
        rows = self.db.execute("SELECT * FROM runs WHERE rev > ? ORDER BY rev", (rev,)).fetchall()
        tombs = self.db.execute("SELECT id, rev FROM tombstones WHERE rev > ? ORDER BY rev", (rev,)).fetchall()
        return [self._row(r, wire) for r in rows], [(t[0], t[1]) for t in tombs]

    def resolve(self, ref: str) -> list[dict[str, Any]]:
        """Runs matching a name exactly, or an id (case-insensitive prefix)."""
        row = self.db.execute("SELECT * FROM runs WHERE name = ?", (ref,)).fetchone()
        if row is not None:
            return [self._row(row)]
        prefix = ref.upper()
        if not prefix or any(c not in _CROCKFORD for c in prefix):
            return []  # not an id prefix (and never a LIKE pattern)
        rows = self.db.execute("SELECT * FROM runs WHERE id LIKE ? ORDER BY id LIMIT 10", (prefix + "%",)).fetchall()
        return [self._row(r) for r in rows]

    # -- sweeps ------------------------------------------------------------
    def create_sweep(self, sweep: dict[str, Any]) -> dict[str, Any]:
        """Insert a sweep (id, name, spec, state, created_at); the stored row."""
        def op():
            self.db.execute("INSERT INTO sweeps (id, name, spec, state, created_at) VALUES (?, ?, ?, ?, ?)",
                            (sweep["id"], sweep["name"], json.dumps(sweep["spec"]), sweep["state"],
                             sweep["created_at"]))
        self._write(op)
        return self.get_sweep(sweep["id"])

    def update_sweep(self, sweep_id: str, **fields: Any) -> None:
        """Set a sweep's ``state`` and ``ended_at`` (no other field changes)."""
        def op():
            for key, value in fields.items():
                if key not in ("state", "ended_at"):
                    raise KeyError(key)
                self.db.execute(f"UPDATE sweeps SET {key} = ? WHERE id = ?", (value, sweep_id))
        self._write(op)

    def get_sweep(self, sweep_id: str) -> dict[str, Any] | None:
        """A sweep by its exact id, its spec parsed, or None."""
        row = self.db.execute("SELECT * FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
        if row is None:
            return None
        out = dict(row)
        out["spec"] = json.loads(out["spec"])
        return out

    def list_sweeps(self) -> list[dict[str, Any]]:
        """Every sweep, oldest first."""
        return [self.get_sweep(r[0]) for r in self.db.execute("SELECT id FROM sweeps ORDER BY id")]

    def resolve_sweep(self, ref: str) -> list[dict[str, Any]]:
        """Sweeps matching a name exactly, or an id (case-insensitive prefix), as ``resolve`` does for runs."""
        row = self.db.execute("SELECT id FROM sweeps WHERE name = ?", (ref,)).fetchone()
        if row is not None:
            return [self.get_sweep(row[0])]
        prefix = ref.upper()
        if not prefix or any(c not in _CROCKFORD for c in prefix):
            return []
        rows = self.db.execute("SELECT id FROM sweeps WHERE id LIKE ? ORDER BY id LIMIT 10", (prefix + "%",))
        return [self.get_sweep(r[0]) for r in rows.fetchall()]

    def sweep_runs(self, sweep_id: str) -> list[dict[str, Any]]:
        """A sweep's runs, by trial, then id."""
        rows = self.db.execute("SELECT * FROM runs WHERE sweep = ? ORDER BY trial, id", (sweep_id,)).fetchall()
        return [self._row(r) for r in rows]

    def name_taken(self, name: str) -> bool:
        """Whether a run already has this name (names are unique)."""
        return self.db.execute("SELECT 1 FROM runs WHERE name = ?", (name,)).fetchone() is not None
