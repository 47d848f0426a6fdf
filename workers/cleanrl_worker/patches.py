"""Import-time patches that make CleanRL 1.2.0's scripts run here, unmodified, and report telemetry.

Installed in the script's process by ``sitedir/sitecustomize.py`` (the worker
puts that directory first on the child's PYTHONPATH), and in the worker itself
for evaluation. Nothing is imported eagerly: each patch runs right after the
module it patches has been imported by the script (a ``sys.meta_path`` finder
wraps that module's loader), so a gym script never imports gymnasium and the
other way round.

What is patched, and why (docs/workers/cleanrl.md has the long version):

- ``torch.utils.tensorboard.writer.SummaryWriter``: every ``add_scalar`` also
  becomes a telemetry scalar; logs go to ``tensorboard/`` instead of ``runs/``.
- ``gym.vector.VectorEnv`` (gym 0.23, used by ppo, c51, sac, td3): the first
  vector env the script creates (its training env) emits one episode event per
  finished episode, from the ``episode`` info RecordEpisodeStatistics adds.
- ``gymnasium.vector.SyncVectorEnv`` / ``AsyncVectorEnv`` (gymnasium 1.x, used
  by dqn, ddpg, ppo_continuous_action, rpo): autoreset in the same step by
  default, and the 0.29-era ``final_observation`` / ``final_info`` keys the
  scripts read are restored; the training env emits episode events.
- ``gymnasium.wrappers.TransformObservation``: ``observation_space`` is
  optional again (it became a required argument in gymnasium 1.0).
- ``gymnasium.wrappers.GrayScaleObservation`` / ``FrameStack`` (dqn_atari): the
  1.0 names GrayscaleObservation / FrameStackObservation under the old ones.
- ``gymnasium.make``: registers the family of the id first (Atari through
  ``gym.register_envs(ale_py)``; workers/sdk/registration.py), and
  ``MUJOCO_GL=egl`` is set so MuJoCo renders without a display.
- ``stable_baselines3.common.buffers.ReplayBuffer``: gym 0.23 spaces are
  converted to gymnasium spaces, which SB3 2.x requires.
- ``torch.save`` of a ``*.cleanrl_model`` file (CleanRL's --save-model): the
  file goes to ``checkpoints/`` (a symlink stays where the script expects it)
  and a checkpoint event is emitted.
- mosaic's own --save-model (scripts without one): at a clean exit, the
  script's networks are saved into ``checkpoints/``.
- the script's ``range`` (stop and continue, ``resume.py``): on the line of the
  script's main loop it returns a loop that restores, saves and stops between
  two passes; everywhere else the builtin.
- frames (``frames.enabled``): the training env publishes rendered frames to
  FastLane when one is due; ``gymnasium.make`` then defaults to
  ``render_mode="rgb_array"``.

Per-step cost: one extra Python call per vector-env step, plus a check of the
done flags; everything else runs once per episode or per logged scalar.
"""
from __future__ import annotations

import atexit
import collections
import json
import os
import sys
from typing import TYPE_CHECKING, Any, Callable

from workers.sdk import registration, rundir, telemetry
from workers.sdk.postimport import when_imported

if TYPE_CHECKING:   # names for annotations only: frames are imported when a run has them
    from workers.sdk.frames import EnvFrames

# Set by install().
_emitter: telemetry.Emitter | None = None
CHECKPOINT_DIR = rundir.CHECKPOINT_DIR
TENSORBOARD_DIR = rundir.TENSORBOARD_DIR
ALGO = "cleanrl"

# The first vector env created in this process: the script's training env.
# Only it emits episode events (not the evaluation env dqn/c51 make after
# training), and its steps are the run's env-step count.
TRAINING_ENV: Any = None
env_steps = 0  # env steps taken in TRAINING_ENV (all its sub-envs)

