"""Recording a run's transitions as an offline dataset, in Tianshou's replay-buffer format.

    recorder = env_recorder(config)              # None when the run records nothing
    if recorder is not None:
        env = recorder.wrap(env)                 # a gymnasium env, or a gymnasium vector env
    ...train or evaluate...
    if recorder is not None:
        recorder.finish(emitter)                 # dataset.hdf5 + dataset.json, a dataset_saved event

Turned on per run by the run config's ``record`` ({"episodes": N} or {"steps": N}).
The file is what Tianshou 2.0.1's ``ReplayBuffer.save_hdf5`` writes (the layout of
``tianshou.data.utils.converter.to_hdf5``: the buffer's attributes as HDF5
attributes, ``_meta`` a group marked "Batch" holding obs / act / rew / terminated /
truncated / done / obs_next), written with h5py alone, so any worker records
without Tianshou; ``ReplayBuffer.load_hdf5(path)`` reads it back
(tests/workers/sdk/test_dataset.py checks that with the installed Tianshou).

A dataset holds whole episodes only, each stored contiguously (Tianshou's
n-step returns follow the buffer's order): a vector env's episodes are kept
apart until they end. Recording stops after ``episodes`` finished episodes, or
once the finished episodes hold at least ``steps`` transitions; an episode still
running when the run ends is not saved. ``finish`` saves at the run's end; a run
that must lose nothing to a cancel (a human play) calls ``save_new_episodes``
after each step, which writes the dataset again whenever an episode has finished
into it (each file replaced whole). ``dataset.json`` beside the file says
what it holds (env, spaces, transitions, episodes), read by the daemon when an
offline run names the dataset by run.
"""
from __future__ import annotations

import json
import os
from typing import Any

import gymnasium as gym
import h5py
import numpy as np
from typing_extensions import override

from workers.sdk.rundir import DATASET_FILE, DATASET_META


class TransitionStore:
    """Whole episodes of transitions, in the order they finished."""

    def __init__(self, episodes: int | None = None, steps: int | None = None):
        self.max_episodes = episodes
        self.max_steps = steps
        self.columns: dict[str, list[Any]] = {k: [] for k in ("obs", "act", "rew", "terminated", "truncated",
                                                             "obs_next")}
        self.episodes = 0
        self.returns: list[float] = []

    @property
    def transitions(self) -> int:
        """Transitions held so far."""
        return len(self.columns["rew"])

    @property
    def full(self) -> bool:
        """Whether the recording asked for is complete (its episodes, or its steps)."""
        if self.max_episodes is not None:
            return self.episodes >= self.max_episodes
        return self.max_steps is not None and self.transitions >= self.max_steps

    def add_episode(self, steps: list[tuple[Any, Any, float, bool, bool, Any]]) -> None:
        """Keep an episode's (obs, act, rew, terminated, truncated, obs_next) steps, unless the store is full."""
        if self.full or not steps:
            return
        for obs, act, rew, terminated, truncated, obs_next in steps:
            for key, value in zip(self.columns, (obs, act, rew, terminated, truncated, obs_next)):
                self.columns[key].append(value)
        self.episodes += 1
        self.returns.append(float(sum(step[2] for step in steps)))

    def save(self, path: str) -> None:
        """Write the transitions as Tianshou's ReplayBuffer.save_hdf5 would (size = transitions)."""
        size = self.transitions
        data = {key: _stack(values) for key, values in self.columns.items()}
        if size:
            data["rew"] = data["rew"].astype(np.float64)
            data["terminated"] = data["terminated"].astype(bool)
            data["truncated"] = data["truncated"].astype(bool)
            data["done"] = np.logical_or(data["terminated"], data["truncated"])
        with h5py.File(path, "w") as f:
            # the buffer's own attributes (ReplayBuffer.__init__ / reset), for a full buffer of ``size``
            f.attrs.update({"maxsize": size, "stack_num": 1, "_save_obs_next": True,
                            "_save_only_last_obs": False, "_sample_avail": False,
                            "_insertion_idx": 0, "_size": size, "_ep_start_idx": 0,
                            "_ep_return": 0.0, "_ep_len": 0})
            options = f.create_group("options")
            options.attrs.update({"stack_num": 1, "ignore_obs_next": False, "save_only_last_obs": False,
                                  "sample_avail": False})
            _ndarray(f, "_indices", np.arange(size))
            _ndarray(f, "last_index", np.array([max(size - 1, 0)]))
            meta = f.create_group("_meta")
            if size:
                meta.attrs["__data_type__"] = "Batch"
                for key in ("obs", "act", "rew", "terminated", "truncated", "done", "obs_next"):
                    _write(meta, key, data[key])
                meta.create_group("info")


