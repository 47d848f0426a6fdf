"""What both modes of the XuanCe worker process share (training in ``runtime``, eval in
``evaluate``): the process environment XuanCe and torch read at import, XuanCe's arguments
(``parser_args``), its runner (``build_runner``) and its end (``finish``).

Everything heavy (xuance, torch) is imported inside functions, after ``prepare_process``.
"""
from __future__ import annotations

import json
import os
from argparse import Namespace
from typing import Any

from workers.sdk import jumanji_envs, registration
from workers.sdk.rundir import CHECKPOINT_DIR, TENSORBOARD_DIR
from workers.xuance_worker import catalog, fixes, mpe_alias, multigrid, sisl, user_config, vizdoom

SITEDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")
FINAL_MODEL = "final_train_model.pth"  # XuanCe's own name for it
PERIODIC_PREFIX = "step_"   # checkpoints/step_<N>/: the ones saved on the way (kept: keep_checkpoints)
# in a training run's directory: the config XuanCe built and trained with (its Namespace), to read back
PARSED_CONFIG = "xuance_args.json"
# params that are mosaic's, not keys of XuanCe's config
MOSAIC_PARAMS = ("curriculum_schedule", "checkpoint_interval", "torch_threads", "env_kwargs", "training_mode",
                 user_config.PARAM)


# -- process setup ------------------------------------------------------------
def prepare_process(torch_threads: int) -> None:
    """Environment variables XuanCe, torch and spawned env processes read at import time.

    Called before the first import of xuance or torch. Also used by
    bench/bench_xuance.py for the plain-XuanCe side, so both run alike.
    """
    os.environ.update(process_environment(torch_threads))
    mpe_alias.install()
    multigrid.install()
    vizdoom.install()
    sisl.install()  # PettingZoo's SISL games in XuanCe's multi-agent registry
    fixes.install()  # XuanCe's bugs that keep COMA and Dreamer from starting


def process_environment(torch_threads: int) -> dict[str, str]:
    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != SITEDIR]
    return {
        # mpi4py blocks in MPI_Init outside an MPI launch (if it is installed)
        "MPI4PY_RC_INITIALIZE": "0",
        # the alias of pettingzoo.mpe for processes XuanCe spawns (sitedir/sitecustomize.py)
        "PYTHONPATH": os.pathsep.join([SITEDIR, *pythonpath]),
        # torch sizes its thread pool from this; spawned env processes import torch too
        "OMP_NUM_THREADS": str(torch_threads),
        # XuanCe's tqdm bars go to stderr.log: a line every 10 s, not 10 a second
        "TQDM_MININTERVAL": os.environ.get("TQDM_MININTERVAL", "10"),
        "WANDB_MODE": "disabled",
        # MUJOCO_GL, NUMBA_CACHE_DIR (MultiGrid's numba functions compile once per home)...
        **registration.process_environment(),
    }


def set_torch_threads(n: int) -> None:
    import torch
    torch.set_num_threads(n)


# -- XuanCe's arguments ---------------------------------------------------------
def total_steps(config: dict[str, Any], template: str) -> int:
    if config["steps"] is not None:
        return int(config["steps"])
    return int(catalog.merged_config(template)["running_steps"])


def xuance_params(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key not in MOSAIC_PARAMS}


def parser_args(config: dict[str, Any], family: str, env_id: str, params: dict[str, Any],
                running_steps: int) -> Namespace:
    """What XuanCe takes as ``parser_args``: its config keys, overriding its YAML files."""
    args = xuance_params(params)
    args.update(
        env_name=catalog.ENV_NAME[family], env_id=env_id, runner=catalog.RUNNER[family],
        running_steps=running_steps, seed=config["seed"], env_seed=config["seed"],
        device="cpu" if config["device"] in ("cpu", "auto") else config["device"],
        dl_toolbox="torch", distributed_training=False, logger="tensorboard",
        # absolute: XuanCe joins them to the cwd, and then appends env_id
        log_dir=os.path.abspath(TENSORBOARD_DIR), model_dir=os.path.abspath(CHECKPOINT_DIR),
        # render=False: no videos into TensorBoard; "rgb_array" lets frames be taken on demand
        render=False, render_mode="rgb_array", test_episode=config["eval_episodes"],
    )
    return Namespace(**args)


def build_runner(config: dict[str, Any], family: str, env_id: str, template: str, args: Namespace):
    registration.register_family_of(env_id)  # Atari: ale_py's ids (MultiGrid registers in its adapter)
    import xuance
    return xuance.get_runner(algo=config["algo"], env=family, env_id=env_id, config_path=template,
                             parser_args=args)


def prepare_run(config: dict[str, Any]) -> None:
    """What a run's process needs before XuanCe loads: its environment variables, and gymnasium
    ids "jumanji/<Env>" (env "classic_control:jumanji/TSP-v1": Jumanji's envs through its gym wrapper)."""
    prepare_process(config["params"]["torch_threads"])
    jumanji_envs.register_for(config["env"].split(":", 1)[-1])
    text = config["params"].get(user_config.PARAM)
    if text is not None:  # the user's own XuanCe YAML, kept with the run (its values are in the params)
        with open(user_config.FILE_NAME, "w", encoding="utf-8") as f:
            f.write(text)


def finish(runner, agent) -> None:
    """What RunnerBase._finalize does: close the TensorBoard writer and the environments."""
    agent.finish()
    if runner.envs is not None:
        runner.envs.close()
        runner.envs = None


def write_parsed_config(namespace: Namespace) -> None:
    """XuanCe's own config of the run (its YAML files and our parser_args, as it merged them)."""
    with open(PARSED_CONFIG, "w", encoding="utf-8") as f:
        json.dump(vars(namespace), f, indent=1, sort_keys=True, default=str)
