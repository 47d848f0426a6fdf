"""Building a Tianshou 2.0.1 algorithm from a run config, with the procedural API.

Each algorithm is built as Tianshou's own tests build it (test/discrete/test_dqn.py,
test/continuous/test_sac_with_il.py, test/offline/test_cql.py ...): the networks
from ``tianshou.utils.net``, the policy, the algorithm. Every plain parameter the
schema shows goes to the class that declares it (catalog.init_params tells which):
the algorithm's, the policy's, or the trainer params dataclass.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import (
    A2C,
    BCQ,
    C51,
    CQL,
    DDPG,
    DQN,
    FQF,
    GAIL,
    IQN,
    NPG,
    PPO,
    QRDQN,
    REDQ,
    SAC,
    TD3,
    TD3BC,
    TRPO,
    DiscreteBCQ,
    DiscreteCQL,
    DiscreteCRR,
    DiscreteSAC,
    RainbowDQN,
    Reinforce,
)
from tianshou.algorithm.imitation.bcq import BCQPolicy
from tianshou.algorithm.imitation.discrete_bcq import DiscreteBCQPolicy
from tianshou.algorithm.imitation.imitation_base import ImitationPolicy, OfflineImitationLearning
from tianshou.algorithm.modelfree.c51 import C51Policy
from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
from tianshou.algorithm.modelfree.discrete_sac import DiscreteSACPolicy
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.modelfree.fqf import FQFPolicy
from tianshou.algorithm.modelfree.iqn import IQNPolicy
from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy
from tianshou.algorithm.modelfree.redq import REDQPolicy
from tianshou.algorithm.modelfree.reinforce import DiscreteActorPolicy, ProbabilisticActorPolicy
from tianshou.algorithm.modelfree.sac import SACPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory, RMSpropOptimizerFactory
from tianshou.data import ReplayBuffer
from tianshou.exploration import GaussianNoise
from tianshou.utils.net.common import MLP, ActorCritic, EnsembleLinear, Net
from tianshou.utils.net.continuous import (
    VAE,
    ContinuousActorDeterministic,
    ContinuousActorProbabilistic,
    ContinuousCritic,
    Perturbation,
)
from tianshou.utils.net.discrete import (
    DiscreteActor,
    DiscreteCritic,
    FractionProposalNetwork,
    FullQuantileFunction,
    ImplicitQuantileNetwork,
    NoisyLinear,
)
from torch.distributions import Categorical, Distribution, Independent, Normal

from workers.tianshou_worker import catalog


@dataclass
class Spaces:
    obs_shape: tuple[int, ...]
    action_space: gym.Space
    observation_space: gym.Space

    @property
    def discrete(self) -> bool:
        return isinstance(self.action_space, gym.spaces.Discrete)

    @property
    def action_shape(self) -> int | tuple[int, ...]:
        return int(self.action_space.n) if self.discrete else self.action_space.shape

    @property
    def action_dim(self) -> int:
        return int(self.action_space.n) if self.discrete else int(np.prod(self.action_space.shape))

    @property
    def max_action(self) -> float:
        return float(np.max(self.action_space.high))


    @property
    def image(self) -> bool:
        """Stacked frames (c, h, w), as Atari's wrap_deepmind and workers/sdk/vizdoom.py give."""
        return len(self.obs_shape) == 3


def spaces_of(env: gym.Env) -> Spaces:
    return Spaces(env.observation_space.shape, env.action_space, env.observation_space)


def split_params(algo: str, params: dict[str, Any]) -> tuple[dict, dict, dict]:
    """The run's params for the algorithm class, the policy class and the trainer params."""
    info = catalog.ALGORITHMS[algo]
    own = lambda names: {k: params[k] for k in names if k in params and k not in catalog.NOT_PARAMS}  # noqa: E731
    algorithm = own(catalog.init_params(*info["cls"]))
    policy = own(catalog.init_params(*info["policy"]))
    trainer = own(catalog.dataclass_params("trainer.py", catalog.TRAINER_PARAMS[info["kind"]]))
    return algorithm, policy, trainer


