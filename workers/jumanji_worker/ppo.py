"""PPO on Jumanji's envs: rejax's ``PPO`` (rejax 0.1.3), trained chunk by chunk.

rejax builds the env itself (``PPO.create(env="jumanji/<Env>")`` goes through
its ``rejax.compat.jumanji2gymnax``: Jumanji's env as a gymnax env,
observations flattened) and trains in one jitted function, ``algo.train``:
a ``lax.scan`` of evaluations, each after ``eval_freq`` env steps of PPO
iterations. One call for the whole run would leave the app silent until the
end, so the run is cut into chunks of ``eval_freq`` steps: the same
``train`` with ``total_timesteps = eval_freq`` and no initial evaluation,
continued from the train state it returns (``train(train_state=ts)``). The
chunk function is compiled once, ahead of time (the "compiling" phase); after
each chunk: its evaluation (rejax's ``evaluate``: whole episodes of the
policy as rejax acts, sampled) as scalars and an episode record, a frame of
the first training env, checkpoints.

Checkpoints: the train state (actor and critic params with their Adam states,
the env states, the observation/reward statistics, the key, the step count)
as its list of leaves (numpy arrays, pickled): rejax makes the state's class at
run time (``init_state``), so it is rebuilt from a fresh ``init_state`` of the
same config and its leaves replaced.
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

from workers.jumanji_worker import STATE_FILE, catalog
from workers.sdk.rundir import checkpoint_dir
from workers.sdk.descriptor import dist_version
from workers.sdk.frames import env_frames
from workers.sdk.rundir import CHECKPOINT_DIR, CHECKPOINT_META, CheckpointSchedule
from workers.sdk.telemetry import Emitter

# the params that shape the saved train state: a checkpoint is refused at submit if they differ
STATE_SHAPING = ("num_envs", "agent_kwargs.hidden_layer_sizes", "agent_kwargs.activation")


def upstream() -> str:
    return f"rejax=={dist_version('rejax') or '?'} jumanji=={dist_version('jumanji') or '?'} " \
           f"jax=={dist_version('jax') or '?'}"


def total_timesteps(config: dict[str, Any]) -> int:
    return config.get("steps") or config["params"]["total_timesteps"]


def total_steps(config: dict[str, Any]) -> int | None:
    """Env steps at the end of training: whole chunks of whole PPO iterations."""
    if config["mode"] == "eval":
        return None
    params = config["params"]
    return math.ceil(total_timesteps(config) / params["eval_freq"]) * catalog.ppo_chunk_steps(params)


def rejax_config(config: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of ``PPO.create``: rejax's fields from the params, one chunk of steps."""
    config_kwargs: dict[str, Any] = {"env": f"jumanji/{config['env']}", "agent_kwargs": {}}
    for key, value in config["params"].items():
        if key in catalog.PPO_MOSAIC_PARAMS:
            continue
        if key.startswith("agent_kwargs."):
            config_kwargs["agent_kwargs"][key.split(".", 1)[1]] = value
        elif value is not None:  # max_grad_norm null: rejax's default (jnp.inf)
            config_kwargs[key] = value
    # one call of train is one chunk: eval_freq steps, its evaluation at the end
    config_kwargs["total_timesteps"] = config_kwargs["eval_freq"]
    config_kwargs["skip_initial_evaluation"] = True
    return config_kwargs


