"""The XuanCe worker's curriculum: ``agent.train`` once per phase of ``params.curriculum_schedule``,
the agent's environments replaced between phases (networks, optimizer, LR scheduler and step
counter carry on). Every phase must have phase 0's observation and action spaces: a probe of each
phase's env, built as XuanCe builds it, refuses the schedule before training, naming the phase.

xuance is imported inside functions: ``run_setup.prepare_process`` runs first.
"""
from __future__ import annotations

import copy
from argparse import Namespace
from typing import Any

from workers.sdk.config import ConfigError
from workers.xuance_worker import catalog, mpe_alias


def spaces_of(envs, multi_agent: bool) -> dict[str, Any]:
    spaces = {"observation": envs.observation_space, "action": envs.action_space}
    if multi_agent:
        spaces["agents"] = list(envs.agents)
    return spaces


def describe_spaces(spaces: dict[str, Any]) -> str:
    return "; ".join(f"{name}: {value}" for name, value in spaces.items())


def probe_spaces(args: Namespace, env_id: str, env_kwargs: dict | None, multi_agent: bool) -> dict[str, Any]:
    """The spaces of one environment built as XuanCe would build it (one copy, in process)."""
    from xuance.environment import make_envs
    probe = copy.copy(args)
    probe.env_id = env_id
    probe.parallels = 1
    probe.vectorize = "DummyVecMultiAgentEnv" if multi_agent else "DummyVecEnv"
    mpe_alias.set_env_kwargs(env_kwargs)
    envs = make_envs(probe)
    try:
        return spaces_of(envs, multi_agent)
    finally:
        envs.close()


def curriculum_phases(config: dict[str, Any], env_id: str, running_steps: int) -> list[dict[str, Any]]:
    params = config["params"]
    default_kwargs = params.get("env_kwargs") or {}
    schedule = params.get("curriculum_schedule")
    if not schedule:
        return [{"env_id": env_id, "steps": running_steps, "env_kwargs": default_kwargs}]
    phases = []
    for phase in schedule:
        _, phase_env = catalog.resolve_env(phase["env_id"])
        phases.append({"env_id": phase_env, "steps": phase["steps"],
                       "env_kwargs": phase.get("env_kwargs", default_kwargs)})
    return phases


def check_curriculum(args: Namespace, phases: list[dict[str, Any]], multi_agent: bool) -> None:
    """Every phase must have phase 0's spaces: refuse before training, naming the phase."""
    first = probe_spaces(args, phases[0]["env_id"], phases[0]["env_kwargs"], multi_agent)
    for index, phase in enumerate(phases[1:], start=1):
        spaces = probe_spaces(args, phase["env_id"], phase["env_kwargs"], multi_agent)
        if spaces != first:
            raise ConfigError(f"params.curriculum_schedule[{index}]",
                              f"{phase['env_id']} has {describe_spaces(spaces)}; phase 0 "
                              f"({phases[0]['env_id']}) has {describe_spaces(first)}: all phases must share "
                              f"observation and action spaces")


def switch_environment(runner, agent, phase: dict[str, Any]) -> None:
    """Give the agent the next phase's environments; the rest of it carries on."""
    from xuance.environment import make_envs
    from xuance.torch.agents.core import OnPolicyAgent, OnPolicyMARLAgents
    config = copy.copy(agent.config)
    config.env_id = phase["env_id"]
    mpe_alias.set_env_kwargs(phase["env_kwargs"])
    envs = make_envs(config)
    envs.reset()
    old = agent.train_envs
    agent.train_envs = envs
    runner.envs = envs
    agent.config.env_id = phase["env_id"]
    if isinstance(agent, (OnPolicyAgent, OnPolicyMARLAgents)):
        # a half-filled rollout of the last environment would be finished with the new one's values
        agent.memory.clear()
    if hasattr(agent, "returns"):  # single-agent: the discounted returns that feed reward normalisation
        agent.returns[...] = 0.0
    old.close()
