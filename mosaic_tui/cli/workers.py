"""`mosaic workers` and `mosaic schema`: what the daemon can train, and each algorithm's parameters."""
from __future__ import annotations

import argparse

from daemon import protocol as P
from mosaic_tui.cli import EXIT_USAGE, CLIError, _client, _print_json, _table


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


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic workers` and `mosaic schema`."""
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
