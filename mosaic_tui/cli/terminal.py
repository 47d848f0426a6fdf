"""The commands that draw on the terminal: `mosaic attach` (the app; also `mosaic` alone),
`mosaic play ENV`, `mosaic watch` and `mosaic graphics` (what the terminal can draw frames with)."""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any

from daemon import protocol as P
from mosaic_tui.cli import INTEGER, NUMBER, CLIError, _client, _home, app_options, graphics_options


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
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic attach`, `play`, `watch` and `graphics`."""
    graphics = graphics_options()
    p = sub.add_parser("attach", parents=[common, graphics, app_options()], help="open the terminal app (the default command)")
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
