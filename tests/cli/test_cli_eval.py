"""`mosaic eval`: a trained CleanRL run's policy played again, as a run of its own."""
from __future__ import annotations

import csv
import io
import os

from daemon import protocol as P
from tests.helpers import ROOT


def test_eval_plays_the_latest_checkpoint_of_a_run(daemon, mosaic):
    trained_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "512",
                               "--set", "num-steps=128", "--set", "save-model=true", "--seed", "4",
                               "--name", "trained")
    proc = mosaic.run("wait", "trained", "--timeout", "600")
    trained = mosaic.show(trained_id)
    assert proc.returncode == 0, f"{trained['state']}: {trained.get('reason')}\n{trained.get('stderr_tail')}"
    assert trained["summary"]["checkpoints"] == ["checkpoints/ppo.cleanrl_model"]

    proc = mosaic.run("eval", "trained", "--episodes", "3", "--name", "played", "--wait", timeout=600)
    played = mosaic.show("played")
    assert proc.returncode == 0, f"{played['state']}: {played.get('reason')}\n{played.get('stderr_tail')}"
    assert proc.stdout.splitlines()[0] == played["id"]  # the new run's id first, like submit
    config = played["config"]
    assert config["mode"] == "eval" and config["eval_episodes"] == 3
    assert config["checkpoint"] == os.path.join(str(daemon.run_dir(trained_id)), "checkpoints", "ppo.cleanrl_model")
    for key in ("worker", "algo", "env", "seed", "params"):
        assert config[key] == trained["config"][key], key
    assert played["state"] == P.SUCCEEDED and played["summary"]["episodes"] >= 3
    returns = list(csv.DictReader(io.StringIO(
        mosaic.run("metrics", "played", "--tag", "episode/return", "--csv", check=True).stdout)))
    assert len(returns) == played["summary"]["episodes"] and all(float(r["value"]) >= 1 for r in returns)

    # an explicit checkpoint, a path typed relative to here, and frames
    relative = os.path.relpath(config["checkpoint"], ROOT)  # the CLI runs in ROOT
    run_id = mosaic.run("eval", "trained", "--checkpoint", relative, "--episodes", "1", "--frames", "--fps", "4",
                        check=True).stdout.strip()
    again = mosaic.show(run_id)["config"]
    assert again["checkpoint"] == config["checkpoint"] and again["frames"]["enabled"] and again["frames"]["fps"] == 4
    assert mosaic.run("wait", run_id, "--timeout", "600").returncode == 0


def test_eval_of_a_run_without_checkpoint_names_it(daemon, mosaic):
    mosaic.synthetic(5, "rate=0", name="no-save")
    proc = mosaic.run("eval", "no-save")
    assert proc.returncode == 1
    assert proc.stderr.strip() == "mosaic: error: run no-save has saved no checkpoint; give --checkpoint PATH"
    proc = mosaic.run("eval", "no-such-run")
    assert proc.returncode == 1 and proc.stderr.strip().startswith("mosaic: error: no run named")
