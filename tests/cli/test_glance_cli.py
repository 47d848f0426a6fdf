"""`mosaic ls` and `mosaic show`: the mean and best returns, ETA, finished and eval runs, paused time.

Real daemon, real workers, the real CLI (issue 14, items 5, 6 and 8).
"""
from __future__ import annotations

import json
import re

from daemon import protocol as P
from tests.helpers import holds, wait_for, wait_state


def ls_rows(mosaic, *args: str) -> dict[str, dict[str, str]]:
    """`mosaic ls` as {name: {COLUMN: value}} (columns split on two spaces or more)."""
    lines = mosaic.run("ls", *args, check=True).stdout.splitlines()
    header = re.split(r"\s{2,}", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        if not line.startswith("01"):
            continue  # the legend under the table
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(header), line
        row = dict(zip(header, cells))
        rows[row["NAME"]] = row
    return rows


def show_field(mosaic, run: str, field: str) -> str:
    out = mosaic.run("show", run, check=True).stdout
    match = re.search(rf"^\s*{field}: (.*)$", out, re.M)
    assert match, f"no {field!r} in:\n{out}"
    return match.group(1)


def seconds(text: str) -> int:
    """fmt.duration's 1m05s (or 5s) back to seconds."""
    match = re.fullmatch(r"(?:(\d+)m)?(\d+)s", text)
    assert match, text
    return int(match.group(1) or 0) * 60 + int(match.group(2))


def test_mean_of_the_last_n_returns_and_the_best_survive_a_daemon_restart(daemon, mosaic):
    # one episode a step, returns step % 500: they climb to 499 at step 499, then start again
    run = mosaic.synthetic(800, "rate=200", "episode_every=1", name="climb")
    wait_for(lambda: (mosaic.show(run)["summary"].get("steps") or 0) >= 520, what="past the best episode")
    # the daemon goes away mid-run: the re-adopted (or finished) run keeps its best and its last returns
    mosaic.run("daemon", "stop", check=True)
    mosaic.run("daemon", "start", check=True)
    wait_state(daemon, run, P.SUCCEEDED)
    # the last 100 returns are 201..300, the last 20 281..300; the daemon keeps enough for N = 100
    rows = ls_rows(mosaic, "--window", "100")
    assert rows["climb"]["AVG100"] == "250.5"
    assert rows["climb"]["BEST@STEP"] == "499@499"
    assert ls_rows(mosaic)["climb"]["AVG20"] == "290.5"
    assert show_field(mosaic, "climb", "best return") == "499 at step 499"
    assert show_field(mosaic, "climb", "mean return") == "290.5 (last 20 episodes)"
    summary = mosaic.show(run)["summary"]
    assert summary["best_return"] == 499 and summary["best_step"] == 499 and len(summary["returns"]) == 100
    # --json says what the table says, by the same functions: the mean of the last N, the best,
    # the elapsed time (paused time left out), the progress, the ETA
    [listed] = [r for r in json.loads(mosaic.run("ls", "--json", "--window", "100", check=True).stdout)
                if r["id"] == run]
    assert listed["derived"]["mean_return"] == 250.5 and listed["derived"]["return_window"] == 100
    assert (listed["derived"]["best_return"], listed["derived"]["best_step"]) == (499, 499)
    assert listed["derived"]["progress"] == 1.0 and listed["derived"]["eta_s"] is None
    assert listed["derived"]["state"] == "succeeded"
    shown = json.loads(mosaic.run("show", "climb", "--json", check=True).stdout)["derived"]
    assert shown["mean_return"] == 290.5 and shown["return_window"] == 20
    assert abs(seconds(show_field(mosaic, "climb", "elapsed")) - shown["elapsed_s"]) < 1.5


def test_window_out_of_range_is_one_clear_error(daemon, mosaic):
    proc = mosaic.run("ls", "--window", "101")
    assert proc.returncode != 0
    assert proc.stderr.strip() == ("mosaic: error: --window must be between 1 and 100 "
                                   "(the daemon keeps the last 100 returns), not 101")


def test_eta_of_a_running_run(daemon, mosaic):
    mosaic.synthetic(200000, "rate=1000", "episode_every=100", name="long")
    wait_for(lambda: ls_rows(mosaic)["long"]["ETA"] != "-", what="an ETA from the steps/s")
    row = ls_rows(mosaic)["long"]
    # about 200 s left at ~1000 steps/s (the figure moves with the shared machine)
    assert 60 <= seconds(row["ETA"]) <= 1000
    mosaic.run("cancel", "long", check=True)


def test_paused_time_is_left_out_of_elapsed_in_ls_and_show(daemon, mosaic):
    run = mosaic.synthetic(1_000_000, "rate=1000", name="napper")
    wait_state(daemon, run, P.RUNNING)
    wait_for(lambda: (mosaic.show(run)["summary"].get("steps") or 0) > 0, what="first steps")
    mosaic.run("pause", "napper", check=True)
    first = ls_rows(mosaic)["napper"]["ELAPSED"]
    # paused: the clock stands still, in ls and show alike, looked at over 3 s of wall time
    holds(lambda: ls_rows(mosaic)["napper"]["ELAPSED"] == first == show_field(mosaic, "napper", "elapsed"), 3.0,
          interval=0, what="the paused run's elapsed time standing still")
    mosaic.run("resume", "napper", check=True)
    mosaic.run("cancel", "napper", check=True)
    record = wait_state(daemon, run, P.CANCELLED)
    assert record["paused_at"] is None and record["paused_seconds"] >= 3
    wall = record["ended_at"] - record["started_at"]
    shown = seconds(ls_rows(mosaic)["napper"]["ELAPSED"])
    assert shown == seconds(show_field(mosaic, "napper", "elapsed"))
    assert shown <= wall - 3


def test_a_real_run_that_stops_short_shows_100_percent_and_eval_runs_are_marked(daemon, mosaic, tmp_path):
    # CleanRL PPO trains whole batches of 4 envs x 128 steps: asked for 1000 steps it stops at 512
    mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "1000",
                  "--set", "num-steps=128", "--set", "save-model=true", "--name", "ppo-short")
    proc = mosaic.run("wait", "ppo-short", "--timeout", "600")
    assert proc.returncode == 0, proc.stderr
    row = ls_rows(mosaic)["ppo-short"]
    assert row["STATE"] == "succeeded" and row["STEPS"] == "512"
    assert row["PROG"] == "100%"
    assert re.search(r"512 / 1000 steps \(100%\)", show_field(mosaic, "ppo-short", "progress"))
    # an evaluation of its checkpoint: no total steps, marked as an eval everywhere
    config = tmp_path / "eval.json"
    config.write_text(json.dumps({"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "mode": "eval",
                                  "checkpoint": "run:ppo-short", "eval_episodes": 2, "name": "ppo-eval"}))
    mosaic.submit(str(config))
    proc = mosaic.run("wait", "ppo-eval", "--timeout", "600")
    assert proc.returncode == 0, proc.stderr
    rows = ls_rows(mosaic)
    assert "ppo-eval [eval]" in rows and "ppo-short" in rows
    assert rows["ppo-eval [eval]"]["PROG"] == "100%"
    assert show_field(mosaic, "ppo-eval", "mode") == "eval"


