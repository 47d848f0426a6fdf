"""The XuanCe worker's resume state: what a training run's checkpoint keeps beside XuanCe's model
so that ``mosaic continue`` goes on as if the run was never stopped (learner state, step and episode
counters, exploration schedules, the replay buffer, RNG states, the curriculum position).

torch and xuance are imported inside functions: ``run_setup.prepare_process`` runs first.
"""
from __future__ import annotations

import os
from typing import Any

from workers.sdk.config import ConfigError
from workers.sdk.rundir import checkpoint_dir

# beside XuanCe's model in a training run's checkpoint: what XuanCe's save_model leaves out (schedulers,
# iteration and step counters, exploration schedules, the replay buffer, RNG states, the curriculum phase)
RESUME_STATE = "resume_state.pt"
# a replay buffer larger than this is not saved: the continued run refills it before it learns again
BUFFER_LIMIT_BYTES = 2 << 30


# -- resume state (stop and continue) ---------------------------------------------
# Attributes of XuanCe's agents and learners that are not state to carry over: the run's
# config and what is built from it, the environments, loggers, and the networks and
# buffer (saved on their own). ``returns`` is the discounted return of the episode in
# progress, which the stop cuts.
SKIPPED_AGENT_ATTRS = frozenset({"config", "train_envs", "policy", "learner", "memory", "writer", "callback",
                                 "returns", "meta_data", "args"})
SKIPPED_LEARNER_ATTRS = frozenset({"config", "policy", "callback"})
VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def is_on_policy(agent) -> bool:
    from xuance.torch.agents.core import OnPolicyAgent, OnPolicyMARLAgents
    return isinstance(agent, (OnPolicyAgent, OnPolicyMARLAgents))


def _plain_state(value) -> bool:
    """A value to save as it is: a counter, a schedule's position (epsilon, noise scale, PER beta),
    a per-env array (episode counters) or a running mean/std of observations and returns."""
    import numpy as np
    import torch
    from xuance.common import RunningMeanStd
    if isinstance(value, (bool, int, float, np.ndarray, np.generic, torch.Tensor, RunningMeanStd)):
        return True
    return type(value).__name__ == "TensorRunningMeanStd"


def _detached(value):
    """A tensor without its graph (SAC's alpha is computed from log_alpha), anything else as it is."""
    import torch
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _stateful(value) -> bool:
    """Optimizers, LR schedulers and modules outside the policy (ValueNorm), alone or in a dict or list."""
    import torch
    if isinstance(value, dict) and value:
        return all(_stateful(v) for v in value.values())
    if isinstance(value, list) and value:
        return all(_stateful(v) for v in value)
    return isinstance(value, (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, torch.nn.Module))


def _state_dicts(value):
    if isinstance(value, dict):
        return {k: _state_dicts(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_state_dicts(v) for v in value]
    return value.state_dict()


def _load_state_dicts(target, state) -> None:
    if isinstance(target, dict):
        for k, v in target.items():
            _load_state_dicts(v, state[k])
    elif isinstance(target, list):
        for v, s in zip(target, state):
            _load_state_dicts(v, s)
    else:
        target.load_state_dict(state)


def _nbytes(value, depth: int = 0) -> int:
    """The bytes of the arrays in a buffer's attributes (dicts of arrays, per agent for MARL)."""
    import numpy as np
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, dict) and depth < 4:
        return sum(_nbytes(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)) and depth < 4:
        return sum(_nbytes(v, depth + 1) for v in value)
    return 0


def rng_state() -> dict[str, Any]:
    import random

    import numpy as np
    import torch
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import random

    import numpy as np
    import torch
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"][:torch.cuda.device_count()])


def save_resume_state(path: str, agent, phase_index: int) -> None:
    """What the agent needs, beyond XuanCe's model file, to go on as if never stopped."""
    import torch
    learner = agent.learner
    memory = None
    buffer_bytes = 0
    # an on-policy rollout buffer is empty at a safe point: nothing of it to keep
    if not is_on_policy(agent) and agent.memory is not None:
        buffer_bytes = _nbytes(vars(agent.memory))
        if buffer_bytes <= BUFFER_LIMIT_BYTES:
            # its arrays, pointers and sizes; views of dict keys (its agent keys) are built again with it
            memory = {k: v for k, v in vars(agent.memory).items() if not isinstance(v, VIEWS)}
    state = {
        "step": int(agent.current_step),
        "phase_index": phase_index,
        "policy": agent.policy.state_dict(),
        "agent": {k: _detached(v) for k, v in vars(agent).items() if k not in SKIPPED_AGENT_ATTRS and _plain_state(v)},
        "learner": {k: _detached(v) for k, v in vars(learner).items()
                    if k not in SKIPPED_LEARNER_ATTRS and _plain_state(v)},
        "learner_modules": {k: _state_dicts(v) for k, v in vars(learner).items()
                            if k not in SKIPPED_LEARNER_ATTRS and _stateful(v)},
        "memory": memory,
        "buffer_bytes": buffer_bytes,
        "rng": rng_state(),
    }
    torch.save(state, path)


def load_resume_state(source: str) -> dict[str, Any]:
    """The resume state of the checkpoint ``source`` (its folder, or its model file)."""
    import torch
    path = os.path.join(checkpoint_dir(source), RESUME_STATE)
    if not os.path.isfile(path):
        raise ConfigError("continue_from", f"{source} is not a resume checkpoint (no {RESUME_STATE}): "
                                           f"it was saved before the XuanCe worker could stop and continue")
    return torch.load(path, map_location="cpu", weights_only=False)


def restore_resume_state(agent, state: dict[str, Any]) -> None:
    """Put a resume state into a freshly built agent: networks, optimizers, schedulers, counters,
    the replay buffer, then the RNG states last (building the agent seeded them)."""
    import torch
    agent.policy.load_state_dict(state["policy"])
    for target, values in ((agent, state["agent"]), (agent.learner, state["learner"])):
        for key, value in values.items():
            current = getattr(target, key, None)
            if isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor) and current.shape == value.shape:
                current.data.copy_(value)   # in place: an optimizer holds SAC's log_alpha by identity
            elif hasattr(current, "__dict__") and hasattr(value, "__dict__") and not isinstance(value, torch.Tensor):
                current.__dict__.update(value.__dict__)   # a running mean/std: keep the object others hold
            else:
                setattr(target, key, value)
    for key, value in state["learner_modules"].items():
        _load_state_dicts(getattr(agent.learner, key), value)
    if state["memory"] is not None:
        agent.memory.__dict__.update(state["memory"])
    elif not is_on_policy(agent) and hasattr(agent, "start_training"):
        # the buffer was too large to keep: learn again once it holds as much as at the run's start
        agent.start_training = int(agent.current_step) + int(agent.start_training)
    set_rng_state(state["rng"])


def resume_position(train_steps: list[int], step: int, n_envs: int) -> tuple[int, int]:
    """Where a run continued at ``step`` is: (the curriculum phase, its training steps left)."""
    done = step // n_envs
    for index, steps in enumerate(train_steps):
        if done < steps:
            return index, steps - done
        done -= steps
    return len(train_steps), 0   # nothing left to train
