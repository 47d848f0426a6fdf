"""A run ending while the real `mosaic` runs in tmux: the notification, and the bell or OSC 9 the
`alert` setting asks for, as the terminal (tmux) receives them."""
from __future__ import annotations

import json
import shutil
import sys
import time
import uuid

import pytest

from tests.app.test_e2e_tmux import Tmux
from tests.helpers import ROOT, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def mosaic_command(home) -> str:
    # this checkout's code, whatever environment an already running tmux server hands its sessions
    return (f"cd {ROOT} && PYTHONPATH={ROOT} TERM=tmux-256color {sys.executable} -m mosaic_tui.cli "
            f"--home {home.root}; echo MOSAIC-EXITED $?; sleep 600")


def tmux_format(pane: Tmux, fmt: str) -> str:
    return pane.tmux("display-message", "-p", "-t", pane.name, fmt, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize("alert", ["bell", "osc9", "off"])
def test_a_run_ending_alerts_the_terminal_as_set(daemon, mosaic, tmp_path, alert):
    (daemon.root / "ui-state.json").write_text(json.dumps({"alert": alert}))
    raw = tmp_path / "pane.raw"
    pane = Tmux(f"mosaic-alert-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(daemon))
        # everything the app writes to its terminal, before tmux interprets it
        pane.tmux("pipe-pane", "-O", "-t", pane.name, f"cat >> {raw}")
        pane.wait_for("0 runs", timeout=60)
        assert tmux_format(pane, "#{window_bell_flag}") == "0"
        mosaic.synthetic(200, "rate=400", "episode_every=50", name="quick")
        pane.wait_for("quick succeeded at step 200", timeout=60)     # the notification

        def alerts() -> tuple[str, bool]:
            # inside tmux the OSC 9 goes out wrapped for passthrough
            return (tmux_format(pane, "#{window_bell_flag}"),
                    b"\x1bPtmux;\x1b\x1b]9;mosaic: quick succeeded at step 200" in raw.read_bytes())
        # the alert set goes out with the toast (the pipe may lag it): wait for it. With none set,
        # nothing may come in the second after the toast was drawn (an absence needs a window)
        if alert == "off":
            until = time.monotonic() + 1.0
            while time.monotonic() < until and alerts() == ("0", False):
                time.sleep(0.1)
            bell, osc9 = alerts()
        else:
            wanted = {"bell": lambda got: got[0] == "1", "osc9": lambda got: got[1]}[alert]
            bell, osc9 = wait_for(lambda: (lambda got: got if wanted(got) else None)(alerts()), 30, 0.1,
                                  f"the {alert} alert")
        if alert == "bell":
            assert bell == "1" and not osc9
        elif alert == "osc9":
            assert osc9 and bell == "0"
        else:
            assert bell == "0" and not osc9
    finally:
        pane.kill()
