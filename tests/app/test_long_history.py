"""A long run's history streams into the app through a bounded queue: past ABSORB_BACKLOG events
waiting, the app stops reading the daemon's socket until it has caught up (a 10M-point run
otherwise piled up its events as Python dicts: 3 GB before its Metrics tab had half of them)."""
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
