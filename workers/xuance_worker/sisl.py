"""PettingZoo's SISL games as a XuanCe multi-agent family (``env_name: sisl``).

XuanCe 1.4.4 wraps PettingZoo in one class, ``MPE_Env``, registered for ``mpe``
only: it makes ``pettingzoo.<env_name>.<env_id>.parallel_env(continuous_actions=...,
render_mode=...)``. The SISL games take no ``continuous_actions`` (pursuit's actions
are discrete, multiwalker's continuous) and pursuit observes a 7x7x3 grid, which
XuanCe's MLP representations cannot take. ``install()`` registers ``sisl`` in
``REGISTRY_MULTI_AGENT_ENV`` (a post-import hook, as multigrid.py does) with a
subclass of ``MPE_Env`` that keeps XuanCe's reset, step (its episode cut at
``max_cycles``, its clipping of continuous actions), render and masks, and changes:

- the env is made with the run's ``env_kwargs`` (``MOSAIC_XUANCE_ENV_KWARGS``, as MPE's);
  multiwalker keeps a fallen walker (``remove_on_fall=False``): XuanCe's vector envs
  need the same agents at every step, and ``terminate_on_fall`` ends the episode anyway;
- observations are flat (pursuit's grid flattened), and the global state is the
  agents' observations side by side (the SISL games have no ``state()``).

The worker calls it in its own process and ``sitedir/sitecustomize.py`` in every
process XuanCe spawns for ``SubprocVecMultiAgentEnv``.
"""
from __future__ import annotations

import importlib

ENV_NAME = "sisl"
# what a game needs unlike its PettingZoo default, so XuanCe's fixed-agent vector envs can run it
DEFAULT_KWARGS = {"multiwalker_v9": {"remove_on_fall": False}}


def adapter_class():
    import numpy as np
    from gymnasium import spaces
    from xuance.environment.multi_agent_env.mpe import MPE_Env

    from workers.xuance_worker.mpe_alias import env_kwargs_from_environ  # the run's env_kwargs, as MPE's

    def flat_box(space):
        return spaces.Box(np.asarray(space.low, np.float32).reshape(-1),
                          np.asarray(space.high, np.float32).reshape(-1), dtype=np.float32)

    class SislEnv(MPE_Env):
        def __init__(self, config):  # MPE_Env.__init__ without its continuous_actions argument
            super(MPE_Env, self).__init__()  # RawMultiAgentEnv's: one group of agents, ...
            kwargs = {**DEFAULT_KWARGS.get(config.env_id, {}), **env_kwargs_from_environ()}
            game = importlib.import_module(f"pettingzoo.sisl.{config.env_id}")
            self.env = game.parallel_env(render_mode=config.render_mode, **kwargs)
            self.env.reset(seed=config.env_seed)
            self.render_mode = config.render_mode
            self.scenario_name = f"sisl.{config.env_id}"
            self.metadata = self.env.metadata
            self.agents = list(self.env.agents)
            self.num_agents = len(self.agents)
            self.observation_space = {k: flat_box(self.env.observation_space(k)) for k in self.agents}
            self.action_space = {k: self.env.action_space(k) for k in self.agents}
            self.continuous_actions = isinstance(self.action_space[self.agents[0]], spaces.Box)
            boxes = [self.observation_space[k] for k in self.agents]
            self.state_space = spaces.Box(np.concatenate([b.low for b in boxes]),
                                          np.concatenate([b.high for b in boxes]), dtype=np.float32)
            self.max_episode_steps = int(self.env.unwrapped.env.max_cycles)
            self.individual_episode_reward = {k: 0.0 for k in self.agents}
            self._episode_step = 0
            self._last = {k: np.zeros(b.shape, np.float32) for k, b in zip(self.agents, boxes)}

        def _flat(self, observations):
            self._last = {k: np.asarray(observations[k], np.float32).reshape(-1) for k in self.agents}
            return dict(self._last)

        def reset(self):
            observations, info = super().reset()
            return self._flat(observations), info

        def step(self, actions):
            observations, rewards, terminated, truncated, info = super().step(actions)
            return self._flat(observations), rewards, terminated, truncated, info

        def state(self):
            return np.concatenate([self._last[k] for k in self.agents])

    return SislEnv


def _register(module) -> None:
    module.REGISTRY_MULTI_AGENT_ENV[ENV_NAME] = adapter_class()


def install() -> None:
    """Add ``sisl`` to XuanCe's multi-agent registry when (or if already) XuanCe loads it."""
    from workers.sdk.postimport import when_imported

    when_imported("xuance.environment.multi_agent_env", _register)
