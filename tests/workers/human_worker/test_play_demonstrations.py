"""Play, then learn from it (docs/play.md, demonstrations): five MiniGrid-Empty-5x5 episodes
played through the human seat and recorded; Tianshou's behaviour cloning trained on that dataset
(`dataset: <play run>`); its policy evaluated against a random policy's on the same env."""
from __future__ import annotations

import json

import numpy as np
import pytest

from daemon import protocol as P
from tests.helpers import connect, wait_for
from tests.workers.human_worker.test_human_worker import TO_THE_GOAL, of_type, take_seat

EPISODES = 5
EVAL_EPISODES = 20


def submit_file(mosaic, name: str, config: dict) -> str:
    path = mosaic.home.root / f"{name}.json"
    path.write_text(json.dumps({"name": name, **config}))
    return mosaic.submit(str(path))


def random_success_rate(episodes: int) -> float:
    """A uniformly random policy on the same env and view, as the evaluation plays it."""
    from workers.sdk import minigrid
    env = minigrid.make("MiniGrid-Empty-5x5-v0")
    rng = np.random.default_rng(0)
    wins = 0
    for seed in range(episodes):
        env.reset(seed=1000 + seed)
        while True:
            _, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
            if terminated or truncated:
                wins += reward > 0
                break
    env.close()
    return wins / episodes


@pytest.mark.slow
def test_five_played_episodes_train_a_policy_that_beats_random(daemon, mosaic):
    home = mosaic.home
    play = submit_file(mosaic, "demo", {"worker": "human", "algo": "play", "env": "MiniGrid-Empty-5x5-v0", "seed": 0,
                                        "params": {"episodes": EPISODES}, "record": {"episodes": EPISODES}})
    player = connect(home, name="player")
    try:
        take_seat(player, play)
        for episode in range(EPISODES):
            for action in TO_THE_GOAL:
                player.call(P.ACT, run=play, seat="0", action=action)
            wait_for(lambda: len(of_type(home, play, "episode")) > episode, 30, 0.05, what=f"episode {episode}")
        mosaic.run("wait", play, "--timeout", "60")
    finally:
        player.close()
    run = mosaic.show(play)
    assert run["state"] == "succeeded" and run["summary"]["dataset"]["episodes"] == EPISODES
    assert run["summary"]["dataset"]["transitions"] == EPISODES * len(TO_THE_GOAL)
    # the actions kept exactly as taken: the dataset's, in order
    import h5py
    with h5py.File(run["summary"]["dataset"]["path"]) as f:
        assert list(np.asarray(f["_meta"]["act"]).reshape(-1)) == TO_THE_GOAL * EPISODES

    bc = submit_file(mosaic, "bc-from-play", {"worker": "tianshou", "algo": "bc", "env": "MiniGrid-Empty-5x5-v0",
                                              "steps": 600, "seed": 0, "dataset": "demo",
                                              "params": {"epoch_num_steps": 200, "test_envs": 1,
                                                         "test_step_num_episodes": 1, "hidden_sizes": [64]}})
    mosaic.run("wait", bc, "--timeout", "300")
    assert mosaic.show(bc)["state"] == "succeeded", mosaic.show(bc)
    evaluation = submit_file(mosaic, "bc-eval", {"worker": "tianshou", "algo": "bc", "env": "MiniGrid-Empty-5x5-v0",
                                                 "mode": "eval", "checkpoint": "run:bc-from-play", "seed": 1000,
                                                 "eval_episodes": EVAL_EPISODES, "params": {"hidden_sizes": [64]}})
    mosaic.run("wait", evaluation, "--timeout", "300")
    assert mosaic.show(evaluation)["state"] == "succeeded", (mosaic.show(evaluation)["reason"], mosaic.show(evaluation).get("stderr_tail"))
    returns = [e["return"] for e in of_type(home, evaluation, "episode")]
    assert len(returns) == EVAL_EPISODES
    cloned = sum(r > 0 for r in returns) / len(returns)
    random = random_success_rate(EVAL_EPISODES)
    print(f"success: behaviour cloning {cloned:.2f}, random {random:.2f}; mean return {np.mean(returns):.3f}")
    assert cloned > random and cloned >= 0.9, (cloned, random, returns)


def test_each_episode_is_in_the_dataset_as_it_ends_and_a_cancel_keeps_them(daemon, mosaic):
    """A play that records keeps every finished episode on disk as it ends: two of three recorded
    episodes played, the dataset holds them while the play waits for the third; the play cancelled,
    it keeps them, and an offline run takes it by the play's name."""
    import h5py
    home = mosaic.home
    play = submit_file(mosaic, "short-demo", {"worker": "human", "algo": "play", "env": "MiniGrid-Empty-5x5-v0",
                                              "seed": 0, "record": {"episodes": 3}})
    assert mosaic.show(play)["config"]["params"]["episodes"] == 3     # the play ends with its recording
    bc_config = {"worker": "tianshou", "algo": "bc", "env": "MiniGrid-Empty-5x5-v0", "steps": 200,
                 "dataset": "short-demo", "name": "bc-from-short"}
    path = home.root / "bc.json"
    path.write_text(json.dumps(bc_config))
    early = mosaic.run("submit", str(path))                          # no episode finished yet: said so
    assert early.returncode != 0 and "records a dataset but has finished no episode yet" in early.stderr
    player = connect(home, name="player")
    try:
        take_seat(player, play)
        for episode in range(2):
            for action in TO_THE_GOAL:
                player.call(P.ACT, run=play, seat="0", action=action)
            wait_for(lambda: len(of_type(home, play, "episode")) > episode, 30, 0.05, what=f"episode {episode}")
        saved = wait_for(lambda: [e for e in of_type(home, play, "dataset_saved") if e["episodes"] == 2], 30, 0.05,
                         what="the second episode saved")[0]
        assert saved["transitions"] == 2 * len(TO_THE_GOAL)
        wait_for(lambda: (mosaic.show(play)["summary"].get("dataset") or {}).get("episodes") == 2, 30, 0.1,
                 what="the dataset in the run's summary")
        player.call(P.ACT, run=play, seat="0", action=2)       # the third episode begun, not finished
    finally:
        player.close()
    mosaic.run("cancel", play, check=True)
    wait_for(lambda: mosaic.show(play)["state"] in P.FINAL_STATES, 30, 0.1, what="the play cancelled")
    run = mosaic.show(play)
    assert run["state"] == P.CANCELLED and run["summary"]["dataset"]["episodes"] == 2, run
    with h5py.File(run["summary"]["dataset"]["path"]) as f:
        assert list(np.asarray(f["_meta"]["act"]).reshape(-1)) == TO_THE_GOAL * 2
    assert not list(home.run_dir(play).glob("*.tmp"))
    # what the BC submit of issue 41 refused ("has recorded no dataset") is taken
    bc = mosaic.submit(str(path))
    assert mosaic.show(bc)["config"]["dataset"] == run["summary"]["dataset"]["path"]
    mosaic.run("cancel", bc)
