"""The numbers that matter at a glance, runs ending, 80 columns (issue 14, items 5, 6, 8 and 9).

Pilot drives the real app: on fixed run records where the daemon does not
matter, against a real daemon and real synthetic runs where it does.
"""
from __future__ import annotations

import copy

import pytest

from daemon import protocol as P
from tests.app.conftest import RUN_IDS, fixed_runs, make_app, screen_text, wait_until
from tests.helpers import wait_state

pytestmark = pytest.mark.anyio

LONG_REASON = ("worker exited with code 1: RuntimeError: CUDA error: an illegal memory access was encountered "
               "while computing the advantage of minibatch 3 of iteration 41 (compile with TORCH_USE_CUDA_DSA)")


def glance_runs() -> list[dict]:
    """The fixed runs, with what the daemon's summary now carries, an eval run and one that stopped short."""
    runs = copy.deepcopy(fixed_runs())
    alpha, bravo, charlie, delta, echo = runs
    alpha["summary"].update(steps=9000, best_return=62.0, best_step=9000)   # succeeded, short of 10000
    bravo["summary"].update(best_return=20.0, best_step=3900)
    charlie["reason"] = LONG_REASON
    delta["config"]["mode"] = "eval"
    return runs


async def load(pilot, app, runs=None) -> None:
    app.link.load(runs or glance_runs(), rev=20)
    app.link.flush()
    await pilot.pause()
    await pilot.pause()


def table(app):
    from mosaic_tui.widgets.runs_table import RunsTable
    return app.screen_stack[0].query_one(RunsTable)


def row(app, run_id: str) -> dict[str, str]:
    """The rendered cells of a run's row, by column key."""
    t = table(app)
    return {key: str(cell) for key, cell in zip(t.shown_columns, t.get_row(run_id))}


def flat(text: str) -> str:
    return "".join(text.split())


async def test_at_80_columns_the_table_keeps_state_progress_return_and_eta(home):
    app = make_app(home)
    async with app.run_test(size=(80, 24)) as pilot:
        await load(pilot, app, env_runs())
        from mosaic_tui.runs_model import NAME_FULL, PRIORITY
        shown = table(app).shown_columns
        assert {"name", "state", "progress", "return", "eta"} <= set(shown)
        assert "worker" not in shown and "algo" not in shown       # the first to go
        columns = [key for key in PRIORITY if key != NAME_FULL]
        dropped = [key for key in columns if key not in shown]
        assert dropped == columns[-len(dropped):]                  # the least wanted ones
        lines = screen_text(app).splitlines()
        header = next(line for line in lines if "state" in line and "progress" in line)
        assert "avg20" in header and "ETA" in header and "worker" not in header
        bravo = next(line for line in lines if "bravo" in line)
        # running: 5800 steps left at 812.5 steps/s; the mean of its returns
        assert "running" in bravo and "42%" in bravo and "-80" in bravo and "7s" in bravo


async def test_at_120_columns_every_column_is_shown(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        from mosaic_tui.runs_model import COLUMN_KEYS
        # every column but tags and job, which take no room while no run is tagged or on a cluster
        assert table(app).shown_columns == [k for k in COLUMN_KEYS if k not in ("tags", "job")]
        header = next(line for line in screen_text(app).splitlines() if "worker" in line)
        assert all(h in header for h in ("algo", "env", "steps/s", "avg20", "best", "ETA", "elapsed", "returns"))
        assert row(app, RUN_IDS[1])["best"] == "20@3900"
        assert row(app, RUN_IDS[1])["eta"] == "7s"


async def test_at_120_columns_default_run_names_are_whole(home):
    """Default names (algo-env-n) of real runs on a realistic mix: whole at 120 columns, where the
    least wanted columns make room for them (they were cut to 'dqn-CartPole…')."""
    runs = glance_runs()
    for run, (algo, env) in zip(runs, [("dqn", "CartPole-v1"), ("sac_continuous_action", "Pendulum-v1"),
                                       ("ppo", "LunarLander-v3"), ("mappo", "simple_spread_v3"),
                                       ("ppo_continuous_action", "HalfCheetah-v5")]):
        run.update(algo=algo, env=env, name=f"{algo}-{env}-1", worker="cleanrl")
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app, runs)
        text = screen_text(app)
        for run in runs:
            assert run["name"] in text, (run["name"], table(app).shown_columns)
        assert {"state", "progress", "return", "eta", "elapsed", "env"} <= set(table(app).shown_columns)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_run_header_keeps_return_and_elapsed(home, size):
    app = make_app(home)
    async with app.run_test(size=size) as pilot:
        await load(pilot, app)
        app.open_run(RUN_IDS[1])
        await pilot.pause()
        title = screen_text(app).splitlines()[0]
        # bravo started 3479 s before FIXED_NOW; its return is the mean of its last 20 episodes (it has 6)
        assert "bravo" in title and "running" in title
        assert "return 11.17 (avg20)" in title and "57m59s" in title


