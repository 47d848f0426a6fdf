"""`mosaic ls --where` and `mosaic report` against a real daemon and real synthetic-worker runs:
queries, groups, scores, normalisation, JSON and CSV, the numbers against rliable's, and a
group that takes in a live run once it finishes."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from tests.helpers import wait_state

# the synthetic worker's episode returns are step % 500 + return_offset, one every episode_every
# steps: over 1,000 steps the mean of the last 20 returns is 225 (every 50), 200 (100), 187.5
# (125), 200 (200), plus the offset
MEANS = {50: 225.0, 100: 200.0, 125: 187.5, 200: 200.0}
A = [(1, 50), (2, 100), (3, 125)]     # (seed, episode_every), return_offset 0
B = [(1, 100), (2, 125), (3, 200)]    # return_offset 30


def _submit(mosaic, name, seed, every, offset, *extra):
    return mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "1000",
                         "--seed", str(seed), "--name", name, "--set", "rate=0", "--set", f"episode_every={every}",
                         "--set", f"return_offset={offset}", *extra)


@pytest.fixture
def runs(daemon, mosaic):
    ids = {}
    for seed, every in A:
        ids[f"a-s{seed}"] = _submit(mosaic, f"a-s{seed}", seed, every, 0)
    for seed, every in B:
        ids[f"b-s{seed}"] = _submit(mosaic, f"b-s{seed}", seed, every, 30)
    ids["broken"] = _submit(mosaic, "broken", 9, 100, 0, "--set", "exit_code=3")
    for name, rid in ids.items():
        wait_state(mosaic.home, rid, "failed" if name == "broken" else "succeeded", timeout=120)
    return ids


def report(mosaic, *args) -> dict:
    return json.loads(mosaic.run("report", *args, "--json", check=True).stdout)


def test_ls_where_and_report(mosaic, runs):
    # -- ls --where: a param, a summary figure, a field
    out = mosaic.run("ls", "--where", "return_offset = 30 and mean_return > 220", check=True).stdout
    assert "b-s1" in out and "b-s3" in out and "b-s2" not in out and "a-s1" not in out
    listed = json.loads(mosaic.run("ls", "--json", "--where", "state = failed or episode_every in (50, 125)",
                                   check=True).stdout)
    assert sorted(r["name"] for r in listed) == ["a-s1", "a-s3", "b-s2", "broken"]
    brief = mosaic.run("ls", "--where", "state != failed and name ~ a-", check=True).stdout   # a brief listing
    assert "a-s2" in brief and "broken" not in brief and "b-s1" not in brief
    bad = mosaic.run("ls", "--where", "return_ofset > 1")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("mosaic: error: --where 'return_ofset > 1': column 1: unknown key return_ofset "
                                 "(did you mean return_offset")
    assert len(bad.stderr.strip().splitlines()) == 1
    bad = mosaic.run("ls", "--where", "mean_return > high")
    assert bad.returncode == 2 and "column 15: mean_return is a number: high is not one" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

    # -- ls --columns and --sort: config keys as columns, the runs in a key's order
    out = mosaic.run("ls", "--where", "return_offset = 30", "--columns", "return_offset,episode_every",
                     "--sort=-mean_return", check=True).stdout.splitlines()
    assert out[0].split()[-2:] == ["RETURN_OFFSET", "EPISODE_EVERY"]
    assert [line.split()[1] for line in out[1:4]] == ["b-s1", "b-s3", "b-s2"]      # 230, 230, 217.5
    assert [line.split()[-2:] for line in out[1:4]] == [["30", "100"], ["30", "200"], ["30", "125"]]
    out = mosaic.run("ls", "--sort", "episode_every", "--where", "state = succeeded", check=True).stdout.splitlines()
    assert [line.split()[1] for line in out[1:7]][:2] == ["a-s1", "a-s2"]           # 50, then 100 (a-s2, b-s1)
    bad = mosaic.run("ls", "--sort", "episode_evry")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1
    assert "--sort episode_evry: unknown key episode_evry (did you mean episode_every" in bad.stderr

    # -- report: grouped by a param, the failed run left out (only finished runs by default)
    rep = report(mosaic, "--by", "return_offset", "--reps", "2000", "--seed", "7")
    groups = {g["group"]: g for g in rep["groups"]}
    assert list(groups) == ["0", "30"]
    assert groups["0"]["runs"] == 3 and groups["30"]["runs"] == 3
    a_scores = sorted(MEANS[e] for _, e in A)
    b_scores = sorted(MEANS[e] + 30 for _, e in B)
    assert sorted(groups["0"]["per_env"]["none"]["scores"]) == a_scores
    assert sorted(groups["30"]["per_env"]["none"]["scores"]) == b_scores
    assert groups["0"]["aggregates"]["mean"]["value"] == pytest.approx(np.mean(a_scores))
    assert groups["30"]["aggregates"]["median"]["value"] == pytest.approx(np.mean(b_scores))  # one env: its mean

    # the numbers are rliable's, on the same scores with the same seed
    library = pytest.importorskip("rliable.library")
    metrics = pytest.importorskip("rliable.metrics")
    for label, g in groups.items():
        scores = np.array(g["per_env"]["none"]["scores"])[:, None]
        np.random.seed(7)
        point, ci = library.get_interval_estimates(
            {label: scores}, lambda x: np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x),
                                                 metrics.aggregate_median(x), metrics.aggregate_optimality_gap(x)]),
            reps=2000)
        for i, name in enumerate(("iqm", "mean", "median", "optimality_gap")):
            assert g["aggregates"][name]["value"] == point[label][i]
            assert (g["aggregates"][name]["ci_low"], g["aggregates"][name]["ci_high"]) == (ci[label][0][i],
                                                                                          ci[label][1][i])
    # two groups: the probability of improvement both ways, rliable's too
    (p30, p0) = sorted(rep["poi"], key=lambda p: p["x"], reverse=True)
    assert (p30["x"], p30["y"]) == ("30", "0")
    x, y = np.array(b_scores)[:, None], np.array(a_scores)[:, None]
    assert p30["value"] == metrics.probability_of_improvement(x, y) == pytest.approx(8 / 9)
    assert p0["value"] == pytest.approx(1 / 9)

    # text: a line a group, the probability, the interval's reps and seed said
    text = mosaic.run("report", "--by", "return_offset", "--reps", "500", "--profile", check=True).stdout
    assert "500 reps, seed 0" in text and "P(30 > 0) = 0.889" in text
    assert any(line.startswith("0 ") and " 3 " in line for line in text.splitlines())
    assert "fraction of runs above" in text

    # normalised by reference scores: (score - 0) / (400 - 0); every state: the failed run too
    rep = report(mosaic, "--by", "name", "--ref", "none=0:400", "--reps", "100", "--state", "all",
                 "--where", "name in (a-s1, broken)")
    assert rep["normalize"] == {"method": "ref", "bounds": {"none": [0.0, 400.0]}}
    values = {g["group"]: g["aggregates"]["mean"]["value"] for g in rep["groups"]}
    assert values == {"a-s1": pytest.approx(225 / 400), "broken": pytest.approx(200 / 400)}

    # CSV: a row per group over all envs (*), then per env
    rows = list(csv.reader(io.StringIO(mosaic.run("report", "--by", "return_offset", "--reps", "100", "--csv",
                                                  check=True).stdout)))
    assert rows[0][:6] == ["group", "env", "runs", "iqm", "iqm_ci_low", "iqm_ci_high"]
    assert [r[:3] for r in rows[1:]] == [["0", "*", "3"], ["0", "none", "3"], ["30", "*", "3"], ["30", "none", "3"]]
    assert float(rows[1][6]) == pytest.approx(np.mean(a_scores))

    # a score of its own: the best return; the default groups: one config's seeds
    rep = report(mosaic, "--score", "best", "--reps", "100", "--where", "return_offset = 30")
    assert [g["runs"] for g in rep["groups"]] == [1, 1, 1]       # episode_every differs: three configs
    assert {g["group"] for g in rep["groups"]} == {"episode_every=100", "episode_every=125", "episode_every=200"}
    assert {g["aggregates"]["mean"]["value"] for g in rep["groups"]} == {430.0, 405.0}

    # mistakes: one line each
    for args, words in [(["--by", "nope"], "--by nope: unknown key nope"),
                        (["--score", "algo"], "--score algo: not a number"),
                        (["--normalize", "ref"], "no reference scores for none"),
                        (["--ref", "none=1"], "--ref none=1: expected ENV=LOW:HIGH"),
                        (["--where", "(a"], "--where '(a': column 1: this ( is not closed"),
                        (["--poi", "0", "9", "--by", "return_offset"], "--poi: no group is called 9")]:
        bad = mosaic.run("report", *args)
        assert bad.returncode == 2, (args, bad.stderr)
        assert words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, (args, bad.stderr)


def test_a_group_takes_in_a_live_run_when_it_finishes(daemon, mosaic):
    first = _submit(mosaic, "c-s1", 1, 100, 0)
    wait_state(mosaic.home, first, "succeeded", timeout=120)
    live = _submit(mosaic, "c-s2", 2, 50, 0, "--set", "rate=400", "--set", "hold_seconds=1")
    wait_state(mosaic.home, live, "running", timeout=60)
    rep = report(mosaic, "--by", "algo", "--reps", "100")
    assert [g["runs"] for g in rep["groups"]] == [1]                    # running: not yet
    rep = report(mosaic, "--by", "algo", "--reps", "100", "--state", "running", "--state", "succeeded")
    assert rep["groups"][0]["runs"] == 2 or rep["left_out"]              # asked for: in, once it has a score
    wait_state(mosaic.home, live, "succeeded", timeout=120)
    rep = report(mosaic, "--by", "algo", "--reps", "100")
    assert rep["groups"][0]["runs"] == 2
    assert rep["groups"][0]["aggregates"]["mean"]["value"] == pytest.approx((200.0 + 225.0) / 2)


def test_report_figures_tables_and_the_long_csv(mosaic, runs, tmp_path):
    import pandas as pd
    from PIL import Image

    from mosaic_tui import figures as F

    # the long CSV: every episode return of every run, as `mosaic metrics --csv` gives it
    out = tmp_path / "long.csv"
    done = mosaic.run("report", "--by", "return_offset", "--reps", "100", "--format", "long", "--out", str(out),
                      check=True)
    assert done.stdout.strip() == f"wrote {out}"
    long = pd.read_csv(out)
    assert list(long.columns) == ["run", "group", "env", "seed", "step", "metric", "value", "wall_time"]
    assert sorted(long["run"].unique()) == ["a-s1", "a-s2", "a-s3", "b-s1", "b-s2", "b-s3"]   # not the failed one
    assert set(long["metric"]) == {"episode/return"}
    for name, rid in runs.items():
        if name == "broken":
            continue
        metrics = pd.read_csv(io.StringIO(mosaic.run("metrics", rid, "--csv", check=True).stdout))
        metrics = metrics[metrics["tag"] == "episode/return"]
        mine = long[long["run"] == name]
        assert len(mine) == len(metrics) > 0
        assert mine["step"].tolist() == metrics["step"].tolist()
        assert mine["value"].tolist() == metrics["value"].tolist()
        assert mine["wall_time"].tolist() == pytest.approx(metrics["wall_time"].tolist())
        assert set(mine["group"].astype(str)) == {"0" if name.startswith("a") else "30"}
        assert set(mine["seed"]) == {int(name[-1])} and set(mine["env"]) == {"none"}

    # Markdown and LaTeX tables: the report's numbers, the format from --out's suffix
    rep = report(mosaic, "--by", "return_offset", "--reps", "300")
    md = mosaic.run("report", "--by", "return_offset", "--reps", "300", "--format", "md", check=True).stdout
    tex_path = tmp_path / "table.tex"
    mosaic.run("report", "--by", "return_offset", "--reps", "300", "--out", str(tex_path), check=True)
    tex = tex_path.read_text()
    for g in rep["groups"]:
        iqm = g["aggregates"]["iqm"]
        cell = f"{table_number(iqm['value'])} [{table_number(iqm['ci_low'])}, {table_number(iqm['ci_high'])}]"
        assert f"| {g['group']} | \\* | 3 | {cell} |" in md
        assert f"{{\\scriptsize [{table_number(iqm['ci_low'])}, {table_number(iqm['ci_high'])}]}}" in tex
    assert tex.startswith("\\begin{table}")

    # figures: learning curves from the runs' episodes, a line and a band a group; a PNG a column wide
    svg_path = tmp_path / "curves.svg"
    mosaic.run("report", "--by", "return_offset", "--reps", "100", "--figure", "curves", "--out", str(svg_path),
               check=True)
    svg = svg_path.read_text()
    assert 'id="curve-0"' in svg and 'id="curve-1"' in svg and 'id="band-1"' in svg and 'id="curve-2"' not in svg
    png_path = tmp_path / "intervals.png"
    mosaic.run("report", "--by", "return_offset", "--reps", "100", "--figure", "intervals", "--column", "double",
               "--out", str(png_path), check=True)
    with Image.open(png_path) as img:
        assert img.size[0] == round(F.COLUMN_INCHES["double"] * F.DPI)
    pdf_path = tmp_path / "poi.pdf"
    mosaic.run("report", "--by", "return_offset", "--reps", "100", "--figure", "poi", "--venue", "icml",
               "--out", str(pdf_path), check=True)
    assert pdf_path.read_bytes().startswith(b"%PDF")

    # mistakes: one line each, nothing written
    for args, words in [(["--figure", "curves"], "--figure curves needs --out FILE.pdf, .svg or .png"),
                        (["--figure", "curves", "--out", str(tmp_path / "c.jpg")], "not " + str(tmp_path / "c.jpg")),
                        (["--out", str(tmp_path / "t.xlsx")], "a table's suffix is .md, .tex, .csv, .json or .txt"),
                        (["--out", str(tmp_path / "no" / "t.md")], "no folder")]:
        bad = mosaic.run("report", "--by", "return_offset", *args)
        assert bad.returncode == 2, (args, bad.stderr)
        assert words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1, (args, bad.stderr)
    assert not (tmp_path / "c.jpg").exists() and not (tmp_path / "t.xlsx").exists()


def table_number(value: float) -> str:
    from mosaic_tui.report_tables import fig
    return fig(value)
