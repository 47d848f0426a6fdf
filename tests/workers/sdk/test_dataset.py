"""workers/sdk/dataset.py: a gymnasium env's transitions recorded in Tianshou's
ReplayBuffer HDF5 format, read back by the installed Tianshou."""
from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from workers.sdk.config import ConfigError, parse_run_config
from workers.sdk.dataset import Recorder, env_recorder

tianshou = pytest.importorskip("tianshou")
from tianshou.data import ReplayBuffer  # noqa: E402


def _play(env, steps: int, seed: int = 0) -> None:
    env.reset(seed=seed)
    env.action_space.seed(seed)
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        if not isinstance(terminated, np.ndarray) and (terminated or truncated):
            env.reset()


def _check_buffer(buf, transitions: int, episodes: int) -> None:
    assert len(buf) == transitions
    # whole episodes, stored contiguously: each ends with done, and obs_next[i] == obs[i+1] inside one
    done = buf.done[:transitions]
    assert done[-1] and int(done.sum()) == episodes
    inside = np.flatnonzero(~done[:-1])
    np.testing.assert_array_equal(buf.obs_next[inside], buf.obs[inside + 1])
    assert np.all(buf.done == np.logical_or(buf.terminated, buf.truncated))
    # Tianshou can sample from it, as offline algorithms do
    batch, indices = buf.sample(8)
    assert batch.obs.shape == (8, 4) and batch.act.shape == (8,)


def test_single_env_episodes_load_in_tianshou(tmp_path):
    recorder = Recorder({"episodes": 3}, "CartPole-v1", str(tmp_path))
    env = recorder.wrap(gym.make("CartPole-v1"))
    _play(env, 400)
    meta = recorder.finish()
    assert meta["episodes"] == 3 and meta["env"] == "CartPole-v1"
    assert json.loads((tmp_path / "dataset.json").read_text())["transitions"] == meta["transitions"]
    buf = ReplayBuffer.load_hdf5(str(tmp_path / "dataset.hdf5"))
    _check_buffer(buf, meta["transitions"], 3)
    # CartPole's reward is 1 a step, so the returns sum to the transitions
    assert float(buf.rew.sum()) == meta["transitions"]


def test_vector_env_keeps_episodes_apart_and_skips_autoreset_steps(tmp_path):
    recorder = Recorder({"steps": 150}, "CartPole-v1", str(tmp_path))
    env = recorder.wrap(gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync"))
    _play(env, 300)
    meta = recorder.finish()
    assert meta["transitions"] >= 150 and meta["episodes"] >= 1
    buf = ReplayBuffer.load_hdf5(str(tmp_path / "dataset.hdf5"))
    _check_buffer(buf, meta["transitions"], meta["episodes"])
    # an episode of CartPole starts near 0 in every coordinate: no reset observation is
    # recorded as the next of a final one (NEXT_STEP autoreset's ignored step)
    starts = np.concatenate([[0], np.flatnonzero(buf.done[:-1]) + 1])
    assert np.all(np.abs(buf.obs[starts]) <= 0.05)


def test_same_step_autoreset_takes_the_final_observation(tmp_path):
    recorder = Recorder({"episodes": 2}, "CartPole-v1", str(tmp_path))
    env = recorder.wrap(gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                                     vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}))
    _play(env, 200)
    recorder.finish()
    buf = ReplayBuffer.load_hdf5(str(tmp_path / "dataset.hdf5"))
    _check_buffer(buf, len(buf), 2)
    # the last obs_next of an episode is where the pole fell (or the cart left), not a fresh reset
    ends = np.flatnonzero(buf.done)
    assert np.all(np.abs(buf.obs_next[ends]).max(axis=1) > 0.05)


