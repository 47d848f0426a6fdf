"""Metric series in numpy: growable columns, TensorBoard's smoothing, decimation.

A ``Series`` holds one scalar tag of one run (or one of the tags an episode
event maps to, ``workers.sdk.telemetry.episode_scalars``) as three columns (step, value,
wall time), appended as telemetry arrives. ``ema`` is TensorBoard's debiased
exponential moving average; ``decimate`` shrinks a series to the columns of a
plot, keeping each column's minimum and maximum, so a million points draw as
fast as a thousand. No Textual here: ``mosaic watch`` and the benchmarks use it.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from workers.sdk.telemetry import EPISODE_LENGTH_TAG, EPISODE_RETURN_TAG, episode_scalars
from workers.sdk.telemetry import float_of as to_float


class Series:
    """One tag: step, value and wall time columns, amortised O(1) appends."""

    __slots__ = ("_step", "_value", "_wall", "n", "version", "_ema_key", "_ema", "_ema_state", "_sorted_upto",
                 "_sorted", "_spread", "_spread_version", "_spread_done", "_decimated",
                 "reduced", "_lo", "_hi", "_last", "_count", "_finite", "_bucket_points")

    def __init__(self, capacity: int = 256):
        self._step = np.empty(capacity, dtype=np.float64)
        self._value = np.empty(capacity, dtype=np.float64)
        self._wall = np.empty(capacity, dtype=np.float64)
        self.n = 0
        self.version = 0          # bumped on every change (plots cache on it)
        self._ema_key: float | None = None
        self._ema: np.ndarray | None = None
        self._ema_state: tuple[float, int, int] = (0.0, 0, 0)  # last, count, points done
        self._sorted_upto = 0     # steps[:_sorted_upto] checked to be non-decreasing
        self._sorted = True
        self._spread: np.ndarray | None = None
        self._spread_version = -1
        self._spread_done = 0      # points whose x is final (before the last group of equal steps)
        self._decimated: dict[tuple, tuple[int, np.ndarray, np.ndarray]] = {}
        # A history the daemon sent as buckets (daemon/history.py): the first ``reduced`` points
        # are buckets of consecutive points, each at its last step and wall time with its mean as
        # the value; beside them their min and max (the envelope), last value, point count and
        # finite count. Points appended later are points.
        self.reduced = 0
        self._lo = self._hi = self._last = self._count = self._finite = None
        self._bucket_points = 0

    def load_history(self, tag: dict) -> None:
        """Start an empty series from one tag of a ``history`` reply (exact points, or buckets)."""
        if self.n:
            raise ValueError("a history goes into an empty series only")
        steps, values, walls = (np.array(tag[k], dtype=np.float64) for k in ("step", "value", "t"))
        if "count" not in tag:
            self.extend(steps, values, walls)
            return
        self.extend(steps, values, walls)
        self._lo, self._hi, self._last = (np.array(tag[k], dtype=np.float64) for k in ("lo", "hi", "last"))
        self._count = np.array(tag["count"], dtype=np.float64)
        self._finite = np.array(tag["finite"], dtype=np.float64)
        self.reduced = self.n
        self._bucket_points = int(self._count.sum())

    @property
    def total(self) -> int:
        """How many points the series stands for (its buckets' points counted)."""
        return self.n - self.reduced + self._bucket_points

    def value_range(self) -> tuple[float, float] | None:
        """The smallest and largest finite value of every point (buckets' min and max), None if none."""
        parts = [self._value[self.reduced:self.n]]
        if self.reduced:
            parts += [self._lo, self._hi]
        v = np.concatenate(parts)
        v = v[np.isfinite(v)]
        return (float(v.min()), float(v.max())) if len(v) else None

    def envelope(self) -> tuple[np.ndarray, np.ndarray]:
        """Each point's low and high: a bucket's min and max, a point's own value twice."""
        if not self.reduced:
            return self.values, self.values
        tail = self._value[self.reduced:self.n]
        return np.concatenate([self._lo, tail]), np.concatenate([self._hi, tail])

    def _grow(self, need: int) -> None:
        cap = len(self._step)
        if need <= cap:
            return
        new = max(need, cap + cap // 2)   # x1.5: ten million points must not hold room for twenty
        for name in ("_step", "_value", "_wall"):
            old = getattr(self, name)
            arr = np.empty(new, dtype=np.float64)
            arr[:self.n] = old[:self.n]
            setattr(self, name, arr)

    def append(self, step: float, value: float, wall: float) -> None:
        if self.n >= len(self._step):
            self._grow(self.n + 1)
        i = self.n
        self._step[i] = step
        self._value[i] = value
        self._wall[i] = wall
        self.n = i + 1
        self.version += 1

    def extend(self, steps: Iterable[float], values: Iterable[float], walls: Iterable[float]) -> None:
        s = np.asarray(list(steps), dtype=np.float64)
        v = np.asarray(list(values), dtype=np.float64)
        w = np.asarray(list(walls), dtype=np.float64)
        k = len(s)
        if not k:
            return
        self._grow(self.n + k)
        self._step[self.n:self.n + k] = s
        self._value[self.n:self.n + k] = v
        self._wall[self.n:self.n + k] = w
        self.n += k
        self.version += 1

    @property
    def steps(self) -> np.ndarray:
        return self._step[:self.n]

    @property
    def values(self) -> np.ndarray:
        return self._value[:self.n]

    @property
    def walls(self) -> np.ndarray:
        return self._wall[:self.n]

    def __len__(self) -> int:
        return self.n

    def last(self) -> float | None:
        if not self.n:
            return None
        if self.n == self.reduced:
            return float(self._last[-1])     # a bucket's value is its mean; its last point is this
        return float(self._value[self.n - 1])

    def smoothed(self, weight: float) -> np.ndarray:
        """ema(values, weight), extended incrementally as points arrive. Buckets move the
        average as their count of points at their mean would (ema_counted)."""
        if weight <= 0:
            return self.values
        if self._ema_key != weight or self._ema is None or self._ema_state[2] > self.n:
            self._ema_key = weight
            self._ema = np.empty(max(256, self.n))
            self._ema_state = (0.0, 0, 0)
        last, count, done = self._ema_state
        if done < self.n:
            if len(self._ema) < self.n:
                grown = np.empty(max(self.n, len(self._ema) + len(self._ema) // 2))
                grown[:done] = self._ema[:done]
                self._ema = grown
            if done < self.reduced:
                part, last, count = ema_counted(self._value[done:self.reduced], self._finite[done:self.reduced],
                                                weight, last, count)
                self._ema[done:self.reduced] = part
                done = self.reduced
            if done < self.n:
                part, last, count = ema(self._value[done:self.n], weight, last, count, with_state=True)
                self._ema[done:self.n] = part
            self._ema_state = (last, count, self.n)
        return self._ema[:self.n]

    @property
    def steps_sorted(self) -> bool:
        """Steps never go down (checked incrementally): decimation may bin by x range."""
        if self._sorted_upto < self.n:
            start = max(0, self._sorted_upto - 1)
            chunk = self._step[start:self.n]
            if self._sorted and len(chunk) > 1 and not bool(np.all(chunk[1:] >= chunk[:-1])):
                self._sorted = False
            self._sorted_upto = self.n
        return self._sorted


    def plot_steps(self) -> np.ndarray:
        """The x of each point on a step axis: ``spread_steps(steps)``, cached per version.

        Extended as points arrive: only the last group of equal steps (which
        new points may join) and the new points are placed again."""
        if self._spread_version == self.version:
            return self._spread
        steps = self.steps
        if not self.steps_sorted:
            self._spread, self._spread_done = steps, 0
        elif self._spread is None or self._spread_done == 0 or self._spread_done > self.n:
            self._spread = spread_steps(steps)
        else:
            done = self._spread_done
            tail = spread_steps(steps[done:], previous=float(steps[done - 1]))
            self._spread = np.concatenate([self._spread[:done], tail])
        if self.steps_sorted and self.n:
            # the last group may still grow: from its start on, place again next time
            self._spread_done = int(np.searchsorted(steps, steps[-1], side="left"))
        self._spread_version = self.version
        return self._spread

    def decimated(self, columns: int, weight: float = 0.0, logy: bool = False,
                  x_origin: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The (x, y) a plot of ``columns`` columns draws: ``decimate`` of the values smoothed
        with ``weight`` (raw at 0), on the step axis (plot_steps) or, given ``x_origin``, at
        wall time minus it; with ``logy`` the positive values only.

        Cached per version: redrawing a finished run's plot (log y toggled back, a theme, a
        resize back) is a lookup instead of passes over millions of points. With ``logy``
        the other values become NaN, which decimate skips, rather than being cut out: that
        copies the arrays once instead of twice."""
        key = (columns, weight, logy, x_origin)
        hit = self._decimated.get(key)
        if hit is not None and hit[0] == self.version:
            return hit[1], hit[2]
        if x_origin is None:
            x, x_sorted = self.plot_steps(), self.steps_sorted
        else:
            x, x_sorted = self.walls - x_origin, None
        y_hi = None
        if weight > 0:
            y = self.smoothed(weight)
        elif self.reduced:
            y, y_hi = self.envelope()      # the buckets' min and max: the points' own envelope
        else:
            y = self.values
        if logy:
            with np.errstate(invalid="ignore"):
                y = np.where(y > 0, y, np.nan)
                if y_hi is not None:
                    y_hi = np.where(y_hi > 0, y_hi, np.nan)
        xs, ys = decimate(x, y, columns, x_sorted, y_hi)
        if len(self._decimated) >= 16:   # options and sizes seen lately, not every one ever
            self._decimated.clear()
        self._decimated[key] = (self.version, xs, ys)
        return xs, ys


# Student's t at 0.975 for 1..30 degrees of freedom (a 95% band over a few seeds is wide:
# with 2 seeds, 12.7 standard errors); beyond 30 the normal 1.96. Here rather than scipy's
# t.ppf: scipy is no dependency of the app (tests/app/test_sweep_app.py checks them against it).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)
BANDS = ("minmax", "ci95")   # what a group's band spans: its seeds' min to max, or the 95% interval of their mean


def t975(dof: int) -> float:
    return T975[dof - 1] if 1 <= dof <= len(T975) else 1.96


def group_band(members: list[Series], band: str = "minmax") -> tuple[Series, Series, Series] | None:
    """Mean, low and high of several runs' series of one tag (a sweep trial's seeds), on the union of
    their steps; each run counts only within its own steps (a run behind does not pull the mean down).
    ``band`` "minmax": low and high are the seeds' min and max; "ci95": the 95% confidence interval of
    the mean, mean ± t(0.975, n-1)·s/√n over the n seeds that reached the step (the mean alone where
    only one did)."""
    members = [m for m in members if len(m)]
    if len(members) < 2:
        return None
    grid = np.unique(np.concatenate([m.steps for m in members]))
    stack = np.full((len(members), len(grid)), np.nan)
    for i, m in enumerate(members):
        order = np.argsort(m.steps, kind="stable")
        steps, values = m.steps[order], m.values[order]
        inside = (grid >= steps[0]) & (grid <= steps[-1])
        stack[i, inside] = np.interp(grid[inside], steps, values)
    walls = np.interp(grid, np.sort(members[0].steps), np.sort(members[0].walls))
    import warnings
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # a step only one run reached: its value, no spread
        mean = np.nanmean(stack, axis=0)
        if band == "ci95":
            n = np.sum(np.isfinite(stack), axis=0)
            half = np.array([t975(int(k) - 1) for k in n]) * np.nanstd(stack, axis=0, ddof=1) / np.sqrt(n)
            half = np.where(n > 1, half, 0.0)
            low, high = mean - half, mean + half
        else:
            low, high = np.nanmin(stack, axis=0), np.nanmax(stack, axis=0)
    out = []
    for column in (mean, low, high):
        ser = Series(len(grid))
        ser.extend(grid, column, walls)
        out.append(ser)
    return out[0], out[1], out[2]


def spread_steps(steps: np.ndarray, previous: float | None = None) -> np.ndarray:
    """Where to draw points reported at these (non-decreasing) steps.

    A value reported at step x stands for the steps since the series' previous
    step p: RLlib reports each metric once per training iteration, at the
    iteration's last step, and hands over the iteration's episodes together,
    all at that step. Drawn at x, a mean over an iteration leads its data by
    half an iteration and an iteration's episodes make a vertical stripe. So a
    group of k points at x is drawn evenly over (p, x], at p + (x - p)(i + 1/2)/k:
    one point lands at the interval's middle, and dense series move by half
    their spacing. The first group's p is ``previous`` (the step before these),
    else 0, or one group gap back for a series that starts late (a resumed run).
    """
    x = np.asarray(steps, dtype=np.float64)
    n = len(x)
    if n == 0:
        return x
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.not_equal(x[1:], x[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    group_x = x[starts]
    if previous is not None:
        first_prev = previous
    elif group_x[0] <= 0:
        first_prev = group_x[0]
    elif len(group_x) > 1:
        first_prev = max(0.0, group_x[0] - (group_x[1] - group_x[0]))
    else:
        first_prev = 0.0
    prev = np.empty(len(group_x))
    prev[0] = first_prev
    prev[1:] = group_x[:-1]
    if len(starts) == n:        # one point a step, the usual case: the middle of each interval
        return (prev + x) * 0.5
    counts = np.diff(np.append(starts, n))
    index_in_group = np.arange(n) - np.repeat(starts, counts)
    return np.repeat(prev, counts) + np.repeat(group_x - prev, counts) * (index_in_group + 0.5) / np.repeat(counts, counts)


def ema(values: np.ndarray, weight: float, last: float = 0.0, count: int = 0, with_state: bool = False):
    """TensorBoard's debiased exponential moving average, vectorised.

    For each finite value: last = last * w + (1 - w) * v; count += 1;
    smoothed = last / (1 - w ** count). Non-finite values pass through as they
    are and do not move the average. Computed in blocks short enough that
    w ** -k stays far from overflow.
    """
    values = np.asarray(values, dtype=np.float64)
    out = values.copy()
    if weight <= 0 or len(values) == 0:
        return (out, last, count) if with_state else out
    w = float(weight)
    finite_idx = np.flatnonzero(np.isfinite(values))
    x = values[finite_idx]
    res = np.empty_like(x)
    if w >= 1.0:
        res[:] = last if count else (x[0] if len(x) else 0.0)
        out[finite_idx] = res
        return (out, last, count) if with_state else out
    # Blocks short enough that w ** -k stays far from overflow, all computed at
    # once as rows of a matrix; only the carry between blocks is a loop.
    block = max(1, min(4096, int(150.0 / -math.log10(w)))) if w > 0 else 4096
    m = len(x)
    if m:
        nb = -(-m // block)
        padded = np.zeros(nb * block)
        padded[:m] = x
        rows = padded.reshape(nb, block)
        k = np.arange(block, dtype=np.float64)
        wk = w ** k
        local = (1 - w) * wk * np.cumsum(rows * (w ** -k), axis=1)
        carry = np.empty(nb)
        wb = w ** block
        c = last
        ends = local[:, -1].tolist()
        for b in range(nb):
            carry[b] = c
            c = wb * c + ends[b]
        raw = (local + (wk * w) * carry[:, None]).ravel()[:m]
        n = count + np.arange(1, m + 1, dtype=np.float64)
        res[:] = raw / (1 - w ** n)
        last = float(raw[-1])
        count += m
    out[finite_idx] = res
    return (out, last, count) if with_state else out


def ema_counted(means: np.ndarray, counts: np.ndarray, weight: float, last: float = 0.0, count: int = 0):
    """``ema`` over buckets: a bucket of c finite points at mean m moves the average as c
    points of value m would (last = last * w**c + (1 - w**c) * m; count += c). Exact when
    a bucket's points are equal; else the mean stands for them. A loop: a history holds
    at most a few thousand buckets a tag. Returns (smoothed, last, count)."""
    out = np.array(means, dtype=np.float64)
    w = float(weight)
    for i, (m, c) in enumerate(zip(out.tolist(), np.asarray(counts).tolist())):
        if c <= 0 or not math.isfinite(m):
            continue
        if w >= 1.0:
            out[i] = last if count else m
            if not count:
                last, count = m, int(c)
            continue
        decay = w ** c
        last = last * decay + (1 - decay) * m
        count += int(c)
        out[i] = last / (1 - w ** count)
    return out, last, count


def decimate(x: np.ndarray, y: np.ndarray, columns: int, x_sorted: bool | None = None,
             y_hi: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """At most 2 points per column: each column's min and max, in x order.

    Columns split the x range evenly when x is sorted (steps, wall time), else
    the point index. NaN values are skipped (a column of NaN only is dropped);
    ``x_sorted`` spares the check when the caller knows. With ``y_hi``, each
    point spans y to y_hi (a bucket of points: its min and max).
    """
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = len(x)
    columns = max(1, int(columns))
    if y_hi is not None and n <= columns:
        x, y = np.repeat(x, 2), np.column_stack([y, np.asarray(y_hi, dtype=np.float64)]).ravel()
        y_hi = None
        n = len(x)
    if n <= 2 * columns and y_hi is None:
        keep = np.isfinite(y) & np.isfinite(x)
        return x[keep], y[keep]
    if x_sorted is None:
        x_sorted = bool(x[-1] >= x[0] and np.all(x[1:] >= x[:-1]))
    if x_sorted and np.isfinite(x[0]) and np.isfinite(x[-1]):
        edges = np.searchsorted(x, np.linspace(x[0], x[-1], columns + 1)[:-1], side="left")
    else:
        edges = np.linspace(0, n, columns + 1).astype(np.int64)[:-1]
    edges = np.unique(edges)
    with np.errstate(invalid="ignore"):
        ymin = np.fmin.reduceat(y, edges)
        ymax = np.fmax.reduceat(y if y_hi is None else np.asarray(y_hi, dtype=np.float64), edges)
    ends = np.append(edges[1:], n) - 1
    xs = np.empty(2 * len(edges))
    ys = np.empty(2 * len(edges))
    xs[0::2] = x[edges]
    xs[1::2] = x[ends]
    ys[0::2] = ymin
    ys[1::2] = ymax
    keep = np.isfinite(ys) & np.isfinite(xs)
    if not keep.all():
        xs, ys = xs[keep], ys[keep]
    return xs, ys


class RunSeries:
    """Every series of one run, fed by its telemetry events."""

    EPISODE_RETURN = EPISODE_RETURN_TAG
    EPISODE_LENGTH = EPISODE_LENGTH_TAG

    def __init__(self):
        self.tags: dict[str, Series] = {}
        self.t0: float | None = None     # first wall time (x axis by time)
        self.events = 0

    def load_history(self, reply: dict) -> set[str]:
        """Take a ``history`` reply (daemon/history.py) into tags that have no points yet."""
        changed: set[str] = set()
        if self.t0 is None and isinstance(reply.get("t0"), (int, float)):
            self.t0 = float(reply["t0"])
        for tag, data in (reply.get("tags") or {}).items():
            series = self.get(tag)
            if series.n or not data.get("step"):
                continue
            series.load_history(data)
            changed.add(tag)
        return changed

    def get(self, tag: str) -> Series:
        s = self.tags.get(tag)
        if s is None:
            s = self.tags[tag] = Series()
        return s

    def absorb(self, events: list[dict]) -> set[str]:
        """Add a chunk of events; return the tags that changed."""
        changed: set[str] = set()
        cols: dict[str, tuple[list, list, list]] = {}
        for ev in events:
            kind = ev.get("type")
            if kind == "scalar":
                tag = ev.get("tag")
                if not isinstance(tag, str):
                    continue
                c = cols.get(tag)
                if c is None:
                    c = cols[tag] = ([], [], [])
                t = ev.get("t") or 0.0
                c[0].append(ev.get("step") or 0)
                c[1].append(to_float(ev.get("value")))
                c[2].append(t)
            elif kind == "episode":
                t = ev.get("t") or 0.0
                step = ev.get("step") or 0
                for tag, value in episode_scalars(ev):
                    c = cols.get(tag)
                    if c is None:
                        c = cols[tag] = ([], [], [])
                    c[0].append(step)
                    c[1].append(to_float(value))
                    c[2].append(t)
        self.events += len(events)
        for tag, (steps, values, walls) in cols.items():
            if self.t0 is None and walls:
                self.t0 = float(walls[0])
            self.get(tag).extend(steps, values, walls)
            changed.add(tag)
        return changed
