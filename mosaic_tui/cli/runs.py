"""The runs one at a time or listed: `mosaic ls`, `show`, `wait`, `cancel`, `pause`, `resume`,
`stop`, `continue`, `delete`, `tag` and `note`."""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.cli import (
    EXIT_RUN_NOT_SUCCEEDED,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    NUMBER,
    CLIError,
    _client,
    _home,
    _print_json,
    _state_line,
    _table,
    where_runs,
)
from mosaic_tui.fmt import (
    DEFAULT_RETURN_WINDOW,
    MAX_RETURN_WINDOW,
    best_return,
    best_text,
    derived,
    duration,
    elapsed,
    eta,
    failure_reason,
    num,
    progress_text,
    run_label,
    run_mode,
    smoothed_return,
    state_label,
    system_figures,
    system_text,
)


def seed_text(config: dict[str, Any]) -> str | None:
    """The run's seed, and whether it was drawn (so a re-run knows to give it)."""
    if config.get("seed") is None:
        return None
    return f"{config['seed']} (drawn at random)" if config.get("seed_drawn") else str(config["seed"])


def _return_window(args: argparse.Namespace) -> int:
    if not 1 <= args.window <= MAX_RETURN_WINDOW:
        raise CLIError(f"--window must be between 1 and {MAX_RETURN_WINDOW} (the daemon keeps the last "
                       f"{MAX_RETURN_WINDOW} returns), not {args.window}")
    return args.window


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
              ("env", run["env"]), ("mode", run_mode(run)),
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
        if "spec" in run:   # a PBT sweep's name: its whole population stopped or continued
            from mosaic_tui.cli.sweep import population_controlled
            return population_controlled(args, client, run)
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


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic ls`, `show`, `wait`, the run controls, `delete`, `tag` and `note`."""
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
