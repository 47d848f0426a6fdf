"""`mosaic sweep SPEC` starts a sweep; `mosaic sweeps` lists them, or ranks one sweep's trials."""
from __future__ import annotations

import argparse
import csv
import sys
import time
from typing import Any

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.cli import EXIT_RUN_NOT_SUCCEEDED, EXIT_TIMEOUT, NUMBER, CLIError, _client, _print_json, _table
from mosaic_tui.fmt import num, plural


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
    if args.schedule or args.replay is not None:
        return _schedules(args, sweep)
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
    for record in sweep.get("lineage", []):   # population-based training: each exploit (daemon/pbt.py)
        changed = ", ".join(f"{k} {num(v['old'])} -> {num(v['new'])}" for k, v in record["changed"].items())
        print(f"generation {record['generation']}: {record['recipient_name']} ({num(record['recipient_score'])}) "
              f"copied {record['donor_name']} ({num(record['donor_score'])}) at step {record['donor_step']}"
              + (f": {changed}" if changed else "") + (f" [{record['skipped']}]" if record.get("skipped") else ""))
    return 0


def _schedules(args: argparse.Namespace, sweep: dict[str, Any]) -> int:
    """`--schedule`: each PBT member's hyperparameters over its steps and the copies it took;
    `--replay MEMBER`: a sweep spec replaying one member's schedule on a new run (`mosaic sweep` it)."""
    if "pbt" not in sweep["spec"]:
        raise CLIError(f"sweep {sweep['name']} is no PBT sweep: its trials' values do not change over steps")
    members = sweep.get("members") or []
    if members and "schedule" not in members[0]:
        raise CLIError("this daemon gives no PBT schedules: restart it (mosaic daemon restart) to use --schedule")
    if args.replay is not None:
        member = next((m for m in members if args.replay in (m["name"], m["id"], str(m["member"]))), None)
        if member is None:
            raise CLIError(f"sweep {sweep['name']} has no member {args.replay!r}: "
                           + ", ".join(f"{m['member']} ({m['name']})" for m in members))
        if len(member["schedule"]) < 2:
            raise CLIError(f"{member['name']} copied no member: its values never changed; submit its config instead")
        _print_json(member["replay_spec"])
        return 0
    if args.json:
        _print_json([{k: m[k] for k in ("member", "id", "name", "schedule")} for m in members])
        return 0
    names = list(sweep["spec"]["params"])
    rows = []
    for m in members:
        for change in m["schedule"]:
            copied = (f"{change['donor_name'] or change['donor']} at step {change['donor_step']}"
                      if change.get("donor") else "-")
            rows.append([m["name"], str(change["step"])] + [num(change["params"].get(n)) for n in names] + [copied])
    print(_table(rows, ["MEMBER", "FROM STEP"] + [n.upper() for n in names] + ["COPIED"]))
    return 0


def population_controlled(args: argparse.Namespace, client, sweep: dict[str, Any]) -> int:
    """After `mosaic stop SWEEP` (or `continue SWEEP`) on a PBT sweep: what could not be stopped, then,
    for a stop, the wait until no member is active any more (each with its checkpoint saved)."""
    for problem in sweep.get("problems") or []:
        print(f"{sweep['name']}: {problem}", file=sys.stderr)
    if args.command == "stop" and not args.no_wait:
        deadline = None if args.timeout is None else time.monotonic() + args.timeout
        while True:
            members = client.call(P.SWEEP_GET, sweep=sweep["id"]).get("members") or []
            active = [m for m in members if m["state"] not in P.FINAL_STATES]
            if not active:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise CLIError(f"timed out after {args.timeout:g}s waiting for sweep {sweep['name']}'s members "
                               f"to stop: {', '.join(m['name'] for m in active)}", EXIT_TIMEOUT)
            time.sleep(0.5)
        counts: dict[str, int] = {}
        for m in members:
            counts[m["state"]] = counts.get(m["state"], 0) + 1
        print(f"sweep {sweep['name']} stopped: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        return 0
    print(f"sweep {sweep['name']} {sweep['state']}")
    return 0 if not sweep.get("problems") else EXIT_RUN_NOT_SUCCEEDED


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic sweep` and `mosaic sweeps`."""
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
    p.add_argument("--schedule", action="store_true",
                   help="with a PBT SWEEP: each member's values over its steps and the copies it took (with --json)")
    p.add_argument("--replay", metavar="MEMBER",
                   help="with a PBT SWEEP: print a spec replaying MEMBER's schedule on a new run (mosaic sweep it)")
    p.set_defaults(func=cmd_sweeps)