def _stack(values: list[Any]) -> Any:
    """A column as one array; dict observations as a dict of arrays."""
    if values and isinstance(values[0], dict):
        return {key: _stack([v[key] for v in values]) for key in values[0]}
    return np.asarray(np.stack([np.asarray(v) for v in values])) if values else np.zeros(0)


def _ndarray(group: Any, key: str, array: Any) -> None:
    group.create_dataset(key, data=array)
    group[key].attrs["__data_type__"] = "ndarray"


def _write(group: Any, key: str, value: Any) -> None:
    if isinstance(value, dict):  # a Dict observation space: a Batch of arrays
        sub = group.create_group(key)
        sub.attrs["__data_type__"] = "Batch"
        for name, array in value.items():
            _write(sub, name, array)
    else:
        _ndarray(group, key, value)


class Recorder:
    """Collects an env's transitions into a TransitionStore; ``finish`` saves them."""

    def __init__(self, record: dict[str, Any], env_id: str, directory: str = "."):
        self.store = TransitionStore(episodes=record.get("episodes"), steps=record.get("steps"))
        self.env_id = env_id
        self.directory = directory
        self.spaces: dict[str, str] = {}
        self.finished = False
        self.saved_episodes = 0       # the store's episodes at the last save

    def wrap(self, env: Any) -> Any:
        """The env, recording: a gymnasium vector env or a single env."""
        self.spaces = {"observation_space": str(env.observation_space), "action_space": str(env.action_space)}
        if isinstance(env, gym.vector.VectorEnv):
            self.spaces = {"observation_space": str(env.single_observation_space),
                           "action_space": str(env.single_action_space)}
            return RecordVectorEnv(env, self.store)
        return RecordEnv(env, self.store)

    def meta(self) -> dict[str, Any]:
        """What the dataset holds (env, transitions, episodes, mean return, spaces): the JSON beside the file."""
        return {"env": self.env_id, "transitions": self.store.transitions, "episodes": self.store.episodes,
                "file": DATASET_FILE, "format": "tianshou.data.ReplayBuffer (HDF5)",
                "mean_return": (sum(self.store.returns) / len(self.store.returns)) if self.store.returns else None,
                **self.spaces}

    def save(self, emitter: Any = None) -> dict[str, Any]:
        """Write dataset.hdf5 and dataset.json as the store holds them now; emit dataset_saved.
        Each file is written beside its place and renamed over it, so a run cancelled while it
        saves, or a reader of a run still recording, finds the last whole dataset."""
        path = os.path.join(self.directory, DATASET_FILE)
        meta = self.meta()
        _replace_whole(path, self.store.save)
        _replace_whole(os.path.join(self.directory, DATASET_META), lambda tmp: _write_json(tmp, meta))
        self.saved_episodes = self.store.episodes
        if emitter is not None:
            emitter.dataset_saved(os.path.abspath(path), self.store.transitions, self.store.episodes)
        return meta

    def save_new_episodes(self, emitter: Any = None) -> bool:
        """``save`` when an episode has finished into the store since the last save (a human
        play keeps every episode as it ends: nothing played is lost to a cancel)."""
        if self.store.episodes == self.saved_episodes:
            return False
        self.save(emitter)
        return True

    def finish(self, emitter: Any = None) -> dict[str, Any]:
        """Write dataset.hdf5 and dataset.json; emit dataset_saved. Once; returns the meta."""
        if self.finished:
            return self.meta()
        self.finished = True
        return self.save(emitter)


def _write_json(path: str, value: Any) -> None:
    with open(path, "w") as f:
        json.dump(value, f, indent=1)


