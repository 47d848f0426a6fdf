"""The `mosaic` command: the contract scripts and tests use.

Every command but `daemon stop` and `daemon status` starts the daemon when none
runs. RUN is a run name or a unique id prefix. Errors are one line on stderr
and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import re
import shlex
import signal
import sys
import time
from typing import Any, Callable, Iterator

from daemon import protocol as P
from daemon.home import Home
from mosaic_tui import fmt, metrics_csv
from mosaic_tui.fmt import (DEFAULT_RETURN_WINDOW, MAX_RETURN_WINDOW, best_return, best_text, derived, duration,
                            elapsed, eta, failure_reason, num, plural, progress_text, run_label, smoothed_return,
                            state_label, system_figures, system_text)

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_RUN_NOT_SUCCEEDED = 3
EXIT_TIMEOUT = 4


class CLIError(Exception):
    def __init__(self, message: str, code: int = EXIT_ERROR):
        super().__init__(message)
        self.code = code


# -- argument types -----------------------------------------------------------
def _typed(kind: str):
    """An argparse type that reads numbers as run configs and forms do (1e4 is an
    integer, 1.5 is not) and says a mistake the same way."""
    def convert(text: str):
        from workers.sdk.config import ConfigError, coerce_text  # pydantic: only for commands that type values
        try:
            return coerce_text({"type": kind}, text)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(exc.message) from None
    convert.__name__ = kind  # argparse names the type in its messages
    return convert


INTEGER = _typed("integer")
NUMBER = _typed("number")


def seed_text(config: dict[str, Any]) -> str | None:
    """The run's seed, and whether it was drawn (so a re-run knows to give it)."""
    if config.get("seed") is None:
        return None
    return f"{config['seed']} (drawn at random)" if config.get("seed_drawn") else str(config["seed"])


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


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line like every other error."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"mosaic: error: {message} (see `{self.prog} --help`)\n")


# -- output helpers -------------------------------------------------------
def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def _table(rows: list[list[str]], header: list[str]) -> str:
    # one format string for every row, widths from whole columns: `mosaic ls` of
    # 10,000 runs lays out 130,000 cells
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(map(len, column)) for column in zip(*cells)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(line.format(*row).rstrip() for row in cells)


# -- connection -------------------------------------------------------------
def _home(args: argparse.Namespace) -> Home:
    return Home.resolve(args.home, getattr(args, "socket", None), getattr(args, "daemon_label", None))


def _client(args: argparse.Namespace, autostart: bool = True):
    from mosaic_tui.client import connect
    return connect(_home(args), autostart=autostart)


# -- commands -----------------------------------------------------------------
def _exited(pid: int) -> bool:
    """The process has ended: gone, or a zombie that its parent (init, for a daemon whose starter
    has exited) has yet to reap; an init that reaps a second late made every `daemon stop` wait
    for it. A zombie holds no files: the daemon's socket, pid file and lock are already released."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] in (b"Z", b"X")
    except FileNotFoundError:
        return True
    except OSError:      # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        return False


def cmd_daemon(args: argparse.Namespace) -> int:
    from mosaic_tui.client import Client, DaemonUnavailable, start_daemon
    home = _home(args)
    if args.action == "start":
        if args.foreground:
            from daemon.__main__ import main as daemon_main
            argv = ["--home", str(home.root)]
            if args.max_runs:
                argv += ["--max-runs", str(args.max_runs)]
            return daemon_main(argv)
        try:
            with Client(home, timeout=5) as client:
                print(f"daemon already running (pid {client.info['pid']}) for {home.root}")
                return 0
        except DaemonUnavailable:
            pass
        info = start_daemon(home, max_runs=args.max_runs)
        print(f"daemon started (pid {info['pid']}) for {home.root}")
        return 0
    if args.action == "stop":
        pid = _stop_daemon(home)
        print(f"no daemon running for {home.root}" if pid is None else
              f"daemon stopped (pid {pid}); runs keep training and are re-adopted at the next start")
        return 0
    if args.action == "restart":
        # after an upgrade (`git pull`): the daemon runs this version's code, its runs keep training
        if not home.own_daemon:
            raise CLIError(f"the daemon on {home.where} is not this machine's to start: restart it where it "
                           f"runs (mosaic daemon restart there)")
        pid = _stop_daemon(home)
        info = start_daemon(home, max_runs=args.max_runs)
        with Client(home, timeout=5) as client:
            counts = client.call(P.STATUS)["runs"]
        adopted = sum(counts.get(state, 0) for state in P.ACTIVE_STATES)
        print(f"daemon {'re' if pid else ''}started (pid {info['pid']}, version {info.get('version')}) for "
              f"{home.root}; {plural(adopted, 'active run')} re-adopted")
        return 0
    # status
    try:
        with Client(home, timeout=5) as client:
            status = client.call(P.STATUS)
    except DaemonUnavailable:
        if args.json:
            _print_json({"running": False, "home": str(home.root)})
        else:
            print(f"no daemon running for {home.root}")
        return 1
    status["running"] = True
    if args.json:
        _print_json(status)
    else:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(status["runs"].items())) or "no runs"
        print(f"daemon running: pid {status['pid']}, version {status.get('version') or '?'}, "
              f"up {duration(status['uptime'])}, "
              f"{plural(status['clients'], 'client')}, {status['rss_bytes'] / 1e6:.0f} MB RSS")
        print(f"home {status['home']}  socket {status['socket']}")
        newer = _newer_here(status)
        if newer:
            print(newer)
        on_cluster = f", {status['cluster']} on a cluster (no slot)" if status.get("cluster") else ""
        print(f"runs: {counts}; {status['active']}/{status['max_concurrent']} slots busy{on_cluster}")
    return 0


def _stop_daemon(home: Home) -> int | None:
    """Shut the home's daemon down and wait for its process to end; its pid (None: none ran)."""
    from mosaic_tui.client import Client, DaemonUnavailable
    try:
        client = Client(home, timeout=5)
    except DaemonUnavailable:
        return None
    with client:
        pid = client.info["pid"]
        client.call(P.SHUTDOWN)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if _exited(pid):
            return pid
        time.sleep(0.05)
    raise CLIError(f"the daemon (pid {pid}) did not stop within 15s")


