"""W&B and MLflow mirrors (daemon/mirror.py, docs/mirrors.md): every point of `mosaic metrics`
read back with W&B's own record format and MLflow's own client, no secret in any file, a failing
mirror said once, a SIGKILLed daemon, `mosaic export`. Real libraries, real processes."""
from __future__ import annotations

import json
import os
import signal
import socket
import struct
import time
from pathlib import Path

import pytest

from daemon import protocol as P
from daemon.analytics import ANALYTICS_FILE
from daemon.mirror import LOCK_FILE, STATE_FILE
from daemon.mirror_targets import ROW_SECONDS
from tests.helpers import events_of, wait_for

FAKE_KEY = "mosaicFAKEkey0123456789abcdef0123456789abcd"   # 40+ characters, as W&B's keys are
FAKE_PASSWORD = "mosaic-fake-mlflow-password-5b1e"


def wandb_points(home, run_id: str) -> dict[str, list[tuple[int, float, float]]]:
    """The points of every offline W&B run of this run id under the home, read from W&B's own
    transaction log (.wandb: LevelDB's log format of wandb_internal_pb2.Record, the file
    `wandb sync` uploads), {tag: [(step, value, _timestamp)]} in the order they were logged."""
    from wandb.proto import wandb_internal_pb2 as pb
    points: dict[str, list] = {}
    files = sorted(Path(home.root, "mirrors", "wandb", "wandb").glob(f"offline-run-*-{run_id.lower()}/*.wandb"))
    assert files, "no offline W&B run"
    for path in files:
        for raw in _leveldb_records(path.read_bytes()):
            record = pb.Record()
            record.ParseFromString(raw)
            if record.WhichOneof("record_type") != "history":
                continue
            row = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            step, t = row.pop("mosaic/step"), row.pop("_timestamp")
            for key in ("_step", "_runtime"):
                row.pop(key, None)
            for tag, value in row.items():
                points.setdefault(tag, []).append((step, value, t))
    return points


def wandb_run_record(home, run_id: str) -> tuple[list[str], str, dict]:
    """The tags, notes and config of the last run record of the run's offline W&B runs."""
    from wandb.proto import wandb_internal_pb2 as pb
    found = None
    for path in sorted(Path(home.root, "mirrors", "wandb", "wandb").glob(f"offline-run-*-{run_id.lower()}/*.wandb")):
        for raw in _leveldb_records(path.read_bytes()):
            record = pb.Record()
            record.ParseFromString(raw)
            if record.WhichOneof("record_type") == "run":
                config = {item.key: json.loads(item.value_json) for item in record.run.config.update}
                found = (list(record.run.tags), record.run.notes, config)
    return found


def _leveldb_records(data: bytes):
    assert data[:4] == b":W&B"
    block, pos, pending = 32768, 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        payload = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield payload
        elif kind == 2:
            pending = payload
        elif kind == 3:
            pending += payload
        elif kind == 4:
            yield pending + payload
            pending = b""


def mlflow_points(home, run_id: str, tags) -> dict[str, list[tuple[int, float, int]]]:
    from mlflow.tracking import MlflowClient
    state = json.loads((home.run_dir(run_id) / STATE_FILE).read_text())["mlflow"]
    client = MlflowClient(state["tracking_uri"])
    return {tag: sorted((m.step, m.value, m.timestamp) for m in client.get_metric_history(state["run_id"], tag))
            for tag in tags}


def metrics_of(mosaic, run_id: str) -> dict[str, list[tuple[int, float, float]]]:
    got = json.loads(mosaic.run("metrics", run_id, "--json", check=True).stdout)
    return {tag: [(p["step"], p["value"], p["t"]) for p in points] for tag, points in got.items()}


def assert_same_points(home, mosaic, run_id: str) -> int:
    """W&B's and MLflow's points are `mosaic metrics`' points, every one, per tag; returns their number."""
    expected = metrics_of(mosaic, run_id)
    wandb = wandb_points(home, run_id)
    assert set(wandb) == set(expected)
    for tag, points in expected.items():
        got = wandb[tag]
        assert [(s, v) for s, v, _ in got] == [(s, v) for s, v, _ in points], tag
        # W&B keeps one time a row: points of one step this close share the first one's
        assert all(abs(a[2] - b[2]) <= ROW_SECONDS + 1e-6 for a, b in zip(got, points)), tag
    mlflow = mlflow_points(home, run_id, expected)
    for tag, points in expected.items():
        assert mlflow[tag] == sorted((s, float(v), int(round(t * 1000))) for s, v, t in points), tag
    return sum(len(p) for p in expected.values())