class Trainer:
    """rejax's PPO for one config, its chunk function and its evaluation."""

    def __init__(self, config: dict[str, Any]):
        import jax
        from rejax import PPO
        from rejax.evaluate import evaluate

        self.algo = PPO.create(**rejax_config(config))
        self.state = self.algo.init_state(jax.random.PRNGKey(config["seed"]))
        algo, seeds = self.algo, config["params"]["eval_seeds"]
        env, env_params = algo.env, algo.env_params

        def evaluation(ts):  # rejax's create() callback, with eval_seeds episodes instead of its 128
            return evaluate(algo.make_act(ts), ts.rng, env, env_params, seeds, env_params.max_steps_in_episode)

        self.algo = algo.replace(eval_callback=lambda _algo, ts, _rng: evaluation(ts))
        self.chunk = jax.jit(lambda ts: self.algo.train(train_state=ts))
        self.evaluate = jax.jit(evaluation)

    def compile(self) -> float:
        started = time.monotonic()
        self.chunk = self.chunk.lower(self.state).compile()
        return time.monotonic() - started

    @property
    def jumanji_env(self):
        """The Jumanji env under rejax's wrappers (FloatObsWrapper, FlattenObsWrapper, Jumanji2GymnaxEnv)."""
        from jumanji.env import Environment

        env = self.algo.env
        while not isinstance(env, Environment):
            env = env.env
        return env

    # -- checkpoints ----------------------------------------------------------
    def save(self, path: Path, chunk: int, config: dict[str, Any]) -> str:
        import jax
        import numpy as np

        path.mkdir(parents=True, exist_ok=True)
        steps = int(self.state.global_step)
        leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.device_get(self.state))]
        tmp = path / (STATE_FILE + ".tmp")
        with open(tmp, "wb") as f:
            pickle.dump({"leaves": leaves, "chunk": chunk, "steps": steps}, f)
        os.replace(tmp, path / STATE_FILE)
        meta = {"worker": "jumanji", "algo": "ppo", "env": config["env"], "chunk": chunk, "steps": steps,
                "network": {k: config["params"][k] for k in STATE_SHAPING},
                "upstream": upstream(), "mosaic_schema": catalog.SCHEMA_VERSION}
        (path / CHECKPOINT_META).write_text(json.dumps(meta, indent=1))
        return str(path / STATE_FILE)

    def load(self, checkpoint: str) -> int:
        """Restore a saved train state into this config's; the chunk it had reached."""
        import jax
        import jax.numpy as jnp

        with open(os.path.join(checkpoint_dir(checkpoint), STATE_FILE), "rb") as f:
            saved = pickle.load(f)
        fresh, treedef = jax.tree_util.tree_flatten(self.state)  # (a fresh state has Python scalars too)
        if len(saved["leaves"]) != len(fresh) or \
                any(a.shape != jnp.shape(b) for a, b in zip(saved["leaves"], fresh)):
            raise ValueError(f"{checkpoint}: its train state does not fit this config's (other network or num_envs)")
        # the saved leaves have the dtypes a chunk returns, which the chunk function is compiled for
        self.state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(a) for a in saved["leaves"]])
        return int(saved["chunk"])


def evaluation_scalars(evaluation) -> dict[str, float]:
    """rejax's evaluation (lengths, returns of eval_seeds episodes) as scalars: mean, and return's min/max."""
    import numpy as np

    lengths, returns = (np.asarray(x).reshape(-1) for x in evaluation)
    return {"eval/episode_return": float(returns.mean()), "eval/episode_return_min": float(returns.min()),
            "eval/episode_return_max": float(returns.max()), "eval/episode_length": float(lengths.mean())}


def first_env_state(state):
    import jax
    return jax.tree_util.tree_map(lambda x: x[0], state.env_state)