def _orthogonal(module: torch.nn.Module, gain: float = 1.0) -> None:
    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.orthogonal_(m.weight, gain=gain)
            torch.nn.init.zeros_(m.bias)


def _gaussian(loc_scale: tuple[torch.Tensor, torch.Tensor]) -> Distribution:
    loc, scale = loc_scale
    return Independent(Normal(loc, scale), 1)


def _critic_net(s: Spaces, hidden: list[int]) -> Net:
    """Q(s, a) for continuous actions: obs and action concatenated."""
    return Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, concat=True)


def build(algo: str, params: dict[str, Any], s: Spaces, expert: ReplayBuffer | None = None) -> Any:
    """The algorithm (policy inside) for ``algo`` with ``params`` on an env of spaces ``s``;
    ``expert``: GAIL's demonstrations."""
    if s.image:
        return build_image(algo, params, s)
    a, p, _ = split_params(algo, params)
    hidden = list(params["hidden_sizes"])
    spaces = {"action_space": s.action_space}

    # -- the DQN family ------------------------------------------------------------
    if algo == "dqn":
        dueling = ({"hidden_sizes": hidden}, {"hidden_sizes": hidden}) if params["dueling"] else None
        net = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, dueling_param=dueling)
        policy = DiscreteQLearningPolicy(model=net, observation_space=s.observation_space, **spaces, **p)
        return DQN(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)
    if algo in ("c51", "rainbow"):
        noisy = {"linear_layer": lambda x, y: NoisyLinear(x, y)} if algo == "rainbow" else None
        net = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, softmax=True,
                  num_atoms=p["num_atoms"], dueling_param=(noisy, noisy) if noisy else None)
        policy = C51Policy(model=net, observation_space=s.observation_space, **spaces, **p)
        cls = RainbowDQN if algo == "rainbow" else C51
        return cls(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)
    if algo in ("qrdqn", "discrete_cql"):
        net = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, softmax=False,
                  num_atoms=a["num_quantiles"])
        policy = QRDQNPolicy(model=net, observation_space=s.observation_space, **spaces, **p)
        cls = DiscreteCQL if algo == "discrete_cql" else QRDQN
        return cls(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)
    if algo in ("iqn", "fqf"):
        feature = Net(state_shape=s.obs_shape, action_shape=hidden[-1], hidden_sizes=hidden[:-1], softmax=False)
        if algo == "iqn":
            net = ImplicitQuantileNetwork(preprocess_net=feature, action_shape=s.action_shape,
                                          num_cosines=params["num_cosines"])
            policy = IQNPolicy(model=net, **spaces, **p)
            return IQN(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)
        net = FullQuantileFunction(preprocess_net=feature, action_shape=s.action_shape, hidden_sizes=hidden,
                                   num_cosines=params["num_cosines"])
        fraction = FractionProposalNetwork(a["num_fractions"], net.input_dim)
        policy = FQFPolicy(model=net, fraction_model=fraction, **spaces, **p)
        return FQF(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]),
                   fraction_optim=RMSpropOptimizerFactory(lr=params["fraction_lr"]), **a)
    if algo == "discrete_bcq":
        net = Net(state_shape=s.obs_shape, action_shape=hidden[0])
        model = DiscreteActor(preprocess_net=net, action_shape=s.action_shape, hidden_sizes=hidden)
        imitator = DiscreteActor(preprocess_net=net, action_shape=s.action_shape, hidden_sizes=hidden)
        policy = DiscreteBCQPolicy(model=model, imitator=imitator, **spaces, **p)
        return DiscreteBCQ(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)

    # -- policy gradient, actor-critic (discrete or continuous) --------------------
    if algo in ("reinforce", "a2c", "ppo", "npg", "trpo", "gail"):
        if s.discrete:
            if algo == "reinforce":
                actor = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, softmax=True)
            else:
                actor = DiscreteActor(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                      action_shape=s.action_shape)
            dist: Callable = Categorical
        else:
            actor = ContinuousActorProbabilistic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                                 action_shape=s.action_shape, unbounded=True)
            dist = _gaussian
        policy = ProbabilisticActorPolicy(actor=actor, dist_fn=dist, action_scaling=not s.discrete,
                                          **spaces, **p)
        optim = AdamOptimizerFactory(lr=params["lr"])
        if algo == "reinforce":
            _orthogonal(actor, gain=math.sqrt(2))
            return Reinforce(policy=policy, optim=optim, **a)
        critic_net = Net(state_shape=s.obs_shape, hidden_sizes=hidden)
        critic = DiscreteCritic(preprocess_net=critic_net) if s.discrete else ContinuousCritic(
            preprocess_net=critic_net)
        _orthogonal(ActorCritic(actor, critic))
        if algo == "gail":
            disc = ContinuousCritic(preprocess_net=Net(state_shape=s.obs_shape, action_shape=s.action_shape,
                                                       hidden_sizes=hidden, activation=torch.nn.Tanh, concat=True))
            _orthogonal(disc, gain=math.sqrt(2))
            return GAIL(policy=policy, critic=critic, optim=optim, expert_buffer=expert, disc_net=disc,
                        disc_optim=AdamOptimizerFactory(lr=params["disc_lr"]), **a)
        cls = {"a2c": A2C, "ppo": PPO, "npg": NPG, "trpo": TRPO}[algo]
        return cls(policy=policy, critic=critic, optim=optim, **a)
    if algo == "discrete_crr":
        net = Net(state_shape=s.obs_shape, action_shape=hidden[0])
        actor = DiscreteActor(preprocess_net=net, action_shape=s.action_shape, hidden_sizes=hidden,
                              softmax_output=False)
        critic = DiscreteCritic(preprocess_net=net, hidden_sizes=hidden, last_size=s.action_dim)
        policy = DiscreteActorPolicy(actor=actor, **spaces, **p)
        return DiscreteCRR(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=params["lr"]), **a)
    if algo == "discrete_sac":
        actor = DiscreteActor(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                              action_shape=s.action_shape, softmax_output=False)
        critics = [DiscreteCritic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                  last_size=s.action_dim) for _ in range(2)]
        policy = DiscreteSACPolicy(actor=actor, **spaces, **p)
        return DiscreteSAC(policy=policy, policy_optim=AdamOptimizerFactory(lr=params["actor_lr"]),
                           critic=critics[0], critic_optim=AdamOptimizerFactory(lr=params["critic_lr"]),
                           critic2=critics[1], critic2_optim=AdamOptimizerFactory(lr=params["critic_lr"]), **a)

    if algo == "bc":
        if s.discrete:
            actor = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden)
        else:
            actor = ContinuousActorDeterministic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                                 action_shape=s.action_shape, max_action=s.max_action)
        policy = ImitationPolicy(actor=actor, **spaces, **p)
        return OfflineImitationLearning(policy=policy, optim=AdamOptimizerFactory(lr=params["lr"]), **a)

    # -- continuous control ---------------------------------------------------------
    actor_optim = AdamOptimizerFactory(lr=params["actor_lr"])
    critic_optim = AdamOptimizerFactory(lr=params["critic_lr"])
    if algo in ("ddpg", "td3", "td3_bc"):
        actor = ContinuousActorDeterministic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                             action_shape=s.action_shape, max_action=s.max_action)
        noise = GaussianNoise(sigma=params.get("exploration_noise", 0.1) * s.max_action)
        policy = ContinuousDeterministicPolicy(actor=actor, exploration_noise=noise, **spaces, **p)
        critic = ContinuousCritic(preprocess_net=_critic_net(s, hidden))
        if algo == "ddpg":
            return DDPG(policy=policy, policy_optim=actor_optim, critic=critic, critic_optim=critic_optim, **a)
        critic2 = ContinuousCritic(preprocess_net=_critic_net(s, hidden))
        cls = TD3BC if algo == "td3_bc" else TD3
        return cls(policy=policy, policy_optim=actor_optim, critic=critic, critic_optim=critic_optim,
                   critic2=critic2, critic2_optim=AdamOptimizerFactory(lr=params["critic_lr"]), **a)
    if algo in ("sac", "cql"):
        actor = ContinuousActorProbabilistic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                             action_shape=s.action_shape, unbounded=True, conditioned_sigma=True)
        critic = ContinuousCritic(preprocess_net=_critic_net(s, hidden))
        if algo == "cql":
            policy = SACPolicy(actor=actor, action_scaling=False, **spaces, **p)
            low, high = float(np.min(s.action_space.low)), s.max_action
            return CQL(policy=policy, policy_optim=actor_optim, critic=critic, critic_optim=critic_optim,
                       **{**a, "min_action": low}, max_action=high)
        policy = SACPolicy(actor=actor, **spaces, **p)
        critic2 = ContinuousCritic(preprocess_net=_critic_net(s, hidden))
        return SAC(policy=policy, policy_optim=actor_optim, critic=critic, critic_optim=critic_optim,
                   critic2=critic2, critic2_optim=AdamOptimizerFactory(lr=params["critic_lr"]), **a)
    if algo == "redq":
        actor = ContinuousActorProbabilistic(preprocess_net=Net(state_shape=s.obs_shape, hidden_sizes=hidden),
                                             action_shape=s.action_shape, unbounded=True, conditioned_sigma=True)
        ensemble = params["ensemble"]
        linear = lambda x, y: EnsembleLinear(ensemble, x, y)  # noqa: E731
        net = Net(state_shape=s.obs_shape, action_shape=s.action_shape, hidden_sizes=hidden, concat=True,
                  linear_layer=linear)
        critic = ContinuousCritic(preprocess_net=net, linear_layer=linear, flatten_input=False)
        policy = REDQPolicy(actor=actor, **spaces, **p)
        return REDQ(policy=policy, policy_optim=actor_optim, critic=critic, critic_optim=critic_optim,
                    ensemble_size=ensemble, subset_size=2, **a)
    if algo == "bcq":
        latent = 2 * s.action_dim
        perturbation = Perturbation(preprocess_net=Net(state_shape=s.obs_shape[0] + s.action_dim,
                                                       action_shape=s.action_dim, hidden_sizes=hidden),
                                    max_action=s.max_action)
        critic = ContinuousCritic(preprocess_net=_critic_net(s, hidden))
        # the VAE calls its encoder and decoder as plain modules (tensor in, tensor out): MLPs
        encoder = MLP(input_dim=s.obs_shape[0] + s.action_dim, output_dim=hidden[-1], hidden_sizes=hidden)
        decoder = MLP(input_dim=s.obs_shape[0] + latent, output_dim=s.action_dim, hidden_sizes=hidden)
        vae = VAE(encoder=encoder, decoder=decoder, hidden_dim=hidden[-1], latent_dim=latent,
                  max_action=s.max_action)
        policy = BCQPolicy(actor_perturbation=perturbation, critic=critic, vae=vae, **spaces, **p)
        return BCQ(policy=policy, actor_perturbation_optim=actor_optim, critic_optim=critic_optim,
                   vae_optim=AdamOptimizerFactory(lr=params["vae_lr"]), **a)
    raise ValueError(f"no builder for {algo}")


