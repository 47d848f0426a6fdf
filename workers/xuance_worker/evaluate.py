"""The XuanCe worker's evaluation: a checkpoint played in XuanCe's test mode (``runtime.evaluate``),
a person in one agent's seat (``params.human_agent``), and ``Policy``: a MultiGrid checkpoint
played greedily outside XuanCe's runner (the MOSAIC LLM worker's checkpoint seats).

Heavy imports (xuance, torch) happen inside functions, after ``run_setup.prepare_run``.
"""
from __future__ import annotations

import os
import shutil
from typing import Any

from workers.sdk.config import ConfigError
from workers.sdk.dataset import env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.rundir import checkpoint_dir, read_checkpoint_meta
from workers.sdk.telemetry import Emitter
from workers.xuance_worker import agent_count_mismatch, catalog, mpe_alias, multigrid
from workers.xuance_worker.hooks import Hooks, install_hooks
from workers.xuance_worker.run_setup import (
    FINAL_MODEL,
    build_runner,
    finish,
    parser_args,
    prepare_run,
    process_environment,
    set_torch_threads,
)


def run(config: dict[str, Any], emitter: Emitter) -> int:
    """Load ``config.checkpoint`` and play ``eval_episodes`` episodes (XuanCe's test mode)."""
    prepare_run(config)
    family, env_id = catalog.resolve_env(config["env"])
    multi_agent = family in catalog.MULTI_AGENT
    template = catalog.config_file(config["algo"], family, env_id)
    checkpoint = os.path.abspath(os.path.expanduser(config["checkpoint"]))
    if not os.path.exists(checkpoint):
        raise ConfigError("checkpoint", f"no such file: {checkpoint}")
    folder = checkpoint_dir(checkpoint)
    model_name = None if os.path.isdir(checkpoint) else os.path.basename(checkpoint)
    meta = read_checkpoint_meta(checkpoint)
    params = dict(config["params"])
    if meta is not None:
        # the networks must be built as they were trained; the world is this run's
        params.update(meta.get("params") or {})
    params["parallels"] = 1
    if "vectorize" in params:
        params["vectorize"] = "DummyVecMultiAgentEnv" if multi_agent else "DummyVecEnv"
    env_kwargs = config["params"].get("env_kwargs") or {}
    emitter.run_started("xuance", config["algo"], config["env"], total_steps=None, upstream=upstream("xuance"),
                        family=family, mode="eval", checkpoint=checkpoint, episodes=config["eval_episodes"])
    set_torch_threads(config["params"]["torch_threads"])
    args = parser_args(config, family, env_id, params, running_steps=1)
    mpe_alias.set_env_kwargs(env_kwargs)
    runner = build_runner(config, family, env_id, template, args)
    agent = runner.agent
    try:
        if meta is not None:
            check_fits(meta, agent, runner.envs, env_id, multi_agent)
        agent.load_model(folder, model_name or model_in(folder))
        frames = env_frames(config)
        recorder = env_recorder(config)
        hooks = Hooks(emitter, multi_agent, list(agent.agent_keys) if multi_agent else None, frames=frames,
                      recorder=recorder)
        install_hooks(agent, hooks)
        hooks.watch(runner.envs)
        human = hand_to_a_person(agent, runner.envs, config["params"]["human_agent"], emitter, hooks) \
            if multi_agent and config["params"].get("human_agent") else None
        try:
            agent.test(test_episodes=config["eval_episodes"], test_envs=runner.envs, close_envs=False)
        finally:
            if human is not None:
                human.close()
            if frames is not None:
                frames.close()
            if recorder is not None:
                recorder.finish(emitter)
    finally:
        finish(runner, agent)
    emitter.run_completed(step=hooks.env_steps)
    return 0


