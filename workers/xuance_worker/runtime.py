"""XuanCe in the worker's process: the entry points ``train`` and ``evaluate``, the curriculum and
the checkpoints (run_setup.py is what both modes share: the process environment, XuanCe's
arguments and runner; hooks.py the telemetry; evaluate.py plays a checkpoint; resume.py is the
stop's state).

Training does what XuanCe's ``RunnerDRL``/``RunnerMARL._run_train`` does --
``agent.train(running_steps // parallels)`` then ``agent.save_model(...)`` --
with the agent built by ``xuance.get_runner``. mosaic adds:

- ``Hooks`` (hooks.py): XuanCe's callback (``agent.callback``) turned into telemetry
  (episode events with each agent's return, heartbeats, periodic
  checkpoints, frames), and a wrapper around ``agent.log_infos``, which sees
  every scalar XuanCe logs (its TensorBoard files are still written);
- a curriculum: ``agent.train`` once per phase, with the agent's environments
  replaced between phases (networks, optimizer, LR scheduler, step counter
  stay);
- checkpoint metadata (``mosaic_checkpoint.json`` beside the model): agent
  count, parameter sharing, spaces and the params, so evaluation rebuilds the
  same networks and refuses what cannot fit;
- stop and continue: every checkpoint a training run saves is a resume
  checkpoint (``resume_state.pt`` beside XuanCe's model: learner state, step
  and episode counters, exploration schedules, replay buffer, RNG states,
  curriculum position) with a manifest. ``mosaic stop`` is taken at the end of
  a training step (on-policy: right after an update, when the rollout buffer
  is empty); ``continue_from`` restores it and trains the steps left.

Everything heavy (xuance, torch, gymnasium) is imported inside functions,
after ``run_setup.prepare_process`` has set up the environment they read at import.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import sys
import time
from argparse import Namespace
from typing import Any

from workers.sdk.config import ConfigError
from workers.sdk.dataset import env_recorder
from workers.sdk.descriptor import dist_version
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, periodic_checkpoint_saved, write_manifest
from workers.sdk.stop import Stopped
from workers.sdk.telemetry import Emitter
from workers.sdk.worker_cli import training_begins
from workers.xuance_worker import catalog, mpe_alias
from workers.xuance_worker.hooks import Hooks, install_hooks
from workers.xuance_worker.resume import (
    RESUME_STATE,
    is_on_policy,
    load_resume_state,
    restore_resume_state,
    resume_position,
    save_resume_state,
)
from workers.xuance_worker.run_setup import (
    FINAL_MODEL,
    PERIODIC_PREFIX,
    build_runner,
    finish,
    parser_args,
    prepare_run,
    set_torch_threads,
    total_steps,
    xuance_params,
)

# in a training run's directory: the config XuanCe built and trained with (its Namespace), to read back
PARSED_CONFIG = "xuance_args.json"


# -- environments ---------------------------------------------------------------
def spaces_of(envs, multi_agent: bool) -> dict[str, Any]:
    spaces = {"observation": envs.observation_space, "action": envs.action_space}
    if multi_agent:
        spaces["agents"] = list(envs.agents)
    return spaces


def describe_spaces(spaces: dict[str, Any]) -> str:
    return "; ".join(f"{name}: {value}" for name, value in spaces.items())


def probe_spaces(args: Namespace, env_id: str, env_kwargs: dict | None, multi_agent: bool) -> dict[str, Any]:
    """The spaces of one environment built as XuanCe would build it (one copy, in process)."""
    from xuance.environment import make_envs
    probe = copy.copy(args)
    probe.env_id = env_id
    probe.parallels = 1
    probe.vectorize = "DummyVecMultiAgentEnv" if multi_agent else "DummyVecEnv"
    mpe_alias.set_env_kwargs(env_kwargs)
    envs = make_envs(probe)
    try:
        return spaces_of(envs, multi_agent)
    finally:
        envs.close()


def curriculum_phases(config: dict[str, Any], env_id: str, running_steps: int) -> list[dict[str, Any]]:
    params = config["params"]
    default_kwargs = params.get("env_kwargs") or {}
    schedule = params.get("curriculum_schedule")
    if not schedule:
        return [{"env_id": env_id, "steps": running_steps, "env_kwargs": default_kwargs}]
    phases = []
    for phase in schedule:
        _, phase_env = catalog.resolve_env(phase["env_id"])
        phases.append({"env_id": phase_env, "steps": phase["steps"],
                       "env_kwargs": phase.get("env_kwargs", default_kwargs)})
    return phases


def check_curriculum(args: Namespace, phases: list[dict[str, Any]], multi_agent: bool) -> None:
    """Every phase must have phase 0's spaces: refuse before training, naming the phase."""
    first = probe_spaces(args, phases[0]["env_id"], phases[0]["env_kwargs"], multi_agent)
    for index, phase in enumerate(phases[1:], start=1):
        spaces = probe_spaces(args, phase["env_id"], phase["env_kwargs"], multi_agent)
        if spaces != first:
            raise ConfigError(f"params.curriculum_schedule[{index}]",
                              f"{phase['env_id']} has {describe_spaces(spaces)}; phase 0 "
                              f"({phases[0]['env_id']}) has {describe_spaces(first)}: all phases must share "
                              f"observation and action spaces")


