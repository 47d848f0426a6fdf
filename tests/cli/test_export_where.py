"""`mosaic export --where QUERY`: every finished run the query keeps is mirrored (to MLflow here,
its sqlite store in the home), the others are not; a run still going is named and left; a wrong
query is one line pointing at its mistake; RUN and --where are one or the other."""
from __future__ import annotations

import json

from daemon import protocol as P
from daemon.mirror import STATE_FILE
from tests.helpers import wait_for


def test_export_every_finished_run_a_query_keeps(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    try:
        fast = [mosaic.synthetic(200, "rate=1000", "episode_every=50", name=f"fast-{i}") for i in range(2)]
        slow = mosaic.synthetic(200, "rate=1000", "episode_every=50", name="slow")
        for rid in fast + [slow]:
            assert mosaic.run("wait", rid, "--timeout", "120").returncode == 0
        mosaic.run("tag", "fast-0", "+keep", check=True)
        mosaic.run("tag", "fast-1", "+keep", check=True)
        going = mosaic.synthetic(10_000_000, "rate=50", name="going")
        mosaic.run("tag", going, "+keep", check=True)
        wait_for(lambda: mosaic.show(going)["state"] == P.RUNNING, 60, 0.1, what="the going run running")

        out = mosaic.run("export", "--where", "tag = keep and rate >= 50", "--mlflow", "--json")
        assert out.returncode == 0, out.stderr
        results = json.loads(out.stdout)
        assert [r["target"] for r in results] == ["mlflow", "mlflow"]
        assert "going is running: not exported" in out.stderr
        for rid in fast:
            state = json.loads((home.run_dir(rid) / STATE_FILE).read_text())
            assert state["mlflow"]["run_id"]
        assert not (home.run_dir(slow) / STATE_FILE).exists()
        assert not (home.run_dir(going) / STATE_FILE).exists()

        wrong = mosaic.run("export", "--where", "tagg = keep", "--mlflow")
        assert wrong.returncode == 2
        assert wrong.stderr.strip().splitlines() == [
            "mosaic: error: --where 'tagg = keep': column 1: unknown key tagg (did you mean tag or tags?)"]
        none = mosaic.run("export", "--where", "name = nobody", "--mlflow")
        assert none.returncode != 0 and none.stderr.strip().endswith("--where 'name = nobody': no run matches")
        both = mosaic.run("export", "fast-0", "--where", "tag = keep", "--mlflow")
        assert both.returncode == 2 and "give RUN or --where QUERY, not both" in both.stderr
        mosaic.run("cancel", going)
        mosaic.run("wait", going, "--timeout", "60")
        assert mosaic.show(going)["state"] in P.FINAL_STATES
    finally:
        mosaic.run("daemon", "stop")
