"""RLModules mosaic adds to RLlib's defaults: action masking and a centralised critic.

Action masking (turn-based Classic games). The env hands each agent
``{"observation": vector, "action_mask": vector}`` (envs.TurnBasedEnv). The
mixin gives the algorithm's default actor-critic module (PPO's, APPO's,
IMPALA's) only the observation, and pushes the logits of illegal actions to
-inf, for exploration, inference, training and APPO's target network alike,
so an illegal move is never sampled and its probability never learnt.

Centralised critic (the ``shared_value`` policy configuration, MAPPO-style).
Every agent has its own actor (``CentralCriticActor``, one module per agent);
one critic module (``SharedCritic``, module id ``shared_critic``) is shared by
all and sees the global state: envs.ParallelEnv appends the concatenation of
every agent's observation to each agent's observation. ``SharedCriticMultiRLModule``
hands each actor a reference to the critic that torch does not register as a
submodule, so the critic's parameters belong to the critic module only: it has
one optimizer, stepped once per update with the value-loss gradients of all
agents, and the actors' optimizers hold their own parameters only.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.utils.torch_utils import FLOAT_MIN
from torch import nn

CRITIC_ID = "shared_critic"
MASK_KEY = "action_mask"
OBS_KEY = "observation"

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "swish": nn.SiLU, "linear": nn.Identity}


# -- action masking ---------------------------------------------------------------------
class ActionMaskMixin:
    """Put before an actor-critic RLModule class: ``type(name, (ActionMaskMixin, Base), {})``."""

    def __init__(self, *args, observation_space=None, **kwargs):
        # The base builds its networks (through its catalog) for the observation alone.
        self._space_with_mask = observation_space
        super().__init__(*args, observation_space=observation_space[OBS_KEY], **kwargs)

    def setup(self):
        super().setup()
        # What connectors and checks see: the env's space, mask included.
        self.observation_space = self._space_with_mask

    @staticmethod
    def _split(batch: dict[str, Any]) -> tuple[dict[str, Any], Any]:
        obs = batch[Columns.OBS]
        inner = dict(batch)  # a shallow copy: the caller's batch keeps its dict observation
        inner[Columns.OBS] = obs[OBS_KEY]
        return inner, obs[MASK_KEY]

    @staticmethod
    def _mask(out: dict[str, Any], mask, key: str = Columns.ACTION_DIST_INPUTS) -> dict[str, Any]:
        out[key] = out[key] + torch.clamp(torch.log(mask), min=FLOAT_MIN)
        return out

    def _forward(self, batch, **kwargs):
        inner, mask = self._split(batch)
        return self._mask(super()._forward(inner, **kwargs), mask)

    def _forward_train(self, batch, **kwargs):
        inner, mask = self._split(batch)
        return self._mask(super()._forward_train(inner, **kwargs), mask)

    def compute_values(self, batch, embeddings=None):
        if embeddings is None:
            batch, _ = self._split(batch)
        return super().compute_values(batch, embeddings)

    def forward_target(self, batch, **kwargs):  # APPO's target network
        from ray.rllib.core.rl_module.apis.target_network_api import TARGET_NETWORK_ACTION_DIST_INPUTS
        inner, mask = self._split(batch)
        return self._mask(super().forward_target(inner, **kwargs), mask, TARGET_NETWORK_ACTION_DIST_INPUTS)


_masked_classes: dict[type, type] = {}


def masked(base: type) -> type:
    """The masking variant of an RLModule class (one class per base, so checkpoints name it stably)."""
    if base not in _masked_classes:
        cls = type(f"Masked{base.__name__}", (ActionMaskMixin, base), {"__module__": __name__})
        _masked_classes[base] = cls
        globals()[cls.__name__] = cls  # importable by name: pickled specs refer to it
    return _masked_classes[base]


def masked_module_class(algo: str) -> type:
    if algo == "APPO":
        from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import DefaultAPPOTorchRLModule
        return masked(DefaultAPPOTorchRLModule)
    from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
    return masked(DefaultPPOTorchRLModule)


# Created at import so that unpickling in an env-runner process finds them.
def _register_masked_classes() -> None:
    try:
        masked_module_class("PPO")
        masked_module_class("APPO")
    except ImportError:  # an RLlib without APPO: nothing to register
        pass


_register_masked_classes()


# -- centralised critic --------------------------------------------------------------------
def mlp(inputs: int, hiddens: list[int], outputs: int, activation: str) -> nn.Sequential:
    layers: list[nn.Module] = []
    size = inputs
    for width in hiddens:
        layers += [nn.Linear(size, width), _ACTIVATIONS[activation]()]
        size = width
    layers.append(nn.Linear(size, outputs))
    return nn.Sequential(*layers)


class CentralCriticActor(TorchRLModule, ValueFunctionAPI):
    """One agent's actor; its values come from the shared critic.

    model_config: own_dim (this agent's part of the observation), agent_index,
    num_agents, fcnet_hiddens, fcnet_activation.
    """

    def setup(self):
        cfg = self.model_config
        self.own_dim = int(cfg["own_dim"])
        if isinstance(self.action_space, gym.spaces.Discrete):
            outputs = int(self.action_space.n)
        else:  # Box: mean and log-std per dimension (TorchDiagGaussian)
            outputs = 2 * int(self.action_space.shape[0])
        self.pi = mlp(self.own_dim, cfg["fcnet_hiddens"], outputs, cfg["fcnet_activation"])
        self._critic = None

    def attach_critic(self, critic: "SharedCritic") -> None:
        # object.__setattr__: a plain reference, not a registered submodule, so
        # the critic's weights stay out of this module's parameters and state.
        object.__setattr__(self, "_critic", critic)

    def _forward(self, batch, **kwargs):
        own = batch[Columns.OBS][..., : self.own_dim]
        return {Columns.ACTION_DIST_INPUTS: self.pi(own)}

    def compute_values(self, batch, embeddings=None):
        if self._critic is None:
            raise RuntimeError("CentralCriticActor has no critic: build it inside SharedCriticMultiRLModule")
        state = batch[Columns.OBS][..., self.own_dim:]
        return self._critic.value(state, int(self.model_config["agent_index"]))


class SharedCritic(TorchRLModule, ValueFunctionAPI):
    """V(state, agent): the global state and a one-hot of the agent whose value it is.

    model_config: state_dim, num_agents, fcnet_hiddens, fcnet_activation.
    Implements ValueFunctionAPI so that the learner gives it an optimizer; no
    agent maps to it, so no loss of its own: its gradients come through the actors.
    """

    def setup(self):
        cfg = self.model_config
        self.num_agents = int(cfg["num_agents"])
        self.vf = mlp(int(cfg["state_dim"]) + self.num_agents, cfg["fcnet_hiddens"], 1, cfg["fcnet_activation"])

    def value(self, state, agent_index: int):
        one_hot = torch.zeros(state.shape[:-1] + (self.num_agents,), dtype=state.dtype, device=state.device)
        one_hot[..., agent_index] = 1.0
        return self.vf(torch.cat([state, one_hot], dim=-1)).squeeze(-1)

    def _forward(self, batch, **kwargs):
        return {}

    def compute_values(self, batch, embeddings=None):
        return self.vf(batch[Columns.OBS]).squeeze(-1)


class SharedCriticMultiRLModule(MultiRLModule):
    def setup(self):
        super().setup()
        critic = self._rl_modules.get(CRITIC_ID)
        for module in self._rl_modules.values():
            if isinstance(module, CentralCriticActor):
                module.attach_critic(critic)
