"""workers/sdk/rundir.py's decisions: when a worker saves (CheckpointSchedule), which checkpoints stay (retention)."""
from __future__ import annotations

import json

from workers.sdk.rundir import MANIFEST_SUFFIX, CheckpointSchedule, prune_checkpoints, write_manifest


def test_saves_come_every_nth_unit_and_once_at_the_end_unless_just_saved():
    schedule = CheckpointSchedule(every=3)
    saves = []
    for done in range(1, 8):
        finished = done == 7
        if schedule.due(done, finished):
            schedule.saved(done)
            saves.append(done)
    assert saves == [3, 6]
    assert schedule.final_due(7)                      # 7 was not saved on the way
    schedule.saved(7)
    assert not schedule.final_due(7)                  # never the same state twice


def test_the_last_unit_is_saved_once_and_a_schedule_of_zero_saves_only_at_the_end():
    schedule = CheckpointSchedule(every=2)
    assert not schedule.due(4, finished=True)         # the end's save, not a save on the way too
    assert schedule.final_due(4)
    never = CheckpointSchedule(every=0)
    assert not any(never.due(done, False) for done in range(1, 10))
    assert never.final_due(9)


def test_a_resumed_run_with_nothing_left_saves_nothing_new():
    assert not CheckpointSchedule(every=5, start=10).final_due(10)
    assert CheckpointSchedule(every=5, start=10).final_due(11)


def checkpoints(tmp_path, steps_objectives):
    for step, objective in steps_objectives:
        path = tmp_path / f"iter_{step:06d}"
        path.mkdir()
        (path / "state.pt").write_bytes(b"x")
        write_manifest(str(path), step, objective)


def test_retention_keeps_the_newest_and_the_best(tmp_path):
    checkpoints(tmp_path, [(10, 5.0), (20, 9.0), (30, 1.0), (40, 2.0), (50, 3.0)])
    deleted = prune_checkpoints(str(tmp_path), "iter_", keep=2)
    assert sorted(p.rsplit("/", 1)[-1] for p in deleted) == ["iter_000010", "iter_000030"]
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(MANIFEST_SUFFIX))
    assert left == ["iter_000020", "iter_000040", "iter_000050"]          # 20: the best objective
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(MANIFEST_SUFFIX)) == [
        f"iter_{s:06d}{MANIFEST_SUFFIX}" for s in (20, 40, 50)]


def test_retention_of_zero_keeps_all_and_leaves_what_has_no_manifest(tmp_path):
    checkpoints(tmp_path, [(10, None), (20, None), (30, None)])
    (tmp_path / "iter_000005").mkdir()                                     # no manifest: not a whole save
    (tmp_path / f"other{MANIFEST_SUFFIX}").write_text(json.dumps({"step": 1, "checkpoint": "x"}))
    assert prune_checkpoints(str(tmp_path), "iter_", keep=0) == []
    deleted = prune_checkpoints(str(tmp_path), "iter_", keep=1)
    assert sorted(p.rsplit("/", 1)[-1] for p in deleted) == ["iter_000010", "iter_000020"]
    assert (tmp_path / "iter_000005").is_dir() and (tmp_path / "iter_000030").is_dir()
