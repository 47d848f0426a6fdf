"""Sweeps through the real daemon and CLI, with the synthetic worker: grid, TPE with pruning, a daemon SIGKILL."""
from __future__ import annotations

import csv
import io
import json
import os
import signal

import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_for


def write_spec(tmp_path, spec: dict, name: str = "sweep.yaml") -> str:
    import yaml
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return str(path)


BASE = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "seed": 7,
        "params": {"rate": 0, "episode_every": 5}}


def test_grid_sweep_of_two_by_two_by_two_seeds_gives_eight_runs_in_four_groups_and_a_csv(daemon, mosaic, tmp_path):
    spec = {"name": "grid", "base": BASE, "seeds": 2, "parallel": 2,
            "params": {"return_offset": [0, 100], "episode-every": {"grid": [5, 10]}},
            "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"}}
    proc = mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "240")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["grid", "sweep grid finished: 8 runs in 4 trials"]
    sweep = json.loads(mosaic.run("sweeps", "grid", "--json", check=True).stdout)
    assert sweep["spec"]["sampler"] == "grid" and len(sweep["trials"]) == 4
    assert sorted((t["params"]["return_offset"], t["params"]["episode_every"]) for t in sweep["trials"]) == \
        [(0, 5), (0, 10), (100, 5), (100, 10)]
    for t in sweep["trials"]:
        assert t["state"] == "complete" and sorted(r["seed"] for r in t["runs"]) == [7, 8]
        # the last 3 returns of a 40-step run: steps 30, 35, 40 (every 5) or 20, 30, 40 (every 10)
        expected = t["params"]["return_offset"] + (35.0 if t["params"]["episode_every"] == 5 else 30.0)
        assert t["mean"] == t["value"] == expected and t["std"] == 0.0
    best = sweep["trials"][0]
    assert best["params"] == {"return_offset": 100, "episode_every": 5}   # ranked: best first
    assert set(sweep["importances"]) == {"return_offset", "episode_every"}
    assert abs(sum(sweep["importances"].values()) - 1.0) < 1e-6   # Optuna's evaluator (4 points: no ranking)
    rows = list(csv.DictReader(io.StringIO(mosaic.run("sweeps", "grid", "--csv", check=True).stdout)))
    assert len(rows) == 8 and {r["state"] for r in rows} == {"succeeded"}
    assert {(r["trial"], r["seed"]) for r in rows} == {(str(t), s) for t in range(4) for s in ("7", "8")}
    assert all(float(r["objective:episode/return"]) == float(r["return_offset"]) + (35 if r["episode_every"] == "5" else 30)
               for r in rows)
    runs = json.loads(mosaic.run("ls", "--json", check=True).stdout)
    assert len(runs) == 8 and len({(r["sweep"], r["trial"]) for r in runs}) == 4
    table = mosaic.run("sweeps", "grid", check=True).stdout.splitlines()
    assert table[2].split()[:4] == ["1", str(best["trial"]), "complete", "135"]


def test_sweep_params_are_checked_against_the_schema_before_any_run(daemon, mosaic, tmp_path):
    for params, message in (({"learning_rate": [1, 2]}, "sweep.params.learning_rate: not a parameter of synthetic"),
                            ({"tags": {"int": [0, 3]}}, "sweep.params.tags: 0: "),
                            ({"rate": {"uniform": [2, 1]}}, "sweep.params.rate: uniform: [low, high] with low < high")):
        proc = mosaic.run("sweep", write_spec(tmp_path, {"base": BASE, "params": params}))
        assert proc.returncode == 1 and proc.stderr.startswith(f"mosaic: error: {message}"), proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert json.loads(mosaic.run("ls", "--json", check=True).stdout) == []


