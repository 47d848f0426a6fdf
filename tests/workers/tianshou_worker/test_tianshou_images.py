"""Tianshou on image observations (issues 16 and 19): Atari through Tianshou's own wrap_deepmind,
ViZDoom through workers/sdk/vizdoom.py, both into Tianshou's Atari CNNs (atari_network.py) as its
examples/atari wire them. The runs through the daemon with frames are in tests/workers/sdk/test_env_families.py
(tianshou-atari, tianshou-vizdoom); here: every image algorithm trains, the others are refused.
"""
from __future__ import annotations

import pytest

from tests.helpers import walk_runs
from tests.workers.xuance_worker.test_xuance_worker import read_events, tags_of
from workers.sdk.config import ConfigError
from workers.tianshou_worker import WORKER, catalog

pytest.importorskip("tianshou")

DOOM = "VizdoomBasic-v1"

def image_config(algo: str) -> dict:
    params = {"training_envs": 1, "test_envs": 0, "hidden_sizes": [32], "batch_size": 32}
    if catalog.ALGORITHMS[algo]["kind"] == catalog.ONLINE_OFF:
        params.update(buffer_size=1000, update_step_num_gradient_steps_per_sample=0.25)
    else:
        params.update(collection_step_num_env_steps=64, update_step_num_repetitions=1)
    return {"worker": "tianshou", "algo": algo, "env": DOOM, "steps": 128, "seed": 1, "params": params}


@pytest.mark.slow  # 1 to 4 minutes (load): nine algorithms with CNNs, 128 ViZDoom steps each, two evals
@pytest.mark.long  # the breadth sweep (make test-long); dqn and ppo on images run in test_env_families
def test_every_image_algorithm_trains_on_vizdoom(tmp_path):
    jobs = []
    for algo in catalog.IMAGE_NETS:
        run_dir = tmp_path / algo
        run_dir.mkdir()
        jobs.append((str(run_dir), image_config(algo)))
    for algo in ("dqn", "ppo"):  # and a trained policy plays an episode (eval mode) from its checkpoint
        run_dir = tmp_path / f"eval-{algo}"
        run_dir.mkdir()
        jobs.append((str(run_dir), {**image_config(algo), "mode": "eval", "name": f"eval-{algo}", "eval_episodes": 1,
                                    "checkpoint": str(tmp_path / algo / "checkpoints" / "final.pt")}))
    # in one process (torch and tianshou imported once), each through the worker's own train() or evaluate()
    results = walk_runs(jobs, "from workers.tianshou_worker import WORKER, runtime",
                        '(runtime.evaluate if config.get("mode") == "eval" else runtime.train)(WORKER.validate(config), emitter)')
    failed = {}
    for algo in catalog.IMAGE_NETS:
        events = read_events(tmp_path / algo)
        kinds = [e["type"] for e in events]
        ok = (results.get(algo) == 0 and kinds[-1] == "run_completed" and "episode" in kinds
              and any("loss" in tag for tag in tags_of(events)))
        if not ok:
            failed[algo] = (results.get(algo), [e for e in events if e["type"] == "run_failed"][-1:])
        elif not convolves(tmp_path / algo / "checkpoints" / "final.pt"):
            failed[algo] = "no convolution kernel among the checkpoint's weights: not the Atari CNN"
    for algo in ("dqn", "ppo"):
        events = read_events(tmp_path / f"eval-{algo}")
        assert results.get(f"eval-{algo}") == 0 and events[-1]["type"] == "run_completed", results
        assert [e["length"] for e in events if e["type"] == "episode"][0] > 1
    assert not failed, failed


def convolves(checkpoint) -> bool:
    """Whether a saved algorithm has a Conv2d kernel (4-D weights) among its networks."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)["algorithm"]
    return any(getattr(value, "ndim", 0) == 4 for value in state.values())


@pytest.mark.parametrize("config, field, words", [
    ({"algo": "trpo", "env": "ALE/Pong-v5"}, "algo", "has no image network"),
    ({"algo": "reinforce", "env": DOOM}, "algo", "has no image network"),
    ({"algo": "discrete_cql", "env": "PongNoFrameskip-v4", "dataset": "x"}, "algo", "learns from a recorded dataset"),
    ({"algo": "dqn", "env": DOOM, "record": {"episodes": 1}}, "record", "image observations"),
])
def test_algorithms_without_an_image_network_are_refused(config, field, words):
    with pytest.raises(ConfigError) as err:
        WORKER.validate({"worker": "tianshou", "steps": 300, **config})
    assert err.value.field == field and words in str(err.value) and "\n" not in str(err.value), err.value


def test_image_envs_are_offered_to_the_image_algorithms_only():
    caps = WORKER.capabilities()
    assert {"atari", "vizdoom"} <= set(caps["env_families"])
    for algo in catalog.ALGORITHMS:
        offered = DOOM in caps["envs"][algo] and "ALE/Pong-v5" in caps["envs"][algo]
        assert offered == (algo in catalog.IMAGE_NETS), algo
    assert set(catalog.IMAGE_NETS) == {"dqn", "c51", "rainbow", "qrdqn", "iqn", "fqf", "ppo", "a2c", "discrete_sac"}
