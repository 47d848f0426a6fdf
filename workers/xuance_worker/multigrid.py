"""MOSAIC MultiGrid as a XuanCe multi-agent environment (``env_name: multigrid``).

XuanCe 1.4.4 has no MultiGrid family. ``install()`` adds one to XuanCe's
``REGISTRY_MULTI_AGENT_ENV`` right after XuanCe imports that registry (a
post-import hook: nothing is imported early). The worker calls it in its own
process and ``sitedir/sitecustomize.py`` in every process XuanCe spawns for
``SubprocVecMultiAgentEnv``, which rebuild the environments from the registry.

The adapter is a ``RawMultiAgentEnv`` over workers/sdk/multigrid.py's view:
string agent ids by team (green_0, blue_0...), flat observations, the padded
grid as global state, and the teams as XuanCe's agent groups.
"""
from __future__ import annotations

ENV_NAME = "multigrid"


def adapter_class():
    import numpy as np
    from xuance.environment.utils.base import RawMultiAgentEnv

    from workers.sdk.multigrid import MultiGridView, make
    from workers.xuance_worker.mpe_alias import env_kwargs_from_environ  # the run's env_kwargs, as MPE's

    class MultiGridEnv(RawMultiAgentEnv):
        def __init__(self, config):
            super().__init__()
            kwargs = env_kwargs_from_environ()
            self.view = MultiGridView(make(config.env_id, render_mode=config.render_mode, **kwargs))
            self.env = self.view.env
            self.seed = config.env_seed
            self.agents = list(self.view.agents)
            self.num_agents = len(self.agents)
            self.agent_groups = [list(members) for members in self.view.teams.values()]
            self.observation_space = {k: self.view.observation_space() for k in self.agents}
            self.action_space = {k: self.view.action_space() for k in self.agents}
            self.state_space = self.view.state_space()
            self.max_episode_steps = self.view.max_steps
            self._episode_step = 0
            self._seeded = False

        def reset(self):
            # seeded once: later resets continue the env's own random stream
            seed = None if self._seeded else self.seed
            self._seeded = True
            observations, info = self.view.reset(seed=seed)
            self._episode_step = 0
            return observations, info

        def step(self, actions):
            observations, rewards, terminated, truncated, info = self.view.step(actions)
            self._episode_step += 1
            # XuanCe's vector envs take one truncation flag per env
            cut = any(truncated.values()) or self._episode_step >= self.max_episode_steps
            return observations, rewards, terminated, cut, {}

        def state(self):
            return self.view.state()

        def avail_actions(self):
            return {k: np.ones(self.action_space[k].n, np.bool_) for k in self.agents}

        def render(self, *args):
            return self.view.render()

        def close(self):
            self.view.close()

    return MultiGridEnv


def _register(module) -> None:
    module.REGISTRY_MULTI_AGENT_ENV[ENV_NAME] = adapter_class()


def install() -> None:
    """Add ``multigrid`` to XuanCe's multi-agent registry when (or if already) XuanCe loads it."""
    from workers.sdk.postimport import when_imported

    when_imported("xuance.environment.multi_agent_env", _register)
