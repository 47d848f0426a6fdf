"""What the report view's tests share (tests/app/test_report_view.py, test_report_figure.py):
a set of finished and running runs by rate, seed and env, and the view opened from compare."""
from __future__ import annotations

import copy

from daemon import protocol as P
from tests.app.conftest import _run


def results_runs() -> list[dict]:
    """2 rates x 3 seeds x 2 envs, finished, and one more seed of rate 10 still running."""
    runs = []
    i = 0
    for rate in (10.0, 20.0):
        for seed in range(3):
            for env in ("EnvA-v0", "EnvB-v0"):
                base = rate * (2 if env == "EnvB-v0" else 1) + seed
                run = _run(i, f"r{int(rate)}-{env}-s{seed}", P.SUCCEEDED, 10000, 100.0, {"rate": rate},
                           returns=[base, base + 1.0, base + 2.0])
                run["env"] = run["config"]["env"] = env
                run["config"]["seed"] = seed
                runs.append(run)
                i += 1
    live = _run(i, "r10-EnvA-v0-s3", P.RUNNING, 5000, 100.0, {"rate": 10.0}, returns=[50.0])
    live["env"] = live["config"]["env"] = "EnvA-v0"
    live["config"]["seed"] = 3
    runs.append(live)
    return runs


async def wait_until(pilot, condition, what: str, rounds: int = 400):
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def open_report(pilot, app, runs: list[dict]):
    """The runs loaded into the app, compare opened on all of them and `R` pressed: the report
    view, once its bootstrap is done."""
    from mosaic_tui.screens.compare import CompareScreen
    from mosaic_tui.screens.report import ReportScreen
    app.link.load(copy.deepcopy(runs), rev=100)
    app.link.flush()
    await pilot.pause()
    app.push_screen(CompareScreen([r["id"] for r in runs]))
    await pilot.pause()
    await pilot.press("R")
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, ReportScreen)
    await wait_until(pilot, lambda: screen.whole is not None, "the bootstrap")
    return screen
