"""workers/tianshou_worker/resume.py: which checkpoint a run starts from, and the counters it goes on from."""
from __future__ import annotations

from workers.tianshou_worker import resume


def test_a_run_continues_from_its_own_stop_before_any_checkpoint_it_was_given():
    assert resume.source({"continue_from": "checkpoints/stop_0002.pt", "checkpoint": "other.pt"}) == \
        "checkpoints/stop_0002.pt"
    assert resume.source({"continue_from": None, "checkpoint": "other.pt"}) == "other.pt"
    assert resume.source({}) is None
    assert resume.load_state({"checkpoint": None}) is None   # nothing to load: torch is not even imported


def test_the_trainer_goes_on_from_the_saved_counters_or_from_zero():
    assert resume.restored(None) == (0, 0, 0)
    state = {"algorithm": {}, "epoch": 3, "env_step": 3000, "update_step": 750}
    assert resume.restored(state) == (3, 3000, 750)


def test_the_stop_checkpoint_is_named_by_its_epoch():
    assert resume.stop_name(7) == "stop_0007"
