"""XuanCe in the worker's process: the entry points ``train`` and ``evaluate`` (run_setup.py is what
both modes share: the process environment, XuanCe's arguments and runner; hooks.py the telemetry;
curriculum.py the phases; checkpoints.py the checkpoints; resume.py the stop's state; evaluate.py
plays a checkpoint).

Training does what XuanCe's ``RunnerDRL``/``RunnerMARL._run_train`` does --
``agent.train(running_steps // parallels)`` then ``agent.save_model(...)`` --
with the agent built by ``xuance.get_runner``. mosaic adds:

- ``Hooks`` (hooks.py): XuanCe's callback (``agent.callback``) turned into telemetry
  (episode events with each agent's return, heartbeats, periodic
  checkpoints, frames), and a wrapper around ``agent.log_infos``, which sees
  every scalar XuanCe logs (its TensorBoard files are still written);
- a curriculum (curriculum.py): ``agent.train`` once per phase, with the agent's
  environments replaced between phases (networks, optimizer, LR scheduler, step
  counter stay);
- checkpoint metadata (checkpoints.py: ``mosaic_checkpoint.json`` beside the model):
  agent count, parameter sharing, spaces and the params, so evaluation rebuilds the
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

import sys
from typing import Any

from workers.sdk.dataset import env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.stop import Stopped
from workers.sdk.telemetry import Emitter
from workers.sdk.worker_cli import training_begins
from workers.xuance_worker import catalog, mpe_alias
from workers.xuance_worker.checkpoints import Checkpoints
from workers.xuance_worker.curriculum import check_curriculum, curriculum_phases, switch_environment
from workers.xuance_worker.hooks import Hooks, install_hooks
from workers.xuance_worker.resume import is_on_policy, load_resume_state, restore_resume_state, resume_position
from workers.xuance_worker.run_setup import (
    FINAL_MODEL,
    build_runner,
    finish,
    parser_args,
    prepare_run,
    set_torch_threads,
    total_steps,
    write_parsed_config,
)


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


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Load ``config.checkpoint`` and play ``eval_episodes`` episodes (XuanCe's test mode: evaluate.py)."""
    from workers.xuance_worker import evaluate as evaluation
    return evaluation.run(config, emitter)