def train(config: dict[str, Any], emitter: Emitter, run_dir: Path) -> int:
    import jax

    params = config["params"]
    chunks = math.ceil(total_timesteps(config) / params["eval_freq"])
    emitter.phase("setup", step=0)
    setup_started = time.monotonic()
    tr = Trainer(config)
    start_chunk = 0
    if config.get("checkpoint"):
        start_chunk = tr.load(config["checkpoint"])
        sys.stderr.write(f"mosaic jumanji worker: resumed from {config['checkpoint']} at chunk {start_chunk}\n")
    steps = int(tr.state.global_step)
    emitter.scalar("time/setup_s", time.monotonic() - setup_started, steps)
    emitter.phase("compiling", step=steps)
    compile_started = time.monotonic()
    emitter.scalar("time/compile_chunk_s", tr.compile(), steps)
    if start_chunk == 0 and not params["skip_initial_evaluation"]:  # as rejax's train evaluates first
        scalars = evaluation_scalars(tr.evaluate(tr.state))
        emitter.scalars(scalars, steps)
        emitter.episode(steps, scalars["eval/episode_return"], round(scalars["eval/episode_length"]))
    emitter.scalar("time/compile_s", time.monotonic() - compile_started, steps)
    emitter.phase("train", step=steps)
    frames = env_frames(config)
    render = None
    if frames is not None:
        from workers.sdk.jumanji_envs import rgb_render
        render = rgb_render(tr.jumanji_env)
    checkpoints = run_dir / CHECKPOINT_DIR
    schedule = CheckpointSchedule(params["checkpoint_every"], start_chunk)
    for chunk in range(start_chunk, chunks):
        started = time.monotonic()
        tr.state, evaluation = tr.chunk(tr.state)
        jax.block_until_ready((tr.state, evaluation))
        seconds = time.monotonic() - started
        chunk_steps = int(tr.state.global_step) - steps
        steps = int(tr.state.global_step)
        scalars = evaluation_scalars(evaluation)
        scalars.update({"time/chunk_s": seconds, "train/steps_per_second": chunk_steps / seconds,
                        "train/chunk": float(chunk + 1), "train/env_steps": float(steps)})
        emitter.scalars(scalars, steps)
        emitter.episode(steps, scalars["eval/episode_return"], round(scalars["eval/episode_length"]))
        if render is not None:
            frames.maybe_publish(render, first_env_state(tr.state))
        if schedule.due(chunk + 1, finished=chunk == chunks - 1):
            path = tr.save(checkpoints / f"chunk_{chunk + 1:06d}", chunk + 1, config)
            emitter.checkpoint_saved(path, steps)
            schedule.saved(chunk + 1)
        emitter.heartbeat(steps)
    if schedule.final_due(chunks):
        path = tr.save(checkpoints / "final", chunks, config)
        emitter.checkpoint_saved(path, steps)
    if frames is not None:
        frames.close()
    emitter.run_completed(step=steps)
    return 0


def evaluate(config: dict[str, Any], emitter: Emitter) -> int:
    """Play ``eval_episodes`` episodes of the checkpoint's policy (as rejax acts: sampled), one env at
    a time, through rejax's gymnax adapter, with frames of the Jumanji state."""
    import jax
    import numpy as np

    emitter.phase("setup", step=0)
    tr = Trainer(config)
    tr.load(config["checkpoint"])
    env, env_params = tr.algo.env, tr.algo.env_params
    act = jax.jit(tr.algo.make_act(tr.state))
    frames = env_frames(config)
    render = None
    if frames is not None:
        from workers.sdk.jumanji_envs import rgb_render
        render = rgb_render(tr.jumanji_env)
    emitter.phase("compiling", step=0)
    key = jax.random.PRNGKey(config["seed"])
    steps = 0
    compiled = False
    for _ in range(config["eval_episodes"]):
        key, reset_key = jax.random.split(key)
        obs, state = env.reset(reset_key, env_params)
        total, length, done = 0.0, 0, False
        # rejax's evaluate stops at max_steps_in_episode too (the env's time limit)
        while not done and length < env_params.max_steps_in_episode:
            key, act_key, step_key = jax.random.split(key, 3)
            # the adapter's step auto-resets: after the last step the state is a new episode's (not drawn)
            obs, next_state, reward, done, _ = env.step(step_key, state, act(obs, act_key), env_params)
            if not compiled:
                emitter.phase("eval", step=0)
                compiled = True
            done = bool(done)
            total += float(np.asarray(reward))
            length += 1
            steps += 1
            state = next_state
            if render is not None and not done:
                frames.maybe_publish(render, state)
        emitter.episode(steps, total, length)
    if frames is not None:
        frames.close()
    emitter.run_completed(step=steps)
    return 0
