"""Runs out to other tools: `mosaic tensorboard` (event files, and TensorBoard over them) and
`mosaic export` (a finished run mirrored to W&B and/or MLflow)."""
from __future__ import annotations

import argparse
import json
import sys

from daemon import protocol as P
from mosaic_tui.cli import EXIT_USAGE, INTEGER, CLIError, _client, _home, _print_json, where_runs
from mosaic_tui.fmt import plural


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


def _mirror_once(home, run: dict, targets: list[str]) -> tuple[list[dict], str | None]:
    """One finished run mirrored (daemon/mirror.py --once, in a process of its own): the
    targets' results, and what went wrong (None: nothing)."""
    import subprocess
    run_dir = home.run_dir(run["id"])
    if not (run_dir / "events.jsonl").is_file():
        return [], (f"run {run['name']}'s files are not on this machine ({run_dir}): run mosaic export where "
                    f"its daemon runs")
    proc = subprocess.run([sys.executable, "-m", "daemon.mirror", str(run_dir), "--home", str(home.root),
                           "--targets", ",".join(targets), "--once"], capture_output=True, text=True)
    results = []
    for line in proc.stdout.splitlines():
        try:
            results.append(json.loads(line))
        except ValueError:
            continue
    if proc.returncode != 0:
        problems = [ln for ln in proc.stderr.splitlines() if "mirror: cannot" in ln]
        return results, problems[-1] if problems else f"the export failed: {proc.stderr.strip()[-500:]}"
    return results, None


def cmd_export(args: argparse.Namespace) -> int:
    """A run mirrored to W&B and/or MLflow in one shot: the live mirror's code (daemon/mirror.py
    --once), in a process of its own (W&B and MLflow are never imported by this one). --where:
    every finished run the query keeps (docs/results.md), one after the other."""
    targets = [t for t, on in (("wandb", args.wandb), ("mlflow", args.mlflow)) if on]
    if not targets:
        raise CLIError("give --wandb, --mlflow or both", EXIT_USAGE)
    if bool(args.run) == bool(args.where):
        raise CLIError("give RUN or --where QUERY" + (", not both" if args.run else ""), EXIT_USAGE)
    home = _home(args)
    with _client(args) as client:
        if args.run:
            runs = [client.call(P.GET, run=args.run)]
        else:
            from mosaic_tui.query import DEFAULT_WINDOW
            listed = client.call(P.LIST)["runs"]
            runs = where_runs(args.where, sorted(listed, key=lambda r: (r.get("created_at") or 0, r["id"])),
                              DEFAULT_WINDOW)
            if not runs:
                raise CLIError(f"--where {args.where!r}: no run matches")
    if args.run and runs[0]["state"] not in P.FINAL_STATES:
        run = runs[0]
        raise CLIError(f"run {run['name']} is {run['state']}: export a run that ended (a live run is mirrored "
                       f"with mosaic submit --mirror)")
    results, problems = [], []
    for run in runs:
        if run["state"] not in P.FINAL_STATES:
            print(f"{run['name']} is {run['state']}: not exported (a run that ended is)", file=sys.stderr)
            continue
        got, problem = _mirror_once(home, run, targets)
        results += got
        for result in got if not args.json else []:
            print(f"{run['name']} -> {result.get('where') or result['target'] + ': not mirrored'}")
        if problem:
            if not args.run:
                print(f"mosaic: error: {problem}", file=sys.stderr)
            problems.append(problem)
    if args.json:
        _print_json(results)
    if args.run and problems:
        raise CLIError(problems[0])
    if not args.run and not results and not problems:
        raise CLIError(f"--where {args.where!r}: none of the {plural(len(runs), 'run')} it keeps has ended")
    if problems:
        raise CLIError(f"{plural(len(problems), 'run')} not exported: {problems[-1]}")
    return 0


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic tensorboard` and `mosaic export`."""
    p = sub.add_parser("tensorboard", aliases=["tb"], parents=[common],
                       help="write runs' telemetry as TensorBoard event files and start TensorBoard over them")
    p.add_argument("runs", nargs="*", metavar="RUN")
    p.add_argument("--sweep", metavar="S", help="every run of this sweep")
    p.add_argument("--port", type=INTEGER, help="default: a free port")
    p.add_argument("--no-launch", action="store_true", help="only write the event files and print the command")
    p.add_argument("--detach", action="store_true", help="leave TensorBoard running in the background and return")
    p.set_defaults(func=cmd_tensorboard)

    p = sub.add_parser("export", parents=[common],
                       help="mirror a finished run (or every one a query keeps) to W&B (offline when W&B is out "
                            "of reach) and/or MLflow")
    p.add_argument("run", nargs="?", metavar="RUN")
    p.add_argument("--where", metavar="QUERY", help="every finished run the query keeps, e.g. 'sweep = lr-sweep and "
                                                    "mean_return > 400' (docs/results.md)")
    p.add_argument("--wandb", action="store_true", help="to W&B (settings.json mirrors.wandb: project, entity)")
    p.add_argument("--mlflow", action="store_true", help="to MLflow (mirrors.mlflow: tracking_uri, experiment)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_export)
