"""Mode ``play`` (workers/sdk/modes.py) on a real match, random against random at tic-tac-toe: a run
submitted as before (no mode, or ``train``: an older client) and one submitted as ``play`` are all
recorded and shown as play; the worker alone takes a config.json in mode ``train`` (what a daemon
older than mode play writes) and plays it."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers import ROOT
from workers.sdk.telemetry import check_event

SEATS = 'seats=["random", "random"]'


@pytest.mark.parametrize("given", [(), ("--mode", "train"), ("--mode", "play")], ids=["none", "train", "play"])
def test_a_match_is_recorded_and_shown_as_play(daemon, mosaic, given):
    run_id = mosaic.submit("--worker", "mosaic_llm", "--algo", "play", "--env", "tictactoe_v3",
                           "--set", SEATS, "--set", "episodes=2", *given)
    mosaic.run("wait", run_id, "--timeout", "300", check=True)
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", run.get("reason")
    assert run["config"]["mode"] == "play" and run["derived"]["mode"] == "play"
    config = json.loads((mosaic.home.run_dir(run_id) / "config.json").read_text())
    assert config["mode"] == "play"
    shown = mosaic.run("show", run_id, check=True).stdout
    assert any(line.split() == ["mode:", "play"] for line in shown.splitlines()), shown
    listed = mosaic.run("ls", "--where", "mode = play", check=True).stdout
    assert f"{run['name']} [play]" in listed, listed


@pytest.mark.parametrize("mode", ["train", "play"])
def test_the_worker_plays_a_config_in_either_mode(tmp_path, mode):
    config = {"worker": "mosaic_llm", "algo": "play", "env": "tictactoe_v3", "mode": mode,
              "params": {"seats": ["random", "random"], "episodes": 1}}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = subprocess.run([sys.executable, "-m", "workers.mosaic_llm_worker.cli", "--config", "config.json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    events = [check_event(json.loads(line)) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [e["type"] for e in events].count("episode") == 1
    assert events[-1]["type"] == "run_completed"
