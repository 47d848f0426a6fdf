"""The app's Textual-independent parts: the link's bookkeeping, series maths, plotext speed-ups."""
from __future__ import annotations

import math
import random
import sys

import numpy as np
import pytest

from mosaic_tui import fmt
from mosaic_tui.link import Link
from mosaic_tui.series import RunSeries, Series, decimate, ema


def scalar(step, value=1.0, tag="a"):
    return {"v": 1, "type": "scalar", "t": 100.0 + step, "tag": tag, "value": value, "step": step}


def test_run_records_keep_the_newest_revision_and_tombstones():
    updates = []
    link = Link(None, updates.append)
    link.load([{"id": "A", "name": "a", "rev": 5, "state": "running"}], rev=5)
    link.feed("run", {"rev": 7, "run": {"id": "A", "name": "a", "rev": 7, "state": "succeeded"}})
    link.feed("run", {"rev": 6, "run": {"id": "A", "name": "a", "rev": 6, "state": "running"}})  # late repeat
    assert link.runs["A"]["state"] == "succeeded" and link.rev == 7
    link.feed("run", {"rev": 8, "deleted": "A"})
    link.flush()
    assert "A" not in link.runs and link.rev == 8
    assert len(updates) == 1 and updates[0].deleted == {"A"}  # one coalesced update


def test_events_are_absorbed_once_in_cursor_order():
    link = Link(None)
    link.watched.add("R")
    link.feed("events", {"run": "R", "from": 0, "to": 10, "events": [scalar(1), scalar(2)]})
    link.feed("events", {"run": "R", "from": 0, "to": 10, "events": [scalar(1), scalar(2)]})  # repeat
    link.feed("events", {"run": "R", "from": 10, "to": 20, "events": [scalar(3)]})
    link.feed("events", {"run": "R", "from": 30, "to": 40, "events": [scalar(9)]})  # gap: refused
    s = link.series["R"].tags["a"]
    assert s.steps.tolist() == [1, 2, 3] and link.cursors["R"] == 20


def test_episodes_become_series():
    rs = RunSeries()
    tags = rs.absorb([{"type": "episode", "t": 1.0, "step": 10, "return": 5.5, "length": 10},
                      {"type": "episode", "t": 2.0, "step": 20, "return": "nan", "length": 10}])
    assert tags == {"episode/return", "episode/length"}
    assert rs.tags["episode/return"].values[0] == 5.5 and np.isnan(rs.tags["episode/return"].values[1])


def ema_reference(values, weight: float) -> list[float]:
    """The loop TensorBoard runs, one value at a time: what ``ema`` is checked against."""
    last, count, out = 0.0, 0, []
    for v in values:
        if not math.isfinite(v):
            out.append(v)
            continue
        last = last * weight + (1 - weight) * v
        count += 1
        debias = 1 - weight ** count if weight != 1 else 1
        out.append(last / debias)
    return out


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.6, 0.9, 0.99, 0.999])
def test_ema_matches_tensorboard(weight):
    rng = np.random.default_rng(0)
    values = rng.normal(size=5000).cumsum()
    values[10] = np.nan
    values[20] = np.inf
    ref = np.array(ema_reference(values.tolist(), weight))
    got = ema(values, weight)
    finite = np.isfinite(ref)
    assert np.allclose(got[finite], ref[finite], rtol=1e-9, atol=1e-9)
    s = Series()
    for chunk in np.array_split(values, 9):  # incremental, as telemetry arrives
        s.extend(range(len(chunk)), chunk, [0.0] * len(chunk))
        s.smoothed(weight)
    assert np.allclose(s.smoothed(weight)[finite], ref[finite], rtol=1e-9, atol=1e-9)


def test_decimate_keeps_every_column_extreme():
    x = np.arange(100_000, dtype=float)
    y = np.sin(x / 1000.0)
    y[31_337] = 50.0     # a spike must survive
    y[77_777] = -40.0
    xs, ys = decimate(x, y, 100)
    assert len(xs) <= 200
    assert ys.max() == 50.0 and ys.min() == -40.0
    assert xs[0] == 0 and xs[-1] == 99_999


