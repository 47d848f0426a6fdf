"""The CLI as scripts use it: one-line errors, exit codes, run references."""
from __future__ import annotations

import csv
import io
import json
import os
import pty
import subprocess
import sys

import pytest

from daemon import protocol as P
from tests.helpers import ROOT, wait_for


@pytest.mark.parametrize("args, message", [
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "-3"], "steps:"),
    (["submit", "--worker", "synthetic", "--algo", "nope", "--env", "x", "--steps", "3"], "algo: unknown algorithm"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "3", "--set", "rate=fast"],
     "--set rate:"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--steps", "3", "--set", "nope=1"],
     "unknown parameter"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--set", "dataset=dqn-rec"],
     "--set dataset: dataset is a setting of the run, not a parameter of synthetic emit: use --dataset"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--set", "eval-episodes=3"],
     "use --episodes"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--record", "lots"],
     "--record 'lots': expected N episodes or N steps"),
    (["submit", "--worker", "synthetic", "--algo", "emit", "--env", "x", "--dataset", "nobody"], "dataset:"),
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
    # a run with episodes and lines that are not events: the CSV (the file's lines sent raw,
    # rows made by the CLI) holds the points the metrics method gives, and no more
    mixed = mosaic.synthetic(60, "rate=0", "tags=2", "episode_every=10", "garbage_every=7")
    mosaic.run("wait", mixed, check=True)
    rows = list(csv.DictReader(io.StringIO(mosaic.run("metrics", mixed, "--csv", check=True).stdout)))
    data = json.loads(mosaic.run("metrics", mixed, "--json", check=True).stdout)
    assert sorted((r["tag"], int(r["step"]), float(r["value"]), float(r["wall_time"])) for r in rows) == \
        sorted((tag, p["step"], float(p["value"]), p["t"]) for tag, points in data.items() for p in points)
    assert {r["tag"] for r in rows} == {"synthetic/value_0", "synthetic/value_1", "episode/return", "episode/length"}


def test_metrics_csv_of_a_run_longer_than_a_page(daemon, mosaic):
    """The CSV of a run several pages long (4 MB each; the next page is asked for before this
    one is written): every line of the file once, in the file's order, none lost at a page's
    edge; the --json of one tag, paged through the metrics method, agrees."""
    steps = 120_000
    run_id = mosaic.synthetic(steps, "rate=0", "tags=1", "episode_every=0")
    mosaic.run("wait", run_id, "--timeout", "120", check=True)
    events = [json.loads(line) for line in open(mosaic.home.run_dir(run_id) / "events.jsonl", "rb")]
    scalars = [(e["tag"], e["step"]) for e in events if e["type"] == "scalar"]
    rows = list(csv.reader(io.StringIO(mosaic.run("metrics", run_id, "--csv", check=True).stdout, newline="")))
    assert rows[0] == ["tag", "step", "value", "wall_time"]
    assert [(tag, int(step)) for tag, step, _, _ in rows[1:]] == scalars
    assert [s for tag, s in scalars if tag == "synthetic/value_0"] == list(range(1, steps + 1))
    data = json.loads(mosaic.run("metrics", run_id, "--json", "--tag", "synthetic/value_0", check=True).stdout)
    assert [p["step"] for p in data["synthetic/value_0"]] == list(range(1, steps + 1))


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


# -- names users type (issue 14, item 3) -------------------------------------------
def one_error_line(proc) -> str:
    """The single `mosaic: error:` line a refused command prints."""
    assert proc.returncode != 0, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mosaic: error: "), proc.stderr
    return lines[0][len("mosaic: error: "):]


