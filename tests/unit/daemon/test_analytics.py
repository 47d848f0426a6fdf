"""daemon/analytics.py: a run's analytics.json, merged by the daemon and the mirror, each checkpoint once."""
from __future__ import annotations

import json
import os

from daemon.analytics import ANALYTICS_FILE, merged, new_checkpoints, tensorboard_section, update_analytics
from daemon.home import CHECKPOINTS_DIR, TENSORBOARD_DIR


def read(run_dir) -> dict:
    return json.loads((run_dir / ANALYTICS_FILE).read_text())


def test_a_first_write_makes_the_manifest_with_its_run_id_and_sections(tmp_path):
    run_dir = tmp_path / "01RUN"
    run_dir.mkdir()
    update_analytics(str(run_dir), tensorboard={"enabled": True})
    manifest = read(run_dir)
    assert (manifest["version"], manifest["run_id"]) == (1, "01RUN")
    assert manifest["artifacts"] == {"tensorboard": {"enabled": True}}
    assert manifest["updated_at"] > 0


def test_the_daemon_and_the_mirror_each_merge_their_part_and_none_removes_one(tmp_path):
    update_analytics(str(tmp_path), tensorboard={"log_dir": "/tb"})
    update_analytics(str(tmp_path), wandb={"run_id": "abc"}, mlflow={"run_id": "m1"})
    assert set(read(tmp_path)["artifacts"]) == {"tensorboard", "wandb", "mlflow"}
    update_analytics(str(tmp_path), mlflow=None)
    assert set(read(tmp_path)["artifacts"]) == {"tensorboard", "wandb"}


def test_each_checkpoint_is_listed_once_by_its_absolute_path(tmp_path):
    run_dir = str(tmp_path)
    update_analytics(run_dir, checkpoints=[{"path": "checkpoints/a.pt", "step": 10}])
    update_analytics(run_dir, checkpoints=[{"path": os.path.join(run_dir, "checkpoints/a.pt"), "step": 10},
                                           {"path": "/elsewhere/b.pt", "step": 20}])
    listed = read(tmp_path)["artifacts"]["checkpoints"]
    assert listed["directory"] == os.path.join(run_dir, CHECKPOINTS_DIR)
    assert listed["files"] == [{"path": os.path.join(run_dir, "checkpoints/a.pt"), "step": 10},
                               {"path": "/elsewhere/b.pt", "step": 20}]


def test_a_manifest_that_is_no_object_is_started_again(tmp_path):
    (tmp_path / ANALYTICS_FILE).write_text("[1, 2]")
    update_analytics(str(tmp_path), tensorboard={"enabled": True})
    assert read(tmp_path)["artifacts"] == {"tensorboard": {"enabled": True}}
    (tmp_path / ANALYTICS_FILE).write_text("{not json")
    update_analytics(str(tmp_path), wandb={"run_id": "w"})
    assert read(tmp_path)["artifacts"] == {"wandb": {"run_id": "w"}}


def test_a_run_directory_that_cannot_be_written_costs_a_log_line_not_the_caller(tmp_path, caplog):
    update_analytics(str(tmp_path / "gone"), tensorboard={"enabled": True})
    assert "cannot write" in caplog.text


def test_merged_keeps_what_others_wrote_and_stamps_the_time():
    manifest = {"version": 1, "run_id": "R", "artifacts": {"wandb": {"run_id": "w"}}, "extra": "kept"}
    out = merged(manifest, "/runs/R", None, {"tensorboard": {"enabled": True}}, now=123.0)
    assert out == {"version": 1, "run_id": "R", "extra": "kept", "updated_at": 123.0,
                   "artifacts": {"wandb": {"run_id": "w"}, "tensorboard": {"enabled": True}}}


def test_new_checkpoints_are_those_not_listed_yet_the_stops_last():
    saved = ["/r/checkpoints/1.pt", "/r/checkpoints/2.pt", "/r/checkpoints/3.pt"]
    last = {"path": "/r/checkpoints/3.pt", "step": 300}
    assert new_checkpoints(saved, 1, last, None) == [{"path": "/r/checkpoints/2.pt", "step": None},
                                                     {"path": "/r/checkpoints/3.pt", "step": 300}]
    assert new_checkpoints(saved, 3, last, {"checkpoint": "/r/checkpoints/stop.pt", "step": 310}) == [
        {"path": "/r/checkpoints/stop.pt", "step": 310}]
    assert new_checkpoints([], 0, None, {"step": 5}) == []      # a stop without a checkpoint
    assert new_checkpoints(saved, 3, last, None) == []


def test_the_tensorboard_section_names_the_export_and_the_workers_own_files(tmp_path):
    run_dir = tmp_path / "runs" / "R"
    run_dir.mkdir(parents=True)
    export = os.path.join(str(tmp_path), "tensorboard", "brave-otter")
    section = tensorboard_section(str(tmp_path), str(run_dir), "brave-otter")
    assert section == {"enabled": True, "log_dir": export,
                       "dirs": [{"kind": "export", "path": export, "written_by": "mosaic tensorboard"}]}
    (run_dir / TENSORBOARD_DIR).mkdir()
    assert len(tensorboard_section(str(tmp_path), str(run_dir), "brave-otter")["dirs"]) == 1  # empty: not listed
    (run_dir / TENSORBOARD_DIR / "events.out.tfevents.1").write_bytes(b"")
    section = tensorboard_section(str(tmp_path), str(run_dir), "brave-otter")
    assert section["log_dir"] == str(run_dir / TENSORBOARD_DIR)
    assert [d["kind"] for d in section["dirs"]] == ["worker", "export"]