def _newer_here(status: dict[str, Any]) -> str | None:
    """A line for `daemon status` when this mosaic is not the daemon's version (a `git pull` since
    the daemon started): how to restart it as this one."""
    from daemon.version import version
    mine, theirs = version(), status.get("version")
    if theirs == mine:
        return None
    what = f"this mosaic is {mine}" if theirs else f"the daemon is older than this mosaic ({mine}): it says no version"
    return f"{what}; `mosaic daemon restart` starts the daemon as it (its runs keep training and are re-adopted)"


def cmd_workers(args: argparse.Namespace) -> int:
    with _client(args) as client:
        workers = client.call(P.WORKERS)
    if not args.all:  # test workers (synthetic) are for tests; submitting to them by name still works
        workers = [w for w in workers if not w.get("hidden")]
    if args.json:
        _print_json(workers)
        return 0
    rows = []
    for w in workers:
        caps = w.get("capabilities") or {}
        upstream = f"{w.get('upstream', '?')} {w.get('upstream_version') or '(not installed)'}"
        algos = ", ".join(caps.get("algorithms", [])) or w.get("error", "")
        families = ", ".join(caps.get("env_families", []))
        rows.append([w["name"], upstream, "yes" if w.get("available") else "no", families, algos])
    print(_table(rows, ["WORKER", "UPSTREAM", "AVAILABLE", "ENV FAMILIES", "ALGORITHMS"]))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    if args.env and args.env_option and args.env != args.env_option:
        raise CLIError(f"two environments: {args.env} and --env {args.env_option}", EXIT_USAGE)
    with _client(args) as client:
        schema = client.call(P.SCHEMA, worker=args.worker, algo=args.algo, env=args.env or args.env_option)
    _print_json(schema)
    return 0


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


def _state_line(run: dict[str, Any]) -> str:
    line = f"{run['name']} {run['state']}"
    if run.get("reason"):
        line += f": {run['reason']}"
    return line


def _return_window(args: argparse.Namespace) -> int:
    if not 1 <= args.window <= MAX_RETURN_WINDOW:
        raise CLIError(f"--window must be between 1 and {MAX_RETURN_WINDOW} (the daemon keeps the last "
                       f"{MAX_RETURN_WINDOW} returns), not {args.window}")
    return args.window