def test_algorithm_names_users_type(daemon, mosaic):
    # CleanRL's sac, td3, ddpg are its *_continuous_action scripts; the schema and submit agree
    assert json.loads(mosaic.run("schema", "cleanrl", "sac", check=True).stdout)["title"] \
        == "cleanrl sac_continuous_action"
    # workers too, in any case; a mistyped one gets the closest names
    assert json.loads(mosaic.run("schema", "CleanRL", "sac", check=True).stdout)["title"] \
        == "cleanrl sac_continuous_action"
    assert one_error_line(mosaic.run("submit", "--worker", "clenrl", "--algo", "ppo", "--env", "CartPole-v1")) \
        == "worker: unknown worker 'clenrl'; did you mean 'cleanrl'?"
    # RLlib's algorithms in any case
    assert json.loads(mosaic.run("schema", "ray", "appo", check=True).stdout) \
        == json.loads(mosaic.run("schema", "ray", "APPO", check=True).stdout)
    message = one_error_line(mosaic.run("schema", "cleanrl", "sax"))
    assert message == "algo: unknown algorithm 'sax' for worker 'cleanrl'; did you mean 'sac_continuous_action'?"
    message = one_error_line(mosaic.run("submit", "--worker", "ray", "--algo", "pppo", "--env", "CartPole-v1"))
    assert "unknown algorithm 'pppo'" in message and "did you mean 'PPO'" in message
    # past the name, on to the next check: ppo is RLlib's PPO
    assert one_error_line(mosaic.run("submit", "--worker", "ray", "--algo", "ppo", "--env", "CartPole-v1")) \
        == "steps: is required to train (env steps sampled, all env runners together)"
    # the run record stores the canonical names; --set folds - and _ and reads 1e3 as 1000
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "td3", "--env", "Pendulum-v1", "--steps", "1e3",
                           "--set", "learning_starts=100", "--set", "buffer-size=1e3")
    mosaic.run("cancel", run_id, check=True)
    run = mosaic.show(run_id)
    assert run["algo"] == run["config"]["algo"] == "td3_continuous_action"
    assert run["config"]["steps"] == 1000
    assert run["config"]["params"]["learning-starts"] == 100 and run["config"]["params"]["buffer-size"] == 1000
    assert "learning_starts" not in run["config"]["params"]


def test_config_files_get_the_same_names(daemon, mosaic, tmp_path):
    config = {"worker": "cleanrl", "algo": "DDPG", "env": "Pendulum-v1", "steps": 1000.0,
              "params": {"learning_starts": 100, "buffer_size": 1000}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(config))
    run_id = mosaic.submit(str(path))
    mosaic.run("cancel", run_id, check=True)
    run = mosaic.show(run_id)
    assert run["algo"] == "ddpg_continuous_action" and run["config"]["steps"] == 1000
    assert {"learning-starts", "buffer-size"} <= set(run["config"]["params"])


def test_integers_may_be_typed_as_floats_when_whole(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "1e2",
                           "--set", "rate=0", "--set", "tags=1.0e1", "--set", "episode_every=50.0")
    config = mosaic.show(run_id)["config"]
    assert config["steps"] == 100 and config["params"]["tags"] == 10 and config["params"]["episode_every"] == 50
    assert type(config["params"]["tags"]) is int
    base = ["submit", "--worker", "synthetic", "--algo", "emit", "--env", "none"]
    assert one_error_line(mosaic.run(*base, "--steps", "3", "--set", "tags=1.5")) \
        == "--set tags: must be an integer, not '1.5'"
    assert one_error_line(mosaic.run(*base, "--steps", "1.5")).startswith(
        "argument --steps: must be an integer, not '1.5'")


