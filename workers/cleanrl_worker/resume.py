"""Stop and continue for CleanRL's scripts, which stay unmodified.

A CleanRL script is one flat file: it builds its networks, optimizers and replay
buffer at module level, then trains in one loop, ``for update in range(1,
num_updates + 1)`` (PPO) or ``for global_step in range(args.total_timesteps)``
(DQN, C51, SAC, TD3, DDPG). ``find_main_loop`` finds that loop in the script's
source (the outermost ``for NAME in range(...)`` whose body steps the envs).

In the script's process, ``arm`` puts a ``range`` of ours in the script's module
globals (before its first line runs). Every call returns the builtin ``range``,
but the one made on the main loop's line returns a ``TrainingLoop``: at the top
of each pass, where the previous update is complete, it

- on a continue (the first pass), loads the checkpoint into the script's
  globals, and the loop goes on from the pass after the saved one;
- when a stop was asked (SIGUSR1, forwarded by the worker), saves a checkpoint,
  writes ``STOP_NOTE`` for the worker and exits with ``STOPPED_EXIT``;
- every ``checkpoint_minutes``, saves a checkpoint on the way (the last
  ``keep`` and the best by the mean return are kept).

A checkpoint is a directory ``checkpoints/resume-<step>/`` with a manifest
beside it (workers/sdk/rundir.py): ``model.cleanrl_model`` (the networks in
mosaic's --save-model format, so ``mosaic eval`` plays it) and ``state.pt``,
everything the script holds between two passes:

- every ``torch.nn.Module`` and ``torch.optim.Optimizer`` in its globals (the
  networks and their targets, the optimizers with their moments and steps);
- tensors trained outside a module (SAC's ``log_alpha``), copied in place;
- its numbers (``global_step``, ``alpha``, ...): every int, float and bool global
  that training changed (not what the script worked out from its args before its
  loop, such as ``num_updates``), but the loop's own variable and ``start_time`` (moved back by the time
  trained, so SPS stays right);
- the loop's next value, the env steps counted, the running observation and
  return statistics of NormalizeObservation/NormalizeReward;
- the RNG states of random, numpy, torch (and CUDA) and the action space's;
- the stable-baselines3 replay buffers, up to ``BUFFER_LIMIT_BYTES`` in all.

Not kept: the envs' own state (a continued run starts new episodes: the one in
progress at the stop is cut), PPO's rollout storage (refilled by the next
rollout before it is read), and a replay buffer over the limit: then learning
waits ``learning_starts`` more steps while the buffer refills.
"""
from __future__ import annotations

import ast
import builtins
import json
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

from workers.sdk import rundir
from workers.sdk.stop import STOP_SIGNAL, STOPPED_EXIT

RESUME_PREFIX = "resume-"
MODEL_FILE = "model.cleanrl_model"
STATE_FILE = "state.pt"
# The worker reads it after the script exited with STOPPED_EXIT: the stop's step, checkpoint and time.
STOP_NOTE = os.path.join(rundir.CHECKPOINT_DIR, "stopped.json")
STATE_FORMAT = 1
# Replay buffers above this (all of a script's together) are not saved: DQN on Atari holds ~7 GB.
BUFFER_LIMIT_BYTES = 4 << 30
# Names of the script's globals never restored: the clock is moved instead, and the loop variable
# is the loop's to set.
NOT_RESTORED = {"start_time"}


# -- the script's main loop -----------------------------------------------------------
@dataclass(frozen=True)
class MainLoop:
    first_line: int   # the lines of its range(...) call
    last_line: int
    target: str       # the loop variable: "update", "iteration", "global_step"

    def as_json(self) -> dict[str, Any]:
        return {"first_line": self.first_line, "last_line": self.last_line, "target": self.target}


def _steps_envs(node: ast.AST) -> bool:
    return any(isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "step"
               for call in ast.walk(node))


