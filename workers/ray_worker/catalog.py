"""What the RLlib worker runs, as data: algorithms, environments, policy configurations, schemas.

Imported by the daemon (through the descriptor): nothing here imports ray,
torch, gymnasium or pettingzoo. Whether an optional family's dependencies are
installed is read from distribution metadata (``dist_version``), not by import.

The defaults in the schemas are RLlib 2.60's own (``PPOConfig()`` etc.);
tests/workers/ray_worker/test_ray_worker.py checks them against the installed RLlib, so a
schema never claims a default that RLlib does not use.
"""
from __future__ import annotations

from typing import Any

from workers.sdk.config import SCHEMA_DIALECT
from workers.sdk.descriptor import dist_version
from workers.sdk.envs import JUMANJI_GYM_ENVS, atari_envs, gymnasium_envs, multigrid_envs, resolve_alias

# Bumped when a param is renamed, removed or changes meaning: a saved config
# names the version it was written for.
SCHEMA_VERSION = 1

ALGORITHMS = ["PPO", "APPO", "IMPALA", "DQN", "SAC"]

# Which action spaces each algorithm's default RLModule handles in RLlib 2.60
# (new API stack). SAC's discrete variant exists upstream but is not walked here.
ACTIONS = {
    "PPO": ("discrete", "continuous"),
    "APPO": ("discrete", "continuous"),
    "IMPALA": ("discrete", "continuous"),
    "DQN": ("discrete",),
    "SAC": ("continuous",),
}

# Algorithms whose default module is a PPO-style actor-critic: the action
# masking module (turn-based games) and the centralised critic build on it.
ACTOR_CRITIC = ("PPO", "APPO", "IMPALA")

POLICY_CONFIGS = {
    "shared": "one policy for all agents of the same kind (parameter sharing; agents whose "
              "observation or action spaces differ, e.g. adversaries and good agents, get one "
              "shared policy per kind)",
    "independent": "one policy per agent",
    "self_play": "two-player and two-team games: the learner ('main') plays one side (every agent of "
                 "one team) against a league of frozen past copies of itself on the other, sides "
                 "alternating between episodes; the league is refreshed every snapshot_every iterations",
    "shared_value": "separate actor per agent, one centralised critic shared by all, fed the "
                    "concatenated observations of every agent (MAPPO-style; PPO only)",
}

# -- environments -----------------------------------------------------------------
# family -> (distributions it needs, kind). kind: "gym" single-agent gymnasium,
# "parallel" PettingZoo parallel API, "turn_based" PettingZoo AEC with action masks.
FAMILIES: dict[str, dict[str, Any]] = {
    "classic_control": {"needs": ("gymnasium",), "kind": "gym"},
    "box2d": {"needs": ("gymnasium", "box2d"), "kind": "gym"},
    "mujoco": {"needs": ("gymnasium", "mujoco"), "kind": "gym"},
    "atari": {"needs": ("gymnasium", "ale-py"), "kind": "gym"},
    "vizdoom": {"needs": ("gymnasium", "vizdoom", "opencv-python"), "kind": "gym"},
    "multigrid": {"needs": ("mosaic-multigrid",), "kind": "parallel"},
    "jumanji": {"needs": ("gymnasium", "jumanji"), "kind": "gym"},
    "mpe": {"needs": ("pettingzoo", "mpe2"), "kind": "parallel"},
    "classic": {"needs": ("pettingzoo",), "kind": "turn_based"},
    "butterfly": {"needs": ("pettingzoo", "pymunk", "pygame"), "kind": "parallel"},
    "sisl": {"needs": ("pettingzoo", "pymunk", "box2d", "scipy"), "kind": "parallel"},
}

