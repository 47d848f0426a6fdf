"""mosaic_tui/figures.py and mosaic_tui/report_tables.py: the figures hold the report's numbers
(read back from the SVG through the axes' own transform), the PNG is a paper column wide at
its dpi, the curves' band follows the bootstrap's interval, the tables hold the report's numbers."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import matplotlib.font_manager  # noqa: F401  (its first import may ask fc-list: here, before the unit guard)
import numpy as np
import pytest

from mosaic_tui import figures as F
from mosaic_tui import report as R
from mosaic_tui import report_tables as T

SVG = "{http://www.w3.org/2000/svg}"


def fake_runs() -> list[dict]:
    """2 rates x 3 seeds x 2 envs, finished; a rate's returns climb with its seed."""
    runs = []
    for rate in (10.0, 20.0):
        for seed in range(3):
            for env in ("EnvA-v0", "EnvB-v0"):
                base = rate * (2 if env == "EnvB-v0" else 1) + seed
                runs.append({"id": f"r{len(runs)}", "name": f"r{int(rate)}-{env}-s{seed}", "state": "succeeded",
                             "worker": "synthetic", "algo": "emit", "env": env, "steps": 1000,
                             "started_at": 1000.0 + seed,
                             "config": {"seed": seed, "env": env, "params": {"rate": rate}},
                             "summary": {"returns": [base, base + 1.0, base + 2.0]}})
    return runs


