"""The training loop of the Jumanji worker: jumanji.training's own pieces, driven as its train.py does.

``train.py`` (jumanji/training/train.py) builds, from a hydra config,
``setup_env`` (the env, vmapped with auto-reset), ``setup_agent`` (A2C or the
random agent), ``setup_evaluators`` (stochastic and greedy) and
``setup_training_state``, then per epoch: both evaluations, then one pmapped
``lax.scan`` of ``agent.run_epoch``. This module does exactly that, from the
same config (``jumanji_config``: the env's YAML with the run's params as
overrides), and turns what the loggers would write into telemetry. Added:
the epoch function is compiled ahead of time under a "compiling" phase (the
app shows it instead of a silent stall), checkpoints of the whole training
state (params, optimiser state, env states, keys: what jumanji's own Logger
pickles) with resume, and eval mode with frames.
"""
from __future__ import annotations

import json
import math
import os
import pickle
import sys
import time
from pathlib import Path
from typing import Any

from workers.jumanji_worker import STATE_FILE, catalog, shims
from workers.sdk.rundir import checkpoint_dir
from workers.sdk.descriptor import dist_version
from workers.sdk.frames import env_frames
from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, CheckpointSchedule
from workers.sdk.telemetry import Emitter

# matplotlib (the viewers) must not look for a display
os.environ.setdefault("MPLBACKEND", "Agg")


def upstream() -> str:
    return f"jumanji=={dist_version('jumanji') or '?'} jax=={dist_version('jax') or '?'}"


def jumanji_config(config: dict[str, Any]):
    """The DictConfig jumanji's setup_* functions take: configs/config.yaml's keys, the env's
    YAML, the run's params over it (and num_epochs from mosaic's ``steps`` when given)."""
    from omegaconf import OmegaConf

    params = config["params"]
    env = dict(catalog.env_config(config["env"]))
    for section, values in catalog.env_overrides(params).items():
        env[section] = {**env.get(section, {}), **values}
    if config.get("steps"):
        env["training"]["num_epochs"] = max(1, math.ceil(config["steps"] / catalog.steps_per_epoch(params)))
    return OmegaConf.create({"agent": config["algo"], "seed": config["seed"], "env": env,
                             "logger": {"type": "terminal", "save_checkpoint": False,
                                        "name": f"{config['algo']}_{env['name']}"}})


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps a training run will have done at its end (None in eval mode)."""
    if config["mode"] == "eval":
        return None
    return int(jumanji_config(config).env.training.num_epochs) * catalog.steps_per_epoch(config["params"])


class Training:
    """jumanji.training's objects for one config, built as train.py builds them."""

    def __init__(self, cfg):
        shims.install()
        import functools

        import jax
        import jax.numpy as jnp
        from jumanji.training.setup_train import setup_agent, setup_env, setup_evaluators, setup_training_state

        self.cfg = cfg
        self.key, init_key = jax.random.split(jax.random.PRNGKey(cfg.seed))
        self.env = setup_env(cfg)
        self.agent = setup_agent(cfg, self.env)
        self.stochastic_eval, self.greedy_eval = setup_evaluators(cfg, self.agent)
        self.training_state = setup_training_state(self.env, self.agent, init_key)
        t = cfg.env.training
        self.steps_per_epoch = t.n_steps * t.total_batch_size * t.num_learner_steps_per_epoch
        agent = self.agent

        @functools.partial(jax.pmap, axis_name="devices")
        def epoch_fn(training_state):
            training_state, metrics = jax.lax.scan(
                lambda training_state, _: agent.run_epoch(training_state),
                training_state, None, t.num_learner_steps_per_epoch)
            metrics = jax.tree_util.tree_map(jnp.mean, metrics)
            return training_state, metrics

        self.epoch_fn = epoch_fn

    def compile(self) -> float:
        """Compile the epoch function ahead of time; seconds it took."""
        started = time.monotonic()
        self.epoch_fn = self.epoch_fn.lower(self.training_state).compile()
        return time.monotonic() - started

    @property
    def greedy(self) -> bool:
        from jumanji.training.agents.random import RandomAgent
        return not isinstance(self.agent, RandomAgent)

    # -- checkpoints ----------------------------------------------------------
    def save(self, path: Path, epoch: int, steps: int, config: dict[str, Any]) -> str:
        import jax

        path.mkdir(parents=True, exist_ok=True)
        state = {"training_state": jax.device_get(self.training_state), "key": jax.device_get(self.key),
                 "epoch": epoch, "steps": steps}
        tmp = path / (STATE_FILE + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(state, f)
        os.replace(tmp, path / STATE_FILE)
        params = config["params"]
        meta = {"worker": "jumanji", "algo": config["algo"], "env": config["env"], "epoch": epoch, "steps": steps,
                "network": {k: v for k, v in params.items() if k.startswith("network.")},
                "upstream": upstream(), "mosaic_schema": catalog.SCHEMA_VERSION}
        (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=1))
        return str(path / STATE_FILE)

    def load(self, checkpoint: str) -> tuple[int, int]:
        """Restore a saved training state; (epoch, steps) it had reached."""
        with open(os.path.join(checkpoint_dir(checkpoint), STATE_FILE), "rb") as f:
            state = pickle.load(f)
        self.training_state = state["training_state"]
        self.key = state["key"]
        return int(state["epoch"]), int(state["steps"])


