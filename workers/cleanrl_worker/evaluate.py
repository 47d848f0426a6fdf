"""Evaluation mode: load a checkpoint, play ``eval_episodes`` episodes, emit them.

Runs inside the worker process (the only place it imports torch). The script
is imported as a module, under the same patches as in training, so the
evaluation uses the script's own ``make_env`` and network classes (``Agent``,
``Actor``, ``QNetwork``) and its episodes become episode events exactly as in
training.

Checkpoints it reads:
- CleanRL's own --save-model files (dqn: the q_network state dict; c51:
  ``{"model_weights", "args"}``), as cleanrl_utils/evals reads them;
- mosaic's --save-model files (``{"mosaic_format": 1, "networks", "args",
  "obs_rms"}``), written by ``patches.save_networks_at_exit``.

How each kind of network acts (as CleanRL's evaluators do where they exist):
``agent`` samples its policy; ``actor`` acts deterministically (SAC: the mean
action); ``q_network`` is epsilon-greedy with epsilon 0.05.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import random
import sys
from typing import Any, Callable

from workers.cleanrl_worker import WORKER, patches
from workers.cleanrl_worker.run_setup import CHECKPOINT_DIR, TENSORBOARD_DIR, algo_name, frames_request
from workers.sdk.packages import upstream
from workers.sdk.telemetry import Emitter

EPSILON = 0.05  # cleanrl_utils/evals' default for DQN and C51


def load_script(path: str):
    """Import a CleanRL script as a module: its classes and functions, not its __main__ block."""
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)  # as `python script.py` would, for a fork's own modules
    spec = importlib.util.spec_from_file_location("mosaic_cleanrl_script", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def read_checkpoint(path: str, name: str) -> tuple[dict[str, Any], dict[str, Any], list]:
    """(networks by name, the script's args, observation statistics) from a checkpoint file, or from
    a resume checkpoint's directory (resume.py: its model file)."""
    import torch

    from workers.cleanrl_worker.resume import MODEL_FILE
    if os.path.isdir(path):
        path = os.path.join(path, MODEL_FILE)
    data = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(data, dict) and data.get("mosaic_format") == 1:
        if data.get("algo") not in (None, name):
            raise ValueError(f"{path} was saved by {data['algo']}, not {name}")
        return data["networks"], data.get("args", {}), data.get("obs_rms", [])
    if isinstance(data, dict) and "model_weights" in data:  # c51's --save-model
        return {"q_network": data["model_weights"]}, data.get("args", {}), []
    if isinstance(data, dict) and all(isinstance(v, torch.Tensor) for v in data.values()):  # dqn's --save-model
        return {"q_network": data}, {}, []
    raise ValueError(f"{path} is not a CleanRL checkpoint mosaic knows")


def construct(cls, envs, saved_args: dict[str, Any]):
    """``cls(envs, ...)`` with further constructor arguments taken from the saved args by name
    (C51's n_atoms/v_min/v_max, RPO's rpo_alpha)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[2:]  # after self, env
    kwargs = {}
    for param in params:
        if param.name in saved_args:
            kwargs[param.name] = saved_args[param.name]
        elif param.default is inspect.Parameter.empty:
            raise ValueError(f"cannot build {cls.__name__}: the checkpoint has no value for {param.name!r}")
    return cls(envs, **kwargs)


def build_policy(script, networks: dict[str, Any], saved_args: dict[str, Any], envs, device) -> Callable:
    """A function from an observation batch (tensor) to an action batch (tensor)."""
    import numpy as np
    import torch

    if "agent" in networks and hasattr(script, "Agent"):  # ppo, ppo_continuous_action, rpo
        agent = construct(script.Agent, envs, saved_args).to(device)
        agent.load_state_dict(networks["agent"])
        agent.eval()
        return lambda obs: agent.get_action_and_value(obs)[0]
    if "actor" in networks and hasattr(script, "Actor"):  # sac, td3, ddpg
        actor = construct(script.Actor, envs, saved_args).to(device)
        actor.load_state_dict(networks["actor"])
        actor.eval()
        if hasattr(actor, "get_action"):
            return lambda obs: actor.get_action(obs)[2]  # SAC's deterministic (mean) action
        return lambda obs: actor(obs)
    if "q_network" in networks and hasattr(script, "QNetwork"):  # dqn, c51
        q_network = construct(script.QNetwork, envs, saved_args).to(device)
        q_network.load_state_dict(networks["q_network"])
        q_network.eval()
        if hasattr(q_network, "get_action"):
            greedy = lambda obs: q_network.get_action(obs)[0]  # noqa: E731
        else:
            greedy = lambda obs: torch.argmax(q_network(obs), dim=1)  # noqa: E731

        def epsilon_greedy(obs):
            if random.random() < EPSILON:
                return torch.as_tensor(np.stack([envs.single_action_space.sample() for _ in range(envs.num_envs)]))
            return greedy(obs)

        return epsilon_greedy
    raise ValueError(f"the checkpoint's networks ({', '.join(networks)}) do not match the script's classes "
                     "(expected agent + Agent, actor + Actor, or q_network + QNetwork)")


def make_eval_env(script, config: dict, saved_args: dict[str, Any]):
    """A one-env vector env built by the script's own make_env (arguments matched by name)."""
    values = {"env_id": config["env"], "seed": config["seed"], "idx": 0,
              "capture_video": bool(config["params"].get("capture-video", False)),
              "run_name": f"eval-{config.get('run_id') or 'run'}", "gamma": saved_args.get("gamma", 0.99)}
    names = list(inspect.signature(script.make_env).parameters)
    missing = [n for n in names if n not in values]
    if missing:
        raise ValueError(f"the script's make_env takes {', '.join(missing)}, which the evaluator cannot supply")
    thunk = script.make_env(**{n: values[n] for n in names})
    return script.gym.vector.SyncVectorEnv([thunk])


def restore_obs_rms(envs, saved: list) -> None:
    """Put back the observation statistics of training (ppo_continuous_action, rpo), frozen."""
    import numpy as np

    for saved_chain, chain in zip(saved, patches.find_obs_normalizers(envs)):
        for stats, wrapper in zip(saved_chain, chain):
            wrapper.obs_rms.mean = np.asarray(stats["mean"], dtype=np.float64)
            wrapper.obs_rms.var = np.asarray(stats["var"], dtype=np.float64)
            wrapper.obs_rms.count = stats["count"]
            if hasattr(type(wrapper), "update_running_mean"):
                wrapper.update_running_mean = False


def finished_returns(infos) -> list[float]:
    """Returns of the episodes that ended in this step, from RecordEpisodeStatistics."""
    if isinstance(infos, dict):  # gymnasium (final_info restored by the patches)
        return [float(info["episode"]["r"]) for info in infos.get("final_info", [])
                if info is not None and "episode" in info]
    return [float(info["episode"]["r"]) for info in infos if "episode" in info]  # gym 0.23


def play(config: dict) -> list[float]:
    import numpy as np
    import torch

    path = WORKER.script_for(config["algo"])
    name = algo_name(config["algo"])
    script = load_script(path)
    networks, saved_args, obs_rms = read_checkpoint(os.path.expanduser(config["checkpoint"]), name)

    seed = config["seed"]
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    device = torch.device("cpu" if config["device"] == "cpu" or not torch.cuda.is_available() else "cuda")

    envs = make_eval_env(script, config, saved_args)
    restore_obs_rms(envs, obs_rms)
    policy = build_policy(script, networks, saved_args, envs, device)
    gymnasium_api = script.gym.__name__ == "gymnasium"
    obs = envs.reset(seed=seed)[0] if gymnasium_api else envs.reset()

    returns: list[float] = []
    while len(returns) < config["eval_episodes"]:
        with torch.no_grad():
            actions = policy(torch.Tensor(obs).to(device)).cpu().numpy()
        result = envs.step(actions)
        obs, infos = result[0], result[-1]
        returns += finished_returns(infos)
    envs.close()
    return returns[: config["eval_episodes"]]


def run(config: dict, emitter: Emitter) -> int:
    emitter.run_started("cleanrl", config["algo"], config["env"], total_steps=None, upstream=upstream("cleanrl"))
    # the patches turn the evaluation env's episodes into episode events
    # (and, with "record", its transitions into dataset.hdf5, as a training run's)
    record = {"record": config["record"], "env": config["env"], "directory": os.path.abspath(".")} \
        if config.get("record") else None
    patches.install(algo=algo_name(config["algo"]), checkpoint_dir=os.path.abspath(CHECKPOINT_DIR),
                    tensorboard_dir=os.path.abspath(TENSORBOARD_DIR), frames=frames_request(config),
                    record=record)
    returns = play(config)
    if patches.RECORDER is not None:
        patches.RECORDER.finish(emitter)
    emitter.scalar("eval/mean_episodic_return", sum(returns) / len(returns), patches.env_steps)
    emitter.run_completed(step=patches.env_steps)
    return 0
