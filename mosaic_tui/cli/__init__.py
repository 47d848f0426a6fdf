"""The `mosaic` command: the contract scripts and tests use.

Every command but `daemon stop` and `daemon status` starts the daemon when none
runs. RUN is a run name or a unique id prefix. Errors are one line on stderr
and a non-zero exit, never a traceback.

This module holds what every command shares (the exit codes, `CLIError`, the
argument types, the connection, `main`); each family of commands is a module
of its own, listed in `families`, with its parser beside its handlers: its
``add_parser(sub, common, cli)`` adds its commands to ``sub``, each with the
``common`` options (--home, --socket) as a parent; ``cli`` is this module.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

from daemon import protocol as P
from daemon.home import Home

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


def _state_line(run: dict[str, Any]) -> str:
    line = f"{run['name']} {run['state']}"
    if run.get("reason"):
        line += f": {run['reason']}"
    return line


def where_runs(text: str | None, runs: list[dict[str, Any]], window: int) -> list[dict[str, Any]]:
    """The runs a --where query keeps (mosaic_tui/query.py); its mistake as one CLIError line."""
    if not text:
        return runs
    from mosaic_tui import query
    try:
        return query.compile_query(text, query.Keys(runs), window=window).filter(runs)
    except query.QueryError as exc:
        raise CLIError(exc.line("--where"), EXIT_USAGE) from None


# -- parser -----------------------------------------------------------------
def families() -> list:
    """The modules of the commands, in `mosaic --help`'s order: each one's add_parser adds its own
    (imported here, not at the top: each imports this module's shared pieces)."""
    from mosaic_tui import report, sweep_explain
    from mosaic_tui.cli import daemon, export, output, runs, submit, sweep, terminal, workers
    # daemon; workers, schema; submit, eval; ls, show, wait, cancel, pause, resume, stop, continue,
    # delete, tag, note; report; sweep, sweeps; explain; tensorboard, export; logs, metrics,
    # transcript; attach, play, watch, graphics
    return [daemon, workers, submit, runs, report, sweep, sweep_explain, export, output, terminal]


def common_options() -> argparse.ArgumentParser:
    """--home and --socket: a parent of every command (and of `mosaic` itself)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", default=argparse.SUPPRESS,
                        help="daemon home (default: $MOSAIC_HOME, ./var in a checkout, else the user data dir)")
    common.add_argument("--socket", default=argparse.SUPPRESS, metavar="PATH",
                        help="talk to the daemon on this socket (default: $MOSAIC_SOCKET, else the home's); "
                             "never started from here (docs/remote.md)")
    return common


def graphics_options() -> argparse.ArgumentParser:
    """--graphics: a parent of the commands that draw run frames."""
    graphics = argparse.ArgumentParser(add_help=False)
    graphics.add_argument("--graphics", choices=["auto", "kitty", "sixel", "halfblock", "none"],
                          default=argparse.SUPPRESS,
                          help="how to draw run frames (default: auto, asks the terminal; $MOSAIC_GRAPHICS)")
    return graphics


def app_options() -> argparse.ArgumentParser:
    """--all-workers: a parent of the commands that open the app."""
    app = argparse.ArgumentParser(add_help=False)
    app.add_argument("--all-workers", action="store_true", default=argparse.SUPPRESS,
                     help="offer the workers for tests (synthetic) in the new-run form too")
    return app


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = Parser(prog="mosaic", parents=[common, graphics_options(), app_options()],
                    description="Train and watch RL agents from the terminal.")
    remote = parser.add_argument_group("remote (docs/remote.md)")
    remote.add_argument("--ssh", metavar="[USER@]HOST",
                        help="drive the daemon on HOST: start it if needed, forward its socket with ssh -L")
    remote.add_argument("--remote-home", metavar="DIR", help="with --ssh: the daemon home on HOST")
    remote.add_argument("--ssh-config", metavar="FILE", help="with --ssh: ssh -F FILE")
    remote.add_argument("--remote-mosaic", metavar="CMD", default="mosaic",
                        help="with --ssh: how to run mosaic on HOST (default: mosaic)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for family in families():
        family.add_parser(sub, common, sys.modules[__name__])
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "home"):
        args.home = None
    from mosaic_tui.cli import terminal
    if args.command is None:
        args.func = terminal.cmd_app
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `mosaic metrics RUN | head` ends quietly
    from mosaic_tui.client import DaemonUnavailable
    from mosaic_tui.remote import RemoteError, SSHForward
    forward = None
    try:
        if args.func in (terminal.cmd_app, terminal.cmd_play, terminal.cmd_watch):
            terminal._need_terminal(args)    # before a daemon starts or a play run is submitted
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