def build_image(algo: str, params: dict[str, Any], s: Spaces) -> Any:
    """The algorithm on stacked-frame observations (c, h, w), wired to Tianshou's Atari networks
    as its examples/atari/atari_<algo>.py wire them (catalog.IMAGE_NETS). Where an example has a
    layer after the CNN (PPO/A2C and discrete SAC's features, IQN/FQF's quantile head: 512 there),
    ``hidden_sizes`` gives it."""
    # tianshou.env.atari imports Tianshou's high-level API (and cv2): only image runs pay for it
    from tianshou.env.atari.atari_network import (
        C51Net,
        DQNet,
        QRDQNet,
        RainbowNet,
        ScaledObsInputActionReprNet,
        layer_init,
    )

    a, p, _ = split_params(algo, params)
    c, h, w = s.obs_shape
    n = s.action_shape
    hidden = list(params["hidden_sizes"])
    spaces = {"action_space": s.action_space}
    optim = AdamOptimizerFactory(lr=params.get("lr", 1e-3))
    if algo == "dqn":
        policy = DiscreteQLearningPolicy(model=DQNet(c=c, h=h, w=w, action_shape=n), **spaces, **p)
        return DQN(policy=policy, optim=optim, **a)
    if algo in ("c51", "rainbow"):
        if algo == "rainbow":
            net = RainbowNet(c=c, h=h, w=w, action_shape=n, num_atoms=p["num_atoms"])
        else:
            net = C51Net(c=c, h=h, w=w, action_shape=n, num_atoms=p["num_atoms"])
        policy = C51Policy(model=net, **spaces, **p)
        return (RainbowDQN if algo == "rainbow" else C51)(policy=policy, optim=optim, **a)
    if algo == "qrdqn":
        net = QRDQNet(c=c, h=h, w=w, action_shape=n, num_quantiles=a["num_quantiles"])
        return QRDQN(policy=QRDQNPolicy(model=net, **spaces, **p), optim=optim, **a)
    if algo in ("iqn", "fqf"):
        feature = DQNet(c=c, h=h, w=w, action_shape=n, features_only=True)
        if algo == "iqn":
            net = ImplicitQuantileNetwork(preprocess_net=feature, action_shape=n, hidden_sizes=hidden,
                                          num_cosines=params["num_cosines"])
            return IQN(policy=IQNPolicy(model=net, **spaces, **p), optim=optim, **a)
        net = FullQuantileFunction(preprocess_net=feature, action_shape=n, hidden_sizes=hidden,
                                   num_cosines=params["num_cosines"])
        fraction = FractionProposalNetwork(a["num_fractions"], net.input_dim)
        return FQF(policy=FQFPolicy(model=net, fraction_model=fraction, **spaces, **p), optim=optim,
                   fraction_optim=RMSpropOptimizerFactory(lr=params["fraction_lr"]), **a)
    if algo in ("ppo", "a2c"):
        # atari_ppo.py: one feature net shared by actor and critic, obs scaled to 0..1 in the net
        feature = ScaledObsInputActionReprNet(DQNet(c=c, h=h, w=w, action_shape=n, features_only=True,
                                                    output_dim_added_layer=hidden[-1], layer_init=layer_init))
        actor = DiscreteActor(preprocess_net=feature, action_shape=n, softmax_output=False)
        critic = DiscreteCritic(preprocess_net=feature)
        policy = DiscreteActorPolicy(actor=actor, **spaces,
                                     **{k: v for k, v in p.items() if k == "deterministic_eval"})
        cls = PPO if algo == "ppo" else A2C
        return cls(policy=policy, critic=critic, optim=AdamOptimizerFactory(lr=params["lr"], eps=1e-5), **a)
    if algo == "discrete_sac":
        feature = DQNet(c=c, h=h, w=w, action_shape=n, features_only=True, output_dim_added_layer=hidden[-1])
        actor = DiscreteActor(preprocess_net=feature, action_shape=n, softmax_output=False)
        critics = [DiscreteCritic(preprocess_net=feature, last_size=s.action_dim) for _ in range(2)]
        policy = DiscreteSACPolicy(actor=actor, **spaces, **p)
        return DiscreteSAC(policy=policy, policy_optim=AdamOptimizerFactory(lr=params["actor_lr"]),
                           critic=critics[0], critic_optim=AdamOptimizerFactory(lr=params["critic_lr"]),
                           critic2=critics[1], critic2_optim=AdamOptimizerFactory(lr=params["critic_lr"]), **a)
    raise ValueError(f"{algo}: {catalog.image_refusal(algo)}")


def eps_annealing(algorithm, params: dict, logger) -> Callable[[int, int], None]:
    """The trainer's ``training_fn``: Tianshou's own linear epsilon decay (the callback its
    high-level DQN experiments use), called before each collect step with the env step."""
    from tianshou.highlevel.trainer import EpochTrainCallbackDQNEpsLinearDecay, TrainingContext
    callback = EpochTrainCallbackDQNEpsLinearDecay(params["eps_training"], params["eps_training_final"],
                                                   params["eps_decay_steps"])
    context = TrainingContext(algorithm, None, logger)
    return lambda epoch, env_step: callback.callback(epoch, env_step, context)
