"""`mosaic watch`: the compact pane, on fixed data and against a real daemon."""
from __future__ import annotations

import time

import pytest

from daemon import protocol as P
from tests.app.conftest import FIXED_NOW, RUN_IDS, fixed_events, fixed_runs, screen_text, wait_until

pytestmark = pytest.mark.anyio


def watch_app(home, ref=None, **kw):
    from mosaic_tui.watch import WatchApp
    return WatchApp(home, ref, connect=False, clock=lambda: FIXED_NOW, **kw)


async def feed(pilot, app, runs=None):
    app.link.load(runs or fixed_runs(), rev=20)
    app.link.feed_events(RUN_IDS[1], fixed_events())
    app.link.flush()
    await pilot.pause(0.2)
    app.refresh_view()
    await pilot.pause(0.2)


async def test_follows_the_newest_run_and_switches(home):
    app = watch_app(home)
    async with app.run_test(size=(80, 12)) as pilot:
        await feed(pilot, app)
        assert app.run_id == RUN_IDS[4]  # echo is the newest
        newer = dict(fixed_runs()[1], id="01M80000000000000000000009", name="zulu", created_at=FIXED_NOW, rev=50)
        app.link.feed("run", {"rev": 50, "run": newer})
        app.link.flush()
        await pilot.pause(0.2)
        assert app.run_id == newer["id"] and newer["id"] in app.link.watched
        assert RUN_IDS[4] not in app.link.watched
        assert "zulu" in screen_text(app).splitlines()[0] and "(newest)" in screen_text(app)


async def test_named_run_fits_80x12_with_two_plots_and_log_lines(home):
    run_dir = home.run_dir(RUN_IDS[1])
    run_dir.mkdir(parents=True)
    (run_dir / "stderr.log").write_text("first\nsecond\r\rthird progress 10%\rthird progress 99%\nlast line\n")
    app = watch_app(home, "bravo")
    async with app.run_test(size=(80, 12)) as pilot:
        await feed(pilot, app)
        lines = screen_text(app).splitlines()
        assert len(lines) == 12
        assert lines[0].startswith(" bravo running") and "42%" in lines[0]
        plots = list(app.query("MetricPlot"))
        assert [p.tag for p in plots] == ["episode/return", "synthetic/value_0"]
        assert all(p.display for p in plots)
        assert lines[-3:] == [" first" + " " * 74, " third progress 99%" + " " * 61, " last line" + " " * 70]


async def test_smaller_panes_drop_the_logs_then_a_plot(home):
    app = watch_app(home, RUN_IDS[1][:26])
    async with app.run_test(size=(50, 8)) as pilot:
        await feed(pilot, app)
        await pilot.pause(0.1)
        assert not app.query_one("#tail").display
        assert not app.query_one("#plot-1").display
        assert app.query_one("#plot-0").display
        assert "bravo" in screen_text(app).splitlines()[0]


async def test_unknown_run_says_so(home):
    app = watch_app(home, "nope")
    async with app.run_test(size=(80, 12)) as pilot:
        await feed(pilot, app)
        assert "no run named 'nope'" in screen_text(app)


async def test_watch_against_the_daemon(daemon, mosaic):
    from mosaic_tui.watch import WatchApp
    first = mosaic.synthetic(300, "rate=2000", name="first")
    app = WatchApp(daemon, None)
    async with app.run_test(size=(80, 12)) as pilot:
        deadline = time.monotonic() + 30
        while app.run_id != first and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert app.run_id == first
        second = mosaic.synthetic(300, "rate=2000", name="second")
        deadline = time.monotonic() + 30
        while (app.run_id != second or app.link.runs[second]["state"] != P.SUCCEEDED) and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert app.run_id == second
        await pilot.pause(1.2)
        assert "second succeeded" in screen_text(app).splitlines()[0]
        assert sum(len(s) for t, s in app.link.series[second].tags.items() if not t.startswith("episode/")) == 300
        await pilot.press("q")


def _submit_json(mosaic, tmp_path, config) -> str:
    import json
    path = tmp_path / f"{config['name']}.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


async def test_watch_a_finished_run_shows_its_history(daemon, mosaic, tmp_path):
    # Issue 14: `mosaic watch RUN` of a finished run with 419 episodes stayed at
    # "no points yet", and its frames pane (the run had frames) drew "FrameCanvas".
    from mosaic_tui.watch import WatchApp
    rid = _submit_json(mosaic, tmp_path, {
        "worker": "synthetic", "algo": "emit", "env": "none", "steps": 41900, "name": "done",
        "params": {"rate": 0, "episode_every": 100}, "frames": {"enabled": True, "fps": 15, "max_dim": 64}})
    mosaic.run("wait", rid, check=True)
    app = WatchApp(daemon, "done")
    async with app.run_test(size=(80, 12)) as pilot:
        await wait_until(pilot, lambda: rid in app.link.synced_runs, what="the run's history")
        await pilot.pause(1.2)      # the once-a-second refresh
        text = screen_text(app)
        assert "no points yet" not in text and "FrameCanvas" not in text
        assert "n 419" in text      # the episode/return plot's border: every episode
        assert [p.tag for p in app.query("MetricPlot")] == ["episode/return", "synthetic/value_0"]
        assert app.query_one("#plot-1").display and not app.screen.has_class("-frames")
        await pilot.press("q")


async def test_watch_a_live_run_shows_what_came_before(daemon, mosaic):
    from mosaic_tui.watch import WatchApp
    rid = mosaic.synthetic(1_000_000, "rate=400", "episode_every=20", name="live")
    try:
        from tests.helpers import wait_for
        wait_for(lambda: (mosaic.show(rid)["summary"].get("episodes") or 0) >= 10, what="ten episodes")
        app = WatchApp(daemon, "live")
        async with app.run_test(size=(80, 12)) as pilot:
            await wait_until(pilot, lambda: rid in app.link.synced_runs, what="the run's history")
            series = app.link.series[rid]
            assert len(series.tags["episode/return"]) >= 10
            await pilot.pause(1.2)
            assert "no points yet" not in screen_text(app)
            before = len(series.tags["episode/return"])
            await wait_until(pilot, lambda: len(series.tags["episode/return"]) > before, what="live episodes")
            await pilot.press("q")
    finally:
        mosaic.run("cancel", rid)


async def test_the_second_plot_is_a_loss_not_a_timing(home):
    # CleanRL's tags: alphabetically charts/SPS (a speed) came first
    events = [{"v": 1, "type": "scalar", "t": FIXED_NOW - 100 + k, "tag": tag, "value": float(k), "step": 128 * k}
              for k in range(1, 5) for tag in ("charts/SPS", "charts/learning_rate", "losses/approx_kl",
                                                "losses/policy_loss", "losses/value_loss")]
    events += [{"v": 1, "type": "episode", "t": FIXED_NOW - 50, "step": 300, "return": 20.0, "length": 20}]
    app = watch_app(home, "bravo")
    async with app.run_test(size=(80, 12)) as pilot:
        app.link.load(fixed_runs(), rev=20)
        app.link.feed_events(RUN_IDS[1], events)
        app.link.flush()
        await pilot.pause(0.2)
        app.refresh_view()
        await pilot.pause(0.2)
        assert [p.tag for p in app.query("MetricPlot")] == ["episode/return", "losses/policy_loss"]
