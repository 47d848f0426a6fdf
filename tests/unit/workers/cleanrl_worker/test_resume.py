"""workers/cleanrl_worker/resume.py: what a continue does to the optimizers' learning rate."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from workers.cleanrl_worker.resume import follow_learning_rate  # noqa: E402


@pytest.fixture(autouse=True)
def _inductor_cache_in_tmp_path(tmp_path, monkeypatch):
    # making an optimizer has torch create its compile cache, /tmp/torchinductor_<user> by default:
    # nothing of the suite's may stay in /tmp
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "torchinductor"))


def optimizer(lr: float):
    return torch.optim.Adam(torch.nn.Linear(2, 1).parameters(), lr=lr)


def test_a_new_rate_replaces_the_checkpoints_in_every_group():
    q, critic = optimizer(1e-3), optimizer(1e-3)      # as loaded from a checkpoint trained at 1e-3
    follow_learning_rate([q, critic], saved_rate=1e-3, rate=5e-4)
    assert [g["lr"] for o in (q, critic) for g in o.param_groups] == [pytest.approx(5e-4)] * 2


def test_an_annealed_rate_keeps_its_point_of_the_schedule():
    annealed = optimizer(2.5e-4)                      # 1e-3 annealed to a quarter when it stopped
    follow_learning_rate([annealed], saved_rate=1e-3, rate=2e-3)
    assert annealed.param_groups[0]["lr"] == pytest.approx(5e-4)


@pytest.mark.parametrize("saved_rate, rate", [(None, 5e-4), (1e-3, None), (1e-3, 1e-3)])
def test_an_older_checkpoint_or_the_same_rate_changes_nothing(saved_rate, rate):
    loaded = optimizer(1e-3)
    follow_learning_rate([loaded], saved_rate=saved_rate, rate=rate)
    assert loaded.param_groups[0]["lr"] == 1e-3