_uncaught_exception = False
STOPPING = False  # set by resume.TrainingLoop at a stop: the exit that follows saves no "final model"
# the last 20 episode returns: the objective a resume checkpoint is kept by (workers/sdk/rundir.py)
RECENT_RETURNS: "collections.deque[float]" = collections.deque(maxlen=20)
_original_torch_save: Callable | None = None
FRAMES: "EnvFrames | None" = None  # set by install() when frames are on
RECORDER: Any = None  # a workers.sdk.dataset.Recorder when the run records a dataset


# -- TensorBoard ------------------------------------------------------------
def patch_tensorboard(module) -> None:
    cls = module.SummaryWriter
    original_init = cls.__init__
    original_add_scalar = cls.add_scalar

    def __init__(self, log_dir=None, *args, **kwargs):
        # CleanRL writes to runs/<run_name>: keep the run name, under tensorboard/
        if isinstance(log_dir, str) and not os.path.isabs(log_dir):
            parts = log_dir.split("/", 1)
            log_dir = os.path.join(TENSORBOARD_DIR, parts[1] if parts[0] == "runs" and len(parts) > 1 else log_dir)
        original_init(self, log_dir, *args, **kwargs)

    def add_scalar(self, tag, scalar_value, global_step=None, *args, **kwargs):
        original_add_scalar(self, tag, scalar_value, global_step, *args, **kwargs)
        try:
            step = env_steps if global_step is None else int(global_step)
            # .item(): a tensor (dqn logs its loss tensor) or numpy scalar as a Python number
            value = scalar_value.item() if hasattr(scalar_value, "item") else scalar_value
            _emitter.scalar(tag, float(value), step)
        except (TypeError, ValueError, RuntimeError):
            pass  # not a single number (TensorBoard took it anyway): nothing to chart

    cls.__init__ = __init__
    cls.add_scalar = add_scalar


# -- episode events -----------------------------------------------------------
def _emit_episode(episode_return, length, env_index: int) -> None:
    RECENT_RETURNS.append(float(episode_return))
    _emitter.episode(script_step(), float(episode_return), int(length), env_index=int(env_index))


def script_step() -> int:
    """The step the script is at: its own ``global_step``, the step it logs
    ``charts/episodic_return`` with, so an episode carries the same step in both. It
    counts differently by script: PPO's adds num_envs before stepping (the env steps
    taken), DQN's, C51's, SAC's, TD3's and DDPG's is the loop index (one less than the
    steps taken). The env steps taken where a script has none at module level."""
    step = getattr(sys.modules.get("__main__"), "global_step", None)
    return step if type(step) is int else env_steps


def patch_gym_vector(module) -> None:
    """gym 0.23: step() returns (obs, rewards, dones, infos) with infos a list of dicts."""
    cls = module.VectorEnv
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        global TRAINING_ENV
        original_init(self, *args, **kwargs)
        if TRAINING_ENV is None:
            TRAINING_ENV = self
            # An instance attribute: the script's envs.step(...) finds it first,
            # other vector envs keep the plain class method.
            self.step = _training_step_gym(self, self.step)
            self.reset = _training_reset_gym(self, self.reset)

    cls.__init__ = __init__


def _training_reset_gym(env, reset: Callable) -> Callable:
    def training_reset(*args, **kwargs):
        result = reset(*args, **kwargs)
        if RECORDER is not None:  # gym 0.23: the observations, or (obs, info) with return_info
            _recording(env, same_step=True).reset(result[0] if isinstance(result, tuple) else result)
        return result

    return training_reset


def _record_gym(env, actions, result) -> None:
    """gym 0.23's step as gymnasium's: a done split by TimeLimit.truncated, the final
    observation (same-step autoreset) from info["terminal_observation"]."""
    import numpy as np

    obs, rewards, dones, infos = result
    truncated = np.array([bool(d and info.get("TimeLimit.truncated", False)) for d, info in zip(dones, infos)])
    terminated = np.logical_and(dones, ~truncated)
    final = [info.get("terminal_observation", o) if d else o for o, d, info in zip(obs, dones, infos)]
    _recording(env, same_step=True).step(actions, obs, rewards, terminated, truncated, {"final_obs": final})