def test_tpe_sweep_with_a_median_pruner_prunes_the_bad_region(daemon, mosaic, tmp_path):
    # returns are step % 500 + return_offset: a trial with a low offset is behind the median at every step
    spec = {"name": "tpe", "base": {**BASE, "steps": 2000, "params": {"rate": 400, "episode_every": 10}},
            "params": {"return_offset": {"uniform": [-1000, 100]}}, "trials": 6, "parallel": 1, "seed": 3,
            "objective": {"tag": "episode/return", "last": 5},
            "pruner": {"type": "median", "startup_trials": 2}}
    assert mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "300").returncode == 0
    sweep = json.loads(mosaic.run("sweeps", "tpe", "--json", check=True).stdout)
    assert sweep["spec"]["sampler"] == "tpe"
    pruned = [t for t in sweep["trials"] if t["state"] == "pruned"]
    assert pruned, [(t["state"], t["params"]) for t in sweep["trials"]]
    complete = [t for t in sweep["trials"] if t["state"] == "complete"]
    for t in pruned:   # pruned ones were worse than what had completed
        assert t["params"]["return_offset"] < max(c["params"]["return_offset"] for c in complete)
        for run in t["runs"]:
            record = mosaic.show(run["id"])
            assert record["state"] == P.CANCELLED and "pruned" in record["tags"]
            assert record["reason"].startswith("pruned by sweep tpe at step")
            assert record["summary"]["steps"] < 2000     # stopped early
    # the sweep's CSV carries each run's tags (and note): pruned runs say so
    rows = list(csv.DictReader(io.StringIO(mosaic.run("sweeps", "tpe", "--csv", check=True).stdout)))
    assert {r["run_tags"] for r in rows if r["trial_state"] == "pruned"} == {"pruned"}
    assert {r["run_tags"] for r in rows if r["trial_state"] == "complete"} == {""}


def test_the_pruner_reads_each_trial_as_it_stood_at_the_reported_step_however_late_it_is_read(tmp_path):
    """The value told to the pruner at step b is the last values logged at steps up to b, whether the
    daemon reads the run just past b or long after: with returns that rise within a bucket, a trial
    read later must not look better than one read earlier (a CI failure: a better trial pruned)."""
    from daemon.sweeps import MARKS_KEPT, RunReader
    from workers.sdk import telemetry as tm
    path = tmp_path / "events.jsonl"
    lines = [tm.encode(tm.make_event(tm.EPISODE, step=s, length=10, **{"return": float(s % 500)}))
             for s in range(10, 2001, 10)]
    path.write_bytes(b"".join(lines))
    whole = RunReader(str(path), "episode/return", 5, every=100)
    whole.read(path.stat().st_size)
    piecewise = RunReader(str(path), "episode/return", 5, every=100)
    for k in (3, 51, 52, 77, 199):                      # read at odd moments: the first k episodes
        piecewise.read(sum(map(len, lines[:k])))
        # a bucket step is closed once a value past it is read: the last one below step 10 k
        assert piecewise.closed_step() == (10 * k - 1) // 100 * 100
    piecewise.read(path.stat().st_size)
    assert whole.at_step == piecewise.at_step
    # at step 500: the episodes at 460..500, the one at 500 included (return 0 there: 500 % 500)
    assert whole.at_step[500] == [460.0, 470.0, 480.0, 490.0, 0.0]
    assert whole.value_at(1200, "mean") == (160 + 170 + 180 + 190 + 200) / 5
    assert whole.closed_step() == 1900           # 2000 closes only when a value past it arrives
    assert len(whole.values) == 5 and whole.values[-1] == 0.0
    # a run far past its sweep's steps keeps only the latest bucket steps
    far = RunReader(str(path), "episode/return", 5, every=1)
    far.read(path.stat().st_size)
    assert len(far.at_step) == MARKS_KEPT and far.closed_step() == 1999
    assert far.at_step[1999] == [1950.0 % 500, 1960.0 % 500, 1970.0 % 500, 1980.0 % 500, 1990.0 % 500]


