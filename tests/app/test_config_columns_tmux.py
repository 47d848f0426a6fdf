"""Config-key columns at 80x24: the real `mosaic` in tmux, two columns chosen (remembered in
ui-state.json), the chooser opened with `C`: no line runs past the terminal, the wanted columns
(state, progress, return) stay, and the key bar keeps its place."""
from __future__ import annotations

import json
import shutil
import uuid

import pytest

from daemon import protocol as P
from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import connect, wait_state

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_config_columns_fit_80_by_24(daemon):
    ids = []
    with connect(daemon) as c:
        for i, rate in enumerate((1000.0, 250.0)):
            run = c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": 400,
                                           "name": f"col-{i}", "params": {"rate": rate, "tags": i + 1}})
            ids.append(run["id"])
    for rid in ids:
        wait_state(daemon, rid, P.SUCCEEDED, timeout=120)
    (daemon.root / "ui-state.json").write_text(json.dumps({"screen": "runs", "columns": ["params.rate", "params.tags"],
                                                           "sort": "params.rate", "reverse": False}))
    pane = Tmux(f"mosaic-cols-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(daemon), 80, 24)
        screen = pane.wait_for("col-0", "col-1", "sort: params.rate", timeout=60)
        lines = screen.splitlines()
        assert len(lines) <= 24 and all(len(line) <= 80 for line in lines), screen
        head = next(line for line in lines if " state " in line)
        for column in ("name", "rate", "tags", "state", "progress", "avg20"):
            assert f" {column} " in f"{head} ", (column, screen)
        rows = lines[lines.index(head) + 1:lines.index(head) + 3]
        assert [row.split()[0] for row in rows] == ["col-1", "col-0"]          # rate 250, then 1000
        assert "250" in rows[0] and "1000" in rows[1]
        assert "Filter" in lines[-1] or "Filter" in lines[-2], screen         # the key bar at the bottom
        pane.keys("C")
        screen = pane.wait_for("Columns from the runs' config", "esc: done")
        assert all(len(line) <= 80 for line in screen.splitlines()), screen
        assert "params.rate" in screen and "params.tags" in screen     # the chosen first, then the rest
        pane.keys("Escape")
        pane.wait_for("sort: params.rate")
    finally:
        pane.kill()
