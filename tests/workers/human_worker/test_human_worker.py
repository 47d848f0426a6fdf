"""The human worker through the real daemon: a client takes the seat and plays (docs/play.md)."""
from __future__ import annotations

import json
import time

import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_for

# MiniGrid-Empty-5x5 (seed 0): the agent starts top left facing right, the goal is bottom right
TO_THE_GOAL = [2, 2, 1, 2, 2]   # forward, forward, turn right, forward, forward


def events_of(home, run_id: str) -> list[dict]:
    text = (home.run_dir(run_id) / "events.jsonl").read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines()]


def of_type(home, run_id: str, kind: str) -> list[dict]:
    return [e for e in events_of(home, run_id) if e["type"] == kind]


def take_seat(client, run_id: str, timeout: float = 60) -> dict:
    """The seat, once the run listens (its pipe exists when its env is made)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return client.call(P.SEAT, run=run_id, seat="0")
        except Exception as exc:  # noqa: BLE001 -- not listening yet
            if "not listening" not in str(exc) and "no human seat" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_a_minigrid_play_reaches_the_goal_through_the_seat(daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "human", "--algo", "play", "--env", "MiniGrid-Empty-5x5-v0",
                           "--seed", "0", "--set", "episodes=1", "--name", "first-play")
    run = mosaic.show(run_id)
    assert run["config"]["params"]["mode"] == "turn" and run["config"]["frames"]["enabled"]
    player = connect(home, name="player")
    watcher = connect(home, name="watcher")
    try:
        assert take_seat(player, run_id)["held_by"].startswith("player#")
        # a second client is told who holds the seat, and its actions are refused
        with pytest.raises(Exception, match=r"held by player#"):
            watcher.call(P.SEAT, run=run_id, seat="0")
        with pytest.raises(Exception, match=r"held by player#"):
            watcher.call(P.ACT, run=run_id, seat="0", action=2)
        keymap = wait_for(lambda: of_type(home, run_id, "keymap"), 30, 0.1, what="the keymap")[0]
        assert keymap["actions"][:3] == ["left", "right", "forward"] and keymap["keys"]["up"] == 2
        assert keymap["frames"] is True
        start = wait_for(lambda: of_type(home, run_id, "play"), 30, 0.1, what="the first episode")[0]
        assert start["objective"] == "get to the green goal square"      # MiniGrid's mission
        player.call(P.ACT, run=run_id, seat="0", action=99)      # not an action: refused, nothing lost
        wait_for(lambda: any(e.get("refused") for e in of_type(home, run_id, "play")), 30, 0.1, what="refusal")
        for action in TO_THE_GOAL:
            player.call(P.ACT, run=run_id, seat="0", action=action)
        mosaic.run("wait", run_id, "--timeout", "60")
    finally:
        player.close()
        watcher.close()
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", run
    episodes = of_type(home, run_id, "episode")
    assert len(episodes) == 1 and episodes[0]["return"] > 0 and episodes[0]["length"] == 5
    moves = [json.loads(line) for line in (home.run_dir(run_id) / "moves.jsonl").read_text().splitlines()]
    assert [m["action"] for m in moves] == TO_THE_GOAL
    returns = mosaic.run("metrics", run_id, "--csv", "--metric", "episode/return", check=True).stdout.splitlines()
    assert len(returns) == 2 and float(returns[1].split(",")[2]) > 0, returns   # tag,step,value,wall_time


def test_a_seat_left_by_its_client_pauses_and_another_takes_it(daemon, mosaic):
    home = mosaic.home
    run_id = mosaic.submit("--worker", "human", "--algo", "play", "--env", "CartPole-v1", "--seed", "1",
                           "--set", "episodes=1")
    first = connect(home, name="first")
    take_seat(first, run_id)
    first.call(P.ACT, run=run_id, seat="0", action=1)
    wait_for(lambda: any(e.get("action") == 1 for e in of_type(home, run_id, "play")), 30, 0.1, what="a step")
    first.close()     # detached: the seat is left, the episode waits
    wait_for(lambda: of_type(home, run_id, "play")[-1].get("held_by", "x") is None, 30, 0.1,
             what="the run told the seat is empty")
    assert mosaic.show(run_id)["state"] == "running"
    second = connect(home, name="second")
    try:
        assert take_seat(second, run_id)["held_by"].startswith("second#")
        for _ in range(500):   # pushing left, the pole falls within a few dozen steps
            if not of_type(home, run_id, "episode"):
                try:
                    second.call(P.ACT, run=run_id, seat="0", action=0)
                except Exception:  # noqa: BLE001 -- the run ended between the look and the act
                    break
                time.sleep(0.02)
        mosaic.run("wait", run_id, "--timeout", "60")
    finally:
        second.close()
    assert mosaic.show(run_id)["state"] == "succeeded"
    plays = [e for e in of_type(home, run_id, "play") if "action" in e]
    assert plays[0]["action"] == 1 and plays[0]["held_by"].startswith("first#")
    assert all(e["action"] == 0 for e in plays[1:]) and plays[-1]["held_by"].startswith("second#")


def test_continuous_actions_are_refused_in_one_line(daemon, mosaic):
    proc = mosaic.run("submit", "--worker", "human", "--algo", "play", "--env", "Pendulum-v1")
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert "continuous actions only" in proc.stderr


def test_a_play_runs_at_the_daemons_priority_a_training_run_nicer(daemon, mosaic):
    """A person waits on a play, not on the CPU: its worker is not niced as training runs are
    (daemon/runs.py), or a busy machine's training would stand between a key and its frame."""
    import psutil
    home = mosaic.home
    play = mosaic.submit("--worker", "human", "--algo", "play", "--env", "CartPole-v1", "--set", "episodes=1")
    training = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "100000000",
                             "--set", "rate=10")

    def worker_nice(run_id: str) -> int:
        supervisor = wait_for(lambda: (home.run_dir(run_id) / "supervisor.json").exists() and json.loads(
            (home.run_dir(run_id) / "supervisor.json").read_text()), 60, 0.1, what="the supervisor")
        return psutil.Process(supervisor["worker_pid"]).nice() - psutil.Process(supervisor["supervisor_pid"]).nice()

    try:
        assert worker_nice(play) == 0
        assert worker_nice(training) == 10
    finally:
        mosaic.run("cancel", play)
        mosaic.run("cancel", training)