def hand_to_a_person(agent, envs, key: str, emitter: Emitter, hooks: Hooks):
    """``params.human_agent``: XuanCe's own evaluation loop plays on, its ``get_actions`` answer for
    that agent replaced by the person's action (workers.sdk.control.HumanAgent: the wait, the legal
    actions from the env's available actions, refusals)."""
    from workers.sdk.control import HumanAgent
    if key not in agent.agent_keys:
        raise ConfigError("params.human_agent", f"{key!r} is not an agent of this env ({', '.join(agent.agent_keys)})")
    space = envs.action_space[key]
    if not hasattr(space, "n"):
        raise ConfigError("params.human_agent", f"{key} has {type(space).__name__} actions: a person plays "
                                                f"discrete actions")
    seat = HumanAgent(key, space.n, emitter)
    get_actions, episode_ended = agent.get_actions, hooks._episode
    episodes = [0]

    def with_the_person(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = get_actions(*args, **kwargs)
        avail = kwargs.get("avail_actions_dict")
        for i, actions in enumerate(out["actions"]):
            mask = avail[i].get(key) if avail is not None and avail[i] is not None else None
            legal = None if mask is None else [a for a in range(space.n) if mask[a]]
            actions[key] = seat.move(hooks.env_steps, episodes[0], legal)
            seat.moved(actions[key], hooks.env_steps + 1, episodes[0])
        return out

    def counting(*args: Any, **kwargs: Any) -> None:
        episodes[0] += 1
        episode_ended(*args, **kwargs)

    agent.get_actions, hooks._episode = with_the_person, counting
    return seat


def model_in(folder: str) -> str:
    """The model file of a checkpoint folder: XuanCe's final model, or the only .pth there."""
    if os.path.isfile(os.path.join(folder, FINAL_MODEL)):
        return FINAL_MODEL
    models = sorted(name for name in os.listdir(folder) if name.endswith(".pth"))
    if len(models) != 1:
        raise ConfigError("checkpoint", f"{folder} holds {len(models)} .pth files; name one of them")
    return models[0]


def check_fits(meta: dict[str, Any], agent, envs, env_id: str, multi_agent: bool) -> None:
    """Refuse a checkpoint whose networks cannot take this environment, saying why."""
    if multi_agent:
        mismatch = agent_count_mismatch(meta, int(envs.num_agents), env_id)
        if mismatch:
            raise ConfigError("checkpoint", mismatch)
        if meta.get("agent_keys") and list(meta["agent_keys"]) != list(envs.agents):
            raise ConfigError("checkpoint", f"has networks for agents {', '.join(meta['agent_keys'])}; "
                                            f"{env_id} here has {', '.join(envs.agents)}")
    for name in ("observation_space", "action_space"):
        trained, here = meta.get(name), str(getattr(agent, name))
        if trained is not None and trained != here:
            raise ConfigError("checkpoint", f"was trained with {name.replace('_', ' ')} {trained}; "
                                            f"{env_id} here has {here}")


# -- a checkpoint as a policy, outside XuanCe's runner ------------------------------------
class Policy:
    """A XuanCe MultiGrid checkpoint played greedily outside training: ``act(agent_key, flat)``
    is the agent's action on its flat view (workers/sdk/multigrid.py, the observation the
    worker trained on). The networks are built as XuanCe's runner builds them for the
    checkpoint's own env and params, then the model is loaded; the runner's envs are closed."""

    def __init__(self, checkpoint: str, torch_threads: int = 1):
        import tempfile

        import numpy as np

        meta = read_checkpoint_meta(checkpoint)
        if meta is None or meta.get("family") != catalog.MULTIGRID:
            raise ValueError(f"{checkpoint} is not a XuanCe MultiGrid checkpoint")
        if meta["algo"] not in catalog.OWN_VIEW_ALGOS:
            raise ValueError(f"{meta['algo']} actors read other agents' actions or messages")
        # what XuanCe and torch read at import, but not the sitedir on PYTHONPATH: this process is
        # another worker's (or a test's), and its children are not XuanCe's env processes
        os.environ.update({k: v for k, v in process_environment(torch_threads).items() if k != "PYTHONPATH"})
        multigrid.install()
        mpe_alias.set_env_kwargs(meta.get("env_kwargs") or {})  # the adapter's env kwargs, as trained
        set_torch_threads(torch_threads)
        params = {**meta["params"], "parallels": 1, "vectorize": "DummyVecMultiAgentEnv"}
        config = {"seed": meta.get("seed", 1), "device": "cpu", "eval_episodes": 1}
        args = parser_args(config, catalog.MULTIGRID, meta["env_id"], params, running_steps=1)
        scratch = tempfile.mkdtemp(prefix="mosaic-xuance-policy-")  # XuanCe's writer wants a log dir
        args.log_dir = args.model_dir = scratch
        template = catalog.config_file(meta["algo"], catalog.MULTIGRID, meta["env_id"])
        runner = build_runner({"algo": meta["algo"]}, catalog.MULTIGRID, meta["env_id"], template, args)
        self.agent = runner.agent
        try:
            folder = checkpoint_dir(checkpoint)
            model = None if os.path.isdir(checkpoint) else os.path.basename(checkpoint)
            self.agent.load_model(folder, model or model_in(folder))
        finally:
            finish(runner, self.agent)
            shutil.rmtree(scratch, ignore_errors=True)   # the policy is loaded: the writer's log dir is not needed
        self.agent_keys = list(self.agent.agent_keys)
        self.on_policy = "deterministic" in self.agent.get_actions.__code__.co_varnames
        self._all_actions = {k: np.ones(self.agent.action_space[k].n, np.bool_) for k in self.agent_keys}

    def act(self, agent_key: str, flat) -> int:
        # every agent is given this agent's view: its own action depends on its view (and id) only
        observations = [{k: flat for k in self.agent_keys}]
        kwargs = {"deterministic": True} if self.on_policy else {}
        out = self.agent.get_actions(obs_dict=observations, avail_actions_dict=[self._all_actions],
                                     test_mode=True, **kwargs)
        return int(out["actions"][0][agent_key])