def switch_environment(runner, agent, phase: dict[str, Any]) -> None:
    """Give the agent the next phase's environments; the rest of it carries on."""
    from xuance.environment import make_envs
    from xuance.torch.agents.core import OnPolicyAgent, OnPolicyMARLAgents
    config = copy.copy(agent.config)
    config.env_id = phase["env_id"]
    mpe_alias.set_env_kwargs(phase["env_kwargs"])
    envs = make_envs(config)
    envs.reset()
    old = agent.train_envs
    agent.train_envs = envs
    runner.envs = envs
    agent.config.env_id = phase["env_id"]
    if isinstance(agent, (OnPolicyAgent, OnPolicyMARLAgents)):
        # a half-filled rollout of the last environment would be finished with the new one's values
        agent.memory.clear()
    if hasattr(agent, "returns"):  # single-agent: the discounted returns that feed reward normalisation
        agent.returns[...] = 0.0
    old.close()


# -- checkpoints ------------------------------------------------------------------
def checkpoint_meta(config: dict[str, Any], agent, family: str, phase: dict[str, Any],
                    multi_agent: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "worker": "xuance", "algo": config["algo"], "xuance_agent": agent.config.agent,
        "family": family, "env": config["env"], "env_id": phase["env_id"], "env_kwargs": phase["env_kwargs"],
        "step": int(agent.current_step), "seed": config["seed"],
        "observation_space": str(agent.observation_space), "action_space": str(agent.action_space),
        "params": xuance_params(config["params"]), "upstream": upstream("xuance"),
        "mosaic_version": dist_version("mosaic-tui"), "saved_at": time.time(),
    }
    if multi_agent:
        meta.update(n_agents=int(agent.n_agents), agent_keys=list(agent.agent_keys),
                    parameter_sharing=bool(agent.use_parameter_sharing),
                    training_mode=config["params"].get("training_mode"))
    return meta


