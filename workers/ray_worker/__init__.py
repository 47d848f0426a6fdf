"""The Ray RLlib worker: RLlib 2.60 (new API stack), single- and multi-agent, local or on a cluster.

The daemon imports this module to list, describe and validate: it must stay
light (no ray, torch, gymnasium or pettingzoo import). What runs is described
as data in ``catalog``; the worker process is ``cli.py``. docs/workers/ray.md
is the user's guide.
"""
from __future__ import annotations

import json
import os
from typing import Any

from workers.ray_worker import catalog
from workers.sdk.config import ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, check_torch_device, dist_version, torch_has_gpu_build
from workers.sdk.envs import missing_family, unknown_env
from workers.sdk.rundir import check_trained_on, read_checkpoint_meta


class RayDescriptor(WorkerDescriptor):
    name = "ray"
    catalog = catalog   # its module: WorkerDescriptor.schema serves catalog.schema
    package = "workers.ray_worker"
    upstream = "ray"
    description = ("Ray RLlib 2.60 (PPO, APPO, IMPALA, DQN, SAC) on gymnasium and PettingZoo envs: parameter "
                   "sharing, independent policies, self-play leagues, centralised critic; on a private Ray "
                   "or an existing cluster")

    def available(self) -> bool:
        return dist_version("ray") is not None and dist_version("torch") is not None

    def capabilities(self) -> dict[str, Any]:
        families = catalog.available_families()
        envs = catalog.known_envs()
        multi = [f for f in families if catalog.FAMILIES[f]["kind"] != "gym"]
        return {
            "paradigms": ["single_agent"] + (["multi_agent"] if multi else []),
            "algorithms": list(catalog.ALGORITHMS),
            "env_families": families,
            "envs": envs,
            "action_spaces": {a: list(catalog.ACTIONS[a]) for a in catalog.ALGORITHMS},
            "policy_configs": list(catalog.POLICY_CONFIGS),
            "turn_based_algorithms": list(catalog.ACTOR_CRITIC),
            "max_agents": max(catalog.ENVS[e].get("agents", 1) for e in envs),
            "parameter_sharing": True,
            "self_play": True,
            "centralised_critic": ["PPO"],
            "distributed": True,
            "pause": True, "stop": ["train"],   # mosaic stop / continue: training runs, between iterations
            "checkpoints": True,
            "resume": True,
            "gpu": torch_has_gpu_build(),
            "frames": True,
            "record": True,
            "schema_version": catalog.SCHEMA_VERSION,
        }

    # -- validation (WorkerDescriptor.validate calls check_env, then check_run) ----
    def check_env(self, config: RunConfig) -> None:
        info = catalog.env_info(config.env)
        if info is None:
            raise unknown_env(config.env, catalog.known_envs(), self.name)
        if not catalog.family_available(info["family"]):
            raise missing_family(config.env, info["family"], catalog.FAMILIES[info["family"]]["needs"])
        if config.mode == "train" and config.steps is None:
            raise ConfigError("steps", "is required to train (env steps sampled, all env runners together)")
        check_torch_device(config.device)

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        p = config.params
        items = self.schema(config.algo, config.env)["properties"]["fcnet_hiddens"]["items"]
        for index, width in enumerate(p["fcnet_hiddens"]):  # check_params leaves items to us
            check_value(f"params.fcnet_hiddens[{index}]", items, width)
        for key, amount in p["custom_resources_per_env_runner"].items():
            check_value(f"params.custom_resources_per_env_runner.{key}", {"type": "number", "minimum": 0}, amount)
        info = catalog.env_info(config.env)
        multi = info["kind"] != "gym"
        if p["human_agent"] is not None:
            if config.mode != "eval" or not multi:
                raise ConfigError("params.human_agent", "hands one agent of a multi-agent checkpoint's evaluation "
                                                        "(mode eval) to a person")
            if config.placement.backend != "local":
                raise ConfigError("params.human_agent", f"a person plays from a client of this daemon: the run's "
                                                        f"placement is local, not {config.placement.backend}")
        policy = p["policy"]
        if not multi and policy != "shared":
            raise ConfigError("params.policy", f"{config.env} is a single-agent environment: only 'shared' applies")
        if policy == "self_play" and not (info.get("two_player") or info.get("two_teams")):
            two = ", ".join(e for e, i in catalog.ENVS.items() if i.get("two_player"))
            raise ConfigError("params.policy", f"self_play needs a two-player game ({two}) or a two-team "
                                               f"MultiGrid game (soccer_2vs2...); {config.env} is not")
        if policy == "shared_value":
            if config.algo != "PPO":
                raise ConfigError("params.policy", "shared_value (centralised critic) runs with PPO only")
            if info["kind"] != "parallel":
                raise ConfigError("params.policy", "shared_value needs a simultaneous-move (parallel) environment; "
                                                   f"{config.env} is turn-based")
        self._check_model(config, given)
        if info["kind"] == "turn_based" and config.algo not in catalog.ACTOR_CRITIC:
            raise ConfigError("algo", f"{config.env} is a turn-based game with illegal moves masked out; the "
                                      f"masking module exists for {', '.join(catalog.ACTOR_CRITIC)} only")
        kind = catalog.action_kind(config.env, p["env_kwargs"])
        if kind not in catalog.ACTIONS[config.algo]:
            hint = " (MPE: env_kwargs {\"continuous_actions\": true})" if info["family"] == "mpe" else ""
            if "discrete_with" in info:
                hint = f" (env_kwargs {json.dumps(info['discrete_with'])}: discrete)"
            raise ConfigError("env", f"{config.algo} needs {' or '.join(catalog.ACTIONS[config.algo])} actions; "
                                     f"{config.env} has {kind} actions{hint}")
        if "minibatch_size" in p and p["minibatch_size"] > p["train_batch_size_per_learner"]:
            raise ConfigError("params.minibatch_size", f"is larger than params.train_batch_size_per_learner "
                                                       f"({p['train_batch_size_per_learner']})")
        if p["address"] == "":
            needed = p["env_runners"] * p["cpus_per_env_runner"]
            if needed > p["num_cpus"]:
                raise ConfigError("params.env_runners",
                                  f"{p['env_runners']} env runners x {p['cpus_per_env_runner']:g} CPUs need "
                                  f"{needed:g} CPUs; the private Ray has params.num_cpus = {p['num_cpus']}: "
                                  f"they would wait forever")
            if p["num_gpus"] > 0 and not torch_has_gpu_build():
                raise ConfigError("params.num_gpus", f"the installed torch ({dist_version('torch')}) is a "
                                                     f"CPU-only build")
            if p["custom_resources_per_env_runner"] and p["env_runners"]:
                raise ConfigError("params.custom_resources_per_env_runner",
                                  "a private Ray has no custom resources; join a cluster with params.address")
        if config.record and (config.mode == "train" or multi):
            raise ConfigError("record", "RLlib's env runners make their own envs: a dataset is recorded by an "
                                        "eval run of a single-agent checkpoint" if config.mode == "train" else
                                        f"{config.env} is multi-agent: a dataset holds single-agent transitions")
        if config.checkpoint is not None:
            self._check_checkpoint(config)
        elif config.mode == "eval":
            raise ConfigError("checkpoint", "is required when mode is 'eval'")

    @staticmethod
    def _check_model(config: RunConfig, given: dict[str, Any]) -> None:
        """The encoder fits the observations: a CNN for images, an MLP for vectors; the params of
        the other one, given other than their defaults (a form sends them all), would be silently
        unused: refused."""
        p = config.params
        env = config.env

        def changed(name: str) -> bool:
            return name in given and given[name] != catalog.COMMON[name]["default"]

        images = catalog.observes_images(env)
        if images:
            seen = "observed as 84x84x4 grey frames" if not catalog.pettingzoo_images(env) else \
                f"observed as {p['image_size']}x{p['image_size']} images"
            if p["model"] == "mlp":
                raise ConfigError("params.model", f"{env} is {seen}: RLlib's MLP takes vectors; use model 'cnn' "
                                                  f"(or 'auto')")
            for name in ("fcnet_hiddens", "fcnet_activation"):
                if changed(name):
                    raise ConfigError(f"params.{name}", f"sizes the MLP of vector observations; {env} is {seen} "
                                                        f"by RLlib's CNN: set conv_filters instead")
            if p["policy"] == "shared_value":
                raise ConfigError("params.policy", f"shared_value's critic concatenates every agent's vector "
                                                   f"observation; {env} is {seen}")
        else:
            if p["model"] == "cnn":
                raise ConfigError("params.model", f"{env} observes vectors: the CNN takes image observations "
                                                  f"(Atari, ViZDoom, {', '.join(catalog.image_envs())})")
            for name in ("conv_filters", "conv_activation"):
                if changed(name):
                    raise ConfigError(f"params.{name}", f"configures the CNN of image observations; {env} "
                                                        f"observes vectors (model 'mlp', fcnet_hiddens)")
        if not catalog.pettingzoo_images(env):
            for name in catalog.IMAGE_DEFAULTS:
                if changed(name):
                    raise ConfigError(f"params.{name}", f"shapes the PettingZoo image games' observations "
                                                        f"({', '.join(catalog.image_envs())}); not {env}'s")
        filters = p["conv_filters"]
        if filters is not None:
            if not filters:
                raise ConfigError("params.conv_filters", "is empty: give at least one [out_channels, kernel, "
                                                         "stride] layer, or null for RLlib's default")
            layer = {"type": "integer", "minimum": 1, "maximum": 4096}
            for index, spec in enumerate(filters):  # check_params leaves items to us
                if not isinstance(spec, list) or len(spec) != 3:
                    raise ConfigError(f"params.conv_filters[{index}]", "must be [out_channels, kernel, stride]")
                for part, value in zip(("out_channels", "kernel", "stride"), spec):
                    check_value(f"params.conv_filters[{index}].{part}", layer, value)
        elif images and catalog.pettingzoo_images(env) and p["image_size"] not in catalog.DEFAULT_FILTER_SIZES:
            sizes = ", ".join(map(str, catalog.DEFAULT_FILTER_SIZES))
            raise ConfigError("params.conv_filters", f"RLlib has default filters for {sizes}-pixel images only; "
                                                     f"give conv_filters for image_size {p['image_size']}")

    @staticmethod
    def _check_checkpoint(config: RunConfig) -> None:
        path = os.path.expanduser(config.checkpoint or "")
        if not os.path.isabs(path):
            raise ConfigError("checkpoint", "must be an absolute path")
        if os.path.isfile(path):
            path = os.path.dirname(path)
        if not os.path.isdir(os.path.join(path, "learner_group", "learner", "rl_module")):
            raise ConfigError("checkpoint", f"{path} is not an RLlib algorithm checkpoint directory")
        meta = read_checkpoint_meta(path)
        if meta is not None:
            check_trained_on(meta, config.env, config.algo if config.mode == "train" else None)
            if config.mode == "train" and meta.get("policy") != config.params.get("policy"):
                raise ConfigError("params.policy", f"the checkpoint was trained with policy "
                                                   f"{meta.get('policy')!r}")


WORKER = RayDescriptor()