async def test_a_succeeded_run_shows_100_percent_and_its_final_step(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        alpha = row(app, RUN_IDS[0])
        assert alpha["state"] == "succeeded" and alpha["progress"].endswith("100%") and alpha["steps"] == "9000"
        app.open_run(RUN_IDS[0])
        await pilot.pause()
        assert "9000/10.0k steps 100%" in screen_text(app).splitlines()[0]


async def test_eval_runs_are_marked_in_the_table_and_the_header(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        assert row(app, RUN_IDS[3])["name"] == "delta [eval]"
        assert row(app, RUN_IDS[1])["name"] == "bravo"
        app.open_run(RUN_IDS[3])
        await pilot.pause()
        assert screen_text(app).splitlines()[0].lstrip().startswith("delta eval")


async def test_a_failed_runs_whole_reason_in_the_detail_line_and_above_its_plots(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        table(app).select_run(RUN_IDS[2])
        await pilot.pause()
        assert flat(f"failed: {LONG_REASON}") in flat(screen_text(app))
        table(app).select_run(RUN_IDS[1])
        await pilot.pause()
        assert flat(LONG_REASON) not in flat(screen_text(app))
        app.open_run(RUN_IDS[2])
        await pilot.pause()
        from mosaic_tui.widgets.failure_banner import FailureBanner
        banner = app.screen.query_one(FailureBanner)
        assert banner.display and banner.region.height >= 2          # visible, wrapped: the whole reason
        screen = screen_text(app)
        assert flat(f"failed: {LONG_REASON}") in flat(screen)
        # above the plots' bar
        lines = screen.splitlines()
        assert lines.index(next(l for l in lines if "failed: worker exited" in l)) < \
            lines.index(next(l for l in lines if "smoothing" in l))


async def test_a_running_run_has_no_failure_band_until_it_fails(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        app.open_run(RUN_IDS[1])
        await pilot.pause()
        from mosaic_tui.widgets.failure_banner import FailureBanner
        assert not app.screen.query_one(FailureBanner).display
        # the run fails while its screen is open: the band follows the new record
        run = dict(app.link.runs[RUN_IDS[1]], state="failed", reason="worker exited with code 3: boom",
                   rev=app.link.runs[RUN_IDS[1]].get("rev", 0) + 100)
        app.link.feed("run", {"rev": run["rev"], "run": run})
        app.link.flush()
        await pilot.pause(0.2)
        assert app.screen.query_one(FailureBanner).display
        assert "worker exited with code 3: boom" in screen_text(app)


def env_runs() -> list[dict]:
    runs = glance_runs()
    for run, env, returns in zip(runs, ["CartPole-v1", "Acrobot-v1", "CartPole-v1", "Acrobot-v1", "CartPole-v1"],
                                 [[500.0], [-80.0], [20.0], [-400.0], []]):
        run["env"] = run["config"]["env"] = env
        run["summary"]["returns"] = returns
    return runs


async def test_sorting_by_return_groups_runs_by_env(home):
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app, env_runs())
        t = table(app)
        while t.sort_key != "return":
            await pilot.press("s")
        names = [app.link.runs[r]["name"] for r in t.visible_ids]
        # Acrobot's returns (-80, -400) are not ranked among CartPole's (500, 20, none)
        assert names == ["bravo", "delta", "alpha", "charlie", "echo"]
        status = str(app.screen.query_one("#status").render())
        assert "grouped by env" in status
        await pilot.press("r")
        names = [app.link.runs[r]["name"] for r in t.visible_ids]
        assert names == ["delta", "bravo", "echo", "charlie", "alpha"]


async def test_sorting_by_return_with_one_env_ranks_them_all_by_their_mean(home):
    runs = glance_runs()
    runs[1]["summary"]["returns"] = [100.0, 0.0]     # bravo: mean 50, last 0
    runs[3]["summary"]["returns"] = [10.0, 20.0]     # delta: mean 15, last 20
    app = make_app(home)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app, runs)
        t = table(app)
        while t.sort_key != "return":
            await pilot.press("s")
        names = [app.link.runs[r]["name"] for r in t.visible_ids]
        assert names == ["bravo", "alpha", "delta", "charlie", "echo"]   # means 50, 43, 15, 1.5, none
        assert "grouped" not in str(app.screen.query_one("#status").render())


async def test_the_return_window_is_a_setting_kept_between_sessions(home):
    app = make_app(home, restore=True, remember=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        assert row(app, RUN_IDS[0])["return"] == "43"        # alpha: the last 20 of 0, 2, ..., 62
        await pilot.press("a")                               # 20 -> 50
        assert table(app).window == 50 and row(app, RUN_IDS[0])["return"] == "31"   # all 32 of them
        assert "avg50" in screen_text(app)
        await pilot.press("q")
    again = make_app(home, restore=True, remember=True)
    async with again.run_test(size=(120, 40)) as pilot:
        await load(pilot, again)
        assert table(again).window == 50 and row(again, RUN_IDS[0])["return"] == "31"
        again.open_run(RUN_IDS[0])
        await pilot.pause()
        assert "(avg50)" in screen_text(again).splitlines()[0]


async def test_the_alert_is_chosen_in_the_palette_and_kept(home):
    import json
    app = make_app(home, restore=True, remember=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await load(pilot, app)
        assert app.alert == "bell"                            # the default
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"when a run ends: osc9")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.alert == "osc9"
        await pilot.press("q")
    assert json.loads((home.root / "ui-state.json").read_text())["alert"] == "osc9"
    again = make_app(home, restore=True, remember=True)
    async with again.run_test(size=(120, 40)) as pilot:
        assert again.alert == "osc9"


# -- against a real daemon --------------------------------------------------------
def live_app(home, **kwargs):
    from mosaic_tui.app import MosaicApp
    options = dict(restore=False, remember=False, cursor_blink=False)
    options.update(kwargs)
    return MosaicApp(home, **options)


def toasts(app) -> list[str]:
    return [n.message for n in app._notifications]


async def test_a_toast_when_a_run_ends_while_the_app_is_open(daemon, mosaic):
    app = live_app(daemon)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_until(pilot, lambda: app.link.loaded, what="runs listed")
        mosaic.synthetic(300, "rate=300", "episode_every=10", name="good")
        mosaic.synthetic(300, "rate=300", "exit_code=3", name="bad")
        await wait_until(pilot, lambda: any("bad failed" in t for t in toasts(app)), what="the failure's toast")
        await wait_until(pilot, lambda: any("good succeeded" in t for t in toasts(app)), what="the success's toast")
        failed = next(t for t in toasts(app) if "bad failed" in t)
        assert failed == "bad failed: worker exited with code 3: synthetic failure with exit code 3"
        ended = next(t for t in toasts(app) if "good succeeded" in t)
        assert ended == "good succeeded at step 300, best return 300 at step 300"
        # one toast a run, not one per record update
        assert sum("good" in t for t in toasts(app)) == 1 and sum("bad" in t for t in toasts(app)) == 1


async def test_reattach_shows_what_changed_while_away(daemon, mosaic):
    steady = mosaic.synthetic(1000, "rate=5000", name="steady")
    wait_state(daemon, steady, P.SUCCEEDED)
    finishing = mosaic.synthetic(1_000_000, "rate=2000", name="finishing")
    doomed = mosaic.synthetic(1_000_000, "rate=2000", name="doomed")
    wait_state(daemon, finishing, P.RUNNING)
    wait_state(daemon, doomed, P.RUNNING)
    app = live_app(daemon, restore=True, remember=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: app.link.loaded and len(app.link.runs) == 3, what="runs listed")
        from mosaic_tui.screens.away import AwayScreen
        assert not isinstance(app.screen, AwayScreen)          # the first start: nothing to compare with
        await pilot.press("q")
    # while the app is closed: one run is cancelled, one fails, one starts
    mosaic.run("cancel", "finishing", check=True)
    failing = mosaic.synthetic(50, "rate=1000", "exit_code=4", name="failing")
    fresh = mosaic.synthetic(1_000_000, "rate=1000", name="fresh")
    wait_state(daemon, failing, P.FAILED)
    wait_state(daemon, finishing, P.CANCELLED)
    wait_state(daemon, fresh, P.RUNNING)
    again = live_app(daemon, restore=True, remember=True)
    async with again.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(again.screen, AwayScreen), what="the away summary")
        await wait_until(pilot, lambda: "fresh" in screen_text(again), what="the summary drawn")
        text = screen_text(again)
        lines = [line for line in text.splitlines() if any(n in line for n in ("finishing", "failing", "fresh"))]
        assert any("cancelled" in l and "finishing" in l for l in lines)
        assert any("new, failed" in l and "failing" in l for l in lines)
        assert any("started" in l and "fresh" in l for l in lines)
        assert "synthetic failure with exit code 4" in text
        # nothing changed for those (the runs table under the translucent summary still lists them)
        summary = again.screen.query_one("#away-text").content
        summary = getattr(summary, "plain", str(summary))
        assert "finishing" in summary and "fresh" in summary
        assert "steady" not in summary and "doomed" not in summary
        await pilot.press("escape")
        assert not isinstance(again.screen, AwayScreen)
        await pilot.press("q")
    # nothing changed since: nothing shown
    third = live_app(daemon, restore=True, remember=True)
    async with third.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: third.link.loaded and len(third.link.runs) == 5, what="runs listed")
        await pilot.pause(0.5)
        assert not isinstance(third.screen, AwayScreen)
    for name in ("doomed", "fresh"):
        mosaic.run("cancel", name)


async def test_a_paused_runs_clock_stands_still_in_the_table_and_the_header(daemon, mosaic):
    import time

    from mosaic_tui import fmt
    run = mosaic.synthetic(1_000_000, "rate=1000", name="napper")
    wait_state(daemon, run, P.RUNNING)
    app = live_app(daemon)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: run in app.link.runs, what="the run listed")
        mosaic.run("pause", "napper", check=True)
        await wait_until(pilot, lambda: app.link.runs[run]["state"] == P.PAUSED, what="paused")
        record = app.link.runs[run]
        # what the run had trained when it was paused, from the daemon's record
        trained = fmt.duration(record["paused_at"] - record["started_at"] - record["paused_seconds"])
        # the wall clock moves on for 3 s, the table ticking once a second; the run's clock does not
        await pilot.pause(1.2)
        still = time.monotonic() + 3
        while time.monotonic() < still:
            assert row(app, run)["elapsed"] == trained
            await pilot.pause(0.2)
        app.open_run(run)
        await pilot.pause()
        assert f"  {trained}  " in screen_text(app).splitlines()[0]
        mosaic.run("resume", "napper", check=True)
        await wait_until(pilot, lambda: app.link.runs[run]["state"] == P.RUNNING, what="running again")
        assert app.link.runs[run]["paused_seconds"] >= 3 and app.link.runs[run]["paused_at"] is None
        mosaic.run("cancel", "napper", check=True)