class Checkpoints:
    """Saves models into checkpoints/<name>/ with their metadata, and says so on the wire.

    Every checkpoint of a training run is a resume checkpoint: RESUME_STATE beside the model. It is
    written into ``checkpoints/.<name>.tmp`` and renamed into place whole, so a crash mid-save
    leaves no half checkpoint under its name."""

    def __init__(self, emitter: Emitter, config: dict[str, Any], agent, family: str, multi_agent: bool):
        self.emitter = emitter
        self.config = config
        self.agent = agent
        self.family = family
        self.multi_agent = multi_agent
        self.phase: dict[str, Any] = {}
        self.phase_index = 0

    def save(self, name: str, model_name: str, manifest: bool = False) -> str:
        """Save, announce and return the model's path (relative to the run directory); ``manifest``:
        write the checkpoint's manifest too (a periodic one, for the daemon to continue from)."""
        folder = os.path.join(CHECKPOINT_DIR, name)
        scratch = os.path.join(CHECKPOINT_DIR, f".{name}.tmp")
        shutil.rmtree(scratch, ignore_errors=True)
        # its own folder per checkpoint: XuanCe saves obs_rms.npy beside the model
        self.agent.save_model(model_name=model_name, model_path=os.path.abspath(scratch))
        meta = checkpoint_meta(self.config, self.agent, self.family, self.phase, self.multi_agent)
        with open(os.path.join(scratch, CHECKPOINT_META), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
        save_resume_state(os.path.join(scratch, RESUME_STATE), self.agent, self.phase_index)
        shutil.rmtree(folder, ignore_errors=True)   # a continued run saving a step again
        os.replace(scratch, folder)
        path = os.path.join(folder, model_name)  # relative to the run directory
        self.emitter.checkpoint_saved(path, int(self.agent.current_step))
        if manifest and name.startswith(PERIODIC_PREFIX):   # on the way: the home's keep_checkpoints too
            periodic_checkpoint_saved(folder, int(self.agent.current_step), PERIODIC_PREFIX)
        elif manifest:
            write_manifest(folder, int(self.agent.current_step))
        return path

    def stop(self, step: int) -> None:
        """The stop's checkpoint (its manifest: Stopped.after), then Stopped to end the run."""
        def save() -> str:
            return os.path.abspath(os.path.dirname(self.save(f"stop_{step}", f"model_step_{step}.pth")))
        raise Stopped.after(save, step)


# -- train ------------------------------------------------------------------------
def train(config: dict[str, Any], emitter: Emitter) -> int:
    prepare_run(config)
    family, env_id = catalog.resolve_env(config["env"])
    multi_agent = family in catalog.MULTI_AGENT
    template = catalog.config_file(config["algo"], family, env_id)
    running_steps = total_steps(config, template)
    phases = curriculum_phases(config, env_id, running_steps)
    params = config["params"]
    extra = {}
    if multi_agent:
        extra = {"n_agents": catalog.agent_count(family, env_id, params.get("env_kwargs")),
                 "parameter_sharing": params.get("use_parameter_sharing"),
                 "training_mode": params.get("training_mode")}
    emitter.run_started("xuance", config["algo"], config["env"], total_steps=running_steps,
                        upstream=upstream("xuance"), family=family, **extra)
    set_torch_threads(params["torch_threads"])
    # continue_from: this same run goes on from its checkpoint (mosaic continue)
    source = config.get("continue_from")
    resume = load_resume_state(source) if source else None
    args = parser_args(config, family, env_id, params, running_steps)
    if resume is not None:
        # the episodes in progress at the stop are cut, and new ones begin: not the run's first ones again
        args.env_seed = config["seed"] + resume["step"]
    if len(phases) > 1:
        check_curriculum(args, phases, multi_agent)
    mpe_alias.set_env_kwargs(phases[0]["env_kwargs"])
    runner = build_runner(config, family, env_id, template, args)
    agent = runner.agent
    write_parsed_config(agent.config)
    train_steps = [max(1, phase["steps"] // runner.n_envs) for phase in phases]
    first, left = 0, train_steps[0]
    if resume is not None:
        restore_resume_state(agent, resume)
        first, left = resume_position(train_steps, int(agent.current_step), runner.n_envs)
        sys.stderr.write(f"mosaic xuance worker: resumed from {source} at step {int(agent.current_step)}\n")
    start_step = int(agent.current_step)
    checkpoints = Checkpoints(emitter, config, agent, family, multi_agent)
    checkpoints.phase = phases[min(first, len(phases) - 1)]
    checkpoints.phase_index = first
    frames = env_frames(config)
    recorder = env_recorder(config)
    on_policy = is_on_policy(agent)
    hooks = Hooks(emitter, multi_agent, list(agent.agent_keys) if multi_agent else None,
                  checkpoint_every=params["checkpoint_interval"], last_step=sum(train_steps) * runner.n_envs,
                  save=checkpoints.save, frames=frames, recorder=recorder, stop=checkpoints.stop,
                  # on-policy: only once the rollout was used and cleared (a half rollout cannot be carried over)
                  safe_point=(lambda: int(agent.memory.size) == 0) if on_policy else None,
                  episodic=multi_agent and bool(getattr(agent, "use_rnn", False)), start_step=start_step)
    install_hooks(agent, hooks)
    hooks.watch(agent.train_envs, lambda: agent.current_step)
    training_begins()
    try:
        for index in range(first, len(phases)):
            phase = phases[index]
            if index > 0:
                switch_environment(runner, agent, phase)
                hooks.watch(agent.train_envs, lambda: agent.current_step)
                checkpoints.phase, checkpoints.phase_index = phase, index
            if len(phases) > 1:
                emitter.phase(phase["env_id"], int(agent.current_step), index=index)
            agent.train(left if index == first else train_steps[index])
        if int(agent.current_step) > start_step:   # a run continued from its end trains nothing new
            checkpoints.save("final", FINAL_MODEL, manifest=True)
    except Stopped:
        finish(runner, agent)   # the TensorBoard writer flushed, env processes closed
        raise
    finally:
        if frames is not None:
            frames.close()
        if recorder is not None:  # a cancelled run keeps the episodes it finished
            recorder.finish(emitter)
    finish(runner, agent)
    emitter.run_completed(step=int(agent.current_step))
    return 0


def write_parsed_config(namespace: Namespace) -> None:
    """XuanCe's own config of the run (its YAML files and our parser_args, as it merged them)."""
    with open(PARSED_CONFIG, "w", encoding="utf-8") as f:
        json.dump(vars(namespace), f, indent=1, sort_keys=True, default=str)


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Load ``config.checkpoint`` and play ``eval_episodes`` episodes (XuanCe's test mode: evaluate.py)."""
    from workers.xuance_worker import evaluate as evaluation
    return evaluation.run(config, emitter)