def scalars_of(metrics: dict[str, Any], prefix: str) -> dict[str, float]:
    """The scalar entries of jumanji's metrics (first device), tagged ``prefix/name``."""
    import numpy as np

    out = {}
    for name, value in metrics.items():
        array = np.asarray(value)
        if array.size:
            out[f"{prefix}/{name}"] = float(array.reshape(-1)[0])
    return out


def first_state(training_state):
    """The first env's state of the batch on the first device (for a frame)."""
    import jax
    return jax.tree_util.tree_map(lambda x: x[0, 0], training_state.acting_state.state)


def train(config: dict[str, Any], emitter: Emitter, run_dir: Path) -> int:
    import jax
    from jumanji.training import utils

    params = config["params"]
    cfg = jumanji_config(config)
    num_epochs = int(cfg.env.training.num_epochs)
    emitter.phase("setup", step=0)
    setup_started = time.monotonic()
    tr = Training(cfg)
    start_epoch, steps = 0, 0
    if config.get("checkpoint"):
        start_epoch, steps = tr.load(config["checkpoint"])
        sys.stderr.write(f"mosaic jumanji worker: resumed from {config['checkpoint']} at epoch {start_epoch}\n")
    emitter.scalar("time/setup_s", time.monotonic() - setup_started, steps)
    emitter.phase("compiling", step=steps)
    compile_started = time.monotonic()
    emitter.scalar("time/compile_epoch_s", tr.compile(), steps)
    frames = env_frames(config)
    render = None
    if frames is not None:
        from workers.sdk.jumanji_envs import rgb_render
        render = rgb_render(tr.stochastic_eval.eval_env)
    checkpoints = run_dir / CHECKPOINT_DIR
    schedule = CheckpointSchedule(params["checkpoint_every"], start_epoch)
    compiling = True
    epoch = start_epoch
    for epoch in range(start_epoch, num_epochs):
        # evaluation first, as train.py does (its first call compiles the evaluators)
        if epoch % params["eval_every"] == 0 or epoch == num_epochs - 1:
            tr.key, stochastic_key, greedy_key = jax.random.split(tr.key, 3)
            started = time.monotonic()
            metrics = tr.stochastic_eval.run_evaluation(tr.training_state.params_state, stochastic_key)
            jax.block_until_ready(metrics)
            metrics = utils.first_from_device(metrics)
            scalars = scalars_of(metrics, "eval_stochastic")
            if tr.greedy:
                greedy = tr.greedy_eval.run_evaluation(tr.training_state.params_state, greedy_key)
                jax.block_until_ready(greedy)
                scalars.update(scalars_of(utils.first_from_device(greedy), "eval_greedy"))
            scalars["time/eval_s"] = time.monotonic() - started
            emitter.scalars(scalars, steps)
            # one episode record per evaluation: the mean over its batch of whole episodes
            emitter.episode(steps, scalars["eval_stochastic/episode_return"],
                            round(scalars["eval_stochastic/episode_length"]))
        if compiling:
            emitter.scalar("time/compile_s", time.monotonic() - compile_started, steps)
            emitter.phase("train", step=steps)
            compiling = False
        started = time.monotonic()
        tr.training_state, metrics = tr.epoch_fn(tr.training_state)
        jax.block_until_ready((tr.training_state, metrics))
        seconds = time.monotonic() - started
        steps += tr.steps_per_epoch
        scalars = scalars_of(utils.first_from_device(metrics), "train")
        scalars["time/epoch_s"] = seconds
        scalars["train/steps_per_second"] = tr.steps_per_epoch / seconds
        scalars["train/epoch"] = float(epoch + 1)
        emitter.scalars(scalars, steps)
        if render is not None:
            frames.maybe_publish(render, first_state(tr.training_state))
        if schedule.due(epoch + 1, finished=epoch == num_epochs - 1):
            path = tr.save(checkpoints / f"epoch_{epoch + 1:06d}", epoch + 1, steps, config)
            emitter.checkpoint_saved(path, steps)
            schedule.saved(epoch + 1)
        emitter.heartbeat(steps)
    if schedule.final_due(num_epochs):
        path = tr.save(checkpoints / "final", num_epochs, steps, config)
        emitter.checkpoint_saved(path, steps)
    if frames is not None:
        frames.close()
    emitter.run_completed(step=steps)
    return 0


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Play ``eval_episodes`` episodes of the checkpoint's policy, one env at a time, with frames."""
    import jax
    import numpy as np

    cfg = jumanji_config({**config, "steps": None})
    emitter.phase("setup", step=0)
    tr = Training(cfg)
    tr.load(config["checkpoint"])
    env = tr.stochastic_eval.eval_env
    if tr.greedy:  # A2C: its greedy policy, as jumanji's greedy evaluator plays it (first device's params)
        actor = jax.tree_util.tree_map(lambda x: x[0], tr.training_state.params_state.params.actor)
        policy = tr.agent.make_policy(policy_params=actor, stochastic=False)
    else:  # the random agent's policy has no params
        policy = tr.agent.make_policy(policy_params=None)
    frames = env_frames(config)
    render = None
    if frames is not None:
        from workers.sdk.jumanji_envs import rgb_render
        render = rgb_render(env)

    def act(observation, key):
        batched = jax.tree_util.tree_map(lambda x: x[None], observation)
        out = policy(batched, key)
        action = out[0] if tr.greedy else out
        return jax.numpy.squeeze(action, axis=0)

    emitter.phase("compiling", step=0)
    reset, step, act = jax.jit(env.reset), jax.jit(env.step), jax.jit(act)
    key = jax.random.PRNGKey(config["seed"])
    steps = 0
    compiled = False
    for episode in range(config["eval_episodes"]):
        key, reset_key = jax.random.split(key)
        state, timestep = reset(reset_key)
        total, length = 0.0, 0
        while not bool(timestep.last()) or length == 0:
            key, action_key = jax.random.split(key)
            state, timestep = step(state, act(timestep.observation, action_key))
            if not compiled:
                emitter.phase("eval", step=0)
                compiled = True
            total += float(np.asarray(timestep.reward))
            length += 1
            steps += 1
            if render is not None:
                frames.maybe_publish(render, state)
        emitter.episode(steps, total, length)
    if frames is not None:
        frames.close()
    emitter.run_completed(step=steps)
    return 0