def test_cli_and_form_say_a_mistake_the_same_way(daemon, mosaic):
    """The daemon's run-config validation (pydantic) speaks check_value's words,
    the validator the app's form runs as the user types."""
    from workers.sdk.config import ConfigError, check_value

    def form_says(spec, value):
        try:
            check_value("x", spec, value)
        except ConfigError as exc:
            return exc.message
        raise AssertionError(f"{value!r} passed {spec}")

    base = ["submit", "--worker", "synthetic", "--algo", "emit", "--env", "none"]
    assert one_error_line(mosaic.run(*base, "--steps", "-3")) \
        == f"steps: {form_says({'type': 'integer', 'exclusiveMinimum': 0}, -3)}" == "steps: must be > 0"
    assert one_error_line(mosaic.run(*base, "--steps", "5", "--memory-mb", "10")) == "limits.memory_mb: must be >= 64"
    assert one_error_line(mosaic.run(*base, "--steps", "5", "--frames", "--fps", "0")) == "frames.fps: must be > 0"
    assert one_error_line(mosaic.run(*base, "--steps", "5", "--set", "tags=5000")) \
        == f"params.tags: {form_says({'type': 'integer', 'maximum': 1000}, 5000)}" == "params.tags: must be <= 1000"
    proc = mosaic.run(*base, "--steps", "5", "--frames", "--fps", "fast")
    assert one_error_line(proc).startswith("argument --fps: must be a number, not 'fast'")
    assert one_error_line(mosaic.run(*base, "--steps", "5", "--fps", "5")) \
        == "--fps: frames are off for this run; add --frames"


def test_submit_with_frames(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "20",
                           "--set", "rate=0", "--frames", "--fps", "5")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 0
    frames = mosaic.show(run_id)["config"]["frames"]
    assert frames["enabled"] is True and frames["fps"] == 5.0


def test_test_workers_are_listed_only_when_asked(daemon, mosaic):
    listed = mosaic.run("workers", check=True).stdout
    assert "cleanrl" in listed and "synthetic" not in listed
    assert "synthetic" in mosaic.run("workers", "--all", check=True).stdout
    assert "synthetic" not in {w["name"] for w in json.loads(mosaic.run("workers", "--json", check=True).stdout)}
    every = json.loads(mosaic.run("workers", "--all", "--json", check=True).stdout)
    assert next(w for w in every if w["name"] == "synthetic")["hidden"] is True
    assert next(w for w in every if w["name"] == "cleanrl")["hidden"] is False
    # submitting to it by name still works (the tests do it all the time)
    assert mosaic.synthetic(5, "rate=0")


def test_schema_takes_the_env_as_a_positional(daemon, mosaic):
    positional = json.loads(mosaic.run("schema", "xuance", "mappo", "simple_tag_v3", check=True).stdout)
    option = json.loads(mosaic.run("schema", "xuance", "mappo", "--env", "simple_tag_v3", check=True).stdout)
    default = json.loads(mosaic.run("schema", "xuance", "mappo", check=True).stdout)
    assert positional == option != default
    assert positional["properties"]["training_mode"]["default"] == "competitive"


def test_usage_mistakes_are_one_line_and_counts_read_well(daemon, mosaic):
    assert one_error_line(mosaic.run("frobnicate")).startswith("argument COMMAND: invalid choice: 'frobnicate'")
    assert one_error_line(mosaic.run("submit", "--nope")).startswith("unrecognized arguments: --nope")
    status = mosaic.run("daemon", "status", check=True).stdout
    assert "1 client," in status and "(s)" not in status  # this very connection


# -- episode returns as data (issue 14, item 4) ------------------------------------------
def test_metrics_of_episodes(daemon, mosaic):
    run_id = mosaic.synthetic(100, "rate=0", "tags=1", "episode_every=10", name="episodic")
    assert mosaic.run("wait", run_id, "--timeout", "60").returncode == 0
    rows = list(csv.DictReader(io.StringIO(
        mosaic.run("metrics", "episodic", "--tag", "episode/return", "--csv", check=True).stdout)))
    assert [int(r["step"]) for r in rows] == list(range(10, 101, 10))
    assert [float(r["value"]) for r in rows] == [float(s % 500) for s in range(10, 101, 10)]
    assert {r["tag"] for r in rows} == {"episode/return"}
    lengths = json.loads(mosaic.run("metrics", "episodic", "--tag", "episode/length", "--json", check=True).stdout)
    assert [p["value"] for p in lengths["episode/length"]] == [10] * 10
    # every tag at once: scalars and episodes
    every = json.loads(mosaic.run("metrics", "episodic", "--json", check=True).stdout)
    assert set(every) == {"synthetic/value_0", "episode/return", "episode/length"}
    # the run's tag list has them (`mosaic show`)
    assert {"episode/return", "episode/length"} <= set(mosaic.show("episodic")["summary"]["tags"])
    assert "episode/return" in mosaic.run("show", "episodic", check=True).stdout