def test_mosaic_play_with_a_misspelled_env_says_so_in_one_line_and_starts_nothing(daemon, mosaic):
    """In a terminal (a pty: `mosaic play` opens the app only there), refused at submit as `submit` is."""
    import os
    import pty
    import subprocess
    import sys

    from tests.helpers import ROOT
    master, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", "--home", str(mosaic.home.root), "play",
                               "MiniGrid-Emtpy-5x5-v0"], stdin=terminal, stderr=terminal, stdout=subprocess.PIPE,
                              cwd=str(ROOT), timeout=60)
        os.close(terminal)
        said = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:       # EIO: the terminal's other end is closed, all of it read
                break
            if not chunk:
                break
            said += chunk
    finally:
        os.close(master)
    lines = said.decode().strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, lines
    assert "did you mean 'MiniGrid-Empty-5x5-v0'" in lines[0]
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []


def test_a_recording_play_ends_with_its_recording_unless_told_otherwise():
    from workers.human_worker import WORKER
    base = {"worker": "human", "algo": "play", "env": "MiniGrid-Empty-5x5-v0"}
    assert WORKER.validate({**base, "record": {"episodes": 2}})["params"]["episodes"] == 2
    assert WORKER.validate({**base, "record": {"episodes": 2}, "params": {"episodes": 5}})["params"]["episodes"] == 5
    assert WORKER.validate({**base, "record": {"steps": 50}})["params"]["episodes"] == 10
    assert WORKER.validate(base)["params"]["episodes"] == 10