def _replace_whole(path: str, write: Any) -> None:
    """``write(temporary path)``, then the file renamed to ``path``; the temporary one removed
    whatever stops the write (a cancel's exception too)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


class RecordEnv(gym.Wrapper):
    """A single gymnasium env whose finished episodes go into ``store``."""

    def __init__(self, env, store: TransitionStore):
        super().__init__(env)
        self.store = store
        self._episode: list[tuple] = []
        self._obs = None

    @override
    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._episode, self._obs = [], obs
        return obs, info

    @override
    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._obs is not None and not self.store.full:
            self._episode.append((_copy(self._obs), _copy(action), float(reward), bool(terminated),
                                  bool(truncated), _copy(obs)))
            if terminated or truncated:
                self.store.add_episode(self._episode)
                self._episode = []
        self._obs = obs
        return obs, reward, terminated, truncated, info


class VectorEpisodes:
    """A vector env's transitions into ``store``, each sub-env's episode kept apart until
    it ends: what RecordVectorEnv does, for a worker that cannot wrap the env (CleanRL's
    scripts hold their own; its patched ``step``/``reset`` call this).

    Both autoreset modes of gymnasium 1.x: NEXT_STEP (the default: the step after
    an episode's end is a reset, its action ignored, so it is not a transition) and
    SAME_STEP (the final observation is in ``info["final_obs"]``). XuanCe's vector
    envs return the final observation itself and the next episode's first in
    ``info["reset_obs"]``: ``step(..., reset_obs={index: obs})`` says so."""

    def __init__(self, store: TransitionStore, num_envs: int, same_step: bool):
        self.store = store
        self.num_envs = num_envs
        self.same_step = same_step
        self._episodes: list[list[tuple]] = [[] for _ in range(num_envs)]
        self._obs = None
        self._reset_obs: dict[int, Any] = {}
        self._was_done = [False] * num_envs

    def reset(self, obs: Any) -> None:
        """Start every sub-env's episode from the vector env's first observations."""
        self._episodes = [[] for _ in range(self.num_envs)]
        self._was_done = [False] * self.num_envs
        self._obs = obs
        self._reset_obs = {}

    def _current(self, i: int) -> Any:
        return self._reset_obs[i] if i in self._reset_obs else _index(self._obs, i)

    def step(self, actions: Any, obs: Any, rewards: Any, terminateds: Any, truncateds: Any, infos: dict,
             reset_obs: dict[int, Any] | None = None) -> None:
        """One step of every sub-env, its transitions kept per sub-env; an episode that ends goes to the store."""
        if self._obs is not None and not self.store.full:
            for i in range(self.num_envs):
                if self._was_done[i] and not self.same_step:
                    continue  # the reset step of NEXT_STEP autoreset: no transition
                done = bool(terminateds[i] or truncateds[i])
                next_obs = _index(infos["final_obs"], i) if done and self.same_step else _index(obs, i)
                self._episodes[i].append((self._current(i), _index(actions, i), float(rewards[i]),
                                          bool(terminateds[i]), bool(truncateds[i]), next_obs))
                if done:
                    self.store.add_episode(self._episodes[i])
                    self._episodes[i] = []
        self._was_done = [bool(t or u) for t, u in zip(terminateds, truncateds)]
        self._obs = obs
        self._reset_obs = dict(reset_obs or {})


def same_step_autoreset(env: Any) -> bool:
    """Whether the vector env resets a finished sub-env within the same step (gymnasium's SAME_STEP autoreset)."""
    mode = env.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    return getattr(mode, "value", mode) == "SameStep"


class RecordVectorEnv(gym.vector.VectorWrapper):
    """A gymnasium vector env whose sub-envs' finished episodes go into ``store``."""

    def __init__(self, env, store: TransitionStore):
        super().__init__(env)
        self.episodes = VectorEpisodes(store, env.num_envs, same_step_autoreset(env))

    @override
    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.episodes.reset(obs)
        return obs, info

    @override
    def step(self, actions):
        obs, rewards, terminateds, truncateds, infos = self.env.step(actions)
        self.episodes.step(actions, obs, rewards, terminateds, truncateds, infos)
        return obs, rewards, terminateds, truncateds, infos


def _index(batch: Any, i: int) -> Any:
    """The i-th sub-env's part of a vector env's batch (dict observations per key)."""
    if isinstance(batch, dict):
        return {key: _index(value, i) for key, value in batch.items()}
    return np.array(batch[i])  # a copy: a vector env may reuse its arrays


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(v) for key, v in value.items()}
    return np.array(value)


def env_recorder(config: dict[str, Any], directory: str = ".") -> Recorder | None:
    """The run's Recorder, or None when its config records nothing."""
    record = config.get("record")
    if not record:
        return None
    return Recorder(record, config["env"], directory)