def test_an_unknown_tag_names_the_ones_there_are(daemon, mosaic):
    done = mosaic.synthetic(20, "rate=0", "tags=1", "episode_every=10", name="done")
    assert mosaic.run("wait", done, "--timeout", "60").returncode == 0
    refused = mosaic.run("metrics", "done", "--tag", "episode/retrun", "--csv")
    assert one_error_line(refused) \
        == "run done has no metric 'episode/retrun'; its metrics: episode/length, episode/return, synthetic/value_0"
    # `> f.csv` gets nothing, not a header alone that looks like an empty export (issue 41, item 10)
    assert refused.stdout == ""
    for args in (["nope-run", "--csv"], ["nope-run", "--csv", "--metric", "episode/return"]):
        assert mosaic.run("metrics", *args).stdout == ""
    live = mosaic.synthetic(100000, "rate=50", "tags=1", "episode_every=5", name="live")
    wait_for(lambda: mosaic.show(live)["state"] == P.RUNNING and mosaic.show(live)["summary"].get("episodes"),
             60, what="the live run's first episode")
    message = one_error_line(mosaic.run("metrics", "live", "--metric", "nope"))
    assert message.startswith("run live has no metric 'nope'; its metrics: ") and "episode/return" in message
    assert mosaic.run("metrics", "live", "--tag", "episode/return", "--csv", check=True).stdout.count("\n") >= 2
    mosaic.run("cancel", live, check=True)


def _csv_of(events, raw: bool = False):
    """What `mosaic metrics --csv` writes for one page of events, parsed back; ``raw``: the
    page as the daemon's raw read_events sends it (the lines as orjson, the Emitter's
    encoder, writes them, joined by commas), cut without decoding where it can be."""
    import sys

    from daemon import protocol as P
    from mosaic_tui import metrics_csv
    out = io.TextIOWrapper(io.BytesIO(), newline="")
    saved, sys.stdout = sys.stdout, out
    try:
        if raw:
            metrics_csv.write_page(csv.writer(out), b",".join(map(P.dumps, events)), None)
        else:
            metrics_csv.write_page(csv.writer(out), None, events)
        out.flush()
    finally:
        sys.stdout = saved
    text = out.buffer.getvalue().decode()
    return text, list(csv.reader(io.StringIO(text, newline="")))