def where_runs(text: str | None, runs: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The runs a --where query keeps (mosaic_tui/query.py); its mistake as one CLIError line."""
    if not text:
        return runs
    from mosaic_tui import query
    try:
        return query.compile_query(text, query.Keys(runs), window=window).filter(runs)
    except query.QueryError as exc:
        raise CLIError(exc.line("--where"), EXIT_USAGE) from None


def _where_brief(text: str | None) -> bool:
    """Whether the brief listing carries what --where reads (its syntax checked first)."""
    if not text:
        return True
    from mosaic_tui import query
    try:
        return not query.needs_whole_records(query.parse(text))
    except query.QueryError as exc:
        raise CLIError(exc.line("--where"), EXIT_USAGE) from None


def _columns_and_sort(args: argparse.Namespace, runs: list[dict[str, Any]], window: int):
    """--sort KEY and --columns KEY,...: the runs in that order and (header, reader) per column."""
    if not args.columns and not args.sort:
        return runs, []
    from mosaic_tui import query
    keys = query.Keys(runs)
    try:
        if args.sort:
            runs = query.sort_runs(runs, args.sort, keys, window)
        names = [k.strip() for k in (args.columns or "").split(",") if k.strip()]
        return runs, [(name, query.key_reader(name, keys, window)) for name in names]
    except query.QueryError as exc:
        raise CLIError(f"--{'sort' if args.sort and exc.text == args.sort.lstrip('-') else 'columns'} "
                       f"{exc.text}: {exc.message}", EXIT_USAGE) from None


def cmd_ls(args: argparse.Namespace) -> int:
    window = _return_window(args)
    brief = not args.json and _where_brief(args.where) and not args.columns and not args.sort
    with _client(args) as client:
        # the table needs a fraction of each run: the brief listing is a fifth of the bytes
        runs = client.call(P.LIST, states=args.state or None, **({"brief": True, "returns": window} if brief
                                                                 else {}))["runs"]
        if not args.json and any(r.get("state") in P.ACTIVE_STATES for r in runs):
            # brief rows carry no resources: a cluster run's job, queue and node come from the active runs
            active = client.call(P.LIST, states=sorted(P.ACTIVE_STATES))["runs"]
            resources = {r["id"]: r.get("resources") for r in active if fmt.job(r) is not None}
            runs = [{**r, "resources": resources[r["id"]]} if r["id"] in resources else r for r in runs]
    for tag in args.tag or []:
        runs = [r for r in runs if tag in (r.get("tags") or [])]
    runs = where_runs(args.where, runs, window)
    runs, columns = _columns_and_sort(args, runs, window)
    now = time.time()
    if args.json:
        _print_json([{**run, "derived": derived(run, now, window)} for run in runs])
        return 0
    rows = []
    for run in runs:
        s = run.get("summary") or {}
        rows.append([run["id"][:10], run_label(run), run["worker"], run["algo"], run["env"], state_label(run),
                     progress_text(run), num(s.get("steps")), num(smoothed_return(run, window)),
                     best_text(run), duration(eta(run)), duration(elapsed(run, now)),
                     " ".join(run.get("tags") or []) or "-"])
        if args.wide:
            rows[-1] += [*system_figures(run), (run.get("note") or "-").splitlines()[0][:40] or "-"]
        if columns:
            from mosaic_tui.query import value_text
            rows[-1] += [value_text(read(run)) for _, read in columns]
    header = ["ID", "NAME", "WORKER", "ALGO", "ENV", "STATE", "PROG", "STEPS", f"AVG{window}", "BEST@STEP", "ETA",
              "ELAPSED", "TAGS"] + (["CPU", "RSS", "THREADS", "NOTE"] if args.wide else []) + [
              name.upper() for name, _ in columns]
    if any(fmt.job(run) is not None for run in runs):   # a cluster run: its job, node and wall time left
        header.insert(6, "JOB")
        for row, run in zip(rows, runs):
            row.insert(6, fmt.job_text(run, now) or "-")
    if rows:
        print(_table(rows, header))
        print(f"AVG{window}: mean of the last {window} episode returns (--window N)")
    else:
        print("no runs")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    window = _return_window(args)
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
    if args.json:
        _print_json({**run, "derived": derived(run, time.time(), window)})
        return 0
    s = run.get("summary") or {}
    best, best_step = best_return(run)
    fields = [("id", run["id"]), ("name", run["name"]), ("worker", run["worker"]), ("algo", run["algo"]),
              ("env", run["env"]), ("mode", (run.get("config") or {}).get("mode")),
              ("seed", seed_text(run.get("config") or {})), ("state", state_label(run)),
              ("reason", run.get("reason") or failure_reason(run)), *_job_fields(run),
              ("progress", f"{num(s.get('steps'))} / {num(s.get('total_steps'))} steps "
                           f"({progress_text(run)})"),
              ("elapsed", duration(elapsed(run, time.time()))),
              ("eta", duration(eta(run)) if eta(run) is not None else None),
              ("episodes", s.get("episodes")), ("last return", num(s.get("last_return"))),
              ("mean return", f"{num(smoothed_return(run, window))} (last {window} episodes)"
               if s.get("returns") else None),
              ("best return", f"{num(best)} at step {num(best_step)}" if best is not None else None),
              ("steps/s", fmt.rate(s.get("sps"))), ("resources", system_text(run) or None), ("exit", run.get("exit_signal") or run.get("exit_code")),
              # one word each, as everywhere: tags are the user's (`mosaic tag`, ls's TAGS), metrics are
              # what the run logs (`mosaic metrics RUN --metric NAME`)
              ("warnings", " · ".join(s.get("warnings") or []) or None),
              ("tags", " ".join(run.get("tags") or []) or None), ("note", run.get("note") or None),
              ("metrics", ", ".join(s.get("tags") or []) or "-"), ("invalid lines", s.get("invalid")),
              ("run dir", str(_home(args).run_dir(run["id"])))]
    for key, value in fields:
        if value is not None and value != "":
            print(f"{key:>13}: {value}")
    print(f"{'params':>13}: {json.dumps(run['config'].get('params', {}))}")
    if run.get("stderr_tail"):
        print("  last stderr:")
        for line in run["stderr_tail"].splitlines():
            print(f"    {line}")
    return 0


def _job_fields(run: dict[str, Any]) -> list[tuple[str, Any]]:
    """`mosaic show`'s lines of a cluster run (none for a local one): its job, the scheduler's
    queue state and reason, the node, and the wall time and what is left of it."""
    resources = fmt.job(run)
    if resources is None:
        return []
    queue = resources.get("queue")
    if queue and resources.get("queue_reason") and queue != "RUNNING":
        queue = f"{queue} ({resources['queue_reason']})"
    wall = resources.get("time_limit")
    left = fmt.time_left(run, time.time())
    if left is not None:
        wall = f"{fmt.hms(left)} left" + (f" of {wall}" if wall else "")
    fields = [("job", resources["job"]), ("queue", queue), ("node", resources.get("node")), ("wall time", wall)]
    says = fmt.queue_message(run)   # the scheduler's whole words for a job it holds (the state says them short)
    return fields[:2] + [("queue says", says)] + fields[2:] if says else fields


def _wait(args: argparse.Namespace, run_ref: str, timeout: float | None, expected: str = P.SUCCEEDED,
          until_processes_end: bool = False) -> int:
    """Wait for a final state; print it (stdout if it is the expected one); 0 if it is."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _client(args, ) as client:
        run = client.call(P.GET, run=run_ref)
        client.call(P.SUBSCRIBE, runs=True, rev=client.info["rev"])
        run = client.call(P.GET, run=run["id"])  # after subscribing: no change can slip between
        # until_processes_end: a lost run whose processes run on (fmt.still_running) ends when they do
        while run["state"] not in P.FINAL_STATES or (until_processes_end and fmt.still_running(run)):
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise CLIError(f"timed out after {timeout:g}s waiting for {run['name']} ({run['state']})",
                               EXIT_TIMEOUT)
            for method, params in client.notifications(timeout=min(left, 1.0) if left else 1.0):
                if method == P.NOTIFY_RUN and params.get("run", {}).get("id") == run["id"]:
                    run = params["run"]
                elif method == P.NOTIFY_RUN and params.get("deleted") == run["id"]:
                    raise CLIError(f"run {run['name']} was deleted")
                if run["state"] in P.FINAL_STATES and not (until_processes_end and fmt.still_running(run)):
                    break
            else:
                run = client.call(P.GET, run=run["id"])
    print(_state_line(run), file=sys.stdout if run["state"] == expected else sys.stderr)
    return 0 if run["state"] == expected else EXIT_RUN_NOT_SUCCEEDED


def cmd_wait(args: argparse.Namespace) -> int:
    return _wait(args, args.run, args.timeout, until_processes_end=True)


def cmd_control(args: argparse.Namespace) -> int:
    method = {"cancel": P.CANCEL, "pause": P.PAUSE, "resume": P.RESUME, "stop": P.STOP,
              "continue": P.CONTINUE}[args.command]
    with _client(args) as client:
        run = client.call(method, run=args.run)
    if args.command == "cancel" and (run["state"] not in P.FINAL_STATES or fmt.still_running(run)) \
            and not args.no_wait:
        return _wait_cancel(args, run)
    if args.command == "stop" and run["state"] not in P.FINAL_STATES and not args.no_wait:
        # the checkpoint's save, bounded by the daemon's stop_grace_seconds
        return _wait(args, run["id"], timeout=args.timeout, expected=P.STOPPED)
    if args.command == "continue" and args.wait:
        return _wait(args, run["id"], timeout=None)
    print(f"{run['name']} {run['state']}")
    return 0


def _wait_cancel(args: argparse.Namespace, run: dict[str, Any]) -> int:
    # the run may also have ended on its own meanwhile: that is no error either
    code = _wait(args, run["id"], timeout=120, expected=P.CANCELLED, until_processes_end=True)
    return 0 if code in (0, EXIT_RUN_NOT_SUCCEEDED) else code


def cmd_delete(args: argparse.Namespace) -> int:
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
        if not args.yes and sys.stdin.isatty():
            answer = input(f"delete run {run['name']} ({run['id']}) and its files? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                print("not deleted")
                return 1
        client.call(P.DELETE, run=run["id"])
    print(f"deleted {run['name']}")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    streams = ["stdout", "stderr"] if args.stream == "all" else [args.stream]
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
        offsets = {s: 0 for s in streams}
        while True:
            for stream in streams:
                while True:
                    page = client.call(P.LOGS, run=run["id"], stream=stream, **{"from": offsets[stream]})
                    if page["data"]:
                        sys.stdout.write(page["data"])
                        sys.stdout.flush()
                    offsets[stream] = page["next"]
                    if page["next"] >= page["size"]:
                        break
            if not args.follow:
                return 0
            run = client.call(P.GET, run=run["id"])
            if run["state"] in P.FINAL_STATES:
                # one more pass picks up what was written at the very end
                args.follow = False
                continue
            time.sleep(0.25)


def _run_pages(client, run: dict[str, Any], method: str, follow: bool,
               on_end: Callable[[dict[str, Any]], None] | None = None, events_raw: bool = False,
               **params: Any) -> Iterator[dict[str, Any]]:
    """The pages of a run's file from its start (``method``: METRICS or EVENTS, paged by
    ``from``/``next``/``end``). With ``follow`` it keeps reading while the run is live; once the
    run ends (``on_end`` is told), one more pass reads what was written at the very end.
    ``events_raw``: raw EVENTS pages keep their lines undecoded (Client.result)."""
    offset = 0
    asked = client.request(method, run=run["id"], **params, **{"from": offset})
    while True:
        page = client.result(asked, events_raw=events_raw)
        done = page["next"] >= page["end"] or page["next"] == offset
        offset = page["next"]
        if not done:
            # the daemon reads the next page while this process works on this one
            asked = client.request(method, run=run["id"], **params, **{"from": offset})
        yield page
        if not done:
            continue
        if not follow:
            return
        run = client.call(P.GET, run=run["id"])
        if run["state"] in P.FINAL_STATES:
            follow = False
            if on_end is not None:
                on_end(run)
        else:
            time.sleep(0.25)
        asked = client.request(method, run=run["id"], **params, **{"from": offset})


def _metric_rows(page: dict[str, Any], tag_filter: str | None):
    for tag, points in page["points"].items():
        if tag_filter and tag != tag_filter:
            continue
        for step, value, t in points:
            yield tag, step, value, t


def cmd_metrics(args: argparse.Namespace) -> int:
    tags = [args.tag] if args.tag else None
    out_csv = csv.writer(sys.stdout) if args.csv else None
    collected: dict[str, list] = {}
    # The header goes out with the first page: the run and the metric are checked by then (the
    # daemon refuses an unknown one with the first page), so `> f.csv` never keeps a header alone.
    header = [["tag", "step", "value", "wall_time"]] if out_csv else []
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
        ended = lambda run: print(_state_line(run), file=sys.stderr)  # noqa: E731
        if out_csv and not tags:
            # every point of the run: the daemon sends the file's lines as they are
            # and this process makes the rows (metrics pages, which the daemon
            # decodes, groups by tag and encodes again, ran at a tenth of the speed)
            for page in _run_pages(client, run, P.EVENTS, args.follow, ended, events_raw=True, raw=True,
                                   max_bytes=metrics_csv.PAGE_BYTES):
                out_csv.writerows(header)
                header = []
                metrics_csv.write_page(out_csv, page.get("events_raw"), page.get("events"), page.get("lines"))
                sys.stdout.flush()
            return 0
        for page in _run_pages(client, run, P.METRICS, args.follow, ended, tags=tags):
            if out_csv:
                out_csv.writerows(header)
                header = []
            for tag, step, value, t in _metric_rows(page, args.tag):
                if out_csv:
                    out_csv.writerow([tag, step, value, t])
                elif args.json:
                    collected.setdefault(tag, []).append({"step": step, "value": value, "t": t})
                else:
                    print(f"{step:>10}  {tag:<32} {num(value)}")
            sys.stdout.flush()
    if args.json:
        _print_json(collected)
    return 0


def cmd_transcript(args: argparse.Namespace) -> int:
    """An LLM run's steps as text (or one JSON line each): the final llm_step events, filtered."""
    from mosaic_tui.transcript import entry_text, step_matches

    shown = 0
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
        for page in _run_pages(client, run, P.EVENTS, args.follow, types=["llm_step"]):
            for event in page["events"]:
                # partial events are a reply still streaming in: its final event follows
                if event.get("partial") or not step_matches(event, args.agent, args.episode, args.grep or ""):
                    continue
                if args.json:
                    print(json.dumps(event, ensure_ascii=False))
                else:
                    print(("\n" if shown else "") + entry_text(event, full_prompt=True))
                shown += 1
            sys.stdout.flush()
    if not shown and not args.json:
        print(f"no LLM steps in {run['name']}" + (" match" if args.agent or args.episode is not None or args.grep
                                                  else ""), file=sys.stderr)
    return 0


def cmd_tag(args: argparse.Namespace) -> int:
    """`mosaic tag RUN +baseline -old`: a bare word adds too."""
    add, remove = [], []
    for change in args.changes:
        if change.startswith("-") and len(change) > 1:
            remove.append(change[1:])
        else:
            add.append(change[1:] if change.startswith("+") else change)
    with _client(args) as client:
        run = client.call(P.TAG, run=args.run, add=add, remove=remove)
    print(f"{run['name']}: {' '.join(run['tags']) or '(no tags)'}")
    return 0


def cmd_note(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.text is None:
            run = client.call(P.GET, run=args.run)
        else:
            run = client.call(P.NOTE, run=args.run, text=args.text)
    print(run["note"] or f"{run['name']} has no note")
    return 0


def _load_spec(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror}") from None
    import yaml  # JSON is YAML too
    try:
        spec = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CLIError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(spec, dict):
        raise CLIError(f"{path} must hold a mapping (base, params, trials, ...)")
    return spec


def cmd_sweep(args: argparse.Namespace) -> int:
    """`mosaic sweep SPEC.yaml`: start a sweep (daemon/sweeps.py documents the spec)."""
    spec = _load_spec(args.spec)
    with _client(args) as client:
        sweep = client.call(P.SWEEP, spec=spec)
        print(sweep["name"])
        if not args.wait:
            return 0
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while sweep["state"] == "running":
            if deadline is not None and time.monotonic() > deadline:
                raise CLIError(f"timed out after {args.timeout:g}s waiting for sweep {sweep['name']}", EXIT_TIMEOUT)
            time.sleep(0.5)
            sweep = next(s for s in client.call(P.SWEEPS) if s["id"] == sweep["id"])
        refused = [t for t in client.call(P.SWEEP_GET, sweep=sweep["id"])["trials"] if t.get("refused")]
    print(f"sweep {sweep['name']} {sweep['state']}: {plural(sweep['runs'], 'run')} in "
          f"{plural(sweep['groups'], 'trial')}" + (f", {len(refused)} refused at submit" if refused else ""))
    for t in refused:
        print(f"trial {t['trial']} refused: {t['refused']}", file=sys.stderr)
    return 0 if sweep["state"] == "finished" and sweep["runs"] else EXIT_RUN_NOT_SUCCEEDED


def cmd_sweeps(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.sweep is None:
            sweeps = client.call(P.SWEEPS)
            if args.json:
                _print_json(sweeps)
            elif not sweeps:
                print("no sweeps")
            else:
                print(_table([[s["id"][:10], s["name"], s["state"], s["spec"]["sampler"], str(s["groups"]),
                               str(s["runs"]), s["spec"]["objective"]["direction"] + " " + s["spec"]["objective"]["tag"]]
                              for s in sweeps], ["ID", "NAME", "STATE", "SAMPLER", "TRIALS", "RUNS", "OBJECTIVE"]))
            return 0
        if args.cancel:
            sweep = client.call(P.SWEEP_CANCEL, sweep=args.sweep)
            print(f"sweep {sweep['name']} {sweep['state']}")
            return 0
        sweep = client.call(P.SWEEP_GET, sweep=args.sweep)
    if args.json:
        _print_json(sweep)
        return 0
    if args.csv:
        header, rows = fmt.sweep_csv_rows(sweep)
        writer = csv.writer(sys.stdout)
        writer.writerow(header)
        writer.writerows(rows)
        return 0
    obj = sweep["spec"]["objective"]
    print(f"sweep {sweep['name']} {sweep['state']}: {obj['direction']} {obj['agg']} of the last {obj['last']} "
          f"{obj['tag']}, {plural(sweep['runs'], 'run')} in {plural(sweep['groups'], 'trial')}")
    names = list(sweep["spec"]["params"])
    rows = []
    for rank, t in enumerate(sweep["trials"], 1):
        band = f"{num(t['mean'])} ± {num(t['std'])}" if t["mean"] is not None else "-"
        rows.append([str(rank), str(t["trial"]), t["state"], band, f"{num(t['min'])}..{num(t['max'])}",
                     str(len(t["runs"]))] + [num(t["params"].get(n)) for n in names])
    print(_table(rows, ["RANK", "TRIAL", "STATE", "MEAN ± STD", "MIN..MAX", "SEEDS"] + [n.upper() for n in names]))
    if sweep.get("importances"):
        print("param importances: " + ", ".join(f"{k} {v:.2f}" for k, v in sweep["importances"].items()))
    for t in sweep["trials"]:
        if t.get("refused"):
            print(f"trial {t['trial']} refused at submit: {t['refused']}")
    return 0


def cmd_tensorboard(args: argparse.Namespace) -> int:
    """Event files from the store for RUN... (or a sweep's runs), then TensorBoard over them."""
    from mosaic_tui import tensorboard as tb
    if not args.runs and not args.sweep:
        raise CLIError("give RUN... or --sweep S", EXIT_USAGE)
    home = _home(args)
    with _client(args) as client:
        runs = [client.call(P.GET, run=ref) for ref in args.runs]
        if args.sweep:
            sweep = client.call(P.SWEEP_GET, sweep=args.sweep)
            runs += [client.call(P.GET, run=r["id"]) for t in sweep["trials"] for r in t["runs"]]
        for run in runs:
            out, points = tb.export_run(client, home, run)
            print(f"{run['name']}: {plural(points, 'point')} -> {out}")
    spec = tb.logdir_spec(home, runs)
    if args.no_launch:
        print(f"tensorboard --logdir_spec {spec}")
        return 0
    port = args.port or tb.free_port()
    proc = tb.launch(spec, port, home.root / "tensorboard" / ".tmp")
    if not tb.wait_http(port):
        proc.kill()
        raise CLIError(f"TensorBoard did not answer on port {port}")
    print(f"TensorBoard (pid {proc.pid}): http://127.0.0.1:{port}/")
    print(f"from another machine: {tb.ssh_line(port)}   then open http://127.0.0.1:{port}/")
    if args.detach:
        return 0
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        return 0


def cmd_export(args: argparse.Namespace) -> int:
    """A run mirrored to W&B and/or MLflow in one shot: the live mirror's code (daemon/mirror.py
    --once), in a process of its own (W&B and MLflow are never imported by this one)."""
    import subprocess
    targets = [t for t, on in (("wandb", args.wandb), ("mlflow", args.mlflow)) if on]
    if not targets:
        raise CLIError("give --wandb, --mlflow or both", EXIT_USAGE)
    home = _home(args)
    with _client(args) as client:
        run = client.call(P.GET, run=args.run)
    if run["state"] not in P.FINAL_STATES:
        raise CLIError(f"run {run['name']} is {run['state']}: export a run that ended (a live run is mirrored "
                       f"with mosaic submit --mirror)")
    run_dir = home.run_dir(run["id"])
    if not (run_dir / "events.jsonl").is_file():
        raise CLIError(f"run {run['name']}'s files are not on this machine ({run_dir}): run mosaic export where "
                       f"its daemon runs")
    proc = subprocess.run([sys.executable, "-m", "daemon.mirror", str(run_dir), "--home", str(home.root),
                           "--targets", ",".join(targets), "--once"], capture_output=True, text=True)
    results = []
    for line in proc.stdout.splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            continue
    if args.json:
        _print_json(results)
    for result in results if not args.json else []:
        print(f"{run['name']} -> {result.get('where') or result['target'] + ': not mirrored'}")
    if proc.returncode != 0:
        problems = [ln for ln in proc.stderr.splitlines() if "mirror: cannot" in ln]
        raise CLIError(problems[-1] if problems else f"the export failed: {proc.stderr.strip()[-500:]}")
    return 0


def _need_terminal(args: argparse.Namespace) -> None:
    """The app and `mosaic watch` read keys from stdin and draw on stderr (Textual's driver):
    without a terminal there (a pipe, a cron job, `2> file`) Textual wrote escape codes and spun
    on the closed input for ever."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stderr", sys.stderr))
               if stream is None or not stream.isatty()]
    if missing:
        what = "mosaic watch" if args.func is cmd_watch else "the app"
        raise CLIError(f"{what} needs a terminal ({' and '.join(missing)} "
                       f"{'is' if len(missing) == 1 else 'are'} not one); from a script use the commands: "
                       f"mosaic ls, show RUN, metrics RUN, logs RUN, wait RUN (mosaic --help lists them all)")


def cmd_app(args: argparse.Namespace) -> int:
    try:
        from mosaic_tui.app import run_app
    except ImportError:
        raise CLIError("the terminal app is not installed in this build; see `mosaic --help`") from None
    return run_app(_home(args), args)


def cmd_play(args: argparse.Namespace) -> int:
    """`mosaic play ENV`: a human run of ENV (docs/play.md), and the app open on its Play screen."""
    try:
        from mosaic_tui.app import run_app
    except ImportError:
        raise CLIError("the terminal app is not installed in this build; see `mosaic --help`") from None
    config: dict[str, Any] = {"worker": "human", "algo": "play", "env": args.env}
    params = {k: v for k, v in (("mode", args.mode), ("rate", args.rate), ("episodes", args.episodes))
              if v is not None}
    if params:
        config["params"] = params
    if args.seed is not None:
        config["seed"] = args.seed
    if args.name is not None:
        config["name"] = args.name
    if args.record_episodes is not None:
        config["record"] = {"episodes": args.record_episodes}
    home = _home(args)
    with _client(args) as client:
        run = client.call(P.SUBMIT, config=config)
    code = run_app(home, args, play=run["id"])
    from mosaic_tui.client import connect
    try:
        with connect(home, autostart=False, timeout=5) as client:
            state = client.call(P.GET, run=run["id"])["state"]
    except (OSError, ConnectionError, P.RPCError):
        state = None
    if state is not None and state not in P.FINAL_STATES:
        again = _same_daemon(args)
        print(f"{run['name']} waits, paused, for a player: P on its row in `{again}` takes the seat again; "
              f"`{again} cancel {shlex.quote(run['name'])}` ends it", file=sys.stderr)
    return code


def _same_daemon(args: argparse.Namespace) -> str:
    """`mosaic` with the options that reach this command's daemon (--home, --ssh and its own, or
    --socket): what a line telling the user what to run next must say."""
    words = ["mosaic"]
    if getattr(args, "home", None):
        words += ["--home", str(args.home)]
    if getattr(args, "ssh", None):
        words += ["--ssh", args.ssh]
        for flag, value in (("--ssh-config", args.ssh_config), ("--remote-home", args.remote_home),
                            ("--remote-mosaic", None if args.remote_mosaic == "mosaic" else args.remote_mosaic)):
            if value:
                words += [flag, value]
    elif getattr(args, "socket", None):
        words += ["--socket", str(args.socket)]
    return shlex.join(words)


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        from mosaic_tui.app import run_watch
    except ImportError:
        raise CLIError("the terminal app is not installed in this build; see `mosaic --help`") from None
    return run_watch(_home(args), args)


def cmd_graphics(args: argparse.Namespace) -> int:
    """What the frames view would draw with in this terminal, and why."""
    from mosaic_tui.graphics.detect import detect, requested_mode
    mode = requested_mode(args)
    # asks the controlling terminal (/dev/tty), so `mosaic graphics --json > file` works too
    caps = detect(mode, timeout=0.5)
    facts = {
        "graphics": caps.graphics, "reason": caps.reason, "colors": caps.colors,
        "cell_px": list(caps.cell_px), "cell_px_measured": caps.cell_px_measured,
        "sixel_colors": caps.sixel_colors, "in_tmux": caps.in_tmux,
        "background": list(caps.background) if caps.background else None,
    }
    if args.json:
        print(json.dumps(facts))
        return 0
    for key, value in facts.items():
        print(f"{key + ':':18} {value}")
    return 0


# -- parser -----------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS,
                        help="daemon home (default: $MOSAIC_HOME, ./var in a checkout, else the user data dir)")
    common.add_argument("--socket", default=argparse.SUPPRESS, metavar="PATH",
                        help="talk to the daemon on this socket (default: $MOSAIC_SOCKET, else the home's); "
                             "never started from here (docs/remote.md)")
    graphics = argparse.ArgumentParser(add_help=False)
    graphics.add_argument("--graphics", choices=["auto", "kitty", "sixel", "halfblock", "none"],
                          default=argparse.SUPPRESS,
                          help="how to draw run frames (default: auto, asks the terminal; $MOSAIC_GRAPHICS)")
    app_options = argparse.ArgumentParser(add_help=False)
    app_options.add_argument("--all-workers", action="store_true", default=argparse.SUPPRESS,
                             help="offer the workers for tests (synthetic) in the new-run form too")
    parser = Parser(prog="mosaic", parents=[common, graphics, app_options],
                    description="Train and watch RL agents from the terminal.")
    remote = parser.add_argument_group("remote (docs/remote.md)")
    remote.add_argument("--ssh", metavar="[USER@]HOST",
                        help="drive the daemon on HOST: start it if needed, forward its socket with ssh -L")
    remote.add_argument("--remote-home", metavar="DIR", help="with --ssh: the daemon home on HOST")
    remote.add_argument("--ssh-config", metavar="FILE", help="with --ssh: ssh -F FILE")
    remote.add_argument("--remote-mosaic", metavar="CMD", default="mosaic",
                        help="with --ssh: how to run mosaic on HOST (default: mosaic)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = sub.add_parser("daemon", parents=[common], help="start, stop or inspect the daemon")
    p.add_argument("action", choices=["start", "stop", "restart", "status"],
                   help="restart: stop it and start it as this version (after an upgrade); runs keep training")
    p.add_argument("--foreground", action="store_true", help="with start: run in this terminal")
    p.add_argument("--max-runs", type=INTEGER, help="with start or restart: concurrent runs (default: CPU count)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser("workers", parents=[common], help="list the installed workers")
    p.add_argument("--json", action="store_true")
    p.add_argument("--all", action="store_true", help="also the workers for tests (synthetic)")
    p.set_defaults(func=cmd_workers)

    p = sub.add_parser("schema", parents=[common], help="print an algorithm's JSON schema")
    p.add_argument("worker")
    p.add_argument("algo")
    p.add_argument("env", nargs="?", help="the environment (some schemas depend on it: XuanCe's)")
    p.add_argument("--env", dest="env_option", metavar="ENV", help="the same as ENV")
    p.set_defaults(func=cmd_schema)

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
    p.add_argument("--mode", choices=("train", "eval"), help="eval: play --checkpoint's policy, train nothing")
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

    p = sub.add_parser("ls", parents=[common], help="list runs")
    p.add_argument("--json", action="store_true")
    p.add_argument("--state", action="append", choices=P.STATES)
    p.add_argument("--tag", action="append", metavar="TAG", help="only runs with this tag (repeatable: all of them)")
    p.add_argument("--where", metavar="QUERY", help="only runs the query keeps, e.g. 'lr < 3e-4 and state = "
                   "succeeded' (docs/results.md)")
    p.add_argument("--columns", metavar="KEY[,KEY]", help="a column for each of these keys (params, config keys, "
                   "fields: lr,gamma,seed)")
    p.add_argument("--sort", metavar="[-]KEY", help="order the runs by this key; descending: --sort=-KEY "
                   "(e.g. --sort=-mean_return)")
    p.add_argument("--wide", action="store_true", help="also each run's CPU, memory and threads (last sample) and note")
    p.add_argument("--window", type=int, default=DEFAULT_RETURN_WINDOW, metavar="N",
                   help=f"the return shown is the mean of the last N episodes (default {DEFAULT_RETURN_WINDOW})")
    p.set_defaults(func=cmd_ls)

    from mosaic_tui import report   # `mosaic report`: its parser and command in its own module
    report.add_parser(sub, common, sys.modules[__name__])   # this module: `python -m` runs it as __main__

    p = sub.add_parser("show", parents=[common], help="show one run")
    p.add_argument("run")
    p.add_argument("--json", action="store_true")
    p.add_argument("--window", type=int, default=DEFAULT_RETURN_WINDOW, metavar="N",
                   help="the mean return is over the last N episodes")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("wait", parents=[common], help="wait for a run to end; exit 0 only if it succeeded")
    p.add_argument("run")
    p.add_argument("--timeout", type=NUMBER)
    p.set_defaults(func=cmd_wait)

    for name, text in (("cancel", "cancel a run (its whole process tree)"), ("pause", "pause a run"),
                       ("resume", "resume a paused run"),
                       ("stop", "stop a run with a checkpoint, to continue it later (mosaic continue)"),
                       ("continue", "start a stopped run again as the same run, from its checkpoint")):
        p = sub.add_parser(name, parents=[common], help=text)
        p.add_argument("run")
        if name in ("cancel", "stop"):
            p.add_argument("--no-wait", action="store_true", help="return before the processes are gone")
        if name == "stop":
            p.add_argument("--timeout", type=NUMBER, default=None, help="seconds to wait for the checkpoint")
        if name == "continue":
            p.add_argument("--wait", action="store_true", help="wait for the run to end; exit 0 if it succeeded")
        p.set_defaults(func=cmd_control)

    p = sub.add_parser("delete", parents=[common], help="delete a finished run and its files")
    p.add_argument("run")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("tag", parents=[common], help="add (+TAG) or remove (-TAG) tags of a run")
    p.add_argument("run")
    p.add_argument("changes", nargs=argparse.REMAINDER, metavar="+TAG|-TAG",
                   help="tags to add (+baseline or baseline) and remove (-old)")
    p.set_defaults(func=cmd_tag)

    p = sub.add_parser("note", parents=[common], help="set a run's note (\"\" clears it); without TEXT print it")
    p.add_argument("run")
    p.add_argument("text", nargs="?")
    p.set_defaults(func=cmd_note)

    p = sub.add_parser("sweep", parents=[common], help="start a sweep from a YAML/JSON spec; prints its name")
    p.add_argument("spec", help="the sweep spec: base, params, trials, seeds, parallel, sampler, objective, pruner")
    p.add_argument("--wait", action="store_true", help="wait for every trial to end")
    p.add_argument("--timeout", type=NUMBER, metavar="S", help="with --wait: give up after S seconds")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("sweeps", parents=[common], help="list the sweeps, or one sweep's trials ranked")
    p.add_argument("sweep", nargs="?", help="a sweep name or id prefix")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--csv", action="store_true", help="with SWEEP: one row per run (params and objective)")
    fmt.add_argument("--cancel", action="store_true", help="with SWEEP: stop it and cancel its runs")
    p.set_defaults(func=cmd_sweeps)

    p = sub.add_parser("tensorboard", aliases=["tb"], parents=[common],
                       help="write runs' telemetry as TensorBoard event files and start TensorBoard over them")
    p.add_argument("runs", nargs="*", metavar="RUN")
    p.add_argument("--sweep", metavar="S", help="every run of this sweep")
    p.add_argument("--port", type=INTEGER, help="default: a free port")
    p.add_argument("--no-launch", action="store_true", help="only write the event files and print the command")
    p.add_argument("--detach", action="store_true", help="leave TensorBoard running in the background and return")
    p.set_defaults(func=cmd_tensorboard)

    p = sub.add_parser("export", parents=[common],
                       help="mirror a finished run to W&B (offline when W&B is out of reach) and/or MLflow")
    p.add_argument("run")
    p.add_argument("--wandb", action="store_true", help="to W&B (settings.json mirrors.wandb: project, entity)")
    p.add_argument("--mlflow", action="store_true", help="to MLflow (mirrors.mlflow: tracking_uri, experiment)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("logs", parents=[common], help="print a run's output")
    p.add_argument("run")
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("--stream", choices=["stderr", "stdout", "supervisor", "all"], default="all")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("metrics", parents=[common], help="print a run's scalars and episodes")
    p.add_argument("run")
    p.add_argument("--metric", "--tag", dest="tag", metavar="NAME",
                   help="only this metric (TensorBoard calls it a tag): episode/return, losses/td_loss, ...")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true")
    fmt.add_argument("--json", action="store_true")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends")
    p.set_defaults(func=cmd_metrics)

    p = sub.add_parser("transcript", parents=[common],
                       help="print an LLM run's steps: observation, prompt, reply, parsed action, valid, tokens")
    p.add_argument("run")
    p.add_argument("--agent", help="only this agent's steps (a seat: 0, player_1 ...)")
    p.add_argument("--episode", type=INTEGER, help="only this episode's steps (0 is the first)")
    p.add_argument("--grep", metavar="TEXT", help="only steps with TEXT anywhere in them (any case)")
    p.add_argument("--json", action="store_true", help="one JSON object a line per step (the llm_step event)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing steps until the run ends")
    p.set_defaults(func=cmd_transcript)

    p = sub.add_parser("attach", parents=[common, graphics, app_options], help="open the terminal app (the default command)")
    p.set_defaults(func=cmd_app)

    p = sub.add_parser("play", parents=[common, graphics],
                       help="play ENV at the keyboard: a human run, opened in the app (docs/play.md)")
    p.add_argument("env", help="an env with discrete actions, e.g. MiniGrid-Empty-5x5-v0, ALE/Breakout-v5")
    p.add_argument("--mode", choices=["turn", "realtime"], help="turn: one step a key; realtime: --rate steps/s "
                                                                   "(default: the env family's)")
    p.add_argument("--rate", type=NUMBER, metavar="N", help="realtime: env steps a second (default 15)")
    p.add_argument("--episodes", type=INTEGER, metavar="N", help="episodes to play (default 10; 0: until cancelled)")
    p.add_argument("--seed", type=INTEGER, metavar="N", help="the first episode's seed")
    p.add_argument("--name", help="the run's name")
    p.add_argument("--record-episodes", type=INTEGER, metavar="N",
                   help="record the first N episodes as a dataset (dataset.hdf5) for offline learners")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("watch", parents=[common, graphics], help="a compact pane following a run (the newest by default)")
    p.add_argument("run", nargs="?", help="run name or id prefix (default: the newest run, followed)")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("graphics", parents=[common, graphics],
                       help="ask the terminal what it can draw frames with, and print the answer")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_graphics)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "home"):
        args.home = None
    if args.command is None:
        args.func = cmd_app
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `mosaic metrics RUN | head` ends quietly
    from mosaic_tui.client import DaemonUnavailable
    from mosaic_tui.remote import RemoteError, SSHForward
    forward = None
    try:
        if args.func in (cmd_app, cmd_play, cmd_watch):
            _need_terminal(args)    # before a daemon starts or a play run is submitted
        if args.ssh:
            if getattr(args, "socket", None):
                raise CLIError("--ssh and --socket: give one", EXIT_USAGE)
            forward = SSHForward(args.ssh, args.remote_home, args.ssh_config, args.remote_mosaic)
            _stop_on_signals(forward)   # before it starts: a SIGTERM as the socket appears cleans up too
            forward.start()
            args.socket = str(forward.local)
            args.daemon_label = f"{args.ssh}:{forward.remote_socket}"
        return args.func(args)
    except RemoteError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except CLIError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return exc.code
    except P.RPCError as exc:
        print(f"mosaic: error: {exc.message}", file=sys.stderr)
        return EXIT_ERROR
    except DaemonUnavailable as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except (ConnectionError, TimeoutError) as exc:
        print(f"mosaic: error: lost the daemon: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as exc:  # the home cannot be created or written
        where = f" {exc.filename}" if exc.filename else ""
        print(f"mosaic: error: cannot use{where}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    finally:
        if forward is not None:
            forward.stop()


def _stop_on_signals(forward) -> None:
    """SIGTERM or SIGHUP (a closed terminal) end the client as they always did, after its ssh
    forward and its socket file: Python's default ending runs no finally clause."""
    def stop(signum, frame):
        forward.stop()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, stop)


if __name__ == "__main__":
    sys.exit(main())
