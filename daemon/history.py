"""A run's scalar history at a bounded size: what a plot of a long run is drawn from.

A plot is a few hundred columns wide and a run can report ten million points.
Sending them all to the app to draw one min/max pair per column cost 34 s and
750 MB; what the columns need is far less. For each tag the daemon keeps at
most MAX_BUCKETS *buckets* of consecutive points, each with its points' count,
finite count and sum (so the mean), finite minimum and maximum, and the step,
wall time and value of its last point. A tag starts with a bucket per point,
which is the points themselves, exactly; when it reaches MAX_BUCKETS buckets,
neighbours merge in pairs, so every bucket covers about 2^k points and the work
per point stays constant. A tag of under MAX_BUCKETS points (most of them) is
served exactly; a longer one as MAX_BUCKETS/2 to MAX_BUCKETS buckets, from
which the app draws the same envelope (a bucket's min and max are its points'),
the same last value and the smoothed curve over bucket means (TensorBoard
itself smooths a sample: it keeps 1,000 points of a tag).

Built while the daemon ingests (``RunTail`` hands over the events it parsed
anyway; points wait in lists and are bucketed SETTLE_EVERY at a time, in
numpy), and saved beside the events file with the byte offset it covers. A
history that is missing or behind that offset (a run from before histories, a
daemon killed before it saved) is caught up from the events file when a client
asks, then saved. Clients take a history, then follow the run's events from
its offset: nothing is missed or counted twice.

numpy is imported here only, and this module only once a run has points.
"""
from __future__ import annotations

import asyncio
import json
import operator
import os
from collections import OrderedDict
from typing import Any

import numpy as np

from workers.sdk import telemetry as tm

HISTORY_FILE = "history.npz"
FORMAT = 1
MAX_BUCKETS = 8192          # per tag (even); merged down to half of it when reached
# points waiting in lists before they are bucketed: 16,384 a time held the event loop ~4.5 ms
# (a delivery-latency tail); 2,048 holds it under 1 ms for 7% more bucketing time
SETTLE_EVERY = 2_048
CATCH_UP_CHUNK = 4 * 1024 * 1024   # bytes of the events file parsed per step of a catch-up
KEEP_FINISHED = 4           # histories of finished runs kept in memory after a client asked

# the rows of a tag's bucket array
STEP, T, LAST, COUNT, FINITE, SUM, LO, HI = range(8)
ROWS = 8

_type = operator.itemgetter("type")
_tag = operator.itemgetter("tag")
_step = operator.itemgetter("step")
_value = operator.itemgetter("value")
_t = operator.itemgetter("t")


