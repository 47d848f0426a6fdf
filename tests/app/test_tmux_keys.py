"""Keys typed fast land where they were typed: the real `mosaic` in tmux, keys sent
in one burst (one send-keys call) the moment a screen is asked for.

Reported: Tab, text, Tab, ctrl+a, ctrl+k, digits typed right after `e` put the
digits into the name field and a 500k-step run started; a query typed right
after ctrl+p was lost.
"""
from __future__ import annotations

import shutil
import time
import uuid

import pytest

from daemon import protocol as P
from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import connect, wait_for, wait_state

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def line_of(screen: str, label: str) -> str:
    return next(line for line in screen.splitlines() if line.lstrip().startswith(label + " "))


def burst(pane: Tmux, *keys: str) -> None:
    pane.tmux("send-keys", "-t", pane.name, *keys)


def _run_named(daemon, name: str) -> dict | None:
    with connect(daemon) as c:
        try:
            return c.call(P.GET, run=name)
        except P.RPCError:
            return None


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_a_burst_after_e_lands_in_the_fields_it_was_typed_at(daemon, size):
    with connect(daemon) as c:
        run = c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 500000,
                                       "name": "big", "params": {"rate": 0.0, "tags": 1}})
    wait_state(daemon, run["id"], P.SUCCEEDED, timeout=120)
    pane = Tmux(f"mosaic-keys-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(daemon), *size)
        pane.wait_for("big", "succeeded", timeout=60)
        # worker -> algo -> env -> name: "burst"; -> steps: cleared, "1234"
        burst(pane, "e", "Tab", "Tab", "Tab", "burst", "Tab", "C-a", "C-k", "1234")
        screen = pane.wait_for("clone of big", "ready: ctrl+s submits", timeout=60)   # parameters loaded
        deadline = time.monotonic() + 10   # every key handled: the last one's digit is there
        while "1234" not in line_of(screen, "steps") and "1234" not in line_of(screen, "name") \
                and time.monotonic() < deadline:
            time.sleep(0.2)
            screen = pane.screen()
        assert "burst" in line_of(screen, "name") and "1234" not in line_of(screen, "name")
        assert "1234" in line_of(screen, "steps") and "500000" not in line_of(screen, "steps")
        pane.keys("C-s")
        made = wait_for(lambda: _run_named(daemon, "burst"), 60, what="the submitted run")
        assert made["config"]["steps"] == 1234
    finally:
        pane.kill()


@pytest.mark.parametrize("opener", ["C-p", ":"])
def test_a_query_typed_right_after_the_palette_key_is_kept(daemon, opener):
    pane = Tmux(f"mosaic-keys-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(daemon))
        pane.wait_for("0 runs", timeout=60)
        burst(pane, opener, "theme")
        pane.wait_for("🔎", timeout=10)

        def query() -> str:
            return next(line for line in pane.screen().splitlines() if "🔎" in line).split("🔎")[1].strip()
        deadline = time.monotonic() + 10   # until the last key is drawn
        while query() != "theme" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert query() == "theme", pane.screen()
    finally:
        pane.kill()
