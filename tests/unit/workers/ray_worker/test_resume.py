"""workers/ray_worker/resume.py: which checkpoint a run starts from."""
from __future__ import annotations

from workers.ray_worker import resume


def test_a_run_continues_from_its_own_stop_before_any_checkpoint_it_was_given():
    assert resume.source({"continue_from": "checkpoints/stop_000003", "checkpoint": "x"}) == "checkpoints/stop_000003"
    assert resume.source({"checkpoint": "x"}) == "x"
    assert resume.source({"continue_from": None, "checkpoint": None}) is None
    assert resume.restore(object(), {}) is None   # nothing to restore: the algorithm is not touched