# env id -> facts. "actions": discrete/continuous (for MPE: the default;
# env_kwargs {"continuous_actions": true} switches). "alike": every agent has
# the same observation and action space (parameter sharing over all of them).
# "module": where the PettingZoo env lives.
ENVS: dict[str, dict[str, Any]] = {
    **gymnasium_envs(["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0",
                      "LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3",
                      "HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5", "InvertedPendulum-v5",
                      "InvertedDoublePendulum-v5", "Reacher-v5", "Swimmer-v5", "Pusher-v5"]),
    # Atari: ALE/<Game>-v5, observed as 84x84x4 stacked grey frames through RLlib's Atari
    # connectors (wrap_atari_for_new_api_stack), trained with its CNN encoder
    **{env: {**info, "atari": True} for env, info in atari_envs().items() if env.startswith("ALE/")},
    # ViZDoom: the screen as 84x84x4 stacked grey frames (workers/sdk/vizdoom.py), scaled to -1..1
    # as RLlib's Atari connectors scale theirs, trained with the same default CNN encoder
    **{env: {**info, "image": True} for env, info in gymnasium_envs(family="vizdoom").items()},
    # MOSAIC MultiGrid: 31-value flat observations (workers/sdk/multigrid.py), string agent ids
    # green_0, blue_0...; "teams": the agents of each side, for self-play between teams
    **{env: {"family": "multigrid", "actions": "discrete", "alike": True, "agents": info["agents"],
             "two_teams": info["competitive"] and len(info["teams"]) == 2}
       for env, info in multigrid_envs().items()},
    # Jumanji: jumanji/<Env>, its JumanjiToGymWrapper with the observation flattened
    # (workers/sdk/jumanji_envs.py, registered by envs.make_env in every env-runner process)
    **JUMANJI_GYM_ENVS,
    "simple_spread_v3": {"family": "mpe", "module": "mpe2.simple_spread_v3", "actions": "discrete",
                         "alike": True, "agents": 3},
    "simple_adversary_v3": {"family": "mpe", "module": "mpe2.simple_adversary_v3", "actions": "discrete",
                            "alike": False, "agents": 3},
    "simple_tag_v3": {"family": "mpe", "module": "mpe2.simple_tag_v3", "actions": "discrete",
                      "alike": False, "agents": 4},
    "simple_push_v3": {"family": "mpe", "module": "mpe2.simple_push_v3", "actions": "discrete",
                       "alike": False, "agents": 2},
    "simple_reference_v3": {"family": "mpe", "module": "mpe2.simple_reference_v3", "actions": "discrete",
                            "alike": True, "agents": 2},
    "tictactoe_v3": {"family": "classic", "module": "pettingzoo.classic.tictactoe_v3", "actions": "discrete",
                     "alike": True, "agents": 2, "two_player": True},
    "connect_four_v3": {"family": "classic", "module": "pettingzoo.classic.connect_four_v3",
                        "actions": "discrete", "alike": True, "agents": 2, "two_player": True},
    "knights_archers_zombies_v11": {"family": "butterfly",
                                    "module": "pettingzoo.butterfly.knights_archers_zombies_v11",
                                    "actions": "discrete", "alike": True, "agents": 4},
    "multiwalker_v9": {"family": "sisl", "module": "pettingzoo.sisl.multiwalker_v9", "actions": "continuous",
                       "alike": True, "agents": 3},
    "pursuit_v5": {"family": "sisl", "module": "pettingzoo.sisl.pursuit_v5", "actions": "discrete",
                   "alike": True, "agents": 8},
    # Image games: every agent observes an RGB view (pistonball 457x120 per piston, cooperative pong
    # the whole 280x480 screen), resized, grey and frame-stacked by envs.ImageParallelEnv into RLlib's
    # CNN encoder. Pistonball's pistons move continuously unless env_kwargs {"continuous": false}.
    "pistonball_v6": {"family": "butterfly", "module": "pettingzoo.butterfly.pistonball_v6",
                      "actions": "continuous", "discrete_with": {"continuous": False},
                      "alike": True, "agents": 20, "image": True, "view": (457, 120)},
    "cooperative_pong_v6": {"family": "butterfly", "module": "pettingzoo.butterfly.cooperative_pong_v6",
                            "actions": "discrete", "alike": True, "agents": 2, "image": True, "view": (280, 480)},
}
# Not offered: waterworld is gone from PettingZoo 1.27.

