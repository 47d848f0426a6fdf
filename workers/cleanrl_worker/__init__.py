"""The CleanRL worker: CleanRL's own single-file scripts, unmodified, with telemetry.

The daemon imports this module to list, describe and validate; it must stay
light (no torch, gym or cleanrl import): scripts are located and their argparse
options read as source text (see ``catalog`` and ``argparse_schema``).

``algo`` is either the name of an installed CleanRL script (``ppo``, ``dqn``,
...) or the absolute path of a user's own CleanRL-style script
(``/home/me/cleanrl-fork/ppo_lstm.py``); either way the params are that
script's argparse options, without the dashes. See docs/workers/cleanrl.md.
"""
from __future__ import annotations

import os
from typing import Any

from workers.cleanrl_worker import catalog
from workers.cleanrl_worker.argparse_schema import property_schema
from workers.sdk.config import SCHEMA_DIALECT, ConfigError, RunConfig, check_value
from workers.sdk.descriptor import WorkerDescriptor, dist_version, torch_has_gpu_build
from workers.sdk.envs import VIZDOOM, env_family, unknown_env


class CleanRLDescriptor(WorkerDescriptor):
    name = "cleanrl"
    package = "workers.cleanrl_worker"
    upstream = "cleanrl"
    description = "CleanRL's single-file algorithms (PPO, DQN, C51, SAC, TD3, DDPG, ...), run unmodified"

    def capabilities(self) -> dict[str, Any]:
        algorithms = catalog.installed_scripts()
        families = [family for family, module in catalog.ENV_FAMILIES.items()
                    if catalog.module_available(module)]
        return {
            "paradigms": ["single_agent"],
            "algorithms": algorithms,
            "env_families": families,
            # per algorithm, the known env ids it runs here (others may work too)
            "envs": {algo: catalog.envs_for(*catalog.SCRIPTS[algo], families, algo) for algo in algorithms},
            "action_spaces": {algo: [catalog.SCRIPTS[algo][0]] for algo in algorithms},
            "max_agents": 1,
            "self_play": False,
            "pause": True,
            # mosaic stop / continue: training runs, between two passes of the script's main loop
            "stop": ["train"],
            "checkpoints": True,
            "gpu": torch_has_gpu_build(),
            "frames": True,
            "record": True,
            # algo may also be the absolute path of a CleanRL-style script
            "user_scripts": True,
        }

    def stop_refusal(self, config: dict[str, Any]) -> str | None:
        refusal = super().stop_refusal(config)
        if refusal is None and catalog.is_script_path(config.get("algo", "")):
            from workers.cleanrl_worker.resume import find_main_loop
            if find_main_loop(self.script_for(config["algo"])) is None:
                return (f"{config['algo']} has no training loop mosaic can find (a module-level "
                        f"'for NAME in range(...)' that steps the envs), so it cannot stop and continue")
        return refusal

    def accepts_algo(self, algo: str) -> bool:
        return algo in self.algorithms() or catalog.is_script_path(algo)

    # -- scripts -------------------------------------------------------
    def script_for(self, algo: str) -> str:
        """Path of the script ``algo`` names; ConfigError("algo") if there is none."""
        if catalog.is_script_path(algo):
            path = os.path.expanduser(algo)
            if not os.path.isabs(path):
                raise ConfigError("algo", f"a script path must be absolute, not {algo!r}")
            if not os.path.isfile(path):
                raise ConfigError("algo", f"no such script: {path}")
            try:
                args = catalog.script_args(path)
            except (OSError, SyntaxError, UnicodeDecodeError) as exc:
                raise ConfigError("algo", f"cannot read {path}: {exc}") from None
            if not any(arg.name == "env-id" for arg in args):
                raise ConfigError("algo", f"{path} has no --env-id option: "
                                          "mosaic sets the environment through it")
            return path
        if algo not in catalog.installed_scripts():
            choices = ", ".join(catalog.installed_scripts()) or "none: cleanrl is not installed"
            raise ConfigError("algo", f"unknown algorithm {algo!r} for worker 'cleanrl'; choose from "
                                      f"{choices}, or give the absolute path of a CleanRL-style script")
        return catalog.script_path(algo)

    def script_traits(self, algo: str) -> tuple[str | None, str | None]:
        """(action space, env library: "gym" or "gymnasium") of ``algo``; None where unknown."""
        if algo in catalog.SCRIPTS:
            return catalog.SCRIPTS[algo]
        return catalog.sniff_script(self.script_for(algo))

    # -- schema and validation -----------------------------------------
    def schema(self, algo: str, env: str | None = None) -> dict[str, Any]:
        path = self.script_for(algo)
        properties: dict[str, Any] = {}
        for arg in catalog.param_args(path):
            prop = property_schema(arg)
            bounds = catalog.BOUNDS.get(arg.name)
            if bounds and arg.type in ("integer", "number") and arg.nargs is None:
                bounded = {**prop, **bounds}
                try:  # a user's script may have a default outside the usual range: keep it valid
                    if arg.has_default and arg.default is not None:
                        check_value(arg.name, bounded, arg.default)
                    prop = bounded
                except ConfigError:
                    pass
            properties[arg.name] = prop
        owned = ", ".join(f"--{flag} from '{field}'" for flag, field in catalog.OWNED_ARGS.items())
        # an installed script by its place in the package (where it is on this machine says nothing
        # in a form); a user's own script by the path they gave
        shown = path if catalog.is_script_path(algo) else f"cleanrl/{os.path.basename(path)}"
        schema = {
            "$schema": SCHEMA_DIALECT,
            "title": f"cleanrl {os.path.basename(path)[:-3] if catalog.is_script_path(algo) else algo}",
            "description": f"Options of {shown} (its argparse parser). Set by the run config instead: {owned}.",
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        # a script that trains whole updates ends short of the steps asked: the form and
        # `mosaic submit` say where (mosaic_tui/fmt.py steps_short)
        per_update = [name for name in catalog.steps_per_update(path) if name in properties]
        if per_update:
            schema["x-steps-per-update"] = per_update
        return schema

    def check_env(self, config: RunConfig) -> None:
        path = self.script_for(config.algo)  # a script path that is no CleanRL-style script says why here
        wanted, library = self.script_traits(config.algo)
        if env_family(config.env) == VIZDOOM:
            raise ConfigError("env", f"{config.env}: no CleanRL 1.2.0 script trains on ViZDoom unmodified "
                                     f"(dqn_atari's wrappers need ALE's get_action_meanings and lives; the "
                                     f"other scripts' MLPs take flat vectors, not 84x84x4 frames); "
                                     f"use the tianshou, xuance or ray worker")
        known = catalog.ENVS.get(config.env)
        if known is not None:
            family, space, libraries = known
            if wanted is not None and space != wanted:
                raise ConfigError("env", f"{config.algo} needs an environment with {wanted} actions; "
                                         f"{config.env} has {space} actions")
            if library is not None and library not in libraries:
                names = {"gym": "gym 0.23", "gymnasium": "gymnasium"}
                raise ConfigError("env", f"{config.algo} makes its envs with {names[library]}, which has no "
                                         f"{config.env} ({' and '.join(names[l] for l in libraries)} only)")
            made_for = catalog.SCRIPT_FAMILIES.get(config.algo)
            if made_for is not None and family not in made_for:
                raise ConfigError("env", f"{config.algo} is made for {' and '.join(made_for)} environments "
                                         f"(its CNN takes 84x84 frames); {config.env} is a {family} environment")
            if made_for is None and family == "atari" and config.algo in catalog.SCRIPTS:
                atari = ", ".join(a for a, f in catalog.SCRIPT_FAMILIES.items() if "atari" in f)
                raise ConfigError("env", f"{config.algo}'s networks take vectors, not Atari frames; use {atari}")
            module = catalog.ENV_FAMILIES[family]
            if not catalog.module_available(module):
                raise ConfigError("env", f"{config.env} is a {family} environment, which needs the "
                                         f"'{module}' package; it is not installed")
        elif ":" not in config.env:
            # a typo is refused here, with the closest ids, not by gym's NameNotFound seconds into
            # the run; an env of one's own is named as gym and gymnasium import it: "module:EnvId-v0"
            raise unknown_env(config.env, sorted(catalog.ENVS), self.name)
        names = {arg.name for arg in catalog.script_args(path)}
        if config.steps is not None and "total-timesteps" not in names:
            raise ConfigError("steps", f"{path} has no --total-timesteps option")
        if config.device.startswith("cuda") and not torch_has_gpu_build():
            raise ConfigError("device", f"the installed torch ({dist_version('torch')}) is a CPU-only build")
        # eval: parse_run_config requires a checkpoint; the daemon resolves
        # "run:NAME" and home-relative references after this, and checks them
        if config.mode == "eval" and os.path.isabs(config.checkpoint or "") \
                and not os.path.exists(config.checkpoint):   # a file, or a resume checkpoint's directory
            raise ConfigError("checkpoint", f"no such file: {config.checkpoint}")
        if config.mode == "train" and os.path.isabs(config.checkpoint or ""):
            check_resume_checkpoint(config.checkpoint, config.algo, config.env)
        for key in config.params:  # before the schema, which has no such key, says less
            if key in catalog.OWNED_ARGS:
                raise ConfigError(f"params.{key}", f"is set by the run config's "
                                                   f"'{catalog.OWNED_ARGS[key]}' field")


def check_resume_checkpoint(path: str, algo: str, env: str) -> None:
    """A training run starts from a resume checkpoint (resume.py) of the same algorithm and env:
    ConfigError("checkpoint") naming what is wrong, read from the checkpoint's manifest (no torch)."""
    import json

    from workers.cleanrl_worker.resume import STATE_FILE
    from workers.sdk.rundir import MANIFEST_SUFFIX
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    if not os.path.isfile(os.path.join(folder, STATE_FILE)):
        raise ConfigError("checkpoint", f"{path} is not a resume checkpoint: a training run starts from a "
                                        f"checkpoints/resume-<step>/ directory (saved by mosaic stop or every "
                                        f"checkpoint_minutes); a model file only plays (--mode eval)")
    try:
        with open(folder.rstrip(os.sep) + MANIFEST_SUFFIX, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return   # no manifest to read: the script refuses a checkpoint of another algorithm when it loads it
    if manifest.get("algo") not in (None, algo):
        raise ConfigError("checkpoint", f"{path} is a checkpoint of {manifest['algo']}, not {algo}")
    if manifest.get("env") not in (None, env):
        raise ConfigError("checkpoint", f"{path} was trained on {manifest['env']}, not {env}")


WORKER = CleanRLDescriptor()
