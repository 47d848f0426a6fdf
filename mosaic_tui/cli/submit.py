"""`mosaic submit` and `mosaic eval`: a new run from flags or a config file, or a trained run's
checkpoint played; each prints the new run's id."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.cli import EXIT_USAGE, INTEGER, NUMBER, CLIError, _client
from mosaic_tui.cli.runs import _wait


def _seed(text: str):
    """--seed N, or --seed random: the daemon draws one and records it in the run."""
    from workers.sdk.config import RANDOM_SEED
    return RANDOM_SEED if text.strip().lower() == RANDOM_SEED else INTEGER(text)


_seed.__name__ = "seed"


def _json_object(text: str) -> dict[str, Any]:
    """--resources: a JSON object (the daemon checks its names and amounts)."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError('expected a JSON object, e.g. \'{"a100": 1}\'')
    return value


# the run's own settings (workers/sdk/config.RunConfig), each with its flag: `--set dataset=...`
# is answered with the flag instead of an unknown-parameter error and an unrelated suggestion
RUN_LEVEL_FLAGS = {"worker": "--worker", "algo": "--algo", "env": "--env", "steps": "--steps", "seed": "--seed",
                   "device": "--device", "name": "--name", "mode": "--mode", "checkpoint": "--checkpoint",
                   "eval_episodes": "--episodes", "dataset": "--dataset", "record": "--record",
                   "frames": "--frames", "fps": "--fps", "wall_seconds": "--wall-time", "wall_time": "--wall-time",
                   "max_steps": "--max-steps", "memory_mb": "--memory-mb", "mirror": "--mirror"}


def _parse_sets(client, worker: str, algo: str, env: str | None, sets: list[str]) -> dict[str, Any]:
    """--set key=value, typed by the algorithm's schema."""
    if not sets:
        return {}
    from workers.sdk.config import ConfigError, coerce_text, did_you_mean, param_name
    schema = client.call(P.SCHEMA, worker=worker, algo=algo, env=env)
    props = schema.get("properties", {})
    params: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise CLIError(f"--set {item!r}: expected key=value")
        typed, _, text = item.partition("=")
        typed = typed.strip()
        key = param_name(props, typed)  # learning_starts for learning-starts, if only one fits
        flag = RUN_LEVEL_FLAGS.get(typed.replace("-", "_"))
        if key is None and flag:
            raise CLIError(f"--set {typed}: {typed} is a setting of the run, not a parameter of {worker} {algo}: "
                           f"use {flag}", EXIT_USAGE)
        if key is None:
            raise CLIError(f"--set {typed}: unknown parameter of {worker} {algo}{did_you_mean(typed, list(props))} "
                           f"(see `mosaic schema {worker} {algo}`)")
        try:
            params[key] = coerce_text(props[key], text)
        except ConfigError as exc:
            raise CLIError(f"--set {key}: {exc.message}") from None
    return params