def test_random_sampler_draws_each_distribution_within_its_range_into_the_runs(daemon, mosaic, tmp_path):
    """sampler random, loguniform / int / categorical params and a successive-halving pruner: every
    drawn value is inside its range, reaches the run's config, and shows in the run's returns."""
    spec = {"name": "rand", "base": BASE, "sampler": "random", "trials": 4, "parallel": 2, "seed": 5,
            "params": {"return_offset": {"loguniform": [1, 1000]}, "episode_every": {"int": [2, 8]},
                       "frame_pattern": {"categorical": ["noise", "cartpole"]}},
            "objective": {"tag": "episode/return", "last": 3},
            "pruner": {"type": "successive_halving"}}
    assert mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "240").returncode == 0
    sweep = json.loads(mosaic.run("sweeps", "rand", "--json", check=True).stdout)
    assert sweep["spec"]["sampler"] == "random" and sweep["spec"]["pruner"]["type"] == "successive_halving"
    assert len(sweep["trials"]) == 4 and {t["state"] for t in sweep["trials"]} <= {"complete", "pruned"}
    drawn = [t["params"] for t in sweep["trials"]]
    assert len({p["return_offset"] for p in drawn}) == 4          # drawn, not a grid
    for t in sweep["trials"]:
        p = t["params"]
        assert 1 <= p["return_offset"] <= 1000 and isinstance(p["episode_every"], int) and 2 <= p["episode_every"] <= 8
        assert p["frame_pattern"] in ("noise", "cartpole")
        for run in t["runs"]:
            params = mosaic.show(run["id"])["config"]["params"]
            assert {k: params[k] for k in p} == p and params["rate"] == 0
        if t["state"] == "complete":   # the last 3 episodes of a 40-step run: returns step + offset
            every = p["episode_every"]
            assert t["mean"] == pytest.approx(p["return_offset"] + sum((40 // every - k) * every for k in range(3)) / 3)


def test_a_sweep_survives_a_daemon_sigkill_and_completes(daemon, mosaic, tmp_path):
    spec = {"name": "tough", "base": {**BASE, "steps": 300, "params": {"rate": 150, "episode_every": 10}},
            "params": {"return_offset": [1, 2, 3]}, "parallel": 1}
    mosaic.run("sweep", write_spec(tmp_path, spec), check=True)
    wait_for(lambda: any(r["state"] == P.RUNNING for r in json.loads(mosaic.run("ls", "--json").stdout)), 60,
             what="the first trial's run")
    os.kill(int(daemon.pid_file.read_text()), signal.SIGKILL)
    mosaic.run("daemon", "start", check=True)
    with connect(daemon) as client:
        def finished():
            return next(s for s in client.call(P.SWEEPS) if s["name"] == "tough")["state"] == "finished"
        wait_for(finished, 120, 0.3, "the sweep to finish after the restart")
        sweep = client.call(P.SWEEP_GET, sweep="tough")
    assert [t["state"] for t in sweep["trials"]] == ["complete"] * 3
    assert sorted(t["params"]["return_offset"] for t in sweep["trials"]) == [1, 2, 3]
    assert sweep["runs"] == 3 and all(r["state"] == P.SUCCEEDED for t in sweep["trials"] for r in t["runs"])


@pytest.mark.slow
def test_a_tiny_real_cleanrl_sweep_and_its_tensorboard(daemon, mosaic, tmp_path):
    """Two trials of CleanRL's DQN on CartPole (2,000 steps each): the real library through the sweep path."""
    spec = {"name": "dqn-lr", "base": {"worker": "cleanrl", "algo": "dqn", "env": "CartPole-v1", "steps": 2000,
                                       "seed": 1, "params": {"learning-starts": 500, "train-frequency": 10,
                                                             "buffer-size": 2000}},
            "params": {"learning-rate": [0.00025, 0.001]},
            "objective": {"tag": "charts/episodic_return", "last": 5}}
    proc = mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "900", timeout=960)
    assert proc.returncode == 0, proc.stderr + mosaic.run("ls").stdout
    sweep = json.loads(mosaic.run("sweeps", "dqn-lr", "--json", check=True).stdout)
    assert sorted(t["params"]["learning-rate"] for t in sweep["trials"]) == [0.00025, 0.001]   # its schema's spelling
    assert all(t["state"] == "complete" and t["value"] >= 1 for t in sweep["trials"])
    out = mosaic.run("tensorboard", "--sweep", "dqn-lr", "--no-launch", check=True).stdout
    # our export and CleanRL's own SummaryWriter files, side by side, by run name
    assert "dqn-lr-t0-s1/worker:" in out and "dqn-lr-t1-s1:" in out


def test_a_trial_the_worker_refuses_counts_and_the_sweep_ends_saying_why(daemon, mosaic, tmp_path):
    """Each value is checked alone up front; together they can still be refused at submit (Jumanji PPO:
    num_minibatches must divide num_envs x num_steps). Such a trial is one of the sweep's trials, refused
    with the worker's reason, and a sweep whose every trial is refused ends instead of asking for more."""
    base = {"worker": "jumanji", "algo": "ppo", "env": "Snake-v1", "steps": 64, "seed": 1,
            "params": {"num_envs": 4, "num_steps": 8, "num_minibatches": 2}}
    # alone: 3 x 8 = 24 splits into 2; 4 x 8 = 32 into 16. Together 24 does not split into 16.
    spec = {"name": "clash", "base": base, "params": {"num_envs": [3], "num_minibatches": [16]},
            "objective": {"tag": "episode/return"}}
    proc = mosaic.run("sweep", write_spec(tmp_path, spec), "--wait", "--timeout", "60")
    assert proc.returncode != 0
    assert proc.stdout.splitlines() == ["clash", "sweep clash finished: 0 runs in 0 trials, 1 refused at submit"]
    assert proc.stderr.strip() == "trial 0 refused: params.num_minibatches: must divide num_envs x num_steps = 24"
    sweep = json.loads(mosaic.run("sweeps", "clash", "--json", check=True).stdout)
    [trial] = sweep["trials"]
    assert trial["state"] == "refused" and trial["runs"] == [] and "must divide" in trial["refused"]
    assert "trial 0 refused at submit: params.num_minibatches" in mosaic.run("sweeps", "clash", check=True).stdout


def test_a_stopped_trial_is_unfinished_until_it_is_continued(daemon, mosaic, tmp_path):
    spec = {"name": "stoppy", "base": {**BASE, "steps": 200000, "params": {"rate": 20000, "episode_every": 1000}},
            "trials": 1, "parallel": 1, "params": {"return_offset": [0]},
            "objective": {"tag": "episode/return", "last": 3, "agg": "mean", "direction": "maximize"}}
    mosaic.run("sweep", write_spec(tmp_path, spec), check=True)
    run = wait_for(lambda: next(iter(json.loads(mosaic.run("ls", "--json", check=True).stdout)), None), 60,
                   what="the trial's run")
    wait_for(lambda: mosaic.show(run["id"])["summary"].get("steps", 0) >= 10000, 60, what="steps")
    assert mosaic.run("stop", run["id"], "--timeout", "60").returncode == 0
    sweep = json.loads(mosaic.run("sweeps", "stoppy", "--json", check=True).stdout)
    assert sweep["state"] == "running" and sweep["trials"][0]["state"] != "complete"
    assert mosaic.run("continue", run["id"], "--wait").returncode == 0
    wait_for(lambda: json.loads(mosaic.run("sweeps", "stoppy", "--json", check=True).stdout)["state"] == "finished",
             60, what="the sweep to finish")
    trial = json.loads(mosaic.run("sweeps", "stoppy", "--json", check=True).stdout)["trials"][0]
    # the returns of its last 3 episodes (steps 198,000 to 200,000: step % 500 each), after the seam
    assert trial["state"] == "complete" and trial["value"] == 0.0


def test_the_sweep_spec_page_names_every_key_and_choice_and_its_example_is_a_valid_spec():
    """docs/sweeps.md is the spec's page (the README links it): every key, distribution, sampler,
    aggregation and pruner of daemon/sweeps.py is named there, and its example spec uses only
    known keys and valid search spaces; an unknown key of the objective or the pruner is refused."""
    import re

    import yaml

    from daemon import sweeps
    from tests.helpers import ROOT
    from workers.sdk.config import ConfigError
    page = (ROOT / "docs" / "sweeps.md").read_text()
    assert "(docs/sweeps.md)" in (ROOT / "README.md").read_text()
    named = set(re.findall(r"`([a-z_]+)", page)) | set(re.findall(r"^ *([a-z_]+):", page, re.M))
    for group in (sweeps.SPEC_KEYS, sweeps.OBJECTIVE_KEYS, sweeps.PRUNER_KEYS, sweeps.DISTRIBUTIONS,
                  sweeps.SAMPLERS, sweeps.AGGREGATIONS, sweeps.PRUNERS):
        assert [k for k in group if k not in named] == [], group
    examples = [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", page, re.S)]
    example = examples[0]
    assert set(example) == set(sweeps.SPEC_KEYS) - {"pbt"}   # pbt: its own example, checked below
    assert set(example["objective"]) == set(sweeps.OBJECTIVE_KEYS) and set(example["pruner"]) == set(sweeps.PRUNER_KEYS)
    for name, space in example["params"].items():
        sweeps.normalise_param(name, space)
    from daemon.pbt_decisions import PBT_KEYS, check_pbt
    pbt = next(e for e in examples if "pbt" in e)
    # replay is the key of a printed replay spec (mosaic sweeps NAME --replay), not of a search
    assert set(pbt["pbt"]) == set(PBT_KEYS) - {"replay"} and set(pbt) <= set(sweeps.SPEC_KEYS)
    assert "pbt: {replay:" in page
    check_pbt(pbt["pbt"], {n: sweeps.normalise_param(n, s) for n, s in pbt["params"].items()},
              {n: {"type": "number"} for n in pbt["params"]})
    for wrong, field in (({"objective": {"metric": "x"}}, "sweep.objective.metric"),
                         ({"pruner": {"type": "median", "patience": 2}}, "sweep.pruner.patience")):
        with pytest.raises(ConfigError) as err:
            sweeps.check_spec({"base": BASE, "params": {"rate": [0]}, **wrong}, _Validator())
        assert str(err.value).startswith(field), str(err.value)


class _Validator:
    """What check_spec calls on the run manager: the synthetic worker's own descriptor and checker,
    as the daemon's RunManager.validate uses them."""

    def validate(self, config):
        from daemon.discovery import discover
        desc = discover()[0]["synthetic"]
        return desc, desc.validate(config)
