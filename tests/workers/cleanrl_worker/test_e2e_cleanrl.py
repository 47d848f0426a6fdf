"""End to end: a real CleanRL DQN run submitted through the CLI, its metrics read back."""
from __future__ import annotations

import csv
import io
import json

from daemon import protocol as P


def test_cleanrl_dqn_through_the_cli(daemon, mosaic):
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "dqn", "--env", "CartPole-v1", "--steps", "3000",
                           "--name", "dqn-e2e", "--set", "learning-starts=500", "--set", "train-frequency=10",
                           "--set", "buffer-size=2000")
    proc = mosaic.run("wait", "dqn-e2e", "--timeout", "600")
    run = mosaic.show(run_id)
    assert proc.returncode == 0, f"{run['state']}: {run.get('reason')}\n{run.get('stderr_tail')}"
    assert run["state"] == P.SUCCEEDED and run["exit_code"] == 0
    summary = run["summary"]
    assert summary["episodes"] > 10 and summary["last_return"] is not None
    assert {"losses/td_loss", "charts/episodic_return", "charts/SPS"} <= set(summary["tags"])
    rows = list(csv.DictReader(io.StringIO(mosaic.run("metrics", run_id, "--csv", check=True).stdout)))
    losses = [r for r in rows if r["tag"] == "losses/td_loss"]
    assert losses and all(500 <= int(r["step"]) <= 3000 for r in losses)
    returns = json.loads(mosaic.run("metrics", "dqn-e2e", "--json", "--tag", "charts/episodic_return",
                                    check=True).stdout)["charts/episodic_return"]
    assert len(returns) == summary["episodes"]  # one scalar per episode, none dropped
    assert all(r["value"] >= 1 for r in returns)
    # TensorBoard files still written, into the run directory
    assert any(daemon.run_dir(run_id).joinpath("tensorboard").rglob("events.out.tfevents*"))
