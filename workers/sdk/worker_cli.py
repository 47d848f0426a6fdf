"""The first lines of every worker process: arguments, telemetry channel, config.

    emitter, config = start("python -m workers.mine.cli", argv, WORKER)
    if config is None:
        return 2          # run_failed was emitted, naming the problem
"""
from __future__ import annotations

import argparse
import json
from typing import Any

from workers.sdk.contract import Worker
from workers.sdk.telemetry import Emitter, take_stdout


def start(prog: str, argv: list[str] | None, descriptor: Worker) -> tuple[Emitter, dict[str, Any] | None]:
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
