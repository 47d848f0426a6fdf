"""XuanCe in the worker's process: the runner, telemetry hooks, curriculum, checkpoints; the entry
points ``train`` and ``evaluate`` (evaluate.py plays a checkpoint; resume.py is the stop's state).

Training does what XuanCe's ``RunnerDRL``/``RunnerMARL._run_train`` does --
``agent.train(running_steps // parallels)`` then ``agent.save_model(...)`` --
with the agent built by ``xuance.get_runner``. mosaic adds:

- ``Hooks``: XuanCe's callback (``agent.callback``) turned into telemetry
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
after ``prepare_process`` has set up the environment they read at import.
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
from workers.sdk.packages import upstream
from workers.sdk import jumanji_envs
from workers.sdk.frames import env_frames
from workers.sdk.rundir import (CHECKPOINT_DIR, CHECKPOINT_META, TENSORBOARD_DIR, periodic_checkpoint_saved,
                                write_manifest)
from workers.sdk.stop import SIGNALS, Stopped
from workers.sdk.telemetry import HEARTBEAT_SECONDS, Emitter
from workers.sdk.worker_cli import training_begins
from workers.xuance_worker import catalog, sisl, user_config
from workers.sdk import registration
from workers.xuance_worker import fixes, mpe_alias, multigrid, vizdoom
from workers.xuance_worker.resume import (RESUME_STATE, is_on_policy, load_resume_state, restore_resume_state,
                                          resume_position, save_resume_state)

SITEDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")
FINAL_MODEL = "final_train_model.pth"  # XuanCe's own name for it
# params that are mosaic's, not keys of XuanCe's config
MOSAIC_PARAMS = ("curriculum_schedule", "checkpoint_interval", "torch_threads", "env_kwargs", "training_mode",
                 user_config.PARAM)
# in a training run's directory: the config XuanCe built and trained with (its Namespace), to read back
PARSED_CONFIG = "xuance_args.json"
PERIODIC_PREFIX = "step_"   # checkpoints/step_<N>/: the ones saved on the way (kept: keep_checkpoints)


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


# -- telemetry ------------------------------------------------------------------
def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None  # arrays, strings: not a scalar


class Hooks:
    """XuanCe's hooks -> telemetry.

    - ``scalars``: wraps ``agent.log_infos``, through which XuanCe logs every
      scalar (its TensorBoard files are still written).
    - ``watch(envs)``: wraps the vectorised environments' ``step``. Each
      sub-environment's ``info`` carries ``episode_score`` (a dict of each
      agent's return for multi-agent envs) and ``episode_step``; an episode
      ends where XuanCe's loops end it (all agents terminated, or truncated).
      Taken here rather than from XuanCe's ``on_train_episode_info`` callback
      because not every agent calls that (CommNet, IC3Net, TarMAC do not), nor
      does any call it while testing. Frames and heartbeats come from here too.
    - the ``agent.callback`` methods: periodic checkpoints and the stop, at the end
      of a training step (or, where XuanCe trains in whole episodes -- MARL agents
      with ``use_rnn`` -- after an update between episodes), once ``safe_point()``
      says the agent can be saved and continued exactly (on-policy: its rollout
      buffer was just used and cleared). The class implements every hook of XuanCe's
      ``MultiAgentBaseCallback`` (and so ``BaseCallback``), which XuanCe calls by name.
    """

    def __init__(self, emitter: Emitter, multi_agent: bool, agent_keys: list[str] | None = None,
                 checkpoint_every: int = 0, last_step: int = 0, save=None, frames=None, recorder=None,
                 stop=None, safe_point=None, episodic: bool = False, start_step: int = 0):
        self.emitter = emitter
        self.multi_agent = multi_agent
        teams = catalog.mpe_teams(agent_keys or []) if multi_agent else {}
        self.teams = teams if len(teams) > 1 else {}
        self.checkpoint_every = checkpoint_every
        # a continued run's next periodic checkpoint is the first one after its checkpoint's step
        self.next_checkpoint = (start_step // checkpoint_every + 1) * checkpoint_every if checkpoint_every else 0
        self.last_step = last_step  # the final checkpoint is saved at the end anyway
        self.save = save
        # stop(step): save the stop's checkpoint and raise Stopped; safe_point(): can the agent be
        # saved now and continued exactly; episodic: XuanCe trains in whole episodes (MARL use_rnn)
        # and calls on_train_step_end only once per agent.train, so the stop is taken after updates
        self.stop = stop
        self.safe_point = safe_point or (lambda: True)
        self.episodic = episodic
        self.frames = frames
        # a workers.sdk.dataset.Recorder when the run records (single-agent: the descriptor refuses the rest)
        self.recorder = recorder
        self.env_steps = 0  # steps of the watched environments (what evaluation reports)

    # -- scalars (wraps agent.log_infos) -------------------------------------
    def scalars(self, info: dict[str, Any], step: int) -> None:
        emit = self.emitter.scalar
        for tag, value in info.items():
            if value is None:
                continue
            if isinstance(value, dict):
                # {"env-0": x}: an episode's steps or return, sent as an episode event instead
                if "Episode-Steps" in tag or "Episode-Rewards" in tag:
                    continue
                for sub, sub_value in value.items():
                    number = _number(sub_value)
                    if number is not None:
                        emit(f"{tag}/{sub}", number, step)
                continue
            number = _number(value)
            if number is not None:
                emit(tag, number, step)

    # -- episodes, frames, heartbeats (wraps envs.step) ----------------------
    def watch(self, envs, step_of=None) -> None:
        """Report what ``envs.step`` returns. ``step_of()`` is the step an episode is
        reported at (the agent's step counter in training); by default the
        environment steps taken so far (evaluation)."""
        step = envs.step
        multi_agent = self.multi_agent
        episodes = self._record(envs)

        def step_and_report(actions):
            result = step(actions)
            terminals, truncations, infos = result[2], result[3], result[4]
            n = len(infos)
            if episodes is not None:
                # XuanCe's vector envs return an episode's final observation itself and
                # the next one's first in info["reset_obs"]
                episodes.step(actions, result[0], result[1], terminals, truncations, {"final_obs": result[0]},
                              reset_obs={i: infos[i]["reset_obs"] for i in range(n) if "reset_obs" in infos[i]})
            self.env_steps += n
            at = self.env_steps if step_of is None else int(step_of())
            for i in range(n):
                done = all(terminals[i].values()) if multi_agent else terminals[i]
                if done or truncations[i]:
                    self._episode(at, infos[i], i)
            self.emitter.heartbeat(at, every=HEARTBEAT_SECONDS)
            if self.frames is not None:
                self.frames.maybe_publish(envs.render, "rgb_array")
            return result

        envs.step = step_and_report

    def _record(self, envs):
        """The vector env's transitions into the recorder (VectorEpisodes), fed from
        step and reset; XuanCe's agents read their first observation from
        ``envs.buf_obs``, which the env filled when it was made."""
        if self.recorder is None:
            return None
        import copy

        from workers.sdk.dataset import VectorEpisodes
        self.recorder.spaces = {"observation_space": str(envs.observation_space),
                                "action_space": str(envs.action_space)}
        episodes = VectorEpisodes(self.recorder.store, envs.num_envs, same_step=True)
        if getattr(envs, "buf_obs", None) is not None:
            episodes.reset(copy.deepcopy(envs.buf_obs))
        reset = envs.reset

        def reset_and_record(*args, **kwargs):
            result = reset(*args, **kwargs)
            episodes.reset(copy.deepcopy(result[0] if isinstance(result, tuple) else result))
            return result

        envs.reset = reset_and_record
        return episodes

    def _episode(self, step: int, info: dict[str, Any], env_index: int) -> None:
        score = info["episode_score"]
        length = int(info["episode_step"])
        if isinstance(score, dict):  # multi-agent: each agent's return; the team's is their mean
            agents = {key: float(value) for key, value in score.items()}
            team_return = sum(agents.values()) / max(1, len(agents))
            self.emitter.episode(step, team_return, length, env_index=env_index, agents=agents)
            for team, members in self.teams.items():
                value = sum(agents[m] for m in members if m in agents) / max(1, len(members))
                self.emitter.scalar(f"returns/{team}", value, step)
        else:
            self.emitter.episode(step, float(score), length, env_index=env_index)

    # -- XuanCe's callback interface ----------------------------------------
    def _at_safe_point(self, step: int) -> None:
        """A periodic checkpoint once one is due, then the stop if one was asked for. Both wait for
        a safe point: a checkpoint taken there is one a run continues from exactly."""
        due = self.checkpoint_every and self.next_checkpoint <= step < self.last_step and self.save is not None
        stop = SIGNALS.stop_requested and self.stop is not None and step < self.last_step
        if not (due or stop) or not self.safe_point():
            return
        if due:
            while self.next_checkpoint <= step:
                self.next_checkpoint += self.checkpoint_every
            self.save(f"{PERIODIC_PREFIX}{step}", f"model_step_{step}.pth", manifest=True)
        if stop:
            self.stop(step)

    def on_train_step_end(self, current_step, **kwargs):
        self._at_safe_point(int(current_step))

    def on_train_epochs_end(self, current_step, **kwargs):
        # elsewhere XuanCe calls it in the middle of a step: this step's transitions stored, the
        # step counter not yet advanced; a checkpoint there would have the step trained twice
        if self.episodic:
            self._at_safe_point(int(current_step))

    def on_train_episode_info(self, **kwargs):
        return

    def on_train_step(self, current_step, **kwargs):
        return

    def on_update_start(self, iterations, **kwargs):
        return {}

    def on_update_end(self, iterations, **kwargs):
        return {}

    def on_update_agent_wise(self, iterations, agent_key, **kwargs):
        return {}

    def on_test_step(self, *args, **kwargs):
        return

    def on_test_end(self, *args, **kwargs):
        return


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


def install_hooks(agent, hooks: Hooks) -> None:
    agent.callback = hooks
    log_infos = agent.log_infos

    def log_infos_with_telemetry(info: dict, x_index: int):
        hooks.scalars(info, x_index)
        log_infos(info, x_index)

    agent.log_infos = log_infos_with_telemetry


def finish(runner, agent) -> None:
    """What RunnerBase._finalize does: close the TensorBoard writer and the environments."""
    agent.finish()
    if runner.envs is not None:
        runner.envs.close()
        runner.envs = None


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Load ``config.checkpoint`` and play ``eval_episodes`` episodes (XuanCe's test mode: evaluate.py)."""
    from workers.xuance_worker import evaluate as evaluation
    return evaluation.run(config, emitter)
