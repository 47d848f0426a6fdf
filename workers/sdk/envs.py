"""Gymnasium's single-agent environments, as data every worker shares.

Which family an env id belongs to (so a worker can say which package it
needs), whether its actions are discrete or continuous (so a descriptor can
refuse DQN on Pendulum at submit), and the "did you mean" for an id a user
mistyped. Read by descriptors in the daemon: no gymnasium import here.
"""
from __future__ import annotations

from typing import Iterable

from workers.sdk.config import ConfigError, did_you_mean

# env id -> family (the gymnasium extra that brings it), action kind and, for
# the small tasks, observation / action spaces (XuanCe checks a curriculum with them)
GYMNASIUM_ENVS: dict[str, dict[str, str]] = {
    "CartPole-v0": {"family": "classic_control", "actions": "discrete", "spaces": "Box(4,) / Discrete(2)"},
    "CartPole-v1": {"family": "classic_control", "actions": "discrete", "spaces": "Box(4,) / Discrete(2)"},
    "Acrobot-v1": {"family": "classic_control", "actions": "discrete", "spaces": "Box(6,) / Discrete(3)"},
    "MountainCar-v0": {"family": "classic_control", "actions": "discrete", "spaces": "Box(2,) / Discrete(3)"},
    "Pendulum-v1": {"family": "classic_control", "actions": "continuous", "spaces": "Box(3,) / Box(1,)"},
    "MountainCarContinuous-v0": {"family": "classic_control", "actions": "continuous",
                                 "spaces": "Box(2,) / Box(1,)"},
    "LunarLander-v3": {"family": "box2d", "actions": "discrete"},
    "LunarLanderContinuous-v3": {"family": "box2d", "actions": "continuous"},
    "BipedalWalker-v3": {"family": "box2d", "actions": "continuous"},
    "BipedalWalkerHardcore-v3": {"family": "box2d", "actions": "continuous"},
}
for _name in ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "HumanoidStandup", "InvertedPendulum",
              "InvertedDoublePendulum", "Reacher", "Swimmer", "Pusher"):
    for _version in ("v4", "v5"):
        GYMNASIUM_ENVS[f"{_name}-{_version}"] = {"family": "mujoco", "actions": "continuous"}


def gymnasium_envs(ids: Iterable[str] | None = None, family: str | None = None,
                   fields: tuple[str, ...] = ("family", "actions")) -> dict[str, dict[str, str]]:
    """The envs ``ids`` (or those of ``family``, or all), each with only ``fields``:
    a worker's own table is this plus the facts only it needs."""
    chosen = list(ids) if ids is not None else [e for e, i in GYMNASIUM_ENVS.items() if family in (None, i["family"])]
    return {env: {k: GYMNASIUM_ENVS[env][k] for k in fields if k in GYMNASIUM_ENVS[env]} for env in chosen}


def unknown_env(env: str, known: list[str], worker: str) -> ConfigError:
    """The error for an env id a worker does not know: the closest known ids, else all of them."""
    hint = did_you_mean(env, known) or f"; choose from {', '.join(known) or 'nothing: no env family is installed'}"
    return ConfigError("env", f"unknown environment {env!r} for worker {worker!r}{hint}")


def missing_family(env: str, family: str, needs: Iterable[str]) -> ConfigError:
    """The error for an env whose family's distributions are not all installed."""
    return ConfigError("env", f"{env} is a {family} environment, which needs {', '.join(needs)}: not all installed")
