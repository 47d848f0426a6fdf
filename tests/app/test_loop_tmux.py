"""The researcher's loop, walked as a user in the real `mosaic` inside tmux.

Open the app; look at XuanCe PPO's parameters, then switch to MAPPO on
simple_spread_v3 (the form must show MAPPO's own defaults, not PPO's); submit;
watch it train; detach while it trains; reattach and read what changed while
away; export the episode returns as CSV.
"""
from __future__ import annotations

import csv
import io
import shutil
import uuid

import pytest

from daemon import protocol as P
from tests.app.test_e2e_tmux import Tmux, mosaic_command
from tests.helpers import connect, wait_state

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")]


def choose(pane: Tmux, options: list[str], current: str, wanted: str) -> None:
    """Pick `wanted` in the focused Select: open it, move down or up, enter."""
    steps = options.index(wanted) - options.index(current)
    pane.keys("Enter")
    for _ in range(abs(steps)):
        pane.keys("Down" if steps > 0 else "Up")
    pane.keys("Enter")


def field_line(screen: str, label: str) -> str:
    return next(line for line in screen.splitlines() if line.lstrip().startswith(label + " "))


def test_the_whole_loop(daemon, mosaic):
    with connect(daemon) as c:
        workers = [w for w in c.call(P.WORKERS) if w.get("available") and not w.get("hidden")
                   and w["capabilities"].get("algorithms")]
        ppo_defaults = {k: v.get("default") for k, v in
                        c.call(P.SCHEMA, worker="xuance", algo="ppo", env="CartPole-v1")["properties"].items()}
        mappo_defaults = {k: v.get("default") for k, v in
                          c.call(P.SCHEMA, worker="xuance", algo="mappo", env="simple_spread_v3")["properties"].items()}
    names = [w["name"] for w in workers]
    algos = next(w for w in workers if w["name"] == "xuance")["capabilities"]["algorithms"]
    assert ppo_defaults["policy"] != mappo_defaults["policy"]   # what the form got wrong before

    pane = Tmux(f"mosaic-loop-{uuid.uuid4().hex[:8]}")
    try:
        pane.start(mosaic_command(daemon))
        pane.wait_for("0 runs", timeout=60)
        pane.keys("n")
        screen = pane.wait_for("Parameters of", "ready: ctrl+s submits", timeout=60)
        choose(pane, names, field_line(screen, "worker").split()[1], "xuance")   # worker
        screen = pane.wait_for("Parameters of xuance", timeout=60)
        current = field_line(screen, "algo").split()[1]
        pane.keys("Tab")                                         # -> algo
        if current != "ppo":
            choose(pane, algos, current, "ppo")
        screen = pane.wait_for("Parameters of xuance ppo", "ready: ctrl+s submits", timeout=60)
        choose(pane, algos, "ppo", "mappo")
        screen = pane.wait_for("Parameters of xuance mappo (", timeout=60)
        assert "CartPole-v1" not in field_line(screen, "env")   # the env followed the algorithm
        pane.keys("Tab", "C-a", "C-k")                           # -> env, cleared
        pane.type("simple_spread_v3")
        pane.keys("Tab")                                         # -> name
        pane.type("loop-mappo")
        pane.keys("Tab")                                         # -> steps
        pane.type("3000")
        screen = pane.wait_for("Parameters of xuance mappo", "ready: ctrl+s submits", timeout=60)
        assert "kept from" not in screen                         # nothing typed in the parameters
        assert "Categorical_AC" not in screen
        pane.keys("C-s")
        # the run opens: watch it train, its episode returns plotted
        pane.wait_for("loop-mappo", "running", timeout=60)
        pane.wait_for("episode/return", timeout=120)
        pane.keys("q")                                           # detach while it trains
        pane.wait_for("MOSAIC-EXITED 0", timeout=20)
        run = mosaic.show("loop-mappo")
        assert run["state"] in (P.RUNNING, P.SUCCEEDED)
        params = run["config"]["params"]
        assert params["policy"] == mappo_defaults["policy"] and params["learner"] == mappo_defaults["learner"]
        assert params["parallels"] == mappo_defaults["parallels"]
        wait_state(daemon, run["id"], P.SUCCEEDED, timeout=300)   # it kept training without the app

        pane.restart(mosaic_command(daemon))                     # reattach: what changed while away
        screen = pane.wait_for("Since the app last closed", "loop-mappo", timeout=60)
        # the summary's own line, below its header: the runs table under the translucent summary
        # lists the run too
        lines = screen.splitlines()
        header = next(i for i, l in enumerate(lines) if "Since the app last closed" in l)
        line = next(l for l in lines[header:] if "loop-mappo" in l)
        assert "succeeded" in line and "mappo" in line and "simple_spread_v3" in line
        pane.keys("Escape")                                      # back where we left: the run
        pane.wait_for("loop-mappo", "succeeded", "episode/return", timeout=20)
        pane.keys("Escape")
        screen = pane.wait_for("1 run ", timeout=20)
        assert "[eval]" not in screen and "loop-mappo" in screen
        pane.keys("q")
        pane.wait_for("MOSAIC-EXITED 0", timeout=20)
    finally:
        pane.kill()

    out = mosaic.run("metrics", "loop-mappo", "--tag", "episode/return", "--csv", check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) >= 10 and all(r["tag"] == "episode/return" for r in rows)
    assert all(float(r["value"]) < 0 for r in rows)              # simple_spread: negative distances
    tags = mosaic.show("loop-mappo")["summary"]["tags"]
    assert any(t.startswith("episode/return/") for t in tags)    # each agent's returns too
