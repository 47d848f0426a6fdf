"""XuanCe in the worker's process: the runner, telemetry hooks, curriculum, checkpoints, evaluation.

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
  same networks and refuses what cannot fit.

Everything heavy (xuance, torch, gymnasium) is imported inside functions,
after ``prepare_process`` has set up the environment they read at import.
"""
from __future__ import annotations

import copy
import json
import os
import time
from argparse import Namespace
from typing import Any

from workers.sdk.config import ConfigError
from workers.sdk.dataset import env_recorder
from workers.sdk.descriptor import dist_version
from workers.sdk import jumanji_envs
from workers.sdk.frames import env_frames
from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, TENSORBOARD_DIR, checkpoint_dir, read_checkpoint_meta
from workers.sdk.telemetry import HEARTBEAT_SECONDS, Emitter
from workers.sdk.worker_cli import training_begins
from workers.xuance_worker import agent_count_mismatch, catalog
from workers.sdk import registration
from workers.xuance_worker import mpe_alias, multigrid, vizdoom

SITEDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")
FINAL_MODEL = "final_train_model.pth"  # XuanCe's own name for it
# params that are mosaic's, not keys of XuanCe's config
MOSAIC_PARAMS = ("curriculum_schedule", "checkpoint_interval", "torch_threads", "env_kwargs", "training_mode")


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


def upstream() -> str:
    return f"xuance=={dist_version('xuance') or '?'}"


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
    - the ``agent.callback`` methods: periodic checkpoints after a training step
      or an update. The class implements every hook of XuanCe's
      ``MultiAgentBaseCallback`` (and so ``BaseCallback``), which XuanCe calls by name.
    """

    def __init__(self, emitter: Emitter, multi_agent: bool, agent_keys: list[str] | None = None,
                 checkpoint_every: int = 0, last_step: int = 0, save=None, frames=None, recorder=None):
        self.emitter = emitter
        self.multi_agent = multi_agent
        teams = catalog.mpe_teams(agent_keys or []) if multi_agent else {}
        self.teams = teams if len(teams) > 1 else {}
        self.checkpoint_every = checkpoint_every
        self.next_checkpoint = checkpoint_every
        self.last_step = last_step  # the final checkpoint is saved at the end anyway
        self.save = save
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
    def _maybe_checkpoint(self, step: int) -> None:
        if self.checkpoint_every and self.next_checkpoint <= step < self.last_step and self.save is not None:
            while self.next_checkpoint <= step:
                self.next_checkpoint += self.checkpoint_every
            self.save(f"step_{step}", f"model_step_{step}.pth")

    def on_train_step_end(self, current_step, **kwargs):
        self._maybe_checkpoint(int(current_step))

    def on_train_epochs_end(self, current_step, **kwargs):
        self._maybe_checkpoint(int(current_step))

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
        "params": xuance_params(config["params"]), "upstream": upstream(),
        "mosaic_version": dist_version("mosaic-tui"), "saved_at": time.time(),
    }
    if multi_agent:
        meta.update(n_agents=int(agent.n_agents), agent_keys=list(agent.agent_keys),
                    parameter_sharing=bool(agent.use_parameter_sharing),
                    training_mode=config["params"].get("training_mode"))
    return meta


class Checkpoints:
    """Saves models into checkpoints/<name>/ with their metadata, and says so on the wire."""

    def __init__(self, emitter: Emitter, config: dict[str, Any], agent, family: str, multi_agent: bool):
        self.emitter = emitter
        self.config = config
        self.agent = agent
        self.family = family
        self.multi_agent = multi_agent
        self.phase: dict[str, Any] = {}

    def save(self, name: str, model_name: str) -> str:
        folder = os.path.join(CHECKPOINT_DIR, name)
        # its own folder per checkpoint: XuanCe saves obs_rms.npy beside the model
        self.agent.save_model(model_name=model_name, model_path=os.path.abspath(folder))
        meta = checkpoint_meta(self.config, self.agent, self.family, self.phase, self.multi_agent)
        with open(os.path.join(folder, CHECKPOINT_META), "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
        path = os.path.join(folder, model_name)  # relative to the run directory
        self.emitter.checkpoint_saved(path, int(self.agent.current_step))
        return path


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
                        upstream=upstream(), family=family, **extra)
    set_torch_threads(params["torch_threads"])
    args = parser_args(config, family, env_id, params, running_steps)
    if len(phases) > 1:
        check_curriculum(args, phases, multi_agent)
    mpe_alias.set_env_kwargs(phases[0]["env_kwargs"])
    runner = build_runner(config, family, env_id, template, args)
    agent = runner.agent
    checkpoints = Checkpoints(emitter, config, agent, family, multi_agent)
    checkpoints.phase = phases[0]
    frames = env_frames(config)
    recorder = env_recorder(config)
    train_steps = [max(1, phase["steps"] // runner.n_envs) for phase in phases]
    hooks = Hooks(emitter, multi_agent, list(agent.agent_keys) if multi_agent else None,
                  checkpoint_every=params["checkpoint_interval"], last_step=sum(train_steps) * runner.n_envs,
                  save=checkpoints.save, frames=frames, recorder=recorder)
    install_hooks(agent, hooks)
    hooks.watch(agent.train_envs, lambda: agent.current_step)
    training_begins()
    try:
        for index, phase in enumerate(phases):
            if index > 0:
                switch_environment(runner, agent, phase)
                hooks.watch(agent.train_envs, lambda: agent.current_step)
                checkpoints.phase = phase
            if len(phases) > 1:
                emitter.phase(phase["env_id"], int(agent.current_step), index=index)
            agent.train(train_steps[index])
        checkpoints.save("final", FINAL_MODEL)
    finally:
        if frames is not None:
            frames.close()
        if recorder is not None:  # a cancelled run keeps the episodes it finished
            recorder.finish(emitter)
    finish(runner, agent)
    emitter.run_completed(step=int(agent.current_step))
    return 0


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


# -- evaluate -----------------------------------------------------------------------
def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
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
    emitter.run_started("xuance", config["algo"], config["env"], total_steps=None, upstream=upstream(),
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
        try:
            agent.test(test_episodes=config["eval_episodes"], test_envs=runner.envs, close_envs=False)
        finally:
            if frames is not None:
                frames.close()
            if recorder is not None:
                recorder.finish(emitter)
    finally:
        finish(runner, agent)
    emitter.run_completed(step=hooks.env_steps)
    return 0


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
