"""XuanCe on PettingZoo's SISL games (workers/xuance_worker/sisl.py): pursuit_v5 (discrete, as
MultiGrid's discrete algorithms) and multiwalker_v9 (continuous), through the daemon, with
episode returns per agent and live frames."""
from __future__ import annotations

import json
import time

import pytest

from tests.helpers import worker_scalar
from workers.fastlane.reader import FrameReader
from workers.xuance_worker import WORKER, catalog


def test_sisl_games_are_offered_to_the_algorithms_that_take_them():
    envs = WORKER.capabilities()["envs"]
    assert "pursuit_v5" in envs["iql"] and "multiwalker_v9" not in envs["iql"]
    assert "multiwalker_v9" in envs["maddpg"] and "pursuit_v5" not in envs["maddpg"]
    assert {"pursuit_v5", "multiwalker_v9"} <= set(envs["mappo"])
    assert catalog.resolve_env("sisl:pursuit_v5") == ("sisl", "pursuit_v5")
    assert WORKER.schema("mappo", "pursuit_v5")["properties"]["policy"]["default"] == "Categorical_MAAC_Policy"
    assert WORKER.schema("mappo", "multiwalker_v9")["properties"]["continuous_action"]["default"] is True


def ended(run_dir) -> bool:
    try:
        text = (run_dir / "events.jsonl").read_text()
    except FileNotFoundError:
        return False
    return '"run_completed"' in text or '"run_failed"' in text


def train_through_the_daemon(mosaic, algo: str, env: str, steps: int, *sets: str, frames: bool = False,
                             timeout: float = 300) -> tuple[dict, list[dict], bool]:
    """Submit, wait (reading frames from FastLane while it runs), and return the run, its events,
    and whether a frame of the game was read."""
    args = ["--worker", "xuance", "--algo", algo, "--env", env, "--steps", str(steps)]
    for item in sets:
        args += ["--set", item]
    run_id = mosaic.submit(*args, *(["--frames", "--fps", "30"] if frames else []))
    run_dir = mosaic.home.run_dir(run_id)
    framed = False
    if frames:  # the segment is removed when the run ends: read while the worker runs
        reader = FrameReader(run_id)
        deadline = time.monotonic() + timeout
        try:
            while not framed and time.monotonic() < deadline and not ended(run_dir):
                latest = reader.latest()
                framed = latest is not None and latest[1].ndim == 3 and bool(latest[1].any())
                time.sleep(0.05)
        finally:
            reader.close()
    mosaic.run("wait", run_id, "--timeout", str(timeout))
    run = mosaic.show(run_id)
    assert run["state"] == "succeeded", (run.get("reason"), (run_dir / "stderr.log").read_text(errors="replace")[-3000:])
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    return run, events, framed


def test_iql_trains_on_pursuit_with_returns_and_frames(daemon, mosaic):
    run, events, framed = train_through_the_daemon(
        mosaic, "iql", "pursuit_v5", 400, "parallels=2", "vectorize=DummyVecMultiAgentEnv",
        "env_kwargs={\"n_pursuers\": 4, \"n_evaders\": 10, \"max_cycles\": 20}", "start_training=100",
        "buffer_size=400", "batch_size=32", frames=True)
    assert events[0]["family"] == "sisl" and events[0]["n_agents"] == 4
    episodes = [e for e in events if e["type"] == "episode"]
    # 400 steps over 2 envs, episodes of 20 steps: XuanCe counts steps of both envs together
    assert len(episodes) == 400 // 20 and all(e["length"] == 20 for e in episodes)
    assert set(episodes[0]["agents"]) == {f"pursuer_{i}" for i in range(4)}
    assert any(e["return"] != 0 for e in episodes)     # pursuit rewards catches and tags
    assert any(worker_scalar(e) and "/loss_Q" in e["tag"] for e in events)   # it learned
    assert run["summary"]["checkpoints"]
    assert framed, "no frame of the game came through FastLane"


@pytest.mark.long
@pytest.mark.parametrize("algo,env,sets", [
    ("mappo", "pursuit_v5", ("parallels=2", "buffer_size=200", "n_epochs=1",
                             "env_kwargs={\"max_cycles\": 100}")),
    ("qmix", "pursuit_v5", ("parallels=2", "start_training=100", "buffer_size=1000", "batch_size=32",
                            "env_kwargs={\"max_cycles\": 100}")),
    ("mappo", "multiwalker_v9", ("parallels=2", "buffer_size=200", "n_epochs=1",
                                 "env_kwargs={\"max_cycles\": 100}")),
    ("maddpg", "multiwalker_v9", ("parallels=2", "start_training=100", "buffer_size=1000", "batch_size=32",
                                  "env_kwargs={\"max_cycles\": 100}")),
])
def test_more_algorithms_on_sisl(daemon, mosaic, algo, env, sets):
    started = time.monotonic()
    run, events, framed = train_through_the_daemon(mosaic, algo, env, 2000, *sets, frames=True, timeout=600)
    episodes = [e for e in events if e["type"] == "episode"]
    assert episodes and all(set(e["agents"]) for e in episodes)
    assert framed
    print(f"{algo} on {env}: 2000 steps in {time.monotonic() - started:.1f} s through the daemon, "
          f"{len(episodes)} episodes, last return {episodes[-1]['return']:.2f}")