def test_a_series_decimation_for_log_y_keeps_positive_extremes_and_follows_new_points():
    s = Series()
    steps = np.arange(1, 200_001, dtype=float)
    values = np.sin(steps / 500.0)            # half of it at or below zero
    values[12_345] = 80.0
    s.extend(steps, values, steps * 1e-3)
    positive = values[values > 0]
    xs, ys = s.decimated(120, logy=True)
    assert len(xs) <= 240 and (ys > 0).all()
    assert ys.max() == 80.0 and ys.min() == positive.min()
    xs_lin, ys_lin = s.decimated(120)
    assert ys_lin.min() == values.min() and ys_lin.max() == 80.0
    # asked again with nothing new: the same arrays, not a new pass over the points
    assert s.decimated(120, logy=True)[1] is ys
    # smoothed, and on the wall-time axis: their own entries
    smooth = s.smoothed(0.6)
    assert s.decimated(120, 0.6)[1].max() == smooth.max()
    xt, _ = s.decimated(120, x_origin=float(s.walls[0]))
    assert xt[0] == 0.0 and abs(xt[-1] - (s.walls[-1] - s.walls[0])) < 1e-9
    # a new point changes what is drawn: the cache follows the series' version
    s.append(200_001.0, 500.0, 200.001)
    xs2, ys2 = s.decimated(120, logy=True)
    assert ys2.max() == 500.0 and xs2[-1] == s.plot_steps()[-1]
    s.append(200_002.0, -1e9, 200.002)
    assert s.decimated(120)[1].min() == -1e9
    assert s.decimated(120, logy=True)[1].min() == positive.min()


def test_decimating_a_million_points_makes_as_many_python_calls_as_a_thousand():
    """Decimation stays in numpy: its Python-level calls do not grow with the points, so a
    million-point plot redraws in the time bench_app measures (a load-proof check, not a timing)."""
    def calls(n: int) -> int:
        x = np.arange(n, dtype=float)
        y = np.random.default_rng(1).normal(size=n)
        count = 0

        def profile(frame, event, arg):
            nonlocal count
            count += event in ("call", "c_call")
        sys.setprofile(profile)
        try:
            xs, ys = decimate(x, y, 240)
        finally:
            sys.setprofile(None)
        assert len(xs) <= 2 * 240 and ys.max() == y.max() and ys.min() == y.min()
        return count

    assert calls(1_000_000) == calls(1_000)


def test_patched_plotext_draws_exactly_what_plotext_draws():
    from rich.style import Style
    from rich.text import Text
    from textual_plotext.plot import Plot

    from mosaic_tui import plotfast
    rng = random.Random(7)
    try:
        for _trial in range(25):
            w, h, n = rng.randint(10, 120), rng.randint(5, 40), rng.randint(2, 300)
            marker = rng.choice(["braille", "hd", "fhd", "dot"])
            series = []
            for _ in range(rng.randint(1, 3)):
                xs = sorted(rng.uniform(-100, 100) for _ in range(n))
                ys = [rng.gauss(0, 10) * rng.choice([1, 1000]) for _ in range(n)]
                series.append((xs, ys))
            outputs = []
            for install in (False, True):
                (plotfast.install if install else plotfast.uninstall)()
                p = Plot()
                p.plotsize(w, h)
                p._set_size(w, h)
                for xs, ys in series:
                    p.plot(xs, ys, marker=marker)
                outputs.append(p.build())
            assert outputs[0] == outputs[1]
            # the strips the app draws hold the same characters in the same styles
            # as Rich's own ANSI decoder makes of plotext's output
            lines = outputs[0].split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            strips = plotfast.ansi_to_strips(outputs[0], Style(), w)
            assert len(strips) == len(lines)
            for line, strip in zip(lines, strips):
                ref = Text.from_ansi(line)
                want = ["none"] * len(ref.plain)
                for span in ref.spans:
                    want[span.start:span.end] = [str(span.style)] * (span.end - span.start)
                got = [(ch, str(seg.style)) for seg in strip for ch in seg.text]
                assert "".join(ch for ch, _ in got)[:len(ref.plain)] == ref.plain
                assert [style for _, style in got][:len(want)] == want
    finally:
        plotfast.install()


def test_formatting():
    assert fmt.num(12345) == "12.3k" and fmt.num(0.5) == "0.5" and fmt.num(None) == "-"
    assert fmt.duration(65) == "1m05s" and fmt.duration(7300) == "2h01m"
    assert fmt.sparkline([0, 1, 2, 3], 2) == "⣠⣾"  # rising: one, two, three, four dots
    spark = fmt.sparkline(list(range(40)), 8)
    assert len(spark) == 8 and all(0x2800 <= ord(c) <= 0x28FF for c in spark)
    assert fmt.sparkline([], 8) == ""


def test_envs_offered_per_algorithm_or_for_all():
    from mosaic_tui.screens.new_run import envs_for
    assert envs_for({"envs": ["A", "B"]}, "ppo") == ["A", "B"]
    assert envs_for({"envs": {"ppo": ["CartPole-v1"], "sac": ["Pendulum-v1"]}}, "sac") == ["Pendulum-v1"]
    assert envs_for({"envs": {"ppo": ["CartPole-v1"]}}, "dqn") == []
    assert envs_for({}, "emit") == []