@pytest.mark.parametrize("raw", [False, True], ids=["decoded", "raw-lines"])
def test_metrics_csv_rows_are_what_csv_writer_writes(raw, monkeypatch):
    """The CSV of a page of scalars made through orjson's number formatting (the fast
    path) reads back as the rows csv.writer writes: same fields, numbers equal as
    floats, CRLF lines, file order; and whatever needs csv.writer's own handling
    (quoting, an empty field for a missing value, True) is written by it."""
    def ev(tag, step, value, t=1795383499.25):
        return {"v": 1, "type": "scalar", "t": t, "tag": tag, "value": value, "step": step}

    def expected(events):
        buf = io.StringIO(newline="")
        csv.writer(buf).writerows([e["tag"], e["step"], e["value"], e.get("t")] for e in events)
        return buf.getvalue(), list(csv.reader(io.StringIO(buf.getvalue(), newline="")))

    def numbers(rows):
        return [[r[0]] + [float(x) if x not in ("", "nan", "True") else x for x in r[1:]] for r in rows]

    plain = [ev("losses/value_loss", s, s / 7, 1795383499.0 + s * 1e-4) for s in range(1, 500)]
    plain += [ev("charts/SPS", 500, 12), ev("e/big", 501, 1e16), ev("e/tiny", 502, 1e-7), ev("e/nan", 503, "nan"),
              ev("", 504, 0.5), ev("ünïcode/tag", 505, -2.5)]
    text, rows = _csv_of(plain, raw)
    want_text, want_rows = expected(plain)
    assert text.endswith("\r\n") and text.count("\r\n") == len(plain)
    assert numbers(rows) == numbers(want_rows)
    for tricky in (ev('a,"quoted" tag', 1, 1.0), ev("line\nbreak", 1, 1.0), ev("back\\slash", 1, 1.0),
                   ev("x", 1, None), ev("x", 1, True), ev("x", None, 1.0), ev("x", 1, "a,b"), ev("x", 1, 'q"'),
                   dict(ev("x", 1, 1.0), extra=ev("nested", 2, 2.0))):
        page = plain[:3] + [tricky] + plain[3:6]
        assert _csv_of(page, raw)[0] == expected(page)[0], tricky
    no_time = [{"v": 1, "type": "scalar", "tag": "x", "value": 1.0, "step": 1}]
    assert _csv_of(no_time, raw)[1] == [["x", "1", "1.0", ""]]
    mixed = plain[:2] + [{"v": 1, "type": "episode", "t": 5.0, "step": 9, "return": 3.5, "length": 4},
                         {"v": 1, "type": "heartbeat", "t": 6.0, "step": 9}] + plain[2:4]
    if raw:   # Emitter lines are cut out of the page as they are, not decoded
        from mosaic_tui import metrics_csv
        calls = []
        monkeypatch.setattr(metrics_csv, "write_rows", lambda *a: calls.append(a))
        assert numbers(_csv_of(plain, raw)[1]) == numbers(want_rows) and not calls
        monkeypatch.undo()
    if raw:   # a page with other events: its scalar stretches still cut, only the others decoded
        from mosaic_tui import metrics_csv
        real = metrics_csv.write_rows
        long_mixed = plain[:200] + mixed[2:4] + plain[200:400] + mixed[2:3]
        want = numbers(_csv_of(long_mixed)[1])
        decoded = []
        monkeypatch.setattr(metrics_csv, "write_rows", lambda w, evs: (decoded.append(len(evs)), real(w, evs)))
        assert numbers(_csv_of(long_mixed, raw)[1]) == want
        assert decoded == [1, 1, 1]
        monkeypatch.undo()
    assert [r[:2] for r in _csv_of(mixed, raw)[1]] == [["losses/value_loss", "1"], ["losses/value_loss", "2"],
                                                   ["episode/return", "9"], ["episode/length", "9"],
                                                   ["losses/value_loss", "3"], ["losses/value_loss", "4"]]


def test_synthetic_start_file_holds_the_first_step(daemon, mosaic, home):
    """bench_telemetry starts its writers together: a synthetic run with start_file
    has started (run_started is in) and writes no step until the file exists."""
    from tests.helpers import wait_state
    start = home.root / "start"
    run_id = mosaic.synthetic(20, "rate=0", "tags=1", "episode_every=0", f"start_file={start}")
    wait_state(home, run_id, P.RUNNING)
    events = home.run_dir(run_id) / "events.jsonl"
    assert [json.loads(line)["type"] for line in events.read_text().splitlines()] == ["run_started"]
    assert mosaic.show(run_id)["state"] == P.RUNNING
    start.touch()
    mosaic.run("wait", run_id, "--timeout", "60", check=True)
    assert mosaic.show(run_id)["summary"]["steps"] == 20