def test_a_store_made_before_pauses_were_recorded_gains_the_columns(home, mosaic):
    import sqlite3
    mosaic.run("daemon", "start", check=True)
    done = mosaic.synthetic(100, "rate=1000", name="before")
    wait_state(home, done, P.SUCCEEDED)
    mosaic.run("daemon", "stop", check=True)
    # the runs table as a daemon of before this change left it
    db = sqlite3.connect(home.root / "mosaic.db")
    db.execute("ALTER TABLE runs DROP COLUMN paused_at")
    db.execute("ALTER TABLE runs DROP COLUMN paused_seconds")
    db.commit()
    db.close()
    mosaic.run("daemon", "start", check=True)
    try:
        assert mosaic.show("before")["paused_seconds"] == 0
        run = mosaic.synthetic(1_000_000, "rate=1000", name="after")
        wait_state(home, run, P.RUNNING)
        mosaic.run("pause", "after", check=True)
        assert mosaic.show("after")["paused_at"] is not None
        mosaic.run("resume", "after", check=True)
        assert mosaic.show("after")["paused_seconds"] > 0
        assert set(ls_rows(mosaic)) == {"before", "after"}
        mosaic.run("cancel", "after", check=True)
    finally:
        mosaic.run("daemon", "stop")


def test_a_run_summary_stored_before_the_best_was_kept_takes_it_from_its_returns(home, mosaic):
    import sqlite3
    mosaic.run("daemon", "start", check=True)
    try:
        run = mosaic.synthetic(800, "rate=50", "episode_every=1", name="older")
        wait_for(lambda: (mosaic.show(run)["summary"].get("steps") or 0) >= 505, what="past the best episode")
        # paused while step 499 is among the last 100 returns the summary keeps
        mosaic.run("pause", "older", check=True)
        # the summary goes to the store every 0.5 s
        wait_for(lambda: 499 in mosaic.show(run)["summary"]["returns"], 10, what="the paused summary stored")
        mosaic.run("daemon", "stop", check=True)
        # the summary as a daemon of before this change stored it
        db = sqlite3.connect(home.root / "mosaic.db")
        summary = json.loads(db.execute("SELECT summary FROM runs WHERE id = ?", (run,)).fetchone()[0])
        del summary["best_return"], summary["best_step"]
        db.execute("UPDATE runs SET summary = ? WHERE id = ?", (json.dumps(summary), run))
        db.commit()
        db.close()
        mosaic.run("daemon", "start", check=True)
        mosaic.run("resume", "older", check=True)
        wait_state(home, run, P.SUCCEEDED)
        # 499 (step 499) was among the kept returns; the steps after the restart only reach 300
        assert ls_rows(mosaic)["older"]["BEST@STEP"] == "499"
    finally:
        mosaic.run("daemon", "stop")
