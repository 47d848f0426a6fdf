"""The Tianshou worker: Tianshou 2.0.1's algorithms (online, offline, imitation) on gymnasium envs.

The daemon imports this module to list, describe and validate: it must stay
light (no tianshou, torch or gymnasium import). The schemas are read from
Tianshou's source (catalog.py); the worker process is cli.py, the training
runtime.py. docs/workers/tianshou.md is the user's guide.
"""
from __future__ import annotations

import os
from typing import Any

from workers.sdk.config import ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, check_torch_device, dist_version, torch_has_gpu_build
from workers.sdk.envs import JUMANJI_GYM_ENVS, missing_family, unknown_env
from workers.sdk.rundir import check_trained_on, read_checkpoint_meta
from workers.tianshou_worker import catalog


class TianshouDescriptor(WorkerDescriptor):
    name = "tianshou"
    package = "workers.tianshou_worker"
    upstream = "tianshou"
    description = ("Tianshou 2.0.1 (procedural API): DQN family, C51, Rainbow, QRDQN, IQN, FQF, REINFORCE, A2C, "
                   "PPO, NPG, TRPO, DDPG, TD3, SAC, discrete SAC, REDQ; offline BCQ, CQL, TD3+BC, discrete "
                   "BCQ/CQL/CRR, BC and GAIL from datasets recorded by other runs; Atari and ViZDoom through "
                   "Tianshou's Atari CNNs")

    def available(self) -> bool:
        return catalog.available() and dist_version("torch") is not None

    def capabilities(self) -> dict[str, Any]:
        envs = [e for e, i in catalog.ENVS.items() if self._family_installed(i["family"])]
        multi = self._family_installed(catalog.MULTIGRID)
        return {
            "paradigms": ["single_agent"] + (["multi_agent"] if multi else []),
            "algorithms": list(catalog.ALGORITHMS),
            "offline_algorithms": [a for a, i in catalog.ALGORITHMS.items()
                                   if i["kind"] == catalog.OFFLINE or i.get("dataset")],
            "env_families": [f for f in catalog.FAMILIES if self._family_installed(f)],
            "envs": {a: [e for e in envs if catalog.takes_env(a, e)] for a in catalog.ALGORITHMS},
            "multi_agent_algorithms": catalog.MULTI_AGENT_ALGORITHMS if multi else [],
            "action_spaces": {a: (["discrete", "continuous"] if i["actions"] == "both" else [i["actions"]])
                              for a, i in catalog.ALGORITHMS.items()},
            "pause": True, "stop": ["train"],   # mosaic stop / continue: training runs, at epoch ends
            "checkpoints": True,
            "resume": True,
            "gpu": torch_has_gpu_build(),
            "frames": True,
            "record": True,
            "datasets": True,
        }

    @staticmethod
    def _family_installed(family: str) -> bool:
        return all(dist_version(d) is not None for d in catalog.FAMILIES[family])

    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        if algo not in catalog.ALGORITHMS:
            raise self.unknown_algo(algo, catalog.ALGORITHMS)
        return catalog.env_schema(algo, env)

    def check_env(self, config: RunConfig) -> None:
        info = catalog.ENVS.get(config.env)
        if info is None and config.env in JUMANJI_GYM_ENVS:
            raise ConfigError("env", f"{config.env} has {JUMANJI_GYM_ENVS[config.env]['actions']} actions; "
                                     f"Tianshou's networks here take Discrete or Box actions")
        if info is None:
            raise unknown_env(config.env, list(catalog.ENVS), self.name)
        if not self._family_installed(info["family"]):
            raise missing_family(config.env, info["family"], catalog.FAMILIES[info["family"]])
        if catalog.is_multigrid(config.env):
            if config.algo not in catalog.MULTI_AGENT_ALGORITHMS:
                raise ConfigError("algo", f"{config.env} is a multi-agent game: every agent learns online with its "
                                          f"own {', '.join(catalog.MULTI_AGENT_ALGORITHMS)}; not {config.algo}")
            if config.record:
                raise ConfigError("record", f"{config.env} is multi-agent: a dataset holds single-agent transitions")
        if not catalog.takes(config.algo, info["actions"]):
            raise ConfigError("env", f"{config.algo} takes {catalog.ALGORITHMS[config.algo]['actions']} actions; "
                                     f"{config.env} has {info['actions']} actions")
        if info.get("image") and not catalog.takes_env(config.algo, config.env):
            raise ConfigError("algo", f"{config.env} has image observations; {catalog.image_refusal(config.algo)}")
        if config.mode == "train" and config.steps is None:
            raise ConfigError("steps", "is required to train (env steps; offline: gradient steps)")
        check_torch_device(config.device)

    def check_run(self, config: RunConfig, given: dict[str, Any]) -> None:
        info = catalog.ALGORITHMS[config.algo]
        p = config.params
        for index, width in enumerate(p["hidden_sizes"]):
            check_value(f"params.hidden_sizes[{index}]", catalog.MOSAIC_PARAMS["hidden_sizes"]["items"], width)
        if not p["hidden_sizes"]:
            raise ConfigError("params.hidden_sizes", "needs at least one layer")
        needs_data = info["kind"] == catalog.OFFLINE or info.get("dataset")
        if config.mode == "train" and needs_data and not config.dataset:
            raise ConfigError("dataset", f"{config.algo} learns from a recorded dataset: name a run that recorded "
                                         f"one on {config.env} (\"dataset\": \"<run name or id>\")")
        if config.dataset and not needs_data:
            raise ConfigError("dataset", f"{config.algo} is an online algorithm; it takes no dataset")
        if config.dataset and not os.path.isfile(config.dataset):
            raise ConfigError("dataset", f"no such file: {config.dataset}")
        if "v_min" in p and p["v_min"] >= p["v_max"]:
            raise ConfigError("params.v_min", f"must be < params.v_max ({p['v_max']})")
        if config.record and info["kind"] == catalog.OFFLINE and config.mode == "train":
            raise ConfigError("record", f"{config.algo} trains from a dataset without stepping an env; "
                                        f"record from an evaluation of its checkpoint")
        if config.record and catalog.ENVS[config.env].get("image"):
            raise ConfigError("record", f"{config.env} has image observations (4x84x84 frames a transition); "
                                        f"mosaic records datasets of vector observations only")
        if config.checkpoint is not None:
            self._check_checkpoint(config)

    @staticmethod
    def _check_checkpoint(config: RunConfig) -> None:
        path = config.checkpoint or ""
        if not os.path.isabs(path) or not os.path.isfile(path):
            raise ConfigError("checkpoint", f"{path} is not a checkpoint file (checkpoints/*.pt of a tianshou run)")
        meta = read_checkpoint_meta(path)
        if meta is not None:
            check_trained_on(meta, config.env, config.algo)
            if meta.get("hidden_sizes") != config.params["hidden_sizes"]:
                raise ConfigError("params.hidden_sizes", f"the checkpoint's networks have {meta.get('hidden_sizes')}")


WORKER = TianshouDescriptor()
