"""A long run in the app: its history arrives at a bounded size (daemon/history.py: a tag of more
than MAX_BUCKETS points as buckets holding their points' count, mean, min, max and last), drawn
with the points' own envelope, and the run is followed from there. Events still stream through a
bounded queue: past ABSORB_BACKLOG events waiting, the app stops reading the daemon's socket until
it has caught up (a 10M-point run once piled up its events as Python dicts: 3 GB)."""
from __future__ import annotations

import pytest

from tests.app.conftest import wait_until

pytestmark = pytest.mark.anyio

POINTS = 120_000
BACKLOG = 3_000
# one daemon notification carries up to BACKLOG_CHUNK (1 MB) of lines, ~13,000 of these
ONE_NOTIFICATION = 14_000


async def test_a_long_history_streams_through_a_bounded_queue(daemon, monkeypatch):
    from bench.bench_scale import TAGS, write_long_run
    from mosaic_tui import link
    from mosaic_tui.app import MosaicApp
    monkeypatch.setattr(link, "ABSORB_BACKLOG", BACKLOG)

    async def no_history(self, run_ids):   # every event through the queue, as from a daemon without histories
        self._no_history.update(run_ids)
    monkeypatch.setattr(link.Link, "_histories", no_history)
    run_id = write_long_run(daemon, POINTS)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: run_id in app.link.runs, what="the long run listed")
        app.open_run(run_id)
        most = 0
        held = []          # while held: was the socket still read?

        def points_in() -> int:
            nonlocal most
            most = max(most, app.link.queued)
            if app.link._holding:
                held.append(app.link.client.writer.transport.is_reading())
            series = app.link.series.get(run_id)
            return sum(s.n for s in series.tags.values()) if series else 0

        await wait_until(pilot, lambda: points_in() >= POINTS, timeout=120, what="every point in")
        assert app.link.queued == 0 and not app.link._holding
        series = app.link.series[run_id]
        assert sorted(series.tags) == sorted(TAGS) and sum(s.n for s in series.tags.values()) == POINTS
        # every step once, in order, in each tag (nothing lost or doubled while the socket waited)
        for tag in TAGS:
            steps = series.tags[tag]._step[:series.tags[tag].n]
            assert (steps[1:] > steps[:-1]).all()
        assert 0 < most <= BACKLOG + ONE_NOTIFICATION
        # held, the socket itself is not read (the stream's buffer would take in up to 128 MB)
        assert held and not any(held)


def test_series_room_grows_by_half_not_double():
    """A series' columns (and its smoothed copy) hold at most half again their points: ten million
    points in a doubled buffer held room for up to twenty (717 MB of app for a 10M-point run)."""
    import numpy as np

    from mosaic_tui.series import Series
    series = Series()
    for chunk in range(200):
        steps = np.arange(chunk * 1_337, (chunk + 1) * 1_337, dtype=float)
        series.extend(steps, steps * 0.5, steps)
        series.smoothed(0.6)
        assert len(series._step) <= 1.5 * series.n + 256
        assert len(series._ema) <= 1.5 * series.n + 256
    assert series.n == 200 * 1_337
    assert np.array_equal(series.values, np.arange(series.n) * 0.5)


def _file_values(home, run_id: str, tag: str):
    import json

    import numpy as np
    with open(home.run_dir(run_id) / "events.jsonl", "rb") as f:
        return np.array([e["value"] for e in map(json.loads, f) if e.get("tag") == tag], dtype=np.float64)


async def test_a_long_run_opens_from_its_history_with_the_points_envelope(daemon):
    import numpy as np

    from bench.bench_scale import TAGS, write_long_run
    from daemon.history import MAX_BUCKETS
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.widgets.metric_plot import summary_of
    from mosaic_tui.widgets.metrics_pane import MetricsPane
    run_id = write_long_run(daemon, POINTS)
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: run_id in app.link.runs, what="the long run listed")
        app.open_run(run_id)
        series = None

        def all_in() -> bool:
            nonlocal series
            series = app.link.series.get(run_id)
            return series is not None and sum(s.total for s in series.tags.values()) == POINTS
        await wait_until(pilot, all_in, timeout=60, what="the whole history in")
        assert sorted(series.tags) == sorted(TAGS)
        for tag in TAGS:
            s = series.tags[tag]
            values = _file_values(daemon, run_id, tag)
            assert s.total == len(values) == POINTS // 4 and s.reduced == s.n <= MAX_BUCKETS
            assert s.value_range() == (values.min(), values.max()) and s.last() == values[-1]
            assert summary_of(s).endswith(f"n {POINTS // 4}")
            xs, ys = s.decimated(120)                   # unsmoothed: the points' own min and max
            assert (ys.min(), ys.max()) == (values.min(), values.max())
            smooth = s.smoothed(0.6)
            assert np.isfinite(smooth).all() and values.min() <= smooth.min() <= smooth.max() <= values.max()
        pane = app.screen.query_one(MetricsPane)
        await wait_until(pilot, lambda: len(pane.plots) == len(TAGS), what="a plot a tag")
        assert app.link.cursors[run_id] == app.link.runs[run_id]["ingest_offset"]


async def test_a_live_run_opened_long_into_it_goes_on_from_its_history(daemon, mosaic):
    from daemon import protocol as P
    from daemon.history import MAX_BUCKETS
    from mosaic_tui.app import MosaicApp
    from tests.helpers import wait_for
    steps = 3 * MAX_BUCKETS
    tag = "synthetic/value_0"
    run = mosaic.synthetic(steps, "rate=3000", "tags=1", "episode_every=0", name="live-long")
    wait_for(lambda: mosaic.show(run)["summary"].get("steps", 0) > 1.5 * MAX_BUCKETS, timeout=60,
             what="more points than a history keeps exactly")
    app = MosaicApp(daemon, restore=False, remember=False, cursor_blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: run in app.link.runs, what="the run listed")
        app.open_run(run)
        await wait_until(pilot, lambda: app.link.series.get(run) is not None and tag in app.link.series[run].tags,
                         what="the history in")
        s = app.link.series[run].tags[tag]
        assert s.reduced > 0 and app.link.runs[run]["state"] == P.RUNNING   # opened as buckets, mid-run
        await wait_until(pilot, lambda: app.link.runs[run]["state"] == P.SUCCEEDED, timeout=60, what="the run ends")
        await wait_until(pilot, lambda: s.total == steps, timeout=30, what="every point once")
        values = _file_values(daemon, run, tag)
        assert s.last() == values[-1] and s.value_range() == (values.min(), values.max())
        # the buckets' last steps, then each live point's, in order and none twice
        assert (s.steps[1:] > s.steps[:-1]).all() and s.steps[-1] == steps
        # compare's export writes every point, not the buckets: those up to the history's end
        # paged from the daemon, then the ones that came live
        import csv
        app.open_compare([run])
        await pilot.pause(0.3)
        await pilot.press("e")
        await wait_until(pilot, lambda: app.screen.last_export, timeout=30, what="the export")
        rows = [r for r in csv.DictReader(open(app.screen.last_export)) if r["tag"] == tag]
        assert [int(r["step"]) for r in rows] == list(range(1, steps + 1))
        assert [float(r["value"]) for r in rows] == values.tolist()