def files_holding(root: str, secret: bytes) -> list[str]:
    found = []
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    if secret in f.read():
                        found.append(path)
            except OSError:
                continue
    return found


def mirror_state(home, run_id: str) -> dict:
    try:
        return json.loads((home.run_dir(run_id) / STATE_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}


def mirror_done(home, run_id: str, targets=("wandb", "mlflow")) -> bool:
    """The run's mirror closed every target at the events file's end."""
    state = mirror_state(home, run_id)
    size = (home.run_dir(run_id) / "events.jsonl").stat().st_size
    return all(state.get(t, {}).get("closed_offset") == size for t in targets)


def synthetic(mosaic, steps: int, rate: int, *extra: str) -> str:
    return mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", str(steps),
                         "--set", f"rate={rate}", "--set", "tags=3", "--set", "episode_every=50", *extra)


def test_the_mirror_targets_are_one_list_for_the_config_the_cli_and_the_form():
    """daemon.protocol.MIRROR_TARGETS is the list; the run config's type (pydantic, which the app does
    not import) says the same targets, and the CLI and the form take exactly those."""
    import typing

    from mosaic_tui.cli import CLIError
    from mosaic_tui.cli.submit import _mirror_targets
    from mosaic_tui.new_run_model import MIRROR_CHOICES
    from workers.sdk.config import RunConfig
    annotation = RunConfig.model_fields["mirror"].annotation
    literal = next(a for a in typing.get_args(annotation) if a is not type(None))
    assert typing.get_args(typing.get_args(literal)[0]) == P.MIRROR_TARGETS
    assert _mirror_targets(",".join(P.MIRROR_TARGETS)) == list(P.MIRROR_TARGETS)
    with pytest.raises(CLIError, match="expected wandb, mlflow, wandb,mlflow or none"):
        _mirror_targets("tensorboard")
    assert {t for targets in MIRROR_CHOICES.values() for t in targets or []} == set(P.MIRROR_TARGETS)


