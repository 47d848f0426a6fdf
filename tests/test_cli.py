"""The CLI as scripts use it: one-line errors, exit codes, run references."""
from __future__ import annotations

import json

import pytest

from daemon import protocol as P


@pytest.mark.parametrize("args, message", [
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "-3"], "steps:"),
    (["submit", "--worker", "synthetic", "--algo", "nope", "--env", "x", "--steps", "3"], "algo: unknown algorithm"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "3", "--set", "rate=fast"],
     "--set rate:"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "3", "--set", "nope=1"],
     "unknown parameter"),
    (["submit", "/nonexistent/config.json"], "cannot read"),
    (["show", "no-such-run"], "no run named"),
    (["schema", "synthetic", "nope"], "unknown algorithm 'nope' for worker 'synthetic'"),
    (["schema", "nope", "x"], "unknown worker"),
])
def test_errors_are_one_line_without_traceback(daemon, mosaic, args, message):
    proc = mosaic.run(*args)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("mosaic: error:") and message in lines[0]
    assert "Traceback" not in proc.stderr


def test_submit_from_a_config_file_and_refer_by_name(daemon, mosaic, tmp_path):
    config = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 40, "name": "from-file",
              "params": {"rate": 0, "episode_every": 10}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    run_id = mosaic.submit(str(path))
    assert mosaic.run("wait", "from-file", "--timeout", "60").returncode == 0
    run = mosaic.show("from-file")
    assert run["id"] == run_id and run["config"]["params"]["episode_every"] == 10
    proc = mosaic.run("submit", str(path))
    assert proc.returncode == 1 and "name: a run named 'from-file' exists already" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert "is not valid JSON" in mosaic.run("submit", str(bad)).stderr


def test_metrics_csv_and_json(daemon, mosaic):
    run_id = mosaic.synthetic(30, "rate=0", "tags=1")
    mosaic.run("wait", run_id, check=True)
    csv_lines = mosaic.run("metrics", run_id, "--csv", check=True).stdout.strip().splitlines()
    assert csv_lines[0] == "tag,step,value,wall_time" and len(csv_lines) == 31
    data = json.loads(mosaic.run("metrics", run_id, "--json", "--tag", "synthetic/value_0", check=True).stdout)
    assert [p["step"] for p in data["synthetic/value_0"]] == list(range(1, 31))


def test_ambiguous_prefix_is_refused(daemon, mosaic):
    a = mosaic.synthetic(5, "rate=0")
    b = mosaic.synthetic(5, "rate=0")
    common = 0
    while a[common] == b[common]:
        common += 1
    if common:
        proc = mosaic.run("show", a[:common])
        assert proc.returncode == 1 and "matches several runs" in proc.stderr
    assert mosaic.run("show", a[:common + 1]).returncode == 0


def test_logs_and_follow(daemon, mosaic):
    run_id = mosaic.synthetic(10, "raise_message=boom")
    proc = mosaic.run("logs", run_id, "-f", timeout=60)
    assert proc.returncode == 0 and "RuntimeError: boom" in proc.stdout
    assert mosaic.show(run_id)["state"] == P.FAILED


def test_schema_of_a_users_own_cleanrl_script(daemon, mosaic, tmp_path):
    script = tmp_path / "my_dqn.py"
    script.write_text(
        "import argparse\n"
        "def parse_args():\n"
        "    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--env-id', type=str, default='CartPole-v1', help='the id of the environment')\n"
        "    parser.add_argument('--total-timesteps', type=int, default=1000, help='total timesteps')\n"
        "    parser.add_argument('--learning-rate', type=float, default=1e-3, help='the learning rate')\n"
        "    return parser.parse_args()\n")
    schema = json.loads(mosaic.run("schema", "cleanrl", str(script), check=True).stdout)
    assert schema["properties"]["learning-rate"]["default"] == 1e-3
    proc = mosaic.run("schema", "cleanrl", str(tmp_path / "missing.py"))
    assert proc.returncode == 1 and "no such script" in proc.stderr