async def test_each_daemon_has_its_own_memory_and_its_own_name_in_messages(daemon, mosaic, tmp_path):
    """The app in one home driving its own daemon and another one (a server's, over --socket or
    --ssh): what it saw of each is kept apart, so the local away summary never lists the local
    runs as new because the other daemon was used meanwhile; messages name the other daemon."""
    import json
    import shutil
    from pathlib import Path

    from daemon.home import Home
    from mosaic_tui.client import DaemonUnavailable, connect
    from tests.helpers import Mosaic, _stop_everything
    local = mosaic.synthetic(5, "rate=0", name="local-one")
    wait_state(daemon, local, P.SUCCEEDED)
    server = Home.resolve(tmp_path / "server")
    far = Mosaic(server)
    far.run("daemon", "start", check=True)
    try:
        remote_run = far.synthetic(5, "rate=0", name="far-one")
        wait_state(server, remote_run, P.SUCCEEDED)
        app = live_app(daemon, remember=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: local in app.link.runs, what="the local run")
            await pilot.press("q")
        mine = json.loads((daemon.root / "ui-state.json").read_text())
        assert local in mine["last_seen"]["runs"]
        other = Home.resolve(daemon.root, server.socket_path, label=f"server:{server.socket_path}")
        app = live_app(other, remember=True)
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: remote_run in app.link.runs, what="the server's run")
            await pilot.press("q")
        assert json.loads((daemon.root / "ui-state.json").read_text()) == mine    # untouched
        [theirs] = [p for p in Path(daemon.root).glob("ui-state-*.json")]
        assert set(json.loads(theirs.read_text())["last_seen"]["runs"]) == {remote_run}
        # a daemon that does not answer is named as the user named it, not by the local home
        far.run("daemon", "stop", check=True)
        with pytest.raises(DaemonUnavailable) as err:
            connect(other)
        assert str(err.value) == f"no daemon answers on server:{server.socket_path}"
    finally:
        _stop_everything(server)
        shutil.rmtree(server.root, ignore_errors=True)
