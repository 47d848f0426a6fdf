"""Collects what the reliability tests inject and what survives; writes docs/reliability.md.

The document is produced by the test suite itself: each fault-injection test
records its fault and outcome, and when every test of tests/daemon/test_reliability.py
(and the crash tests it names) has passed in one session, the table is written.
A partial or failing session leaves the document alone.

Tests never rewrite tracked files: a session writes build/reliability.md
(ignored by git); `make reliability-doc` (MOSAIC_UPDATE_DOCS=1) writes
docs/reliability.md itself, to be committed.
"""
from __future__ import annotations

import datetime
import os
import platform
from pathlib import Path

RECORDS: list[dict] = []
ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "reliability.md"
BUILD_DOC = ROOT / "build" / "reliability.md"


def record(category: str, fault: str, outcome: str, lines_lost: int | None = None,
           processes_left: int | None = None, inputs: int | None = None) -> None:
    RECORDS.append({"category": category, "fault": fault, "outcome": outcome, "lines_lost": lines_lost,
                    "processes_left": processes_left, "inputs": inputs})


def _cell(value) -> str:
    return "-" if value is None else f"{value:,}" if isinstance(value, int) else str(value)


def write() -> None:
    lost = sum(r["lines_lost"] or 0 for r in RECORDS)
    left = sum(r["processes_left"] or 0 for r in RECORDS)
    fuzzed = sum(r["inputs"] or 0 for r in RECORDS)
    lines = [
        "# Reliability: faults injected and what survived",
        "",
        "Written by the test suite (`tests/daemon/test_reliability.py` and the crash tests it",
        "records, `tests/reliability_report.py`) when all of them pass in one session;",
        "do not edit by hand. Every fault below is injected for real: real processes,",
        "signals, sockets, a full tmpfs.",
        "",
        f"Last written {datetime.date.today().isoformat()} on {platform.machine()}, "
        f"Python {platform.python_version()}.",
        "",
        f"**Totals:** {len(RECORDS)} faults injected and survived · {fuzzed:,} fuzzed inputs · "
        f"**{lost} telemetry lines lost** · **{left} processes left behind**.",
        "",
        "| area | fault injected | what survived | lines lost | processes left | inputs |",
        "|---|---|---|---|---|---|",
    ]
    for r in RECORDS:
        lines.append(f"| {r['category']} | {r['fault']} | {r['outcome']} | {_cell(r['lines_lost'])} | "
                     f"{_cell(r['processes_left'])} | {_cell(r['inputs'])} |")
    target = DOC if os.environ.get("MOSAIC_UPDATE_DOCS") == "1" else BUILD_DOC
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(lines) + "\n")