def test_submit_says_everything_the_form_can(daemon, mosaic, tmp_path):
    """--mode, --checkpoint, --episodes, --record reach the run's config as the form sets them."""
    (tmp_path / "where.pt").write_bytes(b"weights")
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "5",
                           "--set", "rate=0", "--record", "5000steps", "--checkpoint", str(tmp_path / "where.pt"),
                           "--mode", "train", "--episodes", "4", "--name", "flagged")
    config = mosaic.show(run_id)["config"]
    assert config["record"] == {"steps": 5000, "episodes": None}
    assert config["mode"] == "train" and config["checkpoint"] == str(tmp_path / "where.pt") and config["eval_episodes"] == 4
    from mosaic_tui.cli.submit import _record
    assert _record("20") == {"episodes": 20} and _record("3 episodes") == {"episodes": 3}


def test_the_csv_fast_path_cuts_what_the_emitter_really_writes(tmp_path):
    """metrics_csv.EMITTER_SCALAR is a pattern of Emitter.scalar's line: pinned here to the
    Emitter's own output (a change of its key order or spacing would otherwise just send every
    page down the slow path, silently)."""
    import os

    from mosaic_tui import metrics_csv
    from workers.sdk.telemetry import Emitter
    path = tmp_path / "events.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    emitter = Emitter(fd)
    values = [0.5, -2.5, 3, 1e16, 1e-7, float("nan"), float("inf"), 123456789.123]
    for step, value in enumerate(values, 1):
        emitter.scalar("losses/value_loss" if step % 2 else "ünïcode/täg", value, step)
    emitter.close()
    os.close(fd)
    lines = path.read_bytes().splitlines()
    assert len(lines) == len(values)
    body = metrics_csv.scalars_csv_raw(b",".join(lines), len(lines))
    assert body is not None, lines[0]                # every line matched the pattern
    rows = list(csv.reader(io.StringIO(body.decode(), newline="")))
    assert [r[1] for r in rows] == [str(s) for s in range(1, len(values) + 1)]
    assert rows[0][0] == "losses/value_loss" and rows[1][0] == "ünïcode/täg"
    assert [r[2] for r in rows][5:7] == ["nan", "inf"] and float(rows[3][2]) == 1e16



def test_daemon_stop_counts_an_unreaped_daemon_as_stopped():
    """A daemon that has exited but is not yet reaped by its parent (init reaps it up to a second
    late on some machines) is stopped: `daemon stop` and every test's teardown need not wait."""
    import os
    import subprocess
    import sys
    import time as clock

    from mosaic_tui.cli.daemon import _exited
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = clock.monotonic() + 30
        while not _exited(child.pid) and clock.monotonic() < deadline:
            clock.sleep(0.01)
        assert _exited(child.pid)
        os.kill(child.pid, 0)         # a zombie: the kernel still has it, not reaped
        assert open(f"/proc/{child.pid}/stat").read().split(")")[-1].split()[0] == "Z"
    finally:
        child.wait()
    assert _exited(child.pid)
    assert not _exited(os.getpid())


@pytest.mark.parametrize("args", [[], ["attach"], ["play", "CartPole-v1"], ["watch"]])
def test_the_app_without_a_terminal_says_so_and_exits(mosaic, home, args):
    """`mosaic` and `mosaic play ENV` from a pipe or a cron job wrote escape codes and spun at 90% of a
    core for ever (issue 41, item 8): one line pointing to the commands, exit 1, before a daemon
    starts or a play run is submitted."""
    proc = mosaic.run(*args, input="", timeout=60)      # stdin and stdout pipes
    assert proc.returncode == 1 and proc.stdout == ""
    assert one_error_line(proc).startswith(("the app needs a terminal (stdin and stderr are not one)",
                                            "mosaic watch needs a terminal (stdin and stderr are not one)"))
    assert "mosaic ls" in proc.stderr
    # stdin a terminal, stderr (where Textual draws) a file: `mosaic 2> log`
    controller, terminal = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "mosaic_tui.cli", "--home", str(home.root), *args],
                              stdin=terminal, capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 1 and "needs a terminal (stderr is not one)" in one_error_line(proc)
    assert not home.pid_file.exists() and not home.socket_path.exists()   # no daemon was started