def test_a_run_mirrored_to_wandb_and_mlflow_has_every_point_and_no_secret(home, mosaic, monkeypatch):
    """A mirrored run: W&B's offline run and MLflow's run hold exactly `mosaic metrics`' points; the
    W&B key and the MLflow password in the daemon's environment are in no file; analytics.json
    names both; a run without --mirror is not mirrored, and `mosaic export` mirrors it afterwards
    with the same points."""
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", FAKE_PASSWORD)
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "mosaic-fake-user")
    mosaic.run("daemon", "start", check=True)
    mirrored = synthetic(mosaic, 1500, 1500, "--mirror", "wandb,mlflow", "--name", "mirrored")
    plain = synthetic(mosaic, 600, 3000, "--name", "plain")
    assert mosaic.run("wait", mirrored, "--timeout", "120").returncode == 0
    assert mosaic.run("wait", plain, "--timeout", "120").returncode == 0
    wait_for(lambda: mirror_done(home, mirrored), 90, 0.2, what="the mirror to finish")
    state = json.loads((home.run_dir(mirrored) / STATE_FILE).read_text())
    assert state["wandb"]["mode"] == "offline"    # a key, but W&B out of reach
    assert Path(state["wandb"]["dir"]).is_dir() and state["wandb"]["dir"].startswith(str(home.root))
    assert assert_same_points(home, mosaic, mirrored) >= 1500 + 2 * 1500 // 50
    analytics = json.loads((home.run_dir(mirrored) / ANALYTICS_FILE).read_text())["artifacts"]
    assert analytics["wandb"]["run_id"] == state["wandb"]["run_id"] and analytics["wandb"]["dir"] == state["wandb"]["dir"]
    assert analytics["mlflow"]["run_id"] == state["mlflow"]["run_id"]
    assert analytics["mlflow"]["tracking_uri"].startswith(f"sqlite:///{home.root}")
    assert analytics["tensorboard"]["dirs"][-1]["path"] == str(home.root / "tensorboard" / "mirrored")
    assert not [e for e in events_of(home, mirrored) if e["type"] == "warning"]

    assert not (home.run_dir(plain) / STATE_FILE).exists()   # not asked, not mirrored
    mosaic.run("tag", "plain", "+baseline", check=True)
    mosaic.run("note", "plain", "lr too high", check=True)
    out = mosaic.run("export", "plain", "--wandb", "--mlflow", check=True).stdout
    assert "W&B offline run" in out and "wandb sync" in out and "MLflow run" in out
    assert assert_same_points(home, mosaic, plain) > 600
    from mlflow.tracking import MlflowClient
    state = json.loads((home.run_dir(plain) / STATE_FILE).read_text())
    tags = MlflowClient(state["mlflow"]["tracking_uri"]).get_run(state["mlflow"]["run_id"]).data.tags
    assert tags["mosaic.tags"] == "baseline" and tags["mosaic.note"] == "lr too high"
    assert tags["mosaic.run_id"] == plain and tags["mosaic.worker"] == "synthetic"
    assert wandb_run_record(home, plain)[:2] == (["baseline"], "lr too high")

    for secret in (FAKE_KEY, FAKE_PASSWORD):
        assert files_holding(str(home.root), secret.encode()) == []
    mosaic.run("daemon", "stop")
    # W&B's import-time temporary dirs (wandb-media, ...) were each mirror's own, in the home, and
    # went with it: none is left in the machine's /tmp
    scratch = home.root / "mirrors" / "tmp"
    assert scratch.is_dir()
    wait_for(lambda: not any(scratch.iterdir()), 30, 0.1, what="the mirrors' temporary dirs to go")


def test_a_mirror_out_of_reach_is_said_once_and_the_run_goes_on(home, mosaic):
    """MLflow at a closed port: the run succeeds in its usual time, one warning event names the
    mirror, the telemetry is all there; W&B beside it mirrors everything."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # closed once the block ends: nothing listens there
    home.root.mkdir(parents=True, exist_ok=True)
    home.settings_file.write_text(json.dumps({"mirrors": {"mlflow": {"tracking_uri": f"http://127.0.0.1:{port}"},
                                                          "wandb": {"mode": "offline"}}}))
    mosaic.run("daemon", "start", check=True)
    go = home.root / "go"
    run_id = synthetic(mosaic, 3000, 1000, "--set", f"start_file={go}", "--mirror", "mlflow,wandb")
    events = home.run_dir(run_id) / "events.jsonl"
    # the worker waits for `go` until the mirror has failed, then writes for 3 s
    wait_for(lambda: b'"type":"warning"' in events.read_bytes(), 120, 0.1, what="the mirror's warning")
    go.touch()
    started = time.monotonic()
    assert mosaic.run("wait", run_id, "--timeout", "120").returncode == 0
    took = time.monotonic() - started
    assert took < 30, took    # no wait on the mirror (its cost to telemetry: bench/bench_mirrors.py)
    warnings = [e for e in events_of(home, run_id) if e["type"] == "warning"]
    assert len(warnings) == 1 and warnings[0]["source"] == "mirror/mlflow", warnings
    assert "mlflow mirror: cannot open" in warnings[0]["message"]
    # said on the run: its summary, `mosaic show`
    assert mosaic.show(run_id)["summary"]["warnings"] == [warnings[0]["message"]]
    assert "warnings: mlflow mirror: cannot open" in mosaic.run("show", run_id, check=True).stdout
    wait_for(lambda: mirror_done(home, run_id, ("wandb",)), 60, 0.2, what="the W&B mirror to finish")
    expected = metrics_of(mosaic, run_id)
    assert {t: [(s, v) for s, v, _ in p] for t, p in wandb_points(home, run_id).items()} == \
        {t: [(s, v) for s, v, _ in p] for t, p in expected.items()}
    state = json.loads((home.run_dir(run_id) / STATE_FILE).read_text())
    assert state["mlflow"].get("offset", 0) == 0 and state["mlflow"]["warned"]
    mosaic.run("daemon", "stop")


def test_a_mirror_that_fails_after_its_run_ended_is_said_in_the_runs_summary(home, mosaic):
    """A run over before its mirror has even started: the mirror's failure (MLflow at a closed
    port) comes after the daemon's last read of the run's file, and still reaches the run."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home.root.mkdir(parents=True, exist_ok=True)
    home.settings_file.write_text(json.dumps({"mirrors": {"mlflow": {"tracking_uri": f"http://127.0.0.1:{port}"}}}))
    mosaic.run("daemon", "start", check=True)
    run_id = synthetic(mosaic, 5, 1000, "--mirror", "mlflow")
    assert mosaic.run("wait", run_id, "--timeout", "120").returncode == 0
    wait_for(lambda: mirror_state(home, run_id).get("mlflow", {}).get("warned"), 120, 0.2,
             what="the mirror's failure")
    warned = mirror_state(home, run_id)["mlflow"]["warned"]
    wait_for(lambda: mosaic.show(run_id)["summary"].get("warnings") == [warned], 30, 0.2,
             what="the warning in the ended run's summary")
    assert f"warnings: {warned}" in mosaic.run("show", run_id, check=True).stdout
    mosaic.run("daemon", "stop")


