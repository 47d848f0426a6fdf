"""daemon/mirror.py, the daemon's side of a run's mirror: settings.json's check, where a run is
mirrored, and what the mirror left in mirror.json (its warnings, a mirror that did not finish)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from daemon import mirror
from daemon.home import EVENTS_FILE
from daemon.mirror import STATE_FILE, check_settings, run_targets, unfinished, warnings


def test_the_daemon_side_imports_neither_the_mirror_process_nor_its_libraries():
    """What the daemon imports of the mirror: its top level names no module of the mirror process
    (nor W&B, MLflow); only its ``__main__`` (the process's command line) hands over to it."""
    tree = ast.parse(Path(mirror.__file__).read_text())
    imported = []
    for node in tree.body:
        if isinstance(node, ast.If):   # the __main__ guard: run as the mirror process, not imported
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                imported += [alias.name for alias in sub.names]
            elif isinstance(sub, ast.ImportFrom):
                imported += [sub.module or ""] + [f"{sub.module}.{alias.name}" for alias in sub.names]
    assert "daemon.home" in imported
    assert not [m for m in imported if m.split(".")[0] in ("wandb", "mlflow", "torch", "ray")
                or m.startswith(("daemon.mirror_process", "daemon.mirror_targets", "daemon.ingest", "daemon.store"))]


def test_settings_name_the_first_wrong_key_in_one_line():
    assert check_settings({"wandb": {"enabled": True, "project": "p", "mode": "offline"},
                           "mlflow": {"tracking_uri": None}, "artifact_max_mb": 10}) is None
    assert check_settings([]) == 'mirrors must be an object: {"wandb": {...}, "mlflow": {...}}'
    assert check_settings({"neptune": {}}) == "mirrors: unknown key 'neptune' (known: wandb, mlflow, artifact_max_mb)"
    assert check_settings({"wandb": {"enabled": "yes"}}) == "mirrors.wandb.enabled must be true or false"
    assert check_settings({"wandb": {"mode": "fast"}}) == "mirrors.wandb.mode must be auto, online or offline"
    assert check_settings({"mlflow": {"experiment": 3}}) == "mirrors.mlflow.experiment must be a string or null"
    assert check_settings({"artifact_max_mb": True}) == "mirrors.artifact_max_mb must be a number >= 0"


def test_a_runs_own_mirror_list_wins_over_the_homes_enabled_targets():
    settings = {"wandb": {"enabled": True}, "mlflow": {"enabled": False}}
    assert run_targets({}, settings) == ["wandb"]
    assert run_targets({"mirror": ["mlflow"]}, settings) == ["mlflow"]
    assert run_targets({"mirror": []}, settings) == []              # mirrored nowhere, whatever the home says
    assert run_targets({}, {}) == []


def test_a_targets_failure_kept_in_mirror_json_is_a_warning(tmp_path):
    assert warnings(str(tmp_path)) == []
    (tmp_path / STATE_FILE).write_text(json.dumps({
        "wandb": {"offset": 10, "warned": "wandb mirror: cannot open: ConnectionError"},
        "mlflow": {"offset": 10}}))
    assert warnings(str(tmp_path)) == [("wandb", "wandb mirror: cannot open: ConnectionError")]
    (tmp_path / STATE_FILE).write_text("{broken")
    assert warnings(str(tmp_path)) == []


def test_a_mirror_unfinished_is_one_with_a_target_not_closed_at_the_events_end(tmp_path):
    def run(name: str, events: bytes, state: dict | None) -> None:
        (tmp_path / name).mkdir()
        (tmp_path / name / EVENTS_FILE).write_bytes(events)
        if state is not None:
            (tmp_path / name / STATE_FILE).write_text(json.dumps(state))
    run("CLOSED", b"x\n" * 5, {"wandb": {"offset": 10, "closed_offset": 10}})
    run("CUT", b"x\n" * 5, {"wandb": {"offset": 10, "closed_offset": 10}, "mlflow": {"offset": 4}})
    run("GREW", b"x\n" * 6, {"wandb": {"offset": 10, "closed_offset": 10}})
    run("UNCLOSED", b"x\n" * 5, {"wandb": {"offset": 10}})      # all mirrored, killed before its close
    run("NEVER", b"x\n", None)
    assert sorted(unfinished(str(tmp_path))) == ["CUT", "GREW", "UNCLOSED"]
    assert unfinished(str(tmp_path / "missing")) == []