# How the PettingZoo image games are observed (params image_size, grayscale, frame_stack): the
# recipe of PettingZoo's own RLlib and SB3 pistonball tutorials (SuperSuit's color_reduction,
# resize, frame_stack 3), done in envs.ImageParallelEnv without SuperSuit; 64x64, not their 84x84:
# RLlib's default filters for 64x64 train ~6x faster than its 84x84 (Atari) ones (docs/workers/ray.md).
IMAGE_DEFAULTS = {"image_size": 64, "grayscale": True, "frame_stack": 3}
# Image sizes RLlib 2.60 has default conv filters for (ray.rllib.models.utils.get_filter_config);
# any other size needs params.conv_filters.
DEFAULT_FILTER_SIZES = (42, 64, 84, 96)


def family_available(family: str) -> bool:
    return all(dist_version(dist) is not None for dist in FAMILIES[family]["needs"])


def available_families() -> list[str]:
    return [f for f in FAMILIES if family_available(f)]


def known_envs() -> list[str]:
    return [env for env, info in ENVS.items() if family_available(info["family"])]


def env_info(env_id: str) -> dict[str, Any] | None:
    info = ENVS.get(resolve_alias(env_id))
    return None if info is None else {**info, "kind": FAMILIES[info["family"]]["kind"]}


def is_multi_agent(env_id: str) -> bool:
    info = env_info(env_id)
    return bool(info) and info["kind"] != "gym"


def action_kind(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str | None:
    info = ENVS.get(env_id)
    if info is None:
        return None
    kwargs = env_kwargs or {}
    if info["family"] == "mpe" and kwargs.get("continuous_actions"):
        return "continuous"
    switch = info.get("discrete_with")
    if switch and all(k in kwargs and kwargs[k] == v for k, v in switch.items()):
        return "discrete"
    return info["actions"]


def observes_images(env_id: str) -> bool:
    """Observed as images, through RLlib's CNN encoder: Atari, ViZDoom, the PettingZoo image games."""
    info = ENVS.get(resolve_alias(env_id)) or {}
    return bool(info.get("atari") or info.get("image"))


def pettingzoo_images(env_id: str) -> bool:
    """A PettingZoo image game: its observations are shaped by params image_size, grayscale, frame_stack."""
    info = ENVS.get(resolve_alias(env_id)) or {}
    return bool(info.get("image")) and FAMILIES[info["family"]]["kind"] == "parallel"


def image_envs() -> list[str]:
    return [env for env in ENVS if pettingzoo_images(env)]


# -- schemas --------------------------------------------------------------------------
def _num(default, help_, minimum=None, maximum=None, exclusive_min=None, nullable=False) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": ["number", "null"] if nullable else "number", "default": default,
                            "description": help_}
    if minimum is not None:
        spec["minimum"] = minimum
    if exclusive_min is not None:
        spec["exclusiveMinimum"] = exclusive_min
    if maximum is not None:
        spec["maximum"] = maximum
    return spec


def _int(default, help_, minimum=None, maximum=None, nullable=False) -> dict[str, Any]:
    spec: dict[str, Any] = {"type": ["integer", "null"] if nullable else "integer", "default": default,
                            "description": help_}
    if minimum is not None:
        spec["minimum"] = minimum
    if maximum is not None:
        spec["maximum"] = maximum
    return spec


def _bool(default, help_) -> dict[str, Any]:
    return {"type": "boolean", "default": default, "description": help_}


