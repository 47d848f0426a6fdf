"""`mosaic daemon start|stop|restart|status`: the daemon of a home, from the command line."""
from __future__ import annotations

import argparse
import os
import time
from typing import Any

from daemon import protocol as P
from daemon.home import Home
from mosaic_tui.cli import INTEGER, CLIError, _home, _print_json
from mosaic_tui.fmt import duration, plural


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


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic daemon`."""
    p = sub.add_parser("daemon", parents=[common], help="start, stop or inspect the daemon")
    p.add_argument("action", choices=["start", "stop", "restart", "status"],
                   help="restart: stop it and start it as this version (after an upgrade); runs keep training")
    p.add_argument("--foreground", action="store_true", help="with start: run in this terminal")
    p.add_argument("--max-runs", type=INTEGER, help="with start or restart: concurrent runs (default: CPU count)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_daemon)