@pytest.mark.long   # ~40 s here under load: the suite's budget (MOSAIC_LONG=1 runs it)
def test_a_sigkilled_daemon_and_a_restarted_mirror_lose_and_repeat_no_point(home, mosaic):
    """SIGKILL the daemon and stop the run's mirror (SIGTERM) mid-run: the restarted daemon adopts
    the run and starts its mirror again, which goes on from the offsets it kept: every point once in
    W&B and in MLflow."""
    mosaic.run("daemon", "start", check=True)
    go = home.root / "go"
    run_id = synthetic(mosaic, 4000, 1000, "--set", f"start_file={go}", "--set", "hold_seconds=4",
                       "--mirror", "wandb,mlflow")
    run_dir = home.run_dir(run_id)
    # the worker waits for `go` until the mirror has opened both targets, then writes for 4 s and lives 4 s more
    wait_for(lambda: all(mirror_state(home, run_id).get(t, {}).get("run_id") for t in ("wandb", "mlflow")),
             120, 0.1, what="the mirror to open W&B and MLflow")
    go.touch()
    wait_for(lambda: mirror_state(home, run_id).get("mlflow", {}).get("offset", 0) > 20000, 30, 0.05,
             what="the mirror to mirror some points")
    assert mosaic.show(run_id)["state"] == P.RUNNING
    daemon_pid = int(home.pid_file.read_text())
    mirrors = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_mirror_of(int(p), str(run_dir))]
    assert len(mirrors) == 1
    os.kill(daemon_pid, signal.SIGKILL)
    os.kill(mirrors[0], signal.SIGTERM)
    wait_for(lambda: not os.path.exists(f"/proc/{mirrors[0]}/cmdline") or not _is_mirror_of(mirrors[0], str(run_dir)),
             60, 0.1, what="the mirror to stop")
    mosaic.run("daemon", "start", check=True)
    assert mosaic.run("wait", run_id, "--timeout", "120").returncode == 0
    wait_for(lambda: mirror_done(home, run_id), 90, 0.2,
             what=f"the mirror to finish: {mirror_state(home, run_id)}\n{_log_of(run_dir)}")
    assert assert_same_points(home, mosaic, run_id) > 4000
    assert len(list(Path(mirror_state(home, run_id)["wandb"]["dir"]).parent.glob(f"offline-run-*-{run_id.lower()}"))) == 2
    assert (run_dir / LOCK_FILE).exists()
    mosaic.run("daemon", "stop")


def _log_of(run_dir) -> str:
    return (run_dir / "mirror.log").read_text(errors="replace")[-3000:]