# mosaic's own params, the same for every algorithm: policies, resources, checkpoints.
COMMON: dict[str, Any] = {
    "schema_version": {"type": "integer", "enum": [SCHEMA_VERSION], "default": SCHEMA_VERSION,
                       "description": "version of this schema the params were written for"},
    "policy": {"type": "string", "enum": list(POLICY_CONFIGS), "default": "shared",
               "description": "multi-agent policy configuration: " +
                              "; ".join(f"{k}: {v}" for k, v in POLICY_CONFIGS.items()) +
                              ". Single-agent environments take 'shared' only"},
    "league_size": _int(3, "self_play: frozen snapshots of the learner in the league (N)", 1, 32),
    "snapshot_every": _int(5, "self_play: copy the learner into the oldest league slot every K "
                              "training iterations", 1, 100000),
    "env_kwargs": {"type": "object", "default": {},
                   "description": "keyword arguments of the PettingZoo env constructor, e.g. "
                                  "{\"N\": 3, \"max_cycles\": 25, \"continuous_actions\": false} for MPE, "
                                  "or of gymnasium.make for a single-agent env"},
    "fcnet_hiddens": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 4096},
                      "default": [256, 256], "description": "hidden layer sizes of the policy and value networks"},
    "fcnet_activation": {"type": "string", "enum": ["tanh", "relu", "swish", "linear"], "default": "tanh",
                         "description": "activation of the hidden layers"},
    # image observations (Atari, ViZDoom, pistonball_v6, cooperative_pong_v6): RLlib's CNN encoder
    "model": {"type": "string", "enum": ["auto", "mlp", "cnn"], "default": "auto",
              "description": "the encoder: 'auto' takes a CNN for image observations (Atari, ViZDoom, "
                             "pistonball_v6, cooperative_pong_v6) and an MLP (fcnet_hiddens) for the rest; "
                             "'mlp' or 'cnn' says which, and is refused where the env's observations do not fit"},
    "conv_filters": {"type": ["array", "null"], "default": None,
                     "items": {"type": "array", "minItems": 3, "maxItems": 3,
                               "items": {"type": "integer", "minimum": 1, "maximum": 4096}},
                     "description": "CNN layers as [out_channels, kernel, stride] ('same' padding), e.g. "
                                    "[[16, 8, 4], [32, 4, 2], [256, 11, 1]]; null: RLlib's default for the image "
                                    f"size (sizes {', '.join(map(str, DEFAULT_FILTER_SIZES))} only)"},
    "conv_activation": {"type": "string", "enum": ["relu", "tanh", "swish", "linear"], "default": "relu",
                        "description": "activation of the CNN layers"},
    "image_size": _int(IMAGE_DEFAULTS["image_size"], "PettingZoo image games: each agent's view is resized "
                                                     "(area-averaged) to image_size x image_size", 8, 512),
    "grayscale": _bool(IMAGE_DEFAULTS["grayscale"], "PettingZoo image games: one grey channel instead of RGB"),
    "frame_stack": _int(IMAGE_DEFAULTS["frame_stack"], "PettingZoo image games: the last N views stacked on "
                                                       "the channel axis (motion: the ball's speed)", 1, 16),
    # resources
    "address": {"type": "string", "default": "",
                "pattern": r"^$|^auto$|^ray://[^\s:]+:\d+$|^[^\s:/]+:\d+$",
                "description": "'' starts a private Ray for this run (no dashboard, num_cpus CPUs, temp dir "
                               "under the run directory, stopped at the end); 'auto', 'host:port' (a GCS "
                               "address) or 'ray://host:port' (Ray Client) joins an existing cluster, where "
                               "only the run's own actors are started and stopped"},
    "auth_mode": {"type": "string", "enum": ["", "token", "disabled"], "default": "",
                  "description": "Ray's RAY_AUTH_MODE when joining a cluster by address: 'token' sends the token "
                                 "of ~/.ray/auth_token (clusters started by `ray start` require it by default), "
                                 "'' keeps the daemon's environment"},
    "num_cpus": _int(2, "CPUs of the private Ray ('' address); ignored on a cluster", 1, 1024),
    "num_gpus": _num(0.0, "GPUs for the learner (fractions allowed, e.g. 0.5)", 0, 64),
    "env_runners": _int(0, "remote env-runner actors sampling in parallel (0: sample in the worker process)",
                        0, 1024),
    "envs_per_runner": _int(1, "vectorised environment copies in each env runner", 1, 1024),
    "cpus_per_env_runner": _num(1.0, "CPUs each env-runner actor reserves", 0, 64),
    "custom_resources_per_env_runner": {"type": "object", "default": {},
                                        "description": "Ray custom resources each env runner requires, "
                                                       "e.g. {\"sampler\": 1} to place runners on nodes "
                                                       "started with --resources '{\"sampler\": 2}'"},
    "torch_threads": _int(1, "torch intra-op threads of the learner (the worker process)", 1, 64),
    # eval mode, a multi-agent checkpoint: one agent played by a person (docs/play.md)
    "human_agent": {"type": ["string", "null"], "default": None,
                    "description": "eval of a multi-agent checkpoint: this agent (e.g. player_1) is played by the "
                                   "client holding its seat, the others by their policies"},
    # checkpoints
    "checkpoint_every": _int(0, "also save a checkpoint every N training iterations (0: only at the end)",
                             0, 1000000),
    "keep_checkpoints": _int(0, "keep only the newest N periodic checkpoints (0: keep all)", 0, 100000),
}