def fake_series(runs: list[dict]) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Episode returns every 50 steps: the rate, the seed and a slope, wall time 10 steps a second."""
    out = {}
    for run in runs:
        steps = np.arange(50.0, 1001.0, 50.0)
        values = run["config"]["params"]["rate"] + 3 * run["config"]["seed"] + steps / 100
        out[run["id"]] = (steps, values, run["started_at"] + steps / 10)
    return out


@pytest.fixture(scope="module")
def report() -> dict:
    return R.build_report(fake_runs(), R.Options(by=["rate"], reps=500))


def paths(svg: str, gid: str) -> list[np.ndarray]:
    """The vertices (x, y in SVG points) of each path in the group of this id."""
    root = ET.fromstring(svg)
    group = next(g for g in root.iter(f"{SVG}g") if g.get("id") == gid)
    out = []
    for path in group.iter(f"{SVG}path"):
        numbers = [float(v) for v in re.findall(r"-?[\d.]+(?:e-?\d+)?", path.get("d"))]
        out.append(np.array(numbers).reshape(-1, 2))
    return out


def to_svg(fig, ax, x, y) -> np.ndarray:
    """Data coordinates to the SVG's: display pixels at the figure's dpi, in points, y down."""
    xy = ax.transData.transform(np.column_stack([x, y]))
    points = xy * 72.0 / fig.dpi
    points[:, 1] = fig.get_figheight() * 72.0 - points[:, 1]
    return points


def test_run_curve_is_the_mean_of_the_last_returns_at_each_step():
    steps = np.array([10.0, 20.0, 30.0, 40.0])
    values = np.array([1.0, 2.0, 3.0, 10.0])
    grid = np.array([0.0, 10.0, 25.0, 40.0, 45.0, 60.0])
    out = F.run_curve(steps, values, grid, window=2, until=50.0)
    assert np.isnan(out[0])                        # before the first episode
    assert out[1:5].tolist() == [1.0, 1.5, 6.5, 6.5]
    assert np.isnan(out[5])                        # past where the run got


def test_curves_mean_and_band_follow_the_runs(report, tmp_path):
    runs = fake_runs()
    curve = F.curves(report, fake_series(runs), {r["id"]: r for r in runs}, points=21, reps=400)
    assert curve["grid"][0] == 0 and curve["grid"][-1] == 1000
    g10 = curve["groups"]["10"]
    # at step 1000 each run's last 20 returns are all of them: mean of rate + 3 seed + steps/100
    expected = np.mean([10 + 3 * s + np.arange(50.0, 1001.0, 50.0).mean() / 100 for s in range(3)])
    assert g10["mean"][-1] == pytest.approx(expected)
    low, high = np.array(g10["ci_low"][1:]), np.array(g10["ci_high"][1:])
    assert np.all(low < np.array(g10["mean"][1:])) and np.all(np.array(g10["mean"][1:]) < high)
    # the band is the seeds' spread: drawing 3 seeds again, the mean ranges within the seeds' own
    assert high[-1] - low[-1] <= 6.0 + 1e-9 and high[-1] - low[-1] > 1.0
    fig = F.draw("curves", report, "single", curve)
    ax = fig.axes[0]
    path = tmp_path / "curves.svg"
    F.save(fig, str(path))
    svg = path.read_text()
    for i, g in enumerate(curve["groups"].values()):
        (line,) = paths(svg, f"curve-{i}")
        known = ~np.isnan(g["mean"])
        assert len(line) == known.sum()                            # one vertex a point of the grid
        np.testing.assert_allclose(line, to_svg(fig, ax, np.array(curve["grid"])[known],
                                                np.array(g["mean"])[known]), atol=1e-3)
        (polygon,) = paths(svg, f"band-{i}")
        lows = to_svg(fig, ax, np.array(curve["grid"])[known], np.array(g["ci_low"])[known])
        highs = to_svg(fig, ax, np.array(curve["grid"])[known], np.array(g["ci_high"])[known])
        np.testing.assert_allclose(polygon[:known.sum()], lows, atol=1e-3)          # along the low bound
        np.testing.assert_allclose(polygon[known.sum():2 * known.sum()], highs[::-1], atol=1e-3)  # back the high
    assert len([g for g in ET.fromstring(svg).iter(f"{SVG}g") if (g.get("id") or "").startswith("curve-")]) == 2


def test_band_is_the_nan_aware_bootstrap_of_the_mean():
    """The band, whatever its arithmetic, is nanmean over each draw of the runs (within their
    env) and nanpercentile over the draws: the same figures bit for bit, NaN points included."""
    rng = np.random.RandomState(3)
    stack = rng.normal(100.0, 30.0, size=(9, 40))
    stack[:, 0] = np.nan                              # a point no run reached
    stack[rng.rand(9, 40) < 0.3] = np.nan             # runs that got no further
    stack[1:, 5], stack[0, 5] = np.nan, 100.0         # a point only one run reached: draws without it
    strata = [np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7, 8])]
    mean, low, high = F.band(stack, strata, reps=500, size=0.95, seed=11)

    draws = np.random.RandomState(11)
    drawn = np.concatenate([rows[draws.randint(0, len(rows), size=(500, len(rows)))] for rows in strata], axis=1)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        means = np.nanmean(stack[drawn], axis=1)
        tail = 100 * (1 - 0.95) / 2                   # 2.500000000000002, as the band has it
        want_low, want_high = np.nanpercentile(means, [tail, 100 - tail], axis=0)
        want_mean = np.nanmean(stack, axis=0)
    assert np.isnan(low[0]) and np.isnan(mean[0]) and not np.isnan(low[5])
    for got, want in ((mean, want_mean), (low, want_low), (high, want_high)):
        assert np.array_equal(got, want, equal_nan=True)


def test_curves_over_wall_time(report):
    runs = fake_runs()
    curve = F.curves(report, fake_series(runs), {r["id"]: r for r in runs}, x="time", points=11, reps=50)
    assert curve["grid"][-1] == pytest.approx(100.0)                # 1000 steps at 10 a second
    with pytest.raises(F.FigureError, match="--x steps: step or time"):
        F.curves(report, fake_series(runs), {}, x="steps")


def test_interval_bars_span_each_ci(report, tmp_path):
    fig = F.draw("intervals", report, "double")
    path = tmp_path / "intervals.svg"
    F.save(fig, str(path))
    svg = path.read_text()
    for m, metric in enumerate(("iqm", "mean", "median")):
        ax = fig.axes[m]
        for i, g in enumerate(report["groups"]):
            agg = g["aggregates"][metric]
            (bar,) = paths(svg, f"interval-{metric}-{i}")
            y = len(report["groups"]) - 1 - i
            corners = to_svg(fig, ax, [agg["ci_low"], agg["ci_high"]], [y, y])
            assert bar[:, 0].min() == pytest.approx(corners[0, 0], abs=1e-3)
            assert bar[:, 0].max() == pytest.approx(corners[1, 0], abs=1e-3)
            (tick,) = paths(svg, f"point-{metric}-{i}")
            assert tick[:, 0] == pytest.approx(to_svg(fig, ax, [agg["value"]], [y])[0, 0], abs=1e-3)


def test_every_interval_and_point_lies_inside_its_axes(report):
    """Each panel keeps a margin on both sides: no interval or point estimate on the axes' edge."""
    from mosaic_tui.aggregates import METRICS
    fig = F.draw("intervals", report, "double")
    for metric, ax in zip(METRICS, fig.axes):
        aggs = [g["aggregates"][metric] for g in report["groups"]]
        lows = [a["ci_low"] if a["ci_low"] is not None else a["value"] for a in aggs]
        highs = [a["ci_high"] if a["ci_high"] is not None else a["value"] for a in aggs]
        left, right = ax.get_xlim()
        assert left < min(lows) and max(highs) < right, metric


