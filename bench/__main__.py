"""python -m bench [--only NAME ...] [--long]: run every benchmark, print one table,
write bench/results/latest.json. python -m bench --readme: put latest.json's
table into README.md (between the bench:start / bench:end markers).

Each bench/bench_*.py module is also runnable alone (python -m bench.bench_fastlane).
Modules with a LONG = True attribute (the learning check) run only with --long.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

from bench.common import machine, print_table

RESULTS = Path(__file__).resolve().parent / "results"
README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def markdown(result: dict) -> str:
    """latest.json as a Markdown table, with the date and machine it came from."""
    def cell(value) -> str:
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
        return str(value)
    dates = sorted(set((result.get("dates") or {}).values()) or {result["date"]})
    when = dates[0][:16].replace("T", " ")
    if len(dates) > 1:
        when = f"between {when} and {dates[-1][:16].replace('T', ' ')}"
    lines = [f"Measured {when} on {result['machine']} "
             f"(`python -m bench`, {sum(result['seconds'].values()) / 60:.0f} min in all).", "",
             "| bench | figure | value | goal | met | anchor |", "|---|---|---:|---|---|---|"]
    for row in result["figures"]:
        met = {True: "yes", False: "**no**", None: ""}[row.get("ok")]
        value = f"{cell(row['value'])} {row.get('unit') or ''}".strip()
        anchor = str(row.get("anchor") or "").replace("|", "/")
        lines.append(f"| {row['bench'].removeprefix('bench_')} | {row['figure']} | {value} | "
                     f"{row.get('goal') or ''} | {met} | {anchor} |")
    return "\n".join(lines)


def update_readme() -> int:
    result = json.loads((RESULTS / "latest.json").read_text())
    text = README.read_text()
    if START not in text or END not in text:
        print(f"README.md has no {START} ... {END} section", file=sys.stderr)
        return 1
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    README.write_text(head + START + "\n" + markdown(result) + "\n" + END + tail)
    print(f"README.md: table of {result['date']}")
    return 0


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--only", action="append", help="run only these modules (e.g. bench_fastlane)")
    parser.add_argument("--long", action="store_true", help="also run the long benchmarks (learning check)")
    parser.add_argument("--readme", action="store_true", help="only put latest.json's table into README.md")
    args = parser.parse_args(argv)
    if args.readme:
        return update_readme()
    rows: list[dict] = []
    timings: dict[str, float] = {}
    failed = []
    for name in modules():
        if args.only and name not in args.only and name.removeprefix("bench_") not in args.only:
            continue
        module = importlib.import_module(f"bench.{name}")
        if getattr(module, "LONG", False) and not args.long:
            continue
        print(f"== {name}", file=sys.stderr, flush=True)
        t0 = time.monotonic()
        try:
            for row in module.run():
                row["bench"] = name
                rows.append(row)
        except Exception as exc:  # one broken benchmark must not hide the others
            traceback.print_exc()
            failed.append(name)
            rows.append({"bench": name, "figure": f"{name} failed: {type(exc).__name__}: {exc}", "value": None,
                         "unit": "", "goal": "", "anchor": "", "ok": False})
        timings[name] = round(time.monotonic() - t0, 1)
    print_table(rows)
    RESULTS.mkdir(exist_ok=True)
    now = datetime.datetime.now().isoformat(timespec="seconds")
    dates = {name: now for name in timings}
    previous = RESULTS / "latest.json"
    if args.only and previous.exists():
        # a partial run replaces its modules' rows and keeps the others'
        old = json.loads(previous.read_text())
        rows = [r for r in old.get("figures", []) if r["bench"] not in timings] + rows
        rows.sort(key=lambda r: r["bench"])
        timings = {**old.get("seconds", {}), **timings}
        dates = {**old.get("dates", {name: old.get("date") for name in old.get("seconds", {})}), **dates}
    result = {"date": now, "dates": dates, "machine": machine(), "seconds": timings, "figures": rows}
    (RESULTS / "latest.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten {RESULTS / 'latest.json'} ({machine()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