def _training_step_gym(env, step: Callable) -> Callable:
    num_envs = env.num_envs

    def training_step(actions):
        global env_steps
        result = step(actions)
        env_steps += num_envs
        if RECORDER is not None:
            _record_gym(env, actions, result)
        dones = result[2]
        if dones.any():
            for i, info in enumerate(result[3]):
                episode = info.get("episode") if dones[i] else None
                if episode is not None:
                    _emit_episode(episode["r"], episode["l"], i)
        if FRAMES is not None:
            FRAMES.maybe_publish(render_sub_envs, env, FRAMES.grid)
        return result

    return training_step


def patch_gymnasium_vector(module) -> None:
    """gymnasium 1.x Sync/AsyncVectorEnv: same-step autoreset and the old final_* keys."""
    import inspect

    from gymnasium.vector import AutoresetMode

    for cls in (module.SyncVectorEnv, module.AsyncVectorEnv):
        _patch_gymnasium_vector_class(cls, inspect.signature(cls.__init__), AutoresetMode.SAME_STEP)


def _patch_gymnasium_vector_class(cls, signature, same_step) -> None:
    original_init = cls.__init__
    original_step = cls.step

    def __init__(self, *args, **kwargs):
        global TRAINING_ENV
        # The scripts were written for gymnasium 0.29, whose vector envs reset
        # a finished sub-env within the same step. 1.x defaults to resetting on
        # the next step (a step with a meaningless transition): ask for the old
        # behaviour unless the caller chose a mode.
        if "autoreset_mode" not in signature.bind_partial(self, *args, **kwargs).arguments:
            kwargs["autoreset_mode"] = same_step
        original_init(self, *args, **kwargs)
        self._mosaic_training = TRAINING_ENV is None
        if TRAINING_ENV is None:
            TRAINING_ENV = self

    original_reset = cls.reset

    def reset(self, *args, **kwargs):
        obs, infos = original_reset(self, *args, **kwargs)
        if self._mosaic_training and RECORDER is not None:
            _recording(self).reset(obs)
        return obs, infos

    def step(self, actions):
        global env_steps
        obs, rewards, terminations, truncations, infos = original_step(self, actions)
        if self._mosaic_training and RECORDER is not None:
            _recording(self).step(actions, obs, rewards, terminations, truncations, infos)
        if self._mosaic_training:
            env_steps += self.num_envs
            # same-step autoreset: a finished episode's info is under final_info;
            # next-step autoreset: it is in infos itself.
            final = infos.get("final_info", infos)
            episode = final.get("episode")
            if episode is not None:
                returns, lengths = episode["r"], episode["l"]
                for i in final["_episode"].nonzero()[0]:
                    _emit_episode(returns[i], lengths[i], i)
            if FRAMES is not None:
                FRAMES.maybe_publish(render_sub_envs, self, FRAMES.grid)
        if "final_obs" in infos:
            _restore_final_keys(self.num_envs, infos)
        return obs, rewards, terminations, truncations, infos

    cls.__init__ = __init__
    cls.reset = reset
    cls.step = step
    cls._mosaic_training = False  # instances made before the patch: not the training env


def _recording(vector_env, same_step: bool | None = None) -> Any:
    """The training env's VectorEpisodes (the script holds the env: it is fed from step/reset)."""
    episodes = getattr(vector_env, "_mosaic_episodes", None)
    if episodes is None:
        from workers.sdk.dataset import VectorEpisodes, same_step_autoreset

        if same_step is None:
            same_step = same_step_autoreset(vector_env)
        episodes = VectorEpisodes(RECORDER.store, vector_env.num_envs, same_step)
        vector_env._mosaic_episodes = episodes
    return episodes