def _floats(values: list) -> np.ndarray:
    """Values as the app reads them (telemetry.float_of): numbers, "nan"/"inf"/"-inf", else NaN."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        return np.array([tm.float_of(v) for v in values], dtype=np.float64)


def _buckets(step: np.ndarray, value: np.ndarray, t: np.ndarray, size: int) -> np.ndarray:
    """Whole buckets of ``size`` consecutive points (len a multiple of size) as a ROWS x m array."""
    m = len(step) // size
    out = np.empty((ROWS, m))
    v = value.reshape(m, size)
    finite = np.isfinite(v)
    out[STEP] = step[size - 1::size]
    out[T] = t[size - 1::size]
    out[LAST] = v[:, -1]
    out[COUNT] = size
    out[FINITE] = finite.sum(axis=1)
    out[SUM] = np.where(finite, v, 0.0).sum(axis=1)
    kept = np.where(finite, v, np.nan)
    out[LO] = np.fmin.reduce(kept, axis=1)
    out[HI] = np.fmax.reduce(kept, axis=1)
    return out


def _wire_floats(values: np.ndarray) -> list:
    """A column for JSON: NaN as null (what orjson writes), infinities as "inf"/"-inf", which
    orjson would also turn into null and the app reads back (telemetry.float_of)."""
    out = values.tolist()
    if np.isinf(values).any():
        out = ["inf" if v == np.inf else "-inf" if v == -np.inf else v for v in out]
    return out


class TagHistory:
    """One tag's buckets, plus the points of the bucket being filled (``carry``)."""

    __slots__ = ("size", "cols", "n", "carry")

    def __init__(self, size: int = 1, cols: np.ndarray | None = None, carry: np.ndarray | None = None):
        self.size = size                        # points per new bucket (a power of two)
        self.cols = cols if cols is not None else np.empty((ROWS, 256))
        self.n = cols.shape[1] if cols is not None else 0
        self.carry = carry if carry is not None and carry.shape[1] else None   # 3 x k: step, value, t

    def add(self, step: np.ndarray, value: np.ndarray, t: np.ndarray) -> None:
        if self.carry is not None:
            step = np.concatenate([self.carry[0], step])
            value = np.concatenate([self.carry[1], value])
            t = np.concatenate([self.carry[2], t])
            self.carry = None
        done = 0
        while len(step) - done >= self.size:
            # Up to MAX_BUCKETS, then merge: buckets then always hold ``size`` points each and
            # start at multiples of it, so the history of the same points is the same however
            # they were chunked (ingested live, or rebuilt from the file).
            whole = min((len(step) - done) // self.size, MAX_BUCKETS - self.n) * self.size
            part = slice(done, done + whole)
            self._append(_buckets(step[part], value[part], t[part], self.size))
            done += whole
            if self.n >= MAX_BUCKETS:
                self._merge()
        if done < len(step):
            self.carry = np.stack([step[done:], value[done:], t[done:]])

    def _append(self, new: np.ndarray) -> None:
        m = new.shape[1]
        if self.n + m > self.cols.shape[1]:
            grown = np.empty((ROWS, max(self.n + m, min(2 * self.cols.shape[1], MAX_BUCKETS))))
            grown[:, :self.n] = self.cols[:, :self.n]
            self.cols = grown
        self.cols[:, self.n:self.n + m] = new
        self.n += m

    def _merge(self) -> None:
        """Neighbours in pairs (MAX_BUCKETS is even): half the buckets, each twice the points."""
        pairs = self.n // 2
        a, b = self.cols[:, 0:2 * pairs:2], self.cols[:, 1:2 * pairs:2]
        merged = np.empty((ROWS, pairs))
        merged[[STEP, T, LAST]] = b[[STEP, T, LAST]]
        merged[[COUNT, FINITE, SUM]] = a[[COUNT, FINITE, SUM]] + b[[COUNT, FINITE, SUM]]
        merged[LO] = np.fmin(a[LO], b[LO])
        merged[HI] = np.fmax(a[HI], b[HI])
        self.cols[:, :pairs] = merged
        self.n = pairs
        self.size *= 2

    def buckets(self) -> np.ndarray:
        """Every bucket, the one being filled last (a bucket of fewer points)."""
        cols = self.cols[:, :self.n]
        if self.carry is None:
            return cols
        step, value, t = self.carry
        partial = np.empty((ROWS, 1))
        finite = np.isfinite(value)
        partial[STEP, 0], partial[T, 0], partial[LAST, 0] = step[-1], t[-1], value[-1]
        partial[COUNT, 0], partial[FINITE, 0] = len(value), finite.sum()
        partial[SUM, 0] = value[finite].sum()
        partial[LO, 0] = value[finite].min() if finite.any() else np.nan
        partial[HI, 0] = value[finite].max() if finite.any() else np.nan
        return np.concatenate([cols, partial], axis=1)

    def wire(self) -> dict[str, Any]:
        """The tag as the ``history`` method sends it: exact points while every bucket is
        one point, else the buckets (NaN goes as null)."""
        cols = self.buckets()
        out: dict[str, Any] = {"n": int(cols[COUNT].sum()), "size": self.size,
                               "step": cols[STEP].tolist(), "t": cols[T].tolist()}
        if self.size == 1:
            out["value"] = _wire_floats(cols[LAST])
            return out
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(cols[FINITE] > 0, cols[SUM] / cols[FINITE], np.nan)
        out.update(value=mean.tolist(), last=_wire_floats(cols[LAST]), count=cols[COUNT].astype(np.int64).tolist(),
                   finite=cols[FINITE].astype(np.int64).tolist(), lo=cols[LO].tolist(), hi=cols[HI].tolist())
        return out


class RunHistory:
    """Every tag of one run, up to byte offset ``covered`` of its events file."""

    def __init__(self, covered: int = 0):
        self.covered = covered
        self.tags: dict[str, TagHistory] = {}
        self.t0: float | None = None            # the first point's wall time (the x origin by time)
        self.saved_at = covered                 # the offset the file on disk covers
        self._tag: list = []
        self._step: list = []
        self._value: list = []
        self._t: list = []

    # -- taking points ---------------------------------------------------------------
    def add_events(self, events: list[dict[str, Any]], offset: int,
                   plain: tuple[list[int], set[str]] | None = None) -> None:
        """The parsed events of the file up to ``offset``: scalars and episode tags kept, the
        rest not. ``plain``: the caller (RunTail._absorb_scalars) found every event a scalar
        with a str tag and an int step; these are the steps and the set of tags, so the
        checks are not made twice."""
        steps, tags = plain if plain is not None else (None, None)
        if steps is not None and len(tags) == 1 and len(events) >= 256:
            try:   # one tag in a big chunk (a busy run's usual chunk): straight into numpy
                value = np.fromiter(map(_value, events), np.float64, len(events))
                t = np.fromiter(map(_t, events), np.float64, len(events))
            except (KeyError, TypeError, ValueError):
                pass
            else:
                self.settle()                  # the points before these go first
                if self.t0 is None and len(t) and t[0]:
                    self.t0 = float(t[0])
                self._tag_history(next(iter(tags))).add(np.array(steps, dtype=np.float64), value, t)
                self.covered = offset
                return
        try:
            if steps is not None or (events and set(map(_type, events)) == {tm.SCALAR}):
                # a chunk of plain scalars (most of a busy run's): columns taken in C, no loop
                tags = list(map(_tag, events))
                values, ts = list(map(_value, events)), list(map(_t, events))
                if steps is None:
                    steps = list(map(_step, events))
                    if set(map(type, tags)) != {str}:
                        raise KeyError("tag")
                self._tag += tags
                self._step += steps
                self._value += values
                self._t += ts
                events = []
        except KeyError:      # a scalar without a step or a time, or a tag that is no string: the loop below
            pass
        for ev in events:
            kind = ev.get("type")
            if kind == tm.SCALAR:
                tag = ev.get("tag")
                if isinstance(tag, str):
                    self._point(tag, ev.get("step"), ev.get("value"), ev.get("t"))
            elif kind == tm.EPISODE:
                for tag, value in tm.episode_scalars(ev):
                    self._point(tag, ev.get("step"), value, ev.get("t"))
        self.covered = offset
        if len(self._tag) >= SETTLE_EVERY:
            self.settle()

    def _point(self, tag: str, step: Any, value: Any, t: Any) -> None:
        self._tag.append(tag)
        self._step.append(step)
        self._value.append(value)
        self._t.append(t)

    def settle(self) -> None:
        """Bucket the points waiting in lists."""
        if not self._tag:
            return
        tags, self._tag = self._tag, []
        # missing steps and times count as 0, as the app has always read them
        step = np.nan_to_num(_floats(self._step), nan=0.0)
        value = _floats(self._value)
        t = np.nan_to_num(_floats(self._t), nan=0.0)
        self._step, self._value, self._t = [], [], []
        if self.t0 is None:
            self.t0 = float(t[0]) if t[0] else None
        distinct = set(tags)
        if len(distinct) == 1:
            self._tag_history(tags[0]).add(step, value, t)
            return
        code_of = {tag: i for i, tag in enumerate(distinct)}
        codes = np.fromiter(map(code_of.__getitem__, tags), dtype=np.int32, count=len(tags))
        order = np.argsort(codes, kind="stable")      # stable: each tag's points stay in file order
        bounds = np.cumsum(np.bincount(codes, minlength=len(code_of)))
        start = 0
        for tag, end in zip(code_of, bounds.tolist()):
            idx = order[start:end]
            start = end
            self._tag_history(tag).add(step[idx], value[idx], t[idx])

    def _tag_history(self, tag: str) -> TagHistory:
        h = self.tags.get(tag)
        if h is None:
            h = self.tags[tag] = TagHistory()
        return h

    # -- serving -----------------------------------------------------------------------
    def wire(self, tags: list[str] | None = None) -> dict[str, Any]:
        self.settle()
        wanted = self.tags if tags is None else [t for t in tags if t in self.tags]
        return {"offset": self.covered, "t0": self.t0, "tags": {tag: self.tags[tag].wire() for tag in wanted}}

    # -- on disk -----------------------------------------------------------------------
    def save(self, path: str) -> None:
        """Write atomically (a torn file is never read: the old one stays until the rename)."""
        self.settle()
        names = list(self.tags)
        meta = {"format": FORMAT, "covered": self.covered, "t0": self.t0,
                "tags": [[name, self.tags[name].size] for name in names]}
        arrays: dict[str, np.ndarray] = {"meta": np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
        for i, name in enumerate(names):
            h = self.tags[name]
            arrays[f"b{i}"] = h.cols[:, :h.n]
            if h.carry is not None:
                arrays[f"c{i}"] = h.carry
        tmp = f"{path}.tmp"
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
        self.saved_at = self.covered

    @classmethod
    def load(cls, path: str) -> "RunHistory | None":
        """The saved history, or None when there is none or it cannot be read (it is rebuilt)."""
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(bytes(data["meta"]).decode())
                if meta.get("format") != FORMAT:
                    return None
                h = cls(int(meta["covered"]))
                h.t0 = meta.get("t0")
                for i, (name, size) in enumerate(meta["tags"]):
                    cols = np.array(data[f"b{i}"], dtype=np.float64)
                    carry = np.array(data[f"c{i}"], dtype=np.float64) if f"c{i}" in data.files else None
                    if cols.ndim != 2 or cols.shape[0] != ROWS:
                        return None
                    h.tags[name] = TagHistory(int(size), cols.copy(), carry)
                return h
        except Exception:   # missing, torn (zipfile.BadZipFile), another layout: rebuilt instead
            return None


class Histories:
    """The histories clients ask for: a live run's is its tail's; a finished run's is
    loaded (or caught up from its events file, then saved) and kept for a while."""

    def __init__(self, keep: int = KEEP_FINISHED):
        self.keep = keep
        self.cache: OrderedDict[str, RunHistory] = OrderedDict()
        self._building: dict[str, asyncio.Lock] = {}

    async def get(self, run_id: str, run_dir: str, end: int, tail: Any = None) -> RunHistory:
        """The run's history up to ``end`` (a live run's: up to its tail, which then keeps it)."""
        from daemon.home import EVENTS_FILE
        from daemon.ingest import read_range
        if tail is not None and tail.history is not None:
            return tail.history
        lock = self._building.setdefault(run_id, asyncio.Lock())
        async with lock:
            if tail is not None and tail.history is not None:
                return tail.history
            path = os.path.join(run_dir, HISTORY_FILE)
            h = self.cache.pop(run_id, None) or RunHistory.load(path) or RunHistory()
            events = os.path.join(run_dir, EVENTS_FILE)
            while True:
                target = tail.offset if tail is not None else end
                if h.covered > target:         # a file that does not match the events: start over
                    h = RunHistory()
                if h.covered == target:
                    break
                nxt, _raws, parsed = read_range(events, h.covered, target, CATCH_UP_CHUNK)
                if nxt <= h.covered:
                    break
                h.add_events(parsed, nxt)
                await asyncio.sleep(0)         # other clients and the ingest go on meanwhile
            if h.covered != h.saved_at:
                try:
                    h.save(path)
                except OSError:
                    pass                       # a full disk: served anyway, rebuilt next time
            if tail is not None and tail.history is None and h.covered == tail.offset:
                tail.history = h               # no await since the last read: the ingest goes on from here
            else:
                self.cache[run_id] = h
                while len(self.cache) > self.keep:
                    self.cache.popitem(last=False)
        self._building.pop(run_id, None)
        return h

    def forget(self, run_id: str) -> None:
        self.cache.pop(run_id, None)
