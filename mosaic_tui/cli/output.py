"""What a run wrote, read from the daemon: `mosaic logs`, `mosaic metrics` and `mosaic transcript`
(an LLM run's steps); each follows a live run with -f."""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from typing import Any, Callable, Iterator

from daemon import protocol as P
from mosaic_tui import metrics_csv
from mosaic_tui.cli import INTEGER, _client, _print_json, _state_line
from mosaic_tui.fmt import num


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


# -- parser -----------------------------------------------------------------
def add_parser(sub, common: argparse.ArgumentParser, cli) -> None:
    """`mosaic logs`, `mosaic metrics` and `mosaic transcript`."""
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
