"""workers/jumanji_worker/resume.py: which checkpoint a run starts from, and the stop's checkpoint."""
from __future__ import annotations

from workers.jumanji_worker import resume
from workers.sdk.stop import Stopped


class Trainer:
    """What resume asks of a trainer: ``load`` (the unit reached) and ``save`` (the path written)."""

    def __init__(self):
        self.saved = []

    def load(self, checkpoint: str) -> int:
        return 4

    def save(self, path, unit: int, config) -> str:
        self.saved.append((str(path), unit))
        return str(path)


def test_a_run_without_a_source_starts_at_unit_zero_and_one_with_a_source_where_it_was():
    tr = Trainer()
    assert resume.restore(tr, {"continue_from": None, "checkpoint": None}, "epoch") == 0
    assert resume.restore(tr, {"continue_from": "checkpoints/stop_000004"}, "epoch") == 4


def test_the_stop_saves_its_checkpoint_under_the_units_done(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # the manifest names the run of the cwd's config.json (none here)
    tr = Trainer()
    (tmp_path / "stop_000005").mkdir()
    stop = resume.stop(tr, tmp_path, 5, {}, steps=1280)
    assert isinstance(stop, Stopped) and (stop.step, stop.checkpoint) == (1280, str(tmp_path / "stop_000005"))
    assert tr.saved == [(str(tmp_path / "stop_000005"), 5)]
    assert resume.source({"continue_from": "a", "checkpoint": "b"}) == "a"
