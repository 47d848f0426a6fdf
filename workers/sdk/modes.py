"""What a run does: ``train`` a policy, ``eval`` a checkpoint of one, or ``play`` episodes with
agents that learn nothing in the run (an LLM agent, a match of seats, a person at the keyboard).

A worker says which of these its runs are in its capabilities' ``modes``; without that key a
worker trains, and evaluates too when it saves checkpoints. The LLM and human workers declare
``["play"]``. Older clients submit their runs as ``train`` (the default), and records written
before mode ``play`` existed say ``train`` for them: both are read here as the play they were.
Pure functions: the daemon, the worker process and the app all read a mode through them.
"""
from __future__ import annotations

from typing import Any

TRAIN, EVAL, PLAY = "train", "eval", "play"

# the bundled workers whose runs were recorded as mode "train" before mode "play" existed
PLAYED_AS_TRAIN = frozenset({"human", "balrog", "mosaic_llm"})


def worker_modes(capabilities: dict[str, Any]) -> list[str]:
    """The modes a worker's runs can have, its declared ``modes`` first; without them ``train``,
    and ``eval`` as well for a worker that saves checkpoints."""
    modes = capabilities.get("modes")
    if isinstance(modes, list) and modes:
        return [str(mode) for mode in modes]
    return [TRAIN, EVAL] if capabilities.get("checkpoints") else [TRAIN]


def plays(capabilities: dict[str, Any]) -> bool:
    """Whether the worker's runs play rather than train."""
    return PLAY in worker_modes(capabilities)


def submitted_mode(mode: Any, playing: bool) -> Any:
    """The mode a submitted run is given: a worker that plays takes a ``train`` (or no mode: an
    older client's default) as ``play``; anything else is left for validation to judge."""
    if playing and mode in (None, TRAIN):
        return PLAY
    return mode


def run_mode(run: dict[str, Any]) -> str:
    """The mode a run record (or a run config: it has ``worker`` too) means: its config's mode,
    ``train`` when it names none, and ``play`` for a ``train`` of a worker that plays (a record
    written before mode play). The record itself is never rewritten."""
    config = run.get("config") if isinstance(run.get("config"), dict) else run
    mode = config.get("mode") or TRAIN
    if mode == TRAIN and (run.get("worker") or config.get("worker")) in PLAYED_AS_TRAIN:
        return PLAY
    return str(mode)