def _restore_final_keys(num_envs: int, infos: dict) -> None:
    """Add gymnasium 0.29's keys: ``final_observation`` (one observation or None
    per sub-env) and ``final_info`` (one info dict or None per sub-env)."""
    import numpy as np

    mask = infos["_final_obs"]
    infos["final_observation"] = infos["final_obs"]
    infos["_final_observation"] = mask
    batched = infos.get("final_info", {})
    final_info = np.full(num_envs, None, dtype=object)
    for i in mask.nonzero()[0]:
        final_info[i] = _unbatch(batched, i)
    infos["final_info"] = final_info
    infos["_final_info"] = mask


def _unbatch(batched: dict, i: int) -> dict:
    """Sub-env ``i``'s own info dict out of a vector env's batched infos."""
    info = {}
    for key, value in batched.items():
        if key.startswith("_") and key[1:] in batched:
            continue  # a mask
        mask = batched.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        info[key] = _unbatch(value, i) if isinstance(value, dict) else value[i]
    return info


# -- gymnasium wrappers -------------------------------------------------------
def patch_gymnasium_transform_observation(module) -> None:
    cls = module.TransformObservation
    original_init = cls.__init__

    def __init__(self, env, func, observation_space=None):
        # ppo_continuous_action calls TransformObservation(env, func), the
        # gymnasium 0.29 signature; None means "same space as env" in 1.x.
        original_init(self, env, func, observation_space)

    cls.__init__ = __init__


def patch_gymnasium_wrappers(module) -> None:
    """dqn_atari's wrappers by their gymnasium 0.29 names: GrayScaleObservation and FrameStack
    were renamed GrayscaleObservation and FrameStackObservation in 1.0 (same arguments as
    the scripts pass them: the env, then the stack size)."""
    module.GrayScaleObservation = module.GrayscaleObservation
    module.FrameStack = module.FrameStackObservation


def patch_gymnasium_make(module) -> None:
    """Frames only: gymnasium envs render only in the mode they were made with."""
    original_make = module.make

    def make(id, *args, **kwargs):
        kwargs.setdefault("render_mode", "rgb_array")
        return original_make(id, *args, **kwargs)

    module.make = make


# -- frames -------------------------------------------------------------------
def render_sub_envs(vector_env, count: int) -> list:
    """RGB arrays of the first ``count`` sub-envs of a gym 0.23 or gymnasium vector env."""
    gymnasium_api = type(vector_env).__module__.startswith("gymnasium")
    sub_envs = getattr(vector_env, "envs", None)
    if sub_envs is not None:  # SyncVectorEnv
        if gymnasium_api:
            return [env.render() for env in sub_envs[:count]]
        return [env.render(mode="rgb_array") for env in sub_envs[:count]]
    if gymnasium_api:  # AsyncVectorEnv
        return list(vector_env.render())[:count]
    return list(vector_env.call("render", mode="rgb_array"))[:count]


# -- stable-baselines3 ----------------------------------------------------------
def to_gymnasium_space(space):
    """A gym 0.23 space as the gymnasium space SB3 2.x accepts (others unchanged)."""
    if not type(space).__module__.startswith("gym."):
        return space
    from gymnasium import spaces

    kind = type(space).__name__
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(space.nvec)
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "Dict":
        return spaces.Dict({key: to_gymnasium_space(sub) for key, sub in space.spaces.items()})
    if kind == "Tuple":
        return spaces.Tuple([to_gymnasium_space(sub) for sub in space.spaces])
    raise TypeError(f"cannot convert gym space {space!r} for stable-baselines3")


def patch_sb3_buffers(module) -> None:
    for cls in (module.ReplayBuffer, module.RolloutBuffer):
        _patch_buffer_init(cls)


def _patch_buffer_init(cls) -> None:
    original_init = cls.__init__

    def __init__(self, buffer_size, observation_space, action_space, *args, **kwargs):
        original_init(self, buffer_size, to_gymnasium_space(observation_space),
                      to_gymnasium_space(action_space), *args, **kwargs)

    cls.__init__ = __init__