def find_main_loop(path: str) -> MainLoop | None:
    """The script's training loop: the first module-level ``for NAME in range(...)`` (inside
    ``if __name__ == "__main__":`` too) whose body calls a ``.step(...)``; None if there is none."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If):
            todo[:0] = node.body + node.orelse
        elif isinstance(node, (ast.With, ast.Try)):
            todo[:0] = node.body
        elif (isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call)
              and isinstance(node.iter.func, ast.Name) and node.iter.func.id == "range" and _steps_envs(node)):
            return MainLoop(node.iter.lineno, node.iter.end_lineno or node.iter.lineno, node.target.id)
    return None


# -- in the script's process -------------------------------------------------------------
class Resume:
    """What the worker asked for (MOSAIC_CLEANRL_RESUME): the loop, where to continue from, how often
    to save on the way and how many checkpoints to keep."""

    def __init__(self, loop: MainLoop, continue_from: str | None, checkpoint_minutes: float, keep: int,
                 checkpoint_dir: str):
        self.loop = loop
        self.continue_from = continue_from
        self.every_s = checkpoint_minutes * 60.0
        self.keep = keep
        self.checkpoint_dir = checkpoint_dir
        self.stop_requested = False
        self.entered = False
        # the script's numbers when its loop began: what training changes is saved, not what the
        # script worked out from its args (num_updates: a new run from a checkpoint may differ)
        self.initial_numbers: dict[str, Any] = {}

    @classmethod
    def from_json(cls, data: dict[str, Any], checkpoint_dir: str) -> "Resume":
        loop = data["loop"]
        return cls(MainLoop(int(loop["first_line"]), int(loop["last_line"]), str(loop["target"])),
                   data.get("from"), float(data.get("checkpoint_minutes") or 0), int(data.get("keep") or 0),
                   checkpoint_dir)


RESUME: Resume | None = None
# patches.py, which arms this module in the script's process and keeps what both read: the
# training env, the env steps, the algorithm's name, the emitter. Handed over by arm(), not
# imported, so that neither module imports the other.
PATCHES: Any = None


def arm(resume: Resume, patches: Any) -> None:
    """Before the script's first line: SIGUSR1 asks for a stop, and the script's ``range`` is ours."""
    global RESUME, PATCHES
    RESUME, PATCHES = resume, patches
    signal.signal(STOP_SIGNAL, _on_stop)
    main = sys.modules["__main__"]
    main_dict = vars(main)

    def script_range(*args):
        frame = sys._getframe(1)
        if (not resume.entered and frame.f_globals is main_dict and frame.f_code.co_name == "<module>"
                and resume.loop.first_line <= frame.f_lineno <= resume.loop.last_line):
            resume.entered = True
            return TrainingLoop(builtins.range(*args), main_dict, resume)
        return builtins.range(*args)

    main_dict["range"] = script_range


def _on_stop(signum, frame) -> None:
    RESUME.stop_requested = True


class TrainingLoop:
    """The script's main loop, passing through the values of its range; see the module's docstring."""

    def __init__(self, values: range, script: dict[str, Any], resume: Resume):
        self.script = script
        self.resume = resume
        self.values = values
        self.started = time.monotonic()
        self.last_saved = time.monotonic()
        first = values.start
        resume.initial_numbers = dict(_kinds(script)[3])
        if resume.continue_from:
            first = restore(script, resume.continue_from, values)
            sys.stderr.write(f"resumed from {resume.continue_from} at {resume.loop.target} {first}: "
                             f"{restored_summary(script)}\n")
        self.remaining = iter(builtins.range(first, values.stop, values.step))

    def __iter__(self) -> "TrainingLoop":
        return self

    def __next__(self) -> int:
        try:
            value = next(self.remaining)
        except StopIteration:
            # Trained to the end: a stop from now on comes too late, and must not kill the script
            # while it saves its model and shuts down (Python's shutdown puts the default action,
            # death, back for a handler of its own; an ignored signal stays ignored).
            signal.signal(STOP_SIGNAL, signal.SIG_IGN)
            raise
        if self.resume.stop_requested:
            started = time.monotonic()
            path, step = save(self.script, value, self.resume)
            note = {"step": step, "checkpoint": path, "save_s": round(time.monotonic() - started, 4)}
            rundir.write_state(STOP_NOTE, note)
            PATCHES.STOPPING = True        # no "final model" saved at this exit
            close_writers(self.script)
            sys.stderr.write(f"stopped at step {step}: {path}\n")
            signal.signal(STOP_SIGNAL, signal.SIG_IGN)   # sent again until we end: see above
            raise SystemExit(STOPPED_EXIT)
        if self.resume.every_s and time.monotonic() - self.last_saved >= self.resume.every_s:
            save(self.script, value, self.resume)
            self.last_saved = time.monotonic()
        return value


# -- what is saved ------------------------------------------------------------------------
def _kinds(script: dict[str, Any]):
    import torch
    from torch import nn

    modules, optimizers, tensors, numbers = {}, {}, {}, {}
    for name, value in script.items():
        if name.startswith("_") or name in NOT_RESTORED:
            continue
        if isinstance(value, nn.Module):
            modules[name] = value
        elif isinstance(value, torch.optim.Optimizer):
            optimizers[name] = value
        elif isinstance(value, torch.Tensor) and value.is_leaf and value.requires_grad:
            tensors[name] = value
        elif type(value) in (int, float, bool):
            numbers[name] = value
    # a module's own parameter left in a global by a loop (DQN's soft update: `for target_network_param,
    # q_network_param in zip(...)`) is saved with its module, not as a tensor of its own
    owned = {id(p) for module in modules.values() for p in module.parameters()}
    tensors = {name: t for name, t in tensors.items() if id(t) not in owned}
    return modules, optimizers, tensors, numbers


def replay_buffers(script: dict[str, Any]) -> dict[str, Any]:
    buffers = sys.modules.get("stable_baselines3.common.buffers")
    if buffers is None:
        return {}
    return {name: value for name, value in script.items() if isinstance(value, buffers.ReplayBuffer)}


BUFFER_ARRAYS = ("observations", "next_observations", "actions", "rewards", "dones", "timeouts")


def buffer_state(buffer) -> dict[str, Any]:
    """The filled part of an SB3 ReplayBuffer (its arrays up to ``pos``, or all once full)."""
    filled = buffer.buffer_size if buffer.full else buffer.pos
    arrays = {key: getattr(buffer, key)[:filled].copy() for key in BUFFER_ARRAYS
              if getattr(buffer, key, None) is not None}
    return {"pos": int(buffer.pos), "full": bool(buffer.full), "filled": int(filled), "arrays": arrays}


def buffer_bytes(buffer) -> int:
    filled = buffer.buffer_size if buffer.full else buffer.pos
    per_row = sum(getattr(buffer, key)[:1].nbytes for key in BUFFER_ARRAYS if getattr(buffer, key, None) is not None)
    return per_row * filled


def running_stats(vector_env) -> list[list[tuple[Any, str]]]:
    """Per sub-env, the (wrapper, attribute) pairs holding running statistics (NormalizeObservation's
    ``obs_rms``, NormalizeReward's ``return_rms``), outermost first."""
    found = []
    for env in getattr(vector_env, "envs", None) or []:
        chain = []
        while env is not None:
            own = getattr(env, "__dict__", {})   # not what gym 0.23's Wrapper.__getattr__ finds further in
            chain += [(env, key) for key in ("obs_rms", "return_rms") if key in own]
            env = getattr(env, "env", None)
        found.append(chain)
    return found


def _rng_states() -> dict[str, Any]:
    import numpy as np
    import torch

    states = {"random": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _action_spaces(vector_env) -> dict[str, Any]:
    spaces = {}
    for name in ("single_action_space", "action_space"):
        space = getattr(vector_env, name, None)
        generator = getattr(space, "_np_random", None) or getattr(space, "np_random", None)
        if generator is not None and hasattr(generator, "bit_generator"):
            spaces[name] = generator.bit_generator.state
    return spaces


def _objective() -> float | None:
    """The mean of the last 20 episode returns: "the best" checkpoint to keep."""
    returns = PATCHES.RECENT_RETURNS
    return round(sum(returns) / len(returns), 6) if returns else None


def save(script: dict[str, Any], next_value: int, resume: Resume) -> tuple[str, int]:
    """A checkpoint of the script between two passes, as ``checkpoints/resume-<step>/`` (written under
    a temporary name, then renamed), its manifest, and the kept ones pruned; (its path, its step)."""
    import torch


    step = PATCHES.script_step()
    modules, optimizers, tensors, numbers = _kinds(script)
    buffers = replay_buffers(script)
    kept = sum(buffer_bytes(b) for b in buffers.values()) <= BUFFER_LIMIT_BYTES
    args = script.get("args")
    start_time = script.get("start_time")
    state = {
        "format": STATE_FORMAT, "algo": PATCHES.ALGO, "loop": resume.loop.target, "next": int(next_value),
        "step": int(step), "env_steps": int(PATCHES.env_steps),
        "modules": {name: m.state_dict() for name, m in modules.items()},
        "optimizers": {name: o.state_dict() for name, o in optimizers.items()},
        "tensors": {name: t.detach().clone() for name, t in tensors.items()},
        "numbers": {name: v for name, v in numbers.items() if name != resume.loop.target
                    and (name not in resume.initial_numbers or resume.initial_numbers[name] != v)},
        "buffers": {name: buffer_state(b) for name, b in buffers.items()} if kept else {},
        "buffers_dropped": [] if kept else sorted(buffers),
        "running_stats": [[(key, {"mean": w.__dict__[key].mean, "var": w.__dict__[key].var,
                                  "count": float(w.__dict__[key].count)}) for w, key in chain]
                          for chain in running_stats(PATCHES.TRAINING_ENV)],
        "rng": _rng_states(), "action_spaces": _action_spaces(PATCHES.TRAINING_ENV),
        "trained_s": (time.time() - start_time) if isinstance(start_time, float) else None,
        "learning_rate": getattr(args, "learning_rate", None),
    }
    folder = os.path.abspath(resume.checkpoint_dir)
    final = os.path.join(folder, f"{RESUME_PREFIX}{step}")
    partial = final + ".partial"
    shutil.rmtree(partial, ignore_errors=True)
    os.makedirs(partial)
    save_file = PATCHES._original_torch_save or torch.save   # not the --save-model redirect
    save_file(PATCHES.networks_file(modules, args, step), os.path.join(partial, MODEL_FILE))
    save_file(state, os.path.join(partial, STATE_FILE))
    if os.path.lexists(final):   # the same step saved again (a stop right after a periodic save)
        shutil.rmtree(final)
    os.replace(partial, final)
    rundir.write_manifest(final, step, objective=_objective())
    PATCHES._emitter.checkpoint_saved(PATCHES._as_reported(final), step)
    rundir.prune_checkpoints(folder, RESUME_PREFIX, resume.keep)
    return final, int(step)


def close_writers(script: dict[str, Any]) -> None:
    """The script's SummaryWriters flushed and closed: its TensorBoard files end whole at a stop."""
    writer = sys.modules.get("torch.utils.tensorboard.writer")
    if writer is None:
        return
    for value in list(script.values()):
        if isinstance(value, writer.SummaryWriter):
            value.close()


# -- what is restored ---------------------------------------------------------------------
def load_state(path: str) -> dict[str, Any]:
    """A checkpoint's state (``path``: its directory, or a file in it); ValueError naming the problem."""
    import torch

    folder = path if os.path.isdir(path) else os.path.dirname(path)
    state_file = os.path.join(folder, STATE_FILE)
    if not os.path.isfile(state_file):
        raise ValueError(f"{folder} is not a CleanRL resume checkpoint (no {STATE_FILE}): "
                         f"a run continues from a checkpoint its stop or the periodic saves wrote")
    try:
        # our own file, checked against its manifest by the daemon: numpy arrays and RNG states need pickle
        state = torch.load(state_file, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 -- a torn or foreign file, whatever torch says about it
        raise ValueError(f"{state_file} cannot be read ({type(exc).__name__}: {exc})") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise ValueError(f"{state_file} is not a CleanRL resume state of format {STATE_FORMAT}")
    return state


def follow_learning_rate(optimizers, saved_rate: float | None, rate: float | None) -> None:
    """A continue with a new ``--learning-rate`` (a PBT exploit, a ``--set``): the optimizers' loaded
    groups hold the checkpoint's rate, and a script that sets the rate only when it builds its
    optimizer (DQN, SAC, PPO without annealing) would keep it. Each group's rate is scaled by
    new/old, so one that was annealed stays at its point of the schedule. A checkpoint that did not
    record its rate (older ones), or the same rate, changes nothing."""
    if not saved_rate or rate is None or rate == saved_rate:
        return
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * rate / saved_rate


def restore(script: dict[str, Any], path: str, values: range) -> int:
    """Load the checkpoint at ``path`` into the script's globals; the loop's next value."""
    import numpy as np
    import torch


    state = load_state(path)
    if state["algo"] != PATCHES.ALGO or state["loop"] != RESUME.loop.target:
        raise ValueError(f"{path} is a checkpoint of {state['algo']} (loop {state['loop']}), "
                         f"not of {PATCHES.ALGO} (loop {RESUME.loop.target})")
    if state["next"] not in values and state["next"] != values.stop:
        raise ValueError(f"{path} stopped at {state['loop']} {state['next']}, outside this run's "
                         f"{values.start}..{values.stop - 1}")
    modules, optimizers, tensors, _ = _kinds(script)
    for kind, have, saved in (("network", modules, state["modules"]), ("optimizer", optimizers, state["optimizers"]),
                              ("tensor", tensors, state["tensors"])):
        if set(have) != set(saved):
            raise ValueError(f"{path} holds the {kind}s {sorted(saved)}; this script has {sorted(have)}")
    for name, module in modules.items():
        module.load_state_dict(state["modules"][name])
    with torch.no_grad():
        for name, tensor in tensors.items():
            tensor.copy_(state["tensors"][name])   # in place: the optimizer holds this tensor
    for name, optimizer in optimizers.items():
        optimizer.load_state_dict(state["optimizers"][name])
    follow_learning_rate(optimizers.values(), state.get("learning_rate"),
                         getattr(script.get("args"), "learning_rate", None))
    for name, value in state["numbers"].items():
        script[name] = value
    buffers = replay_buffers(script)
    for name, saved in state["buffers"].items():
        buffer = buffers[name]
        for key, array in saved["arrays"].items():
            getattr(buffer, key)[:saved["filled"]] = array
        buffer.pos, buffer.full = saved["pos"], saved["full"]
    args = script.get("args")
    if state["buffers_dropped"] and args is not None and hasattr(args, "learning_starts"):
        # the buffer starts empty: learning waits until it holds learning_starts steps again
        args.learning_starts = state["next"] + args.learning_starts
    for chain, saved_chain in zip(running_stats(PATCHES.TRAINING_ENV), state["running_stats"]):
        for (wrapper, key), (saved_key, stats) in zip(chain, saved_chain):
            if key == saved_key:
                rms = wrapper.__dict__[key]
                rms.mean, rms.var, rms.count = np.array(stats["mean"]), np.array(stats["var"]), stats["count"]
    rng = state["rng"]
    random.setstate(rng["random"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["torch"])
    if "cuda" in rng and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    for name, bit_state in state["action_spaces"].items():
        space = getattr(PATCHES.TRAINING_ENV, name, None)
        generator = getattr(space, "_np_random", None) or getattr(space, "np_random", None)
        if generator is not None and hasattr(generator, "bit_generator"):
            generator.bit_generator.state = bit_state
    PATCHES.env_steps = state["env_steps"]
    if state.get("trained_s") is not None and "start_time" in script:
        script["start_time"] = time.time() - state["trained_s"]   # SPS over the time trained, not since now
    return int(state["next"])


def restored_summary(script: dict[str, Any]) -> str:
    """What the script holds after a restore, read from the objects themselves (stderr.log says it)."""
    modules, optimizers, tensors, _ = _kinds(script)
    parts = [f"networks {', '.join(sorted(modules))}", f"optimizers {', '.join(sorted(optimizers))}"]
    if tensors:
        parts.append(f"tensors {', '.join(sorted(tensors))}")
    for name, buffer in sorted(replay_buffers(script).items()):
        held = buffer.buffer_size if buffer.full else buffer.pos
        parts.append(f"replay buffer {name} with {held} transitions")
    for index, chain in enumerate(running_stats(PATCHES.TRAINING_ENV)):
        for wrapper, key in chain:
            parts.append(f"env {index} {key} over {float(wrapper.__dict__[key].count):.0f} steps")
    return "; ".join(parts)


def describe(path: str) -> dict[str, Any]:
    """For the docs and the tests: what a checkpoint holds, by name."""
    state = load_state(path)
    described = {key: (sorted(state[key]) if isinstance(state[key], dict) else state[key])
                 for key in ("modules", "optimizers", "tensors", "numbers", "buffers", "buffers_dropped", "step", "next")}
    described["transitions"] = {name: saved["filled"] for name, saved in state["buffers"].items()}
    return described


def as_environ(loop: MainLoop, continue_from: str | None, checkpoint_minutes: float, keep: int) -> str:
    return json.dumps({"loop": loop.as_json(), "from": continue_from, "checkpoint_minutes": checkpoint_minutes,
                       "keep": keep})
