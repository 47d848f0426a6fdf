"""The CleanRL worker's entry points: ``train`` and ``evaluate``.

In train mode the CleanRL script runs as a child,
``python <script> --env-id ... --total-timesteps ... <params>``, with
``sitedir/`` first on its PYTHONPATH so ``patches`` are armed before the
script's first line; the child writes telemetry to the same events file
through the inherited descriptor (MOSAIC_TELEMETRY_FD). This process adds the
lifecycle events around it, forwards SIGTERM/SIGINT (a cancel) and SIGUSR1 (a
stop: the script saves a checkpoint between two passes of its main loop and
exits, resume.py), and ends as the child ended. In eval mode it plays a
checkpoint itself (``evaluate.py``).
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys

from workers.cleanrl_worker import WORKER, catalog, resume
from workers.cleanrl_worker.run_setup import CHECKPOINT_DIR, TENSORBOARD_DIR, algo_name, frames_request
from workers.sdk import rundir
from workers.sdk.guard import RunFailed
from workers.sdk.packages import upstream
from workers.sdk.stop import STOP_SIGNAL, STOPPED_EXIT, Cancelled, Stopped
from workers.sdk.telemetry import HEARTBEAT_SECONDS, Emitter

SITEDIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sitedir")


def resume_request(config: dict, path: str) -> str | None:
    """MOSAIC_CLEANRL_RESUME for the script (resume.as_environ), or None when the script has no main
    loop mosaic can find (it then trains as it is, and cannot be stopped to continue)."""
    loop = resume.find_main_loop(path)
    if loop is None:
        return None
    # the daemon's settings (checkpoint_minutes, keep_checkpoints), as rundir names them
    minutes = float(os.environ.get(rundir.CHECKPOINT_MINUTES_ENV, rundir.CHECKPOINT_MINUTES_DEFAULT))
    keep = int(os.environ.get(rundir.KEEP_CHECKPOINTS_ENV, rundir.KEEP_CHECKPOINTS_DEFAULT))
    # continue_from: this same run goes on (mosaic continue); checkpoint: a new run starts from one
    start_from = config.get("continue_from") or (config.get("checkpoint") if config.get("mode") == "train" else None)
    return resume.as_environ(loop, start_from, minutes, keep)


def script_argv(config: dict, path: str) -> list[str]:
    """The script's command line: common fields first, then params."""
    by_name = {arg.name: arg for arg in catalog.script_args(path)}
    words = by_name["env-id"].to_argv(config["env"])
    if config["steps"] is not None:
        words += by_name["total-timesteps"].to_argv(config["steps"])
    if "seed" in by_name:
        words += by_name["seed"].to_argv(config["seed"])
    if "cuda" in by_name:
        # cpu -> --cuda false; cuda, cuda:N, auto -> --cuda true (the script
        # itself falls back to the CPU when torch sees no GPU; which GPU is
        # the daemon's CUDA_VISIBLE_DEVICES)
        words += by_name["cuda"].to_argv(config["device"] != "cpu")
    words += catalog.flags_for(path, config["params"])
    return [sys.executable, path] + words


def child_environment(config: dict, path: str) -> dict[str, str]:
    env = dict(os.environ)  # carries MOSAIC_TELEMETRY_FD, exported by take_stdout()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SITEDIR, env.get("PYTHONPATH")) if p)
    env["MOSAIC_CLEANRL_PATCH"] = "1"
    env["MOSAIC_CLEANRL_ALGO"] = algo_name(config["algo"])
    env["MOSAIC_CLEANRL_CHECKPOINT_DIR"] = os.path.abspath(CHECKPOINT_DIR)
    env["MOSAIC_CLEANRL_TENSORBOARD_DIR"] = os.path.abspath(TENSORBOARD_DIR)
    # mosaic's --save-model only for scripts without their own
    own_save = catalog.has_own_save_model(path)
    env["MOSAIC_CLEANRL_SAVE_MODEL"] = "1" if config["params"].get("save-model") and not own_save else "0"
    if not config["params"].get("track"):
        env["WANDB_MODE"] = "disabled"
    if config.get("record"):  # the training env's transitions into dataset.hdf5 (workers/sdk/dataset.py)
        env["MOSAIC_CLEANRL_RECORD"] = json.dumps({"record": config["record"], "env": config["env"],
                                                   "directory": os.path.abspath(".")})
    frames = frames_request(config)
    if frames is not None:
        env["MOSAIC_CLEANRL_FRAMES"] = json.dumps(frames)
    request = resume_request(config, path)
    if request is not None:
        env["MOSAIC_CLEANRL_RESUME"] = request
    # CUDA_VISIBLE_DEVICES is the daemon's (it hands out GPUs): left as it is
    return env


