"""A worker process from its first line to its last: arguments, telemetry channel, config,
stop signals, the entry point for the run's mode, and how the run ended.

A worker's ``cli.py`` hands over to ``serve``:

    def main(argv=None) -> int:
        return serve("python -m workers.mine.cli", argv, WORKER, "workers.mine.runtime")

which calls ``runtime.train(config, emitter)`` for a run in mode ``train`` and
``runtime.evaluate(config, emitter)`` in mode ``eval`` (``entry_points`` names
others: ``PLAY`` for the workers whose runs play), through ``workers.sdk.guard``.
"""
from __future__ import annotations

import argparse
import importlib
import json
from typing import Any

from workers.sdk.contract import Worker
from workers.sdk.guard import guarded
from workers.sdk.stop import SIGNALS
from workers.sdk.telemetry import Emitter, take_stdout

# the entry point of runtime.py for each mode of a run
TRAIN_AND_EVALUATE = {"train": "train", "eval": "evaluate"}
# a worker whose runs play (workers/sdk/modes.py): "train" is how a daemon older than mode "play" asks for one
PLAY = {"play": "play", "train": "play"}


def serve(prog: str, argv: list[str] | None, descriptor: Worker, runtime: str,
          entry_points: dict[str, str] = TRAIN_AND_EVALUATE) -> int:
    """The whole worker process; its exit status. ``runtime``: the module of the entry points,
    imported only now (heavy libraries load in the worker process alone, and an import that
    fails is the run's failure, reported like any other)."""
    emitter, config = start(prog, argv, descriptor)
    if config is None:
        return 2  # run_failed was emitted, naming the problem
    from workers.sdk import registration
    # before any library is imported: their caches and configs under the home, not the user's ~
    registration.prepare_process()
    SIGNALS.install()
    mode = config.get("mode", "train")

    def call() -> int | None:
        module = importlib.import_module(runtime)
        if mode not in entry_points:
            raise ValueError(f"mode {mode!r}: this worker runs {' or '.join(sorted(entry_points))}")
        return getattr(module, entry_points[mode])(config, emitter)

    return guarded(emitter, SIGNALS, call, prog)


def start(prog: str, argv: list[str] | None, descriptor: Worker) -> tuple[Emitter, dict[str, Any] | None]:
    """The run's telemetry channel (stdout taken) and its config read and validated again from ``--config``;
    the config is None when it is bad (``run_failed`` was emitted, naming the problem)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--config", default="config.json", help="the run config (JSON)")
    args = parser.parse_args(argv)
    emitter = take_stdout()
    try:
        with open(args.config, encoding="utf-8") as f:
            # validated again here: the file may have been edited since the daemon took it
            return emitter, descriptor.validate(json.load(f))
    except (OSError, ValueError) as exc:  # ConfigError and JSON errors are ValueErrors
        emitter.run_failed(f"invalid config {args.config}: {exc}")
        return emitter, None


def training_begins() -> None:
    """Call once the libraries are imported and the model, envs and buffers are built, just
    before the training loop: everything alive now is moved out of the cyclic garbage
    collector's sight (``gc.freeze``). It is never garbage, yet each full collection walks it
    all: ~550,000 objects once torch and Tianshou are imported, 0.3 s a collection, and one
    such collection inside a 2 s DQN run made it 7-9% slower than Tianshou's bare
    ``run_training`` (bench_tianshou). Reference counting still frees these objects as usual."""
    import gc

    gc.freeze()
