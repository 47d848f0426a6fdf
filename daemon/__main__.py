"""python -m daemon [--home DIR] [--max-runs N] [--grace S]: run the daemon in the foreground.

`mosaic daemon start` runs this detached. Exactly one daemon per home: an
exclusive lock on <home>/run/daemon.lock, held for the daemon's life. A socket
file left by a dead daemon is replaced (the lock proves nobody serves it).
"""
from __future__ import annotations

import argparse
import asyncio
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import sys

from daemon.home import Home
from workers.sdk.rundir import CHECKPOINT_MINUTES_DEFAULT, KEEP_CHECKPOINTS_DEFAULT

EXIT_ALREADY_RUNNING = 3


def acquire_lock(home: Home) -> int | None:
    fd = os.open(home.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def bind_socket(home: Home) -> socket.socket:
    path = str(home.socket_path)
    try:
        os.unlink(path)  # we hold the lock: any socket file here is stale
    except FileNotFoundError:
        pass
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600, no window where others could connect
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(1024)  # bursts of clients (a thousand at once in the tests) wait, not fail
    sock.setblocking(False)
    return sock


SETTINGS_TYPES = {
    "max_concurrent_runs": "a positive integer",
    "grace_seconds": "a number of seconds >= 0",
    "stop_grace_seconds": "a number of seconds > 0",
    "stop_runs_on_shutdown": "true or false",
    "continue_after_shutdown": "true or false",
    "checkpoint_minutes": "a number of minutes >= 0 (0: resume checkpoints only when a run stops)",
    "keep_checkpoints": "an integer >= 0 (0: keep every resume checkpoint)",
    "cluster_poll_seconds": "a number of seconds >= 0.2",
    "cluster_gone_seconds": "a number of seconds > 0",
    "placement": "a placement object, e.g. {\"backend\": \"slurm\", \"partition\": \"gpu\", \"cpus\": 4}",
    "gpus": "a list of GPU ids, e.g. [\"0\", \"1\"]",
    "cpu_sets": "a list of CPU lists, e.g. [[0], [1]]",
    "worker_nice": "an integer from 0 to 19",
    "resource_sample_seconds": "a number of seconds >= 0.2 (0 turns the sampling off)",
    "mirrors": "an object: {\"wandb\": {\"enabled\": true, \"project\": ...}, \"mlflow\": {...}} (docs/mirrors.md)",
}


class SettingsError(ValueError):
    pass


def _placement_ok(value) -> bool:
    """settings.json's placement: what a run's placement field takes (workers/sdk/config.py)."""
    from pydantic import ValidationError

    from workers.sdk.config import PlacementConfig
    try:
        PlacementConfig.model_validate(value)
    except ValidationError:
        return False
    return isinstance(value, dict)


def load_settings(home: Home) -> dict:
    """<home>/settings.json, checked: a wrong value is refused with its key named."""
    try:
        with open(home.settings_file) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise SettingsError(f"{home.settings_file} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"{home.settings_file} must hold a JSON object")
    for key, value in data.items():
        ok = {
            "max_concurrent_runs": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
            "grace_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
            "stop_grace_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
            "stop_runs_on_shutdown": lambda v: isinstance(v, bool),
            "continue_after_shutdown": lambda v: isinstance(v, bool),
            "checkpoint_minutes": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
            "keep_checkpoints": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
            "cluster_poll_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0.2,
            "cluster_gone_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0,
            "placement": _placement_ok,
            "gpus": lambda v: isinstance(v, list) and all(isinstance(g, (str, int)) for g in v),
            "cpu_sets": lambda v: isinstance(v, list) and all(
                isinstance(c, list) and c and all(isinstance(i, int) and i >= 0 for i in c) for c in v),
            "worker_nice": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 19,
            "resource_sample_seconds": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
            and (v == 0 or v >= 0.2),
        }.get(key)
        if key == "mirrors":   # a nested object: daemon/mirror.py names what is wrong in it
            from daemon.mirror import check_settings
            problem = check_settings(value)
            if problem:
                raise SettingsError(f"{home.settings_file}: {problem}")
            continue
        if ok is None:
            raise SettingsError(f"{home.settings_file}: unknown setting {key!r} "
                                f"(known: {', '.join(SETTINGS_TYPES)})")
        if not ok(value):
            raise SettingsError(f"{home.settings_file}: {key} must be {SETTINGS_TYPES[key]}")
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m daemon")
    parser.add_argument("--home")
    parser.add_argument("--max-runs", type=int)
    parser.add_argument("--grace", type=float)
    parser.add_argument("--socket", help="listen here instead of the home's socket path")
    args = parser.parse_args(argv)
    home = Home.resolve(args.home, args.socket)
    try:
        home.ensure()
    except OSError as exc:
        print(f"mosaic: error: cannot use the home {home.root}: {exc.strerror}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    lock_fd = acquire_lock(home)
    if lock_fd is None:
        print(f"mosaic: a daemon is already running for {home.root}", file=sys.stderr)
        return EXIT_ALREADY_RUNNING
    try:
        settings = load_settings(home)
    except SettingsError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        os.close(lock_fd)
        return 2
    max_runs = args.max_runs or settings.get("max_concurrent_runs")
    grace = args.grace if args.grace is not None else float(settings.get("grace_seconds", 10.0))

    from daemon.runs import CLUSTER_GONE_SECONDS
    from daemon.server import Daemon  # after the lock: a second daemon exits fast

    sock = bind_socket(home)
    with open(home.pid_file, "w") as f:
        f.write(str(os.getpid()))

    async def run() -> None:
        daemon = Daemon(home, max_concurrent=max_runs, grace_seconds=grace,
                        gpus=settings.get("gpus"), cpu_sets=settings.get("cpu_sets"),
                        worker_nice=settings.get("worker_nice", 10),
                        resource_seconds=float(settings.get("resource_sample_seconds", 5.0)),
                        stop_grace_seconds=float(settings.get("stop_grace_seconds", 120.0)),
                        stop_runs_on_shutdown=bool(settings.get("stop_runs_on_shutdown", False)),
                        continue_after_shutdown=bool(settings.get("continue_after_shutdown", False)),
                        checkpoint_minutes=float(settings.get("checkpoint_minutes", CHECKPOINT_MINUTES_DEFAULT)),
                        keep_checkpoints=int(settings.get("keep_checkpoints", KEEP_CHECKPOINTS_DEFAULT)),
                        cluster_poll_seconds=float(settings.get("cluster_poll_seconds", 2.0)),
                        cluster_gone_seconds=float(settings.get("cluster_gone_seconds", CLUSTER_GONE_SECONDS)),
                        default_placement=settings.get("placement"))
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, daemon.terminate)   # the host shutting down, or a kill
        loop.add_signal_handler(signal.SIGINT, daemon.stopping.set)
        await daemon.serve(sock)

    try:
        asyncio.run(run())
    finally:
        try:
            os.unlink(home.socket_path)
        except FileNotFoundError:
            pass
        try:
            os.unlink(home.pid_file)
        except FileNotFoundError:
            pass
        os.close(lock_fd)
    logging.getLogger("mosaic.daemon").info("daemon stopped; runs keep training under their supervisors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