def _is_mirror_of(pid: int, run_dir: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return b"daemon.mirror" in argv and run_dir.encode() in argv


@pytest.mark.parametrize("worker", ["cleanrl"])
def test_a_real_library_run_is_mirrored_with_its_checkpoint(worker, home, mosaic):
    """CleanRL's PPO, unmodified, mirrored: its scalars and episodes are W&B's and MLflow's points,
    its final model is an artifact of both, analytics.json lists it with its step."""
    mosaic.run("daemon", "start", check=True)
    run_id = mosaic.submit("--worker", "cleanrl", "--algo", "ppo", "--env", "CartPole-v1", "--steps", "2048",
                           "--set", "num-envs=2", "--set", "num-steps=256", "--set", "save-model=true",
                           "--mirror", "wandb,mlflow")
    assert mosaic.run("wait", run_id, "--timeout", "300").returncode == 0, mosaic.show(run_id).get("reason")
    wait_for(lambda: mirror_done(home, run_id), 90, 0.2, what="the mirror to finish")
    assert assert_same_points(home, mosaic, run_id) > 10
    run = mosaic.show(run_id)
    assert run["state"] == P.SUCCEEDED
    files = json.loads((home.run_dir(run_id) / ANALYTICS_FILE).read_text())["artifacts"]["checkpoints"]["files"]
    assert files and files[-1]["path"].endswith(".cleanrl_model") and files[-1]["step"] == 2048
    assert Path(files[-1]["path"]).exists()
    from mlflow.tracking import MlflowClient
    state = json.loads((home.run_dir(run_id) / STATE_FILE).read_text())
    listed = MlflowClient(state["mlflow"]["tracking_uri"]).list_artifacts(state["mlflow"]["run_id"], "checkpoints")
    assert [a.path for a in listed] == [f"checkpoints/{Path(files[-1]['path']).name}"]
    staged = list(Path(state["wandb"]["dir"]).rglob("*.wandb"))
    assert staged and b"checkpoint" in staged[0].read_bytes()   # the artifact's record
    mosaic.run("daemon", "stop")


def test_a_stopped_then_continued_run_has_its_final_checkpoint_as_its_model(home, mosaic):
    """A run stopped (its mirror closing at the stop) and continued: the stop's checkpoint is where
    it went on from, not its model. Neither W&B nor MLflow gets it; both get the checkpoint the run
    ended with; mirror.json lists each checkpoint once, by its absolute path."""
    mosaic.run("daemon", "start", check=True)
    run_id = synthetic(mosaic, 30000, 3000, "--set", "final_checkpoint=true", "--mirror", "wandb,mlflow")
    run_dir = home.run_dir(run_id)
    wait_for(lambda: mosaic.show(run_id)["summary"].get("steps", 0) >= 1000, 60, 0.1, what="the run under way")
    assert mosaic.run("stop", run_id, "--timeout", "60").returncode == 0
    wait_for(lambda: mirror_done(home, run_id), 90, 0.2, what="the mirror to close at the stop")
    stop = mosaic.show(run_id)["summary"]["stopped"]
    assert mosaic.run("continue", run_id, "--wait").returncode == 0
    wait_for(lambda: mirror_done(home, run_id), 90, 0.2, what=f"the mirror to finish\n{_log_of(run_dir)}")
    final = str(run_dir / "checkpoints" / "final.json")
    state = mirror_state(home, run_id)
    for target in ("wandb", "mlflow"):
        assert state[target]["checkpoints"] == [{"path": final, "step": 30000}], state[target]
        assert state[target]["checkpoint_logged"] == final
    from mlflow.tracking import MlflowClient
    client = MlflowClient(state["mlflow"]["tracking_uri"])
    assert [a.path for a in client.list_artifacts(state["mlflow"]["run_id"], "checkpoints")] == ["checkpoints/final.json"]
    assert client.get_run(state["mlflow"]["run_id"]).data.tags["mosaic.checkpoint_step"] == "30000"
    staged = b"".join(p.read_bytes() for p in Path(state["wandb"]["dir"]).parent.glob(f"offline-run-*-{run_id.lower()}/*.wandb"))
    assert b"final.json" in staged and Path(stop["checkpoint"]).name.encode() not in staged
    files = [f["path"] for f in json.loads((run_dir / ANALYTICS_FILE).read_text())["artifacts"]["checkpoints"]["files"]]
    assert files == [stop["checkpoint"], final]   # analytics.json lists every checkpoint the run saved
    mosaic.run("daemon", "stop")