# -- checkpoints ----------------------------------------------------------------
def patch_torch(module) -> None:
    global _original_torch_save
    _original_torch_save = module.save

    def save(obj, f, *args, **kwargs):
        if not (isinstance(f, (str, os.PathLike)) and os.fspath(f).endswith(".cleanrl_model")):
            return _original_torch_save(obj, f, *args, **kwargs)
        # CleanRL's --save-model: runs/<run>/<exp>.cleanrl_model. Keep it in
        # checkpoints/ and leave a link where the script will load it from.
        wanted = os.fspath(f)
        path = os.path.abspath(os.path.join(CHECKPOINT_DIR, os.path.basename(wanted)))
        os.makedirs(CHECKPOINT_DIR, exist_ok=True)
        result = _original_torch_save(obj, path, *args, **kwargs)
        if os.path.abspath(wanted) != path:
            os.makedirs(os.path.dirname(os.path.abspath(wanted)), exist_ok=True)
            if os.path.lexists(wanted):
                os.remove(wanted)
            os.symlink(path, wanted)
        _emitter.checkpoint_saved(_as_reported(path), env_steps)
        return result

    module.save = save


def _mark_uncaught(exc_type, exc, tb, _previous=sys.excepthook):
    global _uncaught_exception
    _uncaught_exception = True
    _previous(exc_type, exc, tb)


def find_obs_normalizers(vector_env) -> list[list[Any]]:
    """Per sub-env, the wrappers holding running observation statistics
    (NormalizeObservation's ``obs_rms``), outermost first."""
    found = []
    for env in getattr(vector_env, "envs", None) or []:
        chain = []
        while env is not None:
            # its own attribute, not one gym 0.23's Wrapper.__getattr__ finds further in
            if "obs_rms" in getattr(env, "__dict__", {}):
                chain.append(env)
            env = getattr(env, "env", None)
        found.append(chain)
    return found


def networks_file(networks: dict[str, Any], args: Any, step: int) -> dict[str, Any]:
    """mosaic's --save-model format (evaluate.py reads it): the networks' state dicts, the script's
    args and its observation statistics; plain lists and floats, so that the file loads with
    torch.load(weights_only=True)."""
    obs_rms = [[{"mean": w.obs_rms.mean.tolist(), "var": w.obs_rms.var.tolist(), "count": float(w.obs_rms.count)}
                for w in chain]
               for chain in find_obs_normalizers(TRAINING_ENV)]
    return {"mosaic_format": 1, "algo": ALGO, "args": dict(vars(args)) if args is not None else {},
            "networks": {name: net.state_dict() for name, net in networks.items()}, "obs_rms": obs_rms,
            "env_steps": int(step)}


def save_networks_at_exit() -> None:
    """mosaic's --save-model: save every torch network the script left in its
    globals (agent, actor, q_network, ...) with its args and observation
    statistics, unless the script died of an exception or stopped (mosaic stop)."""
    if _uncaught_exception or STOPPING:
        return
    torch = sys.modules.get("torch")
    main = sys.modules.get("__main__")
    if torch is None or main is None:
        return
    networks = {name: obj for name, obj in vars(main).items() if isinstance(obj, torch.nn.Module)}
    if not networks:
        return
    path = os.path.abspath(os.path.join(CHECKPOINT_DIR, f"{ALGO}.cleanrl_model"))
    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    save = _original_torch_save or torch.save
    save(networks_file(networks, getattr(main, "args", None), env_steps), path)
    _emitter.checkpoint_saved(_as_reported(path), env_steps)


def _as_reported(path: str) -> str:
    """A checkpoint's path as events carry it: relative to the run directory
    (the parent of checkpoints/), like "checkpoints/ppo.cleanrl_model"."""
    return os.path.relpath(path, os.path.dirname(os.path.abspath(CHECKPOINT_DIR)))