@pytest.mark.parametrize("kind", F.KINDS)
def test_a_report_without_runs_draws_no_figure(kind):
    empty = R.build_report([], R.Options(reps=0))
    with pytest.raises(F.FigureError, match="no run of the report has a score"):
        F.draw(kind, empty, "single", {"groups": {}, "grid": [], "x": "step"})


def test_profiles_and_poi_hold_the_report(report, tmp_path):
    fig = F.draw("profiles", report, "single")
    path = tmp_path / "profiles.svg"
    F.save(fig, str(path))
    svg = path.read_text()
    ax = fig.axes[0]
    for i, g in enumerate(report["profile"]["groups"].values()):
        (line,) = paths(svg, f"profile-{i}")
        np.testing.assert_allclose(line, to_svg(fig, ax, report["profile"]["taus"], g["fraction_above"]), atol=1e-3)
    fig = F.draw("poi", report, "single")
    F.save(fig, str(tmp_path / "poi.svg"))
    svg = (tmp_path / "poi.svg").read_text()
    for i, p in enumerate(report["poi"]):
        (tick,) = paths(svg, f"poi-point-{i}")
        assert tick[:, 0] == pytest.approx(to_svg(fig, fig.axes[0], [p["value"]], [0])[0, 0], abs=1e-3)


@pytest.mark.parametrize("column", ["single", "double"])
def test_png_is_a_column_wide_at_its_dpi_and_pdf_is_a_pdf(report, tmp_path, column):
    from PIL import Image
    fig = F.draw("intervals", report, column)
    F.save(fig, str(tmp_path / "f.png"))
    F.save(fig, str(tmp_path / "f.pdf"))
    width, height = F.figure_size("intervals", column, report)
    with Image.open(tmp_path / "f.png") as img:
        assert img.size == (round(F.COLUMN_INCHES[column] * F.DPI), round(height * F.DPI))
    assert width == {"single": 3.25, "double": 6.75}[column]
    pdf = (tmp_path / "f.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")
    assert b"/FontFile2" in pdf and b"/Type3" not in pdf        # TrueType fonts, as conferences' checks ask
    with pytest.raises(F.FigureError, match="a figure is .pdf, .svg or .png"):
        F.save(fig, str(tmp_path / "f.jpg"))


def test_pixels_for_the_terminal(report):
    fig = F.draw("intervals", report, "single", dpi=F.screen_dpi(650))
    rgb = F.pixels(fig)
    assert rgb.shape[1] == 650 and rgb.shape[2] == 3 and rgb.dtype == np.uint8


def test_markdown_and_latex_tables_hold_the_numbers(report):
    md = T.markdown(report)
    lines = md.splitlines()
    assert lines[0] == "| rate | env | runs | IQM | mean | median | optimality gap |"
    g = report["groups"][1]
    row = next(line for line in lines if line.startswith("| 20 | \\* |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    for cell, metric in zip(cells[3:], ("iqm", "mean", "median", "optimality_gap")):
        agg = g["aggregates"][metric]
        assert cell == f"{T.fig(agg['value'])} [{T.fig(agg['ci_low'])}, {T.fig(agg['ci_high'])}]"
    assert "| 20 | EnvB-v0 | 3 |" in md
    tex = T.latex(report)
    assert "\\begin{tabular}" in tex and "\\toprule" in tex and tex.count(" \\\\\n") == 7   # header + 6 rows
    iqm = g["aggregates"]["iqm"]
    assert f"\\textbf{{{T.fig(iqm['value'])}}} {{\\scriptsize [{T.fig(iqm['ci_low'])}, {T.fig(iqm['ci_high'])}]}}" in tex
    assert "95\\% CIs" in tex
    assert T.tex("a_b & 50%") == "a\\_b \\& 50\\%"


@pytest.mark.parametrize("venue,column,inches,points", [("icml", "single", 3.25, 8), ("icml", "double", 6.75, 8),
                                                        ("neurips", "double", 5.5, 9), ("iclr", "single", 2.75, 9)])
def test_a_venues_width_and_font_sizes(report, tmp_path, venue, column, inches, points):
    from PIL import Image
    fig = F.draw("profiles", report, column, venue=venue)
    F.save(fig, str(tmp_path / "f.png"))
    F.save(fig, str(tmp_path / "f.svg"))
    with Image.open(tmp_path / "f.png") as img:
        assert img.size[0] == round(inches * F.DPI)
    svg = (tmp_path / "f.svg").read_text()
    sizes = set(re.findall(r"font-size: ([\d.]+)px", svg))
    assert sizes == {str(points), str(points - 2)}             # labels and ticks at the venue's sizes
    with pytest.raises(F.FigureError, match="--venue nips: one of icml, neurips, iclr"):
        F.draw("profiles", report, column, venue="nips")