def cmd_submit(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.config:
            try:
                with open(args.config) as f:
                    config = json.load(f)
            except OSError as exc:
                raise CLIError(f"cannot read {args.config}: {exc.strerror}") from None
            except ValueError as exc:
                raise CLIError(f"{args.config} is not valid JSON: {exc}") from None
            if not isinstance(config, dict):
                raise CLIError(f"{args.config} must hold a JSON object")
        else:
            missing = [f"--{n}" for n in ("worker", "algo", "env") if getattr(args, n) is None]
            if missing:
                raise CLIError(f"give a CONFIG.json or {', '.join(missing)}", EXIT_USAGE)
            config = {"worker": args.worker, "algo": args.algo, "env": args.env}
        for key in ("worker", "algo", "env", "steps", "name", "seed", "device", "mode", "checkpoint", "dataset"):
            value = getattr(args, key, None)
            if value is not None:
                config[key] = value
        if args.episodes is not None:
            config["eval_episodes"] = args.episodes
        if args.record is not None:
            config["record"] = _record(args.record)
        if args.mirror is not None:
            config["mirror"] = _mirror_targets(args.mirror)
        limits = {k: v for k, v in (("wall_seconds", args.wall_time), ("max_steps", args.max_steps),
                                    ("memory_mb", args.memory_mb)) if v is not None}
        if limits:
            config["limits"] = {**(config.get("limits") or {}), **limits}
        if args.set:
            params = dict(config.get("params") or {})
            params.update(_parse_sets(client, config.get("worker"), config.get("algo"), config.get("env"), args.set))
            config["params"] = params
        if args.xuance_config:
            config["params"] = {**(config.get("params") or {}), "xuance_config": _read_text(args.xuance_config)}
        _set_frames(args, config)
        _set_placement(args, config)
        run = client.call(P.SUBMIT, config=config)
        _say_steps_short(client, run)
    return _submitted(args, run)


def _say_steps_short(client, run: dict[str, Any]) -> None:
    """A worker that trains whole updates ends short of the steps asked (CleanRL's PPO: 3000 ->
    2560); nothing said it. Said at submit, on stderr: stdout is the run's id."""
    config = run.get("config") or {}
    if not config.get("steps") or config.get("mode") == "eval":
        return
    try:
        schema = client.call(P.SCHEMA, worker=run["worker"], algo=run["algo"], env=run["env"])
    except P.RPCError:
        return
    note = fmt.steps_short(schema, config.get("params") or {}, config["steps"])
    if note:
        print(f"note: {run['name']} ({run['worker']} {run['algo']}) {note}", file=sys.stderr)


def _mirror_targets(text: str) -> list[str]:
    """--mirror wandb,mlflow (or none): where the daemon mirrors the run (docs/mirrors.md)."""
    targets = [t.strip().lower() for t in text.split(",") if t.strip()]
    if targets == ["none"]:
        return []
    unknown = [t for t in targets if t not in P.MIRROR_TARGETS]
    if unknown or not targets:
        raise CLIError(f"--mirror {text!r}: expected {', '.join(P.MIRROR_TARGETS)}, "
                       f"{','.join(P.MIRROR_TARGETS)} or none", EXIT_USAGE)
    return targets


def _read_text(path: str) -> str:
    """A file the run takes as text (workers.sdk.config.read_text_file, as the form reads it)."""
    from workers.sdk.config import ConfigError, read_text_file
    try:
        return read_text_file(path)
    except ConfigError as exc:
        raise CLIError(exc.message) from None


def _set_placement(args: argparse.Namespace, config: dict[str, Any]) -> None:
    """--placement and its requests into the config's placement (over a CONFIG.json's)."""
    given = {key: getattr(args, attr) for key, attr in (("backend", "placement"), ("partition", "partition"),
                                                         ("account", "account"), ("cpus", "cpus"), ("mem", "mem"),
                                                         ("gpus", "gpus"), ("time", "time"),
                                                         ("extra_args", "extra_args"), ("requeue", "requeue"),
                                                         ("address", "address"), ("resources", "resources"),
                                                         ("shared_home", "shared_home"))
             if getattr(args, attr, None) is not None}
    if not given:
        return
    placement = {**(config.get("placement") or {}), **given}
    if "backend" not in placement:
        raise CLIError("--partition, --cpus, --mem, --gpus, --time, --requeue and --sbatch-arg are requests to a "
                       "scheduler: add --placement slurm (--address, --resources, --no-shared-home: "
                       "--placement ray)", EXIT_USAGE)
    config["placement"] = placement


def _record(text: str) -> dict[str, int]:
    """--record N (episodes) or --record Nsteps / Nepisodes: the run's ``record`` setting."""
    match = re.fullmatch(r"\s*(\d+)\s*(episodes?|steps?|transitions?)?\s*", text)
    if match is None:
        raise CLIError(f"--record {text!r}: expected N episodes or N steps, e.g. --record 20 or --record 5000steps",
                       EXIT_USAGE)
    unit = "steps" if (match.group(2) or "").startswith(("step", "transition")) else "episodes"
    return {unit: int(match.group(1))}


def _submitted(args: argparse.Namespace, run: dict[str, Any]) -> int:
    """What submit and eval print: the new run's id; with --wait, how it ended."""
    print(run["id"])
    return _wait(args, run["id"], None) if args.wait else 0


def _set_frames(args: argparse.Namespace, config: dict[str, Any]) -> None:
    """--frames and --fps into the config's ``frames`` (the daemon checks the values)."""
    if not args.frames and args.fps is None:
        return
    frames = dict(config.get("frames") or {})
    if args.frames:
        frames["enabled"] = True
    if args.fps is not None:
        if not frames.get("enabled"):
            raise CLIError("--fps: frames are off for this run; add --frames", EXIT_USAGE)
        frames["fps"] = args.fps
    config["frames"] = frames


def cmd_eval(args: argparse.Namespace) -> int:
    """Play a trained run's policy: a new run in eval mode, from RUN's latest checkpoint."""
    with _client(args) as client:
        trained = client.call(P.GET, run=args.run)
        checkpoint = args.checkpoint
        if checkpoint is None:
            if not (trained.get("summary") or {}).get("checkpoints"):
                raise CLIError(f"run {trained['name']} has saved no checkpoint; give --checkpoint PATH")
            # the daemon resolves it to the run's latest checkpoint, as for a config file's "run:NAME"
            checkpoint = f"run:{trained['id']}"
        elif not checkpoint.startswith("run:") and not os.path.isabs(checkpoint) and os.path.exists(checkpoint):
            checkpoint = os.path.abspath(checkpoint)  # a path typed here means here, not the home
        from workers.sdk.config import eval_config
        config = eval_config(trained["config"], checkpoint, args.episodes)
        if args.name:
            config["name"] = args.name
        _set_frames(args, config)
        run = client.call(P.SUBMIT, config=config)
    return _submitted(args, run)


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic submit` and `mosaic eval`."""
    p = sub.add_parser("submit", parents=[common], help="submit a run; prints its id")
    p.add_argument("config", nargs="?", help="a run config JSON file")
    p.add_argument("--worker")
    p.add_argument("--algo")
    p.add_argument("--env")
    p.add_argument("--steps", type=INTEGER)
    p.add_argument("--seed", type=_seed, metavar="N|random",
                   help="the run's seed; random: one drawn by the daemon, recorded in the run (seed_drawn)")
    p.add_argument("--device")
    p.add_argument("--name")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="an algorithm parameter (repeatable)")
    p.add_argument("--xuance-config", metavar="FILE",
                   help="your own XuanCe YAML config, sent with the run: under the --set params, over XuanCe's "
                        "defaults (params.xuance_config)")
    p.add_argument("--mode", choices=("train", "eval", "play"),
                   help="eval: play --checkpoint's policy, train nothing; play: the LLM and human workers' runs "
                        "(their default)")
    p.add_argument("--checkpoint", metavar="REF",
                   help="a checkpoint: a path, run:NAME (that run's latest); train: resume from it")
    p.add_argument("--episodes", type=INTEGER, metavar="N", help="with --mode eval: episodes to play (default 10)")
    p.add_argument("--dataset", metavar="RUN", help="an offline algorithm's data: a run that recorded one")
    p.add_argument("--record", metavar="N[steps]",
                   help="record the run's transitions as a dataset: N episodes, or N steps (e.g. 5000steps)")
    p.add_argument("--wall-time", type=NUMBER, metavar="S", help="stop the run after S seconds")
    p.add_argument("--max-steps", type=INTEGER, metavar="N", help="stop the run once it reaches step N")
    p.add_argument("--memory-mb", type=INTEGER, metavar="MB", help="memory limit of the worker")
    p.add_argument("--mirror", metavar="wandb,mlflow|none",
                   help="mirror the run live to W&B and/or MLflow (default: settings.json's mirrors)")
    p.add_argument("--frames", action="store_true", help="publish live frames (the app's Frames tab)")
    p.add_argument("--fps", type=NUMBER, metavar="N", help="with --frames: frames a second (default 15)")
    placement = p.add_argument_group("placement", "where the run runs (default: here, or settings.json's placement)")
    placement.add_argument("--placement", choices=("local", "slurm", "ray"), help="here, or as a cluster job")
    placement.add_argument("--partition", help="Slurm partition (sbatch --partition)")
    placement.add_argument("--account", help="Slurm account (sbatch --account)")
    placement.add_argument("--cpus", type=INTEGER, metavar="N", help="CPUs for the job (sbatch --cpus-per-task)")
    placement.add_argument("--mem", metavar="SIZE", help="memory for the job, e.g. 8G (sbatch --mem)")
    placement.add_argument("--gpus", type=INTEGER, metavar="N", help="GPUs for the job (sbatch --gres=gpu:N)")
    placement.add_argument("--time", metavar="T", help="wall time, e.g. 2:00:00 (sbatch --time); the run stops "
                                                       "with a checkpoint before it")
    placement.add_argument("--requeue", action="store_true", default=None,
                           help="a run stopped by its wall-time warning (or a preemption) goes on in a new job")
    placement.add_argument("--sbatch-arg", action="append", metavar="ARG", dest="extra_args",
                           help="one more sbatch argument, as given (repeatable)")
    placement.add_argument("--address", metavar="URL", help="the Ray dashboard, http://head:8265 (else RAY_ADDRESS)")
    placement.add_argument("--resources", type=_json_object, metavar="JSON",
                           help='custom Ray resources the job needs, e.g. \'{"a100": 1}\'')
    placement.add_argument("--no-shared-home", action="store_false", default=None, dest="shared_home",
                           help="the Ray nodes do not mount the home: the run works in a directory of its node's "
                                "own, its events come back through the job's log (no stop, frames)")
    p.add_argument("--wait", action="store_true", help="wait for the run to end")
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("eval", parents=[common], help="evaluate a trained run's checkpoint; prints the new run's id")
    p.add_argument("run", help="the trained run: its worker, algorithm, env, params and seed")
    p.add_argument("--checkpoint", metavar="PATH", help="this checkpoint instead of the run's latest")
    p.add_argument("--episodes", type=INTEGER, metavar="N", help="episodes to play (default 10)")
    p.add_argument("--frames", action="store_true", help="publish live frames (the app's Frames tab)")
    p.add_argument("--fps", type=NUMBER, metavar="N", help="with --frames: frames a second (default 15)")
    p.add_argument("--name")
    p.add_argument("--wait", action="store_true", help="wait for the evaluation to end")
    p.set_defaults(func=cmd_eval)
