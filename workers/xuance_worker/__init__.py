"""The XuanCe worker: XuanCe's single- and multi-agent algorithms, run in process.

The daemon imports this module to list, describe and validate; it must stay
light (no xuance, torch or gymnasium import): algorithms and environments come
from ``catalog``, schemas from XuanCe's YAML files read as data.

A run config maps onto XuanCe like this (docs/workers/xuance.md):

- ``algo``: the name of XuanCe's config folder (``ppo``, ``dqn``, ``mappo``...);
- ``env``: XuanCe's env_id (``CartPole-v1``, ``simple_spread_v3``) or a MOSAIC
  MultiGrid id (``MosaicMultiGrid-S-1v1-IndAgObs-v1``, alias ``soccer_1vs1``); the
  family (classic_control, mpe, multigrid) is found from it, or given as ``mpe:simple_tag_v3``;
- ``steps`` -> ``running_steps`` (all parallel environments together), ``seed``
  -> ``seed`` and ``env_seed``, ``device`` -> ``device``;
- ``params``: the keys of XuanCe's config for that algorithm and environment
  (basic.yaml + ``<algo>/<family>/<env_id>.yaml``), plus a few of mosaic's own
  (``curriculum_schedule``, ``env_kwargs``, ``training_mode``,
  ``checkpoint_interval``, ``torch_threads``).
"""
from __future__ import annotations

import os
from typing import Any

from workers.sdk.config import SCHEMA_DIALECT, ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, check_torch_device, dist_version, torch_has_gpu_build
from workers.sdk.rundir import read_checkpoint_meta
from workers.xuance_worker import catalog, user_config, vizdoom

_CURRICULUM_PHASE = {
    "type": "object",
    "properties": {
        "env_id": {"type": "string"},
        "steps": {"type": "integer", "minimum": 1},
        "env_kwargs": {"type": "object"},
    },
    "required": ["env_id", "steps"],
    "additionalProperties": False,
}


def mosaic_params(family: str, env_id: str, competitive_default: bool) -> dict[str, Any]:
    """mosaic's own params (not XuanCe keys)."""
    params: dict[str, Any] = {
        "curriculum_schedule": {
            "type": ["array", "null"], "default": None, "items": _CURRICULUM_PHASE,
            "description": "train on these environments in turn, in one process, keeping the networks, "
                           "optimizer and learning-rate schedule: [{\"env_id\": ..., \"steps\": ...}, ...]; "
                           "the first phase is the run's env, all phases must have the same observation "
                           "and action spaces, and the steps add up to the run's steps",
        },
        "checkpoint_interval": {
            "type": "integer", "default": 0, "minimum": 0,
            "description": "also save a checkpoint every this many steps (0: only the final one)",
        },
        "torch_threads": {
            "type": "integer", "default": 1, "minimum": 1, "maximum": 64,
            "description": "torch intra-op threads; XuanCe's networks are small: one thread is "
                           "fastest when several runs share the CPU",
        },
        user_config.PARAM: user_config.schema_property(),
    }
    if family == catalog.MULTIGRID:
        params["env_kwargs"] = {
            "type": "object", "default": {},
            "description": f"keyword arguments of the MultiGrid env, e.g. {{\"max_steps\": 100}} "
                           f"(gymnasium.make({env_id!r}, ...))",
        }
    if family == catalog.MPE:
        params["env_kwargs"] = {
            "type": "object", "default": {},
            "description": f"keyword arguments of the MPE scenario, e.g. {{\"N\": 2, \"max_cycles\": 25}} "
                           f"for simple_spread_v3 (mpe2.{env_id}.parallel_env)",
        }
    if family == catalog.SISL:
        params["env_kwargs"] = {
            "type": "object", "default": {},
            "description": f"keyword arguments of the SISL game, e.g. {{\"n_pursuers\": 4, \"max_cycles\": 200}} "
                           f"for pursuit_v5 (pettingzoo.sisl.{env_id}.parallel_env)",
        }
    if family in catalog.MULTI_AGENT:
        params["training_mode"] = {
            "type": "string", "enum": ["cooperative", "competitive"],
            "default": "competitive" if competitive_default else "cooperative",
            "description": "competitive: every agent has its own networks and learns from its own "
                           "reward, teams are reported apart; cooperative: XuanCe's configuration as is",
        }
        params["human_agent"] = {
            "type": ["string", "null"], "default": None,
            "description": "eval of a multi-agent checkpoint: this agent (e.g. agent_0) is played by the client "
                           "holding its seat (docs/play.md), the others by their networks",
        }
    return params