_IMPALA_PARAMS = {
    "lr": _num(0.0005, "learning rate", exclusive_min=0, maximum=1),
    "gamma": _num(0.99, "discount factor", 0, 1),
    "train_batch_size_per_learner": _int(500, "env steps per learner update", 1),
    "rollout_fragment_length": _int(50, "env steps each runner sends at a time", 1),
    "vtrace": _bool(True, "V-trace off-policy correction"),
    "vf_loss_coeff": _num(0.5, "value-function loss coefficient", 0),
    "entropy_coeff": _num(0.01, "entropy bonus coefficient", 0),
    "grad_clip": _num(40.0, "clip gradients to this global norm (null: no clipping)",
                      exclusive_min=0, nullable=True),
}

ALGO_PARAMS: dict[str, dict[str, Any]] = {
    "PPO": {
        "lr": _num(5e-05, "learning rate", exclusive_min=0, maximum=1),
        "gamma": _num(0.99, "discount factor", 0, 1),
        "train_batch_size_per_learner": _int(4000, "env steps per training iteration", 1),
        "minibatch_size": _int(128, "SGD minibatch size", 1),
        "num_epochs": _int(30, "passes over each train batch", 1, 10000),
        "lambda_": _num(1.0, "GAE lambda", 0, 1),
        "clip_param": _num(0.3, "PPO clip parameter", exclusive_min=0),
        "vf_clip_param": _num(10.0, "value-function loss clip", exclusive_min=0),
        "vf_loss_coeff": _num(1.0, "value-function loss coefficient", 0),
        "entropy_coeff": _num(0.0, "entropy bonus coefficient", 0),
        "use_kl_loss": _bool(True, "add a KL penalty to the loss"),
        "kl_coeff": _num(0.2, "initial KL penalty coefficient", 0),
        "kl_target": _num(0.01, "KL target of the adaptive coefficient", exclusive_min=0),
        "grad_clip": _num(None, "clip gradients to this global norm (null: no clipping)",
                          exclusive_min=0, nullable=True),
    },
    # APPO is IMPALA's learner and V-trace plus PPO's clipped surrogate and
    # an optional KL penalty (RLlib's APPOConfig extends IMPALAConfig)
    "APPO": {
        **_IMPALA_PARAMS,
        "clip_param": _num(0.4, "surrogate clip parameter", exclusive_min=0),
        "use_kl_loss": _bool(False, "add a KL penalty to the loss"),
        "kl_coeff": _num(1.0, "KL penalty coefficient", 0),
        "target_network_update_freq": _int(2, "update the target network every N learner updates", 1),
        "circular_buffer_num_batches": _int(8, "batches the learner's circular buffer holds", 1),
        "circular_buffer_iterations_per_batch": _int(2, "times each batch is trained on", 1),
    },
    "IMPALA": _IMPALA_PARAMS,
    "DQN": {
        "lr": _num(0.0005, "learning rate", exclusive_min=0, maximum=1),
        "gamma": _num(0.99, "discount factor", 0, 1),
        "train_batch_size_per_learner": _int(32, "replayed transitions per update", 1),
        "num_steps_sampled_before_learning_starts": _int(1000, "env steps before the first update", 0),
        "target_network_update_freq": _int(500, "env steps between target-network updates", 1),
        "replay_capacity": _int(50000, "replay buffer capacity (transitions)", 1),
        "double_q": _bool(True, "double Q-learning"),
        "dueling": _bool(True, "dueling network heads"),
        "n_step": _int(1, "n-step returns", 1, 1000),
        "epsilon_timesteps": _int(10000, "env steps over which epsilon decays from 1.0 to final_epsilon", 1),
        "final_epsilon": _num(0.05, "exploration epsilon after the decay", 0, 1),
        "grad_clip": _num(40.0, "clip gradients to this global norm (null: no clipping)",
                          exclusive_min=0, nullable=True),
        "rollout_fragment_length": _int(None, "env steps sampled between updates (null: RLlib's 'auto', "
                                              "one step per env)", 1, nullable=True),
        "training_intensity": _num(None, "replayed to sampled steps ratio (null: one update per sample call)",
                                   exclusive_min=0, nullable=True),
        "min_sample_timesteps_per_iteration": _int(1000, "env steps sampled per training iteration (at least)", 0),
    },
    "SAC": {
        "actor_lr": _num(3e-05, "actor learning rate", exclusive_min=0, maximum=1),
        "critic_lr": _num(0.0003, "critic learning rate", exclusive_min=0, maximum=1),
        "alpha_lr": _num(0.0003, "entropy-temperature learning rate", exclusive_min=0, maximum=1),
        "gamma": _num(0.99, "discount factor", 0, 1),
        "tau": _num(0.005, "target-network soft update rate", 0, 1),
        "initial_alpha": _num(1.0, "initial entropy temperature", exclusive_min=0),
        "train_batch_size_per_learner": _int(256, "replayed transitions per update", 1),
        "num_steps_sampled_before_learning_starts": _int(1500, "env steps before the first update", 0),
        "replay_capacity": _int(1000000, "replay buffer capacity (transitions)", 1),
        "n_step": _int(1, "n-step returns", 1, 1000),
        "twin_q": _bool(True, "two Q networks (clipped double Q)"),
        "rollout_fragment_length": _int(None, "env steps sampled between updates (null: RLlib's 'auto', "
                                              "one step per env)", 1, nullable=True),
        "training_intensity": _num(None, "replayed to sampled steps ratio (null: one update per sample call)",
                                   exclusive_min=0, nullable=True),
        "min_sample_timesteps_per_iteration": _int(100, "env steps sampled per training iteration (at least)", 0),
    },
}

# params that are not AlgorithmConfig.training() keywords but mapped by hand
MAPPED_BY_HAND = {"replay_capacity", "epsilon_timesteps", "final_epsilon", "rollout_fragment_length",
                  "min_sample_timesteps_per_iteration"}


def schema(algo: str, env: str | None = None) -> dict[str, Any]:
    properties = {**ALGO_PARAMS[algo], **COMMON}
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": f"mosaic:ray/{algo}/v{SCHEMA_VERSION}",
        "title": f"ray {algo}" + (f" on {env}" if env else ""),
        "description": f"RLlib 2.60 {algo} (new API stack). Algorithm params map onto "
                       f"{algo}Config.training(); resources onto .env_runners()/.learners(); the run "
                       f"config's steps are env steps sampled (num_env_steps_sampled_lifetime), seed "
                       f"goes to .debugging(seed=...).",
        "version": SCHEMA_VERSION,
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
