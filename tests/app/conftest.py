"""Fixtures of the app's tests: a fixed run list and telemetry, a fake daemon for screens
that ask it things, and helpers to drive a MosaicApp with Pilot."""
from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest

from daemon import protocol as P

FIXED_NOW = 1_790_000_000.0

_CONFIG = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 10000, "seed": 1, "device": "cpu",
           "mode": "train", "checkpoint": None, "eval_episodes": 10, "params": {"rate": 1000.0, "tags": 2}}


def _run(i: int, name: str, state: str, steps: int, rate: float, params: dict[str, Any] | None = None,
         returns: list[float] | None = None, algo: str = "emit", worker: str = "synthetic") -> dict[str, Any]:
    created = FIXED_NOW - 3600 + 60 * i
    cfg = copy.deepcopy(_CONFIG)
    cfg.update(name=name, algo=algo, worker=worker)
    cfg["params"].update(params or {})
    ended = None if state in P.ACTIVE_STATES or state == P.QUEUED else created + 30 + i
    return {
        "id": f"01M8000000000000000000000{i}", "name": name, "worker": worker, "algo": algo, "env": "none",
        "config": cfg, "state": state, "created_at": created,
        "started_at": None if state == P.QUEUED else created + 1, "ended_at": ended,
        "pid": None, "pid_start": None, "worker_pid": None, "exit_code": 0 if ended else None,
        "exit_signal": None, "reason": "worker exited with code 3" if state == P.FAILED else None,
        "stderr_tail": None, "cancel_requested": False, "rev": 10 + i, "ingest_offset": 0,
        "summary": {"steps": steps, "total_steps": 10000, "lines": steps, "invalid": 0, "episodes": steps // 100,
                    "last_return": (returns or [None])[-1], "returns": returns or [], "tags": [],
                    "sps": rate, "started": True, "completed": state == P.SUCCEEDED},
    }


def fixed_runs() -> list[dict[str, Any]]:
    ramp = [float(x) for x in range(0, 64, 2)]
    return [
        _run(1, "alpha", P.SUCCEEDED, 10000, 1005.0, {"rate": 1000.0}, ramp),
        _run(2, "bravo", P.RUNNING, 4200, 812.5, {"rate": 800.0}, [5.0, 9.0, 3.0, 12.0, 20.0, 18.0]),
        _run(3, "charlie", P.FAILED, 1200, None, {"rate": 10.0, "tags": 3}, [1.0, 2.0]),
        _run(4, "delta", P.PAUSED, 7000, 0.0, {"rate": 500.0}, [30.0, 31.0, 29.0]),
        _run(5, "echo", P.QUEUED, 0, None, {"rate": 1000.0}),
    ]


def fixed_events(n: int = 400, tags: int = 2, t0: float = FIXED_NOW - 3000) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for step in range(1, n + 1):
        tag = f"synthetic/value_{step % tags}"
        events.append({"v": 1, "type": "scalar", "t": t0 + step * 0.01, "tag": tag,
                       "value": float((step * 7) % 97) + step / 10, "step": step})
        if step % 20 == 0:
            events.append({"v": 1, "type": "episode", "t": t0 + step * 0.01, "step": step,
                           "return": float(step % 200), "length": 20})
    return events


RUN_IDS = [r["id"] for r in fixed_runs()]


def fixed_home(path: str):
    """A daemon home at a fixed path, empty before and removed after: a snapshot's title shows the
    home's path, so it cannot be a fresh temp dir. Use as ``yield from fixed_home(PATH)``."""
    import shutil

    from daemon.home import Home
    shutil.rmtree(path, ignore_errors=True)
    h = Home.resolve(path)
    h.root.mkdir(parents=True)
    try:
        yield h
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_app(home, **kwargs):
    from mosaic_tui.app import MosaicApp
    # all_workers: the fake daemon's only worker is the synthetic one, hidden from users
    options = dict(connect=False, clock=lambda: FIXED_NOW, restore=False, remember=False, cursor_blink=False,
                   all_workers=True)
    options.update(kwargs)
    return MosaicApp(home, **options)


async def load_fixed(pilot, app, events_for: tuple[str, ...] = (RUN_IDS[0], RUN_IDS[1])) -> None:
    """Give the app the fixed runs (and telemetry for some) as if the daemon had sent them."""
    app.link.load(fixed_runs(), rev=20)
    for rid in events_for:
        app.link.feed_events(rid, fixed_events())
    app.link.flush()
    await pilot.pause()
    await pilot.pause()


class FakeDaemon:
    """Answers the form's and the workers screen's requests (workers, schema, submit) from the real
    synthetic worker's descriptor: kept where a snapshot needs the same answers every time, and
    for the form's checks as you type. It answers no run action (cancel, pause, resume, delete):
    those are tested against the real daemon, where they land (tests/app/test_run_actions_live.py)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.submitted: list[dict[str, Any]] = []

    async def call(self, method: str, **params: Any) -> Any:
        from daemon import discovery
        from workers.synthetic_worker import WORKER
        self.calls.append((method, params))
        if method == P.WORKERS:
            return discovery.describe({"synthetic": WORKER}, {})
        if method == P.SCHEMA:
            return WORKER.schema(params["algo"], params.get("env"))
        if method == P.SUBMIT:
            config = WORKER.validate(params["config"])   # raises ConfigError like the daemon
            self.submitted.append(config)
            run = _run(9, config.get("name") or "emit-none-1", P.QUEUED, 0, None)
            run["config"] = config
            return run
        raise P.RPCError(P.METHOD_NOT_FOUND, method)


@pytest.fixture
def fake_daemon():
    return FakeDaemon()


def use_fake(app, fake: FakeDaemon) -> None:
    app.link.call = fake.call


@pytest.fixture
def anyio_backend():
    return "asyncio"


def screen_text(app) -> str:
    """What the terminal shows right now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_until(pilot, predicate, timeout: float = 30.0, what: str = "condition"):
    """Let the app run until predicate() holds; fail naming what was awaited."""
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def writer():
    """A real FrameWriter for a fake run id (no daemon, no worker)."""
    from workers.fastlane.writer import FrameWriter
    w = FrameWriter("01M8FRAMETEST" + uuid.uuid4().hex[:13].upper(), capacity=8)
    yield w
    w.close(unlink=True)