class XuanCeDescriptor(WorkerDescriptor):
    name = "xuance"
    package = "workers.xuance_worker"
    upstream = "xuance"
    description = ("XuanCe's single-agent (PPO, DQN family, SAC, TD3...) and multi-agent "
                   "(MAPPO, IPPO, QMIX, VDN, MADDPG...) algorithms, run in process")

    def available(self) -> bool:
        return dist_version("xuance") is not None and catalog.configs_dir() is not None

    def capabilities(self) -> dict[str, Any]:
        algorithms = catalog.installed_algorithms()
        families = catalog.available_families()
        multi = [a for a in algorithms if catalog.ALGORITHMS[a]["family"] in catalog.MULTI_AGENT]
        known = catalog.known_envs()
        return {
            "paradigms": [p for p, present in (("single_agent", len(multi) < len(algorithms)),
                                               ("multi_agent", bool(multi))) if present],
            "algorithms": algorithms,
            "env_families": families,
            # by algorithm, as every worker's: the env ids of the algorithm's family
            "envs": {a: [e for f in catalog.families_of(a)
                         for e in (catalog.sisl_envs_of(a) if f == catalog.SISL else known.get(f, []))]
                     for a in algorithms},
            "env_families_by_algorithm": {a: [f for f in catalog.families_of(a) if f in families]
                                          for a in algorithms},
            "action_spaces": {a: sorted(set(catalog.ALGORITHMS[a]["actions"])
                                        | ({"discrete"} if catalog.MULTIGRID in catalog.families_of(a) else set()))
                              for a in algorithms},
            # not a limit of XuanCe's: scenarios take their agent count as a keyword (env_kwargs)
            "max_agents": 64,
            "parameter_sharing": True,
            "competitive": [a for a in multi if catalog.ALGORITHMS[a].get("competitive")],
            "self_play": False,
            "curriculum": True,
            "pause": True,
            "checkpoints": True,
            "gpu": torch_has_gpu_build(),
            "frames": True,
            "record": True,  # single-agent envs: a dataset in Tianshou's format (workers/sdk/dataset.py)
            # mosaic stop: a resume checkpoint at the end of a training step (on-policy: after an update);
            # mosaic continue trains the steps left (runtime.py)
            "stop": ["train"],
        }

    # -- schema ----------------------------------------------------------
    def _config_file(self, algo: str, family: str, env_id: str) -> str:
        path = catalog.config_file(algo, family, env_id)
        if path is None:
            raise ConfigError("env", f"XuanCe has no {family} configuration for {algo}")
        return path

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo not in catalog.installed_algorithms():
            raise self.unknown_algo(algo, catalog.installed_algorithms())
        family = catalog.ALGORITHMS[algo]["family"]
        if env:
            family, env_id = catalog.resolve_env(env)
        else:
            env_id = catalog.default_env(algo)
        path = self._config_file(algo, family, env_id)
        defaults = catalog.merged_config(path)
        defaults.update(catalog.ALGORITHMS[algo].get("defaults", {}))
        if family == catalog.MULTIGRID:
            defaults.update(catalog.MULTIGRID_DEFAULTS[algo])
        if family == catalog.SISL:  # pursuit as MultiGrid (discrete), multiwalker continuous
            discrete = catalog.action_kind(family, env_id) == "discrete"
            defaults.update(catalog.MULTIGRID_DEFAULTS.get(algo, {}) if discrete else {"continuous_action": True})
        comments = catalog.comments_for(path)
        env_competitive = (catalog.MPE_ENVS.get(env_id, {}).get("competitive", False) if family == catalog.MPE
                           else catalog.multigrid_envs().get(env_id, {}).get("competitive", False))
        competitive = (family in catalog.MULTI_AGENT and catalog.ALGORITHMS[algo].get("competitive", False)
                       and env_competitive)
        properties: dict[str, Any] = {}
        for key, value in defaults.items():
            if key in catalog.OWNED_KEYS:
                continue
            properties[key] = catalog.property_for(key, value, comments.get(key))
        if family == catalog.VIZDOOM:  # atari.yaml's keys for XuanCe's Atari wrapper: not this env's
            for key in vizdoom.ATARI_ONLY_KEYS:
                properties.pop(key, None)
        if "vectorize" in properties:
            properties["vectorize"]["enum"] = catalog.VECTORIZERS[family]
            if properties["vectorize"]["default"] not in catalog.VECTORIZERS[family]:
                properties["vectorize"]["default"] = catalog.VECTORIZERS[family][0]
        if competitive and "use_parameter_sharing" in properties:
            properties["use_parameter_sharing"]["default"] = False
        if needs_global_state(algo, env_id, properties.get("use_parameter_sharing", {}).get("default")):
            properties["use_global_state"]["default"] = True
        properties.update(mosaic_params(family, env_id, competitive))
        owned = ", ".join(sorted({f"{k} ({v})" for k, v in catalog.OWNED_KEYS.items()}))
        return {
            "$schema": SCHEMA_DIALECT,
            "title": f"xuance {algo} on {env_id}",
            "description": f"XuanCe's configuration {os.path.relpath(path, catalog.configs_dir())} on top of "
                           f"basic.yaml, with its defaults. Set by the run config instead: {owned}.",
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }

    # -- validation (WorkerDescriptor.validate calls check_env, then check_run) ----
    def check_env(self, config: RunConfig) -> None:
        for key in config.params:
            if key in catalog.OWNED_KEYS:
                raise ConfigError(f"params.{key}", f"is set by {catalog.OWNED_KEYS[key]}, not a param")
        info = catalog.ALGORITHMS[config.algo]
        family, env_id = catalog.resolve_env(config.env)
        families = catalog.families_of(config.algo)
        if family not in families:
            raise ConfigError("env", f"{config.algo} is a "
                                     f"{'multi' if info['family'] in catalog.MULTI_AGENT else 'single'}"
                                     f"-agent algorithm for {' and '.join(families)}; {config.env} is a "
                                     f"{family} environment")
        kind = catalog.action_kind(family, env_id)
        if family == catalog.SISL and env_id not in catalog.sisl_envs_of(config.algo):
            takes = ", ".join(catalog.sisl_envs_of(config.algo))
            raise ConfigError("env", f"{config.algo} does not run on {env_id} ({kind} actions); of the SISL "
                                     f"games it takes {takes}" if env_id in catalog.SISL_ENVS else
                                     f"unknown SISL game {env_id!r}; known: {', '.join(catalog.SISL_ENVS)}")
        # "actions" are the kinds of the algorithm's own family's configs; on MultiGrid it runs discrete
        if kind is not None and kind not in info["actions"] and family not in (catalog.MULTIGRID, catalog.SISL):
            raise ConfigError("env", f"{config.algo} needs {' or '.join(info['actions'])} actions; "
                                     f"{env_id} has {kind} actions")
        template = self._config_file(config.algo, family, env_id)
        check_torch_device(config.device)
        if config.params.get(user_config.PARAM) is not None:  # the user's own XuanCe YAML, under the params
            user_config.merge(config, self.schema(config.algo, config.env)["properties"],
                              user_config.run_values(config, family, env_id, template))
        if config.record is not None and family in catalog.MULTI_AGENT:
            raise ConfigError("record", f"datasets are single-agent (Tianshou's replay buffer); "
                                        f"{config.env} is a {family} environment")
        if config.mode == "eval":
            # "run:NAME" and paths relative to the home are the daemon's to resolve (after this
            # check); the worker validates again with the absolute path the daemon wrote
            checkpoint = os.path.expanduser(config.checkpoint or "")
            if os.path.isabs(checkpoint) and not os.path.exists(checkpoint):
                raise ConfigError("checkpoint", f"no such file: {checkpoint}")

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        """Checks across fields, once params have their defaults."""
        schema = self.schema(config.algo, config.env)
        for key, value in given.items():  # check_params leaves list items to us
            items = schema["properties"][key].get("items")
            if items and items.get("type") != "object" and isinstance(value, list):
                for index, item in enumerate(value):
                    check_value(f"params.{key}[{index}]", items, item)
        params = config.params
        family, env_id = catalog.resolve_env(config.env)
        parallels = params.get("parallels", 1)
        if config.steps is not None and config.mode == "train" and config.steps < parallels:
            raise ConfigError("steps", f"must be at least params.parallels ({parallels}): "
                                       f"steps count all parallel environments together")
        self._check_batches(params)
        self._check_actor_layers(config.algo, params, given)
        if family in catalog.MULTI_AGENT:
            self._check_multi_agent(config, family, env_id, given)
        schedule = params.get("curriculum_schedule")
        if schedule is not None:
            self._check_curriculum(config, family, env_id, schedule)
        if config.mode == "eval":
            self._check_checkpoint(config, family, env_id)
        if params.get("human_agent") is not None:
            if config.mode != "eval":
                raise ConfigError("params.human_agent", "hands one agent of a multi-agent checkpoint's evaluation "
                                                        "(mode eval) to a person")
            if config.placement.backend != "local":
                raise ConfigError("params.human_agent", f"a person plays from a client of this daemon: the run's "
                                                        f"placement is local, not {config.placement.backend}")

    @staticmethod
    def _check_batches(params: dict[str, Any]) -> None:
        parallels = params.get("parallels", 1)
        if "horizon_size" in params and "n_minibatch" in params:  # single-agent on-policy
            if params["horizon_size"] * parallels < params["n_minibatch"]:
                raise ConfigError("params.n_minibatch", "is larger than the rollout (horizon_size x parallels)")
        elif "buffer_size" in params and "n_minibatch" in params and not params.get("use_rnn"):
            # multi-agent on-policy: the rollout buffer holds buffer_size transitions over all envs
            if params["buffer_size"] < parallels:
                raise ConfigError("params.buffer_size", f"must be at least params.parallels ({parallels}): "
                                                        f"each environment holds buffer_size / parallels steps")
            if params["buffer_size"] < params["n_minibatch"]:
                raise ConfigError("params.n_minibatch", "is larger than params.buffer_size")
        if "buffer_size" in params and "batch_size" in params and params["batch_size"] > params["buffer_size"]:
            raise ConfigError("params.batch_size", f"is larger than params.buffer_size ({params['buffer_size']})")

    @staticmethod
    def _check_actor_layers(algo: str, params: dict[str, Any], given: dict[str, Any]) -> None:
        """An actor weight tensor above the algorithm's ``max_actor_layer_weights`` (NPG's learner inverts a
        dense matrix of its weights squared at every learner step: docs/workers/xuance.md, "NPG")."""
        limit = catalog.ALGORITHMS[algo].get("max_actor_layer_weights")
        representation, actor = params.get("representation_hidden_size"), params.get("actor_hidden_size")
        if limit is None or not representation or not isinstance(actor, list):
            return
        # the actor reads the representation's last layer; its output layer (a few actions) is left out
        widths = [representation[-1], *actor]
        for index, (inputs, units) in enumerate(zip(widths, widths[1:])):
            weights = inputs * units
            if weights > limit:
                field = ("representation_hidden_size" if index == 0 and "representation_hidden_size" in given
                         and "actor_hidden_size" not in given else "actor_hidden_size")
                raise ConfigError(f"params.{field}",
                                  f"{algo}'s actor layer of {inputs} x {units} = {weights} weights is over {limit}: "
                                  f"XuanCe's learner inverts a dense {weights} x {weights} matrix for it at every "
                                  f"learner step (measured on CartPole, one thread: 64 x 64 layers 5 to 13 s a step, 32 x 64 1.4 s, "
                                  f"32 x 32 0.25 s)")

    @staticmethod
    def _check_multi_agent(config: RunConfig, family: str, env_id: str, raw: dict[str, Any]) -> None:
        params = config.params
        info = catalog.ALGORITHMS[config.algo]
        scenario = catalog.MPE_ENVS.get(env_id, {})
        if params.get("training_mode") == "competitive":
            if not info.get("competitive"):
                raise ConfigError("params.training_mode",
                                  f"{config.algo} learns one team value; it trains cooperatively only "
                                  f"(competitive: {', '.join(a for a, i in catalog.ALGORITHMS.items() if i.get('competitive'))})")
            if raw.get("use_parameter_sharing") is True:
                raise ConfigError("params.use_parameter_sharing",
                                  "competitive training gives every agent its own networks: set it to false")
            params["use_parameter_sharing"] = False
        if params.get("use_parameter_sharing") and scenario.get("alike") is False:
            raise ConfigError("params.use_parameter_sharing",
                              f"{env_id}'s agents have different observation spaces; one shared network "
                              f"cannot take them all: set it to false")
        if needs_global_state(config.algo, env_id, params.get("use_parameter_sharing")) \
                and not params.get("use_global_state"):
            raise ConfigError("params.use_global_state",
                              f"without parameter sharing {config.algo}'s critic stacks the agents' observations, "
                              f"and {env_id}'s differ: it needs the global state (true)")
        if family == catalog.MULTIGRID:
            if params.get("continuous_action"):
                raise ConfigError("params.continuous_action", f"{env_id}'s actions are discrete (Discrete(8))")
            return
        if family == catalog.SISL:
            kind = catalog.action_kind(family, env_id)
            if bool(params.get("continuous_action")) != (kind == "continuous"):
                raise ConfigError("params.continuous_action", f"{env_id}'s actions are {kind}: "
                                                              f"{str(kind == 'continuous').lower()}")
            if "render_mode" in (params.get("env_kwargs") or {}):
                raise ConfigError("params.env_kwargs.render_mode", "is set by XuanCe (frames)")
            return
        kind = catalog.action_kind(catalog.MPE, env_id, params)
        if kind is not None and kind not in info["actions"]:
            raise ConfigError("params.continuous_action",
                              f"{config.algo} runs with {' or '.join(info['actions'])} actions here")
        kwargs = params.get("env_kwargs") or {}
        for reserved in ("continuous_actions", "render_mode"):
            if reserved in kwargs:
                raise ConfigError(f"params.env_kwargs.{reserved}", "is set by XuanCe (continuous_action, frames)")

    @staticmethod
    def _check_curriculum(config: RunConfig, family: str, env_id: str, schedule: list[dict]) -> None:
        if not schedule:
            raise ConfigError("params.curriculum_schedule", "needs at least one phase")
        total = 0
        for index, phase in enumerate(schedule):
            field = f"params.curriculum_schedule[{index}]"
            if not isinstance(phase, dict):
                raise ConfigError(field, "must be an object {\"env_id\": ..., \"steps\": ...}")
            for key in phase:
                if key not in _CURRICULUM_PHASE["properties"]:
                    raise ConfigError(f"{field}.{key}", "unknown field (env_id, steps, env_kwargs)")
            if not isinstance(phase.get("env_id"), str):
                raise ConfigError(f"{field}.env_id", "is required (a string)")
            steps = phase.get("steps")
            if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
                raise ConfigError(f"{field}.steps", "is required (a positive integer)")
            if "env_kwargs" in phase and not isinstance(phase["env_kwargs"], dict):
                raise ConfigError(f"{field}.env_kwargs", "must be an object")
            if "env_kwargs" in phase and family not in catalog.MULTI_AGENT:
                raise ConfigError(f"{field}.env_kwargs", "is for MPE and MultiGrid envs only")
            try:
                phase_family, phase_env = catalog.resolve_env(phase["env_id"])
            except ConfigError as exc:
                raise ConfigError(f"{field}.env_id", exc.message) from None
            if phase_family != family:
                raise ConfigError(f"{field}.env_id", f"is a {phase_family} environment; the run's env is {family}")
            if index == 0 and phase_env != env_id:
                raise ConfigError(f"{field}.env_id", f"the first phase is the run's env ({env_id}), "
                                                     f"not {phase['env_id']}")
            if family == catalog.MULTIGRID:
                first, this = catalog.agent_count(family, env_id, None), catalog.agent_count(family, phase_env, None)
                if first != this:
                    raise ConfigError(f"{field}.env_id", f"{phase_env} has {this} agents, phase 0 ({env_id}) has "
                                                         f"{first}: all phases must have the same agents")
            if family == catalog.CLASSIC_CONTROL:
                first = catalog.CLASSIC_CONTROL_ENVS.get(env_id, {}).get("spaces")
                this = catalog.CLASSIC_CONTROL_ENVS.get(phase_env, {}).get("spaces")
                if first and this and first != this:
                    raise ConfigError(f"{field}.env_id", f"{phase_env} has observation / action spaces {this}, "
                                                         f"phase 0 ({env_id}) has {first}: all phases must "
                                                         f"share them")
            total += steps
        if config.steps is None:
            config.steps = total
        elif config.steps != total:
            raise ConfigError("steps", f"is {config.steps} but the curriculum phases add up to {total}")

    @staticmethod
    def _check_checkpoint(config: RunConfig, family: str, env_id: str) -> None:
        meta = read_checkpoint_meta(config.checkpoint or "")
        if meta is None:
            return  # a plain XuanCe model file: the worker loads it with this run's params
        if meta.get("algo") != config.algo:
            raise ConfigError("checkpoint", f"was trained by {meta.get('algo')}, not {config.algo}")
        if meta.get("family") != family:
            raise ConfigError("checkpoint", f"was trained on a {meta.get('family')} environment, not {family}")
        if family in catalog.MULTI_AGENT:
            kwargs = config.params.get("env_kwargs") or {}
            count = catalog.agent_count(family, env_id, kwargs)
            mismatch = agent_count_mismatch(meta, count, env_id)
            if mismatch:
                raise ConfigError("checkpoint", mismatch)


def needs_global_state(algo: str, env_id: str, parameter_sharing: bool | None) -> bool:
    """An algorithm whose critic stacks observations, with its own networks per agent, on a
    scenario whose agents observe different things."""
    return (catalog.ALGORITHMS[algo].get("stacked_critic", False) and parameter_sharing is False
            and catalog.MPE_ENVS.get(env_id, {}).get("alike") is False)


def agent_count_mismatch(meta: dict[str, Any], n_agents: int | None, env_id: str) -> str | None:
    """Why a parameter-shared checkpoint cannot play with ``n_agents`` agents (None: it can)."""
    trained = meta.get("n_agents")
    if not meta.get("parameter_sharing") or n_agents is None or trained is None or trained == n_agents:
        return None
    return (f"this checkpoint shares one network among {trained} agents (parameter sharing), and "
            f"{env_id} here has {n_agents}: the shared network's input is the observation plus a "
            f"{trained}-wide one-hot agent id, so it does not fit {n_agents} agents; evaluate with "
            f"{trained} agents, or train a checkpoint for {n_agents}")


WORKER = XuanCeDescriptor()
