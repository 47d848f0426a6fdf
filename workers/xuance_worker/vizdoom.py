"""ViZDoom as a XuanCe single-agent environment (``env_name: ViZDoom``).

XuanCe 1.4.4 has no ViZDoom family. Its image representations (``Basic_CNN``
for the DQN family, ``AC_CNN_Atari`` for the actor-critics) take one Box image,
channels last, 0..255 (they divide by 255 and permute to channels first). The
shared wrapper (workers/sdk/vizdoom.py) gives exactly that: 84x84x4 stacked grey
screens. This module adds an env class to XuanCe's ``REGISTRY_ENV`` right after
XuanCe imports it (a post-import hook, as workers/xuance_worker/multigrid.py does
for its multi-agent registry), in the worker and, through the worker's
sitecustomize, in ``SubprocVecEnv``'s processes. Runs start from the algorithm's
``atari.yaml`` (the CNN settings of XuanCe's Atari runs) with this env name and
gymnasium's vectorizers (``DummyVecEnv``, ``SubprocVecEnv``).
"""
from __future__ import annotations

ENV_NAME = "ViZDoom"
# atari.yaml keys that configure XuanCe's own Atari wrapper: the ViZDoom one sets its own
ATARI_ONLY_KEYS = ("obs_type", "img_size", "num_stack", "frame_skip", "noop_max")


def env_class():
    import gymnasium as gym

    from workers.sdk import vizdoom

    class ViZDoomEnv(gym.Wrapper):
        """What ``REGISTRY_ENV[name](config)`` makes: the wrapped ViZDoom env of ``config.env_id``,
        seeded, with the ``max_episode_steps`` XuanCe's wrapper reads (the scenario's timeout in
        actions)."""

        def __init__(self, config):
            super().__init__(vizdoom.make(config.env_id, render_mode=config.render_mode, channels_first=False))
            self.env.action_space.seed(seed=config.env_seed)
            self.env.reset(seed=config.env_seed)
            timeout = self.env.unwrapped.game.get_episode_timeout()
            self.max_episode_steps = timeout // vizdoom.FRAME_SKIP if timeout else 100_000

        def render(self, *args):
            return self.env.render()

    return ViZDoomEnv


def _register(module) -> None:
    module.REGISTRY_ENV[ENV_NAME] = env_class()


def install() -> None:
    """Add ``ViZDoom`` to XuanCe's single-agent registry when (or if already) XuanCe loads it."""
    from workers.sdk.postimport import when_imported

    when_imported("xuance.environment.single_agent_env", _register)