def test_record_config():
    assert env_recorder({"env": "CartPole-v1", "record": None}) is None
    config = parse_run_config({"worker": "w", "algo": "a", "env": "e", "record": {"episodes": 5}})
    assert config.record.episodes == 5
    for bad in ({}, {"episodes": 1, "steps": 2}, {"episodes": 0}, {"frames": 3}):
        with pytest.raises(ConfigError) as err:
            parse_run_config({"worker": "w", "algo": "a", "env": "e", "record": bad})
        assert err.value.field.startswith("record")


def test_cleanrl_training_env_records_a_dataset(tmp_path):
    """A CleanRL script's own vector env (SAME_STEP autoreset, patched in its process)
    records through VectorEpisodes; the dataset is saved at the script's exit."""
    from tests.workers.cleanrl_worker.test_cleanrl_worker import BASE, run_worker, stderr_of

    run_dir = tmp_path / "run"
    returncode, events = run_worker(run_dir, {**BASE, "steps": 1024, "record": {"episodes": 6}})
    assert returncode == 0, stderr_of(run_dir)
    saved = [e for e in events if e["type"] == "dataset_saved"]
    assert len(saved) == 1 and saved[0]["episodes"] == 6
    assert [e["type"] for e in events].index("dataset_saved") < [e["type"] for e in events].index("run_completed")
    buf = ReplayBuffer.load_hdf5(saved[0]["path"])
    _check_buffer(buf, saved[0]["transitions"], 6)
    # the episodes are the ones the script reported: their lengths are among the episode events'
    lengths = np.diff(np.concatenate([[-1], np.flatnonzero(buf.done)]))
    reported = [e["length"] for e in events if e["type"] == "episode"]
    assert all(int(n) in reported for n in lengths)


def test_artifacts_tab_lists_the_recorded_dataset(tmp_path):
    from mosaic_tui.widgets.artifacts_view import DATASET, collect

    recorder = Recorder({"episodes": 1}, "CartPole-v1", str(tmp_path))
    _play(recorder.wrap(gym.make("CartPole-v1")), 100)
    assert [a.kind for a in collect({}, tmp_path)] == []
    recorder.finish()
    found = collect({}, tmp_path)
    assert [(a.kind, a.path.name) for a in found] == [(DATASET, "dataset.hdf5")] and found[0].size() > 0


def test_xuance_training_env_records_a_dataset(tmp_path):
    """XuanCe's own vector env (final observation returned, the next episode's first in
    info["reset_obs"]) records through VectorEpisodes; the dataset is saved before the end."""
    from tests.workers.xuance_worker.test_xuance_worker import RUNS, config_for, run_worker, stderr_of

    run_dir = tmp_path / "run"
    returncode, events = run_worker(run_dir, config_for({**RUNS["dqn"], "steps": 600}, record={"episodes": 5}))
    assert returncode == 0, stderr_of(run_dir)
    saved = [e for e in events if e["type"] == "dataset_saved"]
    assert len(saved) == 1 and saved[0]["episodes"] == 5
    kinds = [e["type"] for e in events]
    assert kinds.index("dataset_saved") < kinds.index("run_completed")
    # XuanCe's step hook beats at every env step through the SDK's paced heartbeat: the first goes out
    beats = [e["t"] for e in events if e["type"] == "heartbeat"]
    assert beats and all(b - a >= 10.0 for a, b in zip(beats, beats[1:])), beats
    buf = ReplayBuffer.load_hdf5(saved[0]["path"])
    _check_buffer(buf, saved[0]["transitions"], 5)
    # the episodes are the ones XuanCe reported: their lengths are among the episode events'
    lengths = np.diff(np.concatenate([[-1], np.flatnonzero(buf.done)]))
    reported = [e["length"] for e in events if e["type"] == "episode"]
    assert all(int(n) in reported for n in lengths)
    # a CartPole episode starts upright: each first observation is a reset's, not the last one's
    starts = np.concatenate([[0], np.flatnonzero(buf.done)[:-1] + 1])
    assert np.all(np.abs(buf.obs[starts]) <= 0.05)