@pytest.mark.parametrize("weight", [0.3, 0.9, 0.999])
def test_smoothing_buckets_moves_as_their_points_would(weight):
    """A bucket of c points at m moves TensorBoard's average as those c points do: exactly when
    they are equal; buckets then points carry on as one series of points."""
    import numpy as np

    from mosaic_tui.series import Series, ema, ema_counted
    rng = np.random.default_rng(4)
    counts = rng.integers(1, 9, 300)
    means = rng.normal(0, 3, 300)
    means[17] = np.nan                      # a bucket of no finite point: passes, moves nothing
    raw = np.repeat(means, counts)
    ends = np.cumsum(counts) - 1
    finite = np.where(np.isfinite(means), counts, 0)
    got, last, count = ema_counted(means, finite, weight)
    want = ema(raw, weight)[ends]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    # a series from these buckets, then 50 points: the points' EMA carries on from the buckets
    tail = rng.normal(0, 3, 50)
    s = Series()
    s.load_history({"step": ends.tolist(), "t": ends.tolist(), "value": means.tolist(), "last": means.tolist(),
                    "count": counts.tolist(), "finite": finite.tolist(), "lo": means.tolist(), "hi": means.tolist()})
    s.extend(np.arange(50) + ends[-1] + 1, tail, np.zeros(50))
    np.testing.assert_allclose(s.smoothed(weight)[-50:], ema(np.concatenate([raw, tail]), weight)[-50:], rtol=1e-9)
    assert s.total == counts.sum() + 50 and s.last() == tail[-1]


def test_buckets_draw_their_min_and_max_at_any_width():
    import numpy as np

    from mosaic_tui.series import Series
    s = Series()
    steps = np.arange(1, 41) * 10.0
    lo, hi = -np.arange(40.0), np.arange(40.0) + 100
    s.load_history({"step": steps.tolist(), "t": steps.tolist(), "value": ((lo + hi) / 2).tolist(),
                    "last": hi.tolist(), "count": [10] * 40, "finite": [10] * 40, "lo": lo.tolist(), "hi": hi.tolist()})
    for columns in (5, 30, 200):            # fewer columns than buckets, and more
        xs, ys = s.decimated(columns)
        assert (ys.min(), ys.max()) == (-39.0, 139.0)
    assert s.value_range() == (-39.0, 139.0) and s.last() == 139.0 and s.total == 400


def test_one_number_format_for_the_app_and_the_cli():
    """fmt.num is the only one (the CLI had its own, which printed 1.2e+05 where the app said 1.20e+05)."""
    cases = {None: "-", 0: "0", 9999: "9999", 12345: "12.3k", -12345: "-12.3k", 12_345_678: "12.3M",
             0.5: "0.5", 123.456: "123.5", 0.00025: "0.00025", 1e-5: "1e-05", 2.5e-6: "2.5e-06",
             123456.0: "1.23e+05", float("nan"): "nan", "inf": "inf", True: "True"}
    for value, text in cases.items():
        assert fmt.num(value) == text, (value, fmt.num(value))
    import mosaic_tui.cli as cli
    assert not [name for name in vars(cli) if "fmt" in name and "num" in name]   # no second formatter


def test_steps_per_second_read_alike_everywhere():
    """One rule (issue 41, item 15): the table showed `538.5` beside `1038` (num's 4 significant
    digits); whole steps from 10 up, two significant digits under 10, in the table, the header, watch and show."""
    cases = [(538.5, "539"), (1038.2, "1038"), (1038, "1038"), (99.96, "100"), (12345.6, "12.3k"),
             (12_345_678.0, "12.3M"), (2.46, "2.5"), (0.04, "0.04"), (9.96, "10"), (0, "0"), (0.0, "0"),
             (None, "-"), ("nan", "nan"), (float("inf"), "inf")]
    for value, text in cases:
        assert fmt.rate(value) == text, (value, fmt.rate(value))
    from mosaic_tui import runs_model, watch
    from mosaic_tui.screens.run import header_text
    from tests.app.conftest import FIXED_NOW, fixed_runs
    run = fixed_runs()[1]
    run["summary"]["sps"] = 538.5
    cells = runs_model.row_cells(run, False, FIXED_NOW)
    assert cells[[key for key, _ in runs_model.COLUMNS].index("sps")].text == "539"
    assert "539/s" in watch.state_line(run, FIXED_NOW, False).plain
    assert "539 steps/s" in header_text(run, FIXED_NOW).plain
