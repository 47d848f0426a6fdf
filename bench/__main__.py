"""python -m bench [--only NAME ...] [--long]: run every benchmark, print one table,
write bench/results/latest.json.

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


def modules() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--only", action="append", help="run only these modules (e.g. bench_fastlane)")
    parser.add_argument("--long", action="store_true", help="also run the long benchmarks (learning check)")
    args = parser.parse_args(argv)
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
    result = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine(),
              "seconds": timings, "figures": rows}
    (RESULTS / "latest.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwritten {RESULTS / 'latest.json'} ({machine()})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