# -- installing -------------------------------------------------------------------
POST_IMPORT_PATCHES: dict[str, Callable[[Any], None]] = {
    "torch": patch_torch,
    "torch.utils.tensorboard.writer": patch_tensorboard,
    "gym.vector.vector_env": patch_gym_vector,
    "gymnasium.vector": patch_gymnasium_vector,
    "gymnasium.wrappers.transform_observation": patch_gymnasium_transform_observation,
    "gymnasium.wrappers": patch_gymnasium_wrappers,
    "stable_baselines3.common.buffers": patch_sb3_buffers,
}
_installed = False


def install(algo: str = "cleanrl", checkpoint_dir: str = rundir.CHECKPOINT_DIR,
            tensorboard_dir: str = rundir.TENSORBOARD_DIR, save_model_at_exit: bool = False,
            frames: dict[str, Any] | None = None, record: dict[str, Any] | None = None,
            resume: dict[str, Any] | None = None) -> None:
    """Arm the patches in this process (once). Modules imported already are patched now.

    ``frames``: {"run_id", "fps", "max_dim", "grid"} to publish frames to FastLane.
    ``record``: {"record": {"episodes": N} | {"steps": N}, "env", "directory"}: the training
    env's transitions become the run's dataset, saved at exit (workers/sdk/dataset.py).
    ``resume``: stop and continue (resume.py): the script's main loop, the checkpoint to continue
    from, the periodic interval and how many checkpoints to keep (resume.as_environ).
    """
    global _installed, _emitter, ALGO, CHECKPOINT_DIR, TENSORBOARD_DIR, FRAMES, RECORDER
    if _installed:
        return
    _installed = True
    ALGO, CHECKPOINT_DIR, TENSORBOARD_DIR = algo, checkpoint_dir, tensorboard_dir
    _emitter = telemetry.get_emitter()  # before atexit.register below: runs after our exit hook
    pending = dict(POST_IMPORT_PATCHES)
    if frames:
        from workers.sdk.frames import EnvFrames

        FRAMES = EnvFrames(**frames)
        atexit.register(lambda: FRAMES is not None and FRAMES.close())
        pending["gymnasium.envs.registration"] = patch_gymnasium_make
    if record:
        from workers.sdk.dataset import Recorder

        RECORDER = Recorder(record["record"], record["env"], record["directory"])
        atexit.register(lambda: RECORDER.finish(_emitter))
    for name, patch in pending.items():   # now if imported already, else right after its import
        when_imported(name, patch)
    # Atari (ale_py), ViZDoom, MultiGrid ids: registered by gymnasium.make when a script makes one;
    # MUJOCO_GL=egl so MuJoCo renders headless
    registration.prepare_process()
    registration.install_make_hook()
    if save_model_at_exit:
        sys.excepthook = _mark_uncaught
        atexit.register(save_networks_at_exit)
    if resume:
        from workers.cleanrl_worker import resume as resume_module
        resume_module.arm(resume_module.Resume.from_json(resume, checkpoint_dir), sys.modules[__name__])


def install_from_environ() -> bool:
    """install() as the worker asked through MOSAIC_CLEANRL_* variables; False if it did not."""
    if os.environ.get("MOSAIC_CLEANRL_PATCH") != "1":
        return False
    install(algo=os.environ.get("MOSAIC_CLEANRL_ALGO", "cleanrl"),
            checkpoint_dir=os.environ.get("MOSAIC_CLEANRL_CHECKPOINT_DIR", rundir.CHECKPOINT_DIR),
            tensorboard_dir=os.environ.get("MOSAIC_CLEANRL_TENSORBOARD_DIR", rundir.TENSORBOARD_DIR),
            save_model_at_exit=os.environ.get("MOSAIC_CLEANRL_SAVE_MODEL") == "1",
            frames=json.loads(os.environ.get("MOSAIC_CLEANRL_FRAMES") or "null"),
            record=json.loads(os.environ.get("MOSAIC_CLEANRL_RECORD") or "null"),
            resume=json.loads(os.environ.get("MOSAIC_CLEANRL_RESUME") or "null"))
    return True