def stderr_offset() -> int | None:
    """Current size of our stderr if it is a regular file (the run's stderr.log)."""
    try:
        st = os.fstat(2)
    except OSError:
        return None
    return st.st_size if stat.S_ISREG(st.st_mode) else None


def stderr_tail(offset: int | None, max_lines: int = 25) -> str:
    """The child's last traceback in stderr.log (written after ``offset``), or its last few lines."""
    if offset is None:
        return ""
    try:
        with open("/proc/self/fd/2", "rb") as f:
            f.seek(max(offset, os.fstat(f.fileno()).st_size - 64 * 1024))
            text = f.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        return "\n".join(lines[starts[-1]:][-max_lines:])
    return "\n".join(lines[-5:])


def script_failure(name: str, returncode: int, tail: str) -> RunFailed:
    """The script's failure: one line saying what happened (with the exception, if any), then
    the traceback; the worker exits with the script's code, or dies of the script's signal."""
    if returncode < 0:
        # killed by a signal: no traceback to show, and the last lines are unrelated warnings
        return RunFailed(f"{name} was killed by {signal.Signals(-returncode).name}", signum=-returncode)
    what = f"{name} exited with code {returncode}"
    last = tail.splitlines()[-1] if tail else ""
    return RunFailed(f"{what}: {last}\n\n{tail}" if last else what, code=returncode)


def train(config: dict, emitter: Emitter) -> int:
    """Run the CleanRL script as a child with the patches armed; this process adds the lifecycle
    events around it and forwards SIGTERM/SIGINT to it (the script ends itself)."""
    path = WORKER.script_for(config["algo"])
    name = algo_name(config["algo"])
    os.makedirs(CHECKPOINT_DIR, exist_ok=True)
    os.makedirs(TENSORBOARD_DIR, exist_ok=True)
    argv = script_argv(config, path)
    total_steps = config["steps"]
    if total_steps is None:
        default = {arg.name: arg for arg in catalog.script_args(path)}.get("total-timesteps")
        total_steps = default.default if default is not None and isinstance(default.default, int) else None
    emitter.run_started("cleanrl", config["algo"], config["env"], total_steps=total_steps, upstream=upstream("cleanrl"))

    child: subprocess.Popen | None = None
    received: int | None = None
    stop_asked = False

    def forward(signum, frame):
        nonlocal received
        received = signum
        if child is not None and child.returncode is None:
            child.send_signal(signum)

    def forward_stop(signum, frame):
        nonlocal stop_asked
        stop_asked = True
        if child is not None and child.returncode is None:
            child.send_signal(STOP_SIGNAL)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    signal.signal(STOP_SIGNAL, forward_stop)
    if os.path.exists(resume.STOP_NOTE):    # the last stop's, read when that stop ended
        os.remove(resume.STOP_NOTE)

    offset = stderr_offset()
    telemetry_fd = int(os.environ["MOSAIC_TELEMETRY_FD"])
    try:
        # The script starts with the stop signal ignored (its default would kill it) until the
        # patches install its handler; a stop that came meanwhile is sent again below.
        child = subprocess.Popen(argv, env=child_environment(config, path), stdin=subprocess.DEVNULL,
                                 pass_fds=(telemetry_fd,),
                                 preexec_fn=lambda: signal.signal(STOP_SIGNAL, signal.SIG_IGN))
    except OSError as exc:
        raise RunFailed(f"cannot start {name}: {exc}", code=127) from exc
    if received is not None:  # a signal came while starting the child
        child.send_signal(received)

    while True:
        try:
            returncode = child.wait(timeout=1.0 if stop_asked else HEARTBEAT_SECONDS)
            break
        except subprocess.TimeoutExpired:
            emitter.heartbeat(every=HEARTBEAT_SECONDS)
            if stop_asked:   # the script may have been starting when it came: idempotent
                child.send_signal(STOP_SIGNAL)

    if received is not None:  # the script has ended on the forwarded signal: the run was cancelled
        raise Cancelled(received)
    if returncode == STOPPED_EXIT and os.path.exists(resume.STOP_NOTE):
        with open(resume.STOP_NOTE, encoding="utf-8") as f:
            note = json.load(f)
        raise Stopped(note["step"], note["checkpoint"], note.get("save_s"))
    if returncode != 0:
        raise script_failure(name, returncode, stderr_tail(offset))
    emitter.run_completed()
    return 0


def evaluate(config: dict, emitter: Emitter) -> int:
    """Play a checkpoint's policy in this process (evaluate.run)."""
    from workers.cleanrl_worker import evaluate as evaluation
    return evaluation.run(config, emitter)
