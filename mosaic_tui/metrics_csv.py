"""`mosaic metrics RUN --csv`: a run's events as CSV rows (tag, step, value, wall time), fast.

Two fast paths beside csv.writer, each falling back to it whenever a row needs what only it
does (quoting, an empty field, True/False):

- decoded pages of scalars: the rows as orjson writes them (``scalars_csv``);
- raw pages (the daemon's ``read_events`` lines, not decoded): the scalar lines the SDK's
  Emitter writes are cut out with one regex pass (``EMITTER_SCALAR``, pinned by a test to
  ``Emitter.scalar``'s own output) and joined in C, other lines decoded one by one
  (``page_csv_raw``). About twice as fast as decoding the page (docs/performance.md).
"""
from __future__ import annotations

import csv
import io
import itertools
import operator
import re
import sys
from typing import Any

from daemon import protocol as P
from workers.sdk.telemetry import EPISODE, SCALAR, episode_scalars

_SCALAR_ROW = operator.itemgetter("tag", "step", "value", "t")
_EVENT_TYPE = operator.itemgetter("type")
PAGE_BYTES = 4 * 1024 * 1024     # a page of the run's events asked for at a time


def scalars_csv(events: list[dict[str, Any]]) -> bytes | None:
    """Scalar events as the CSV rows csv.writer writes (tag,step,value,wall_time and
    CRLF), with the numbers written by orjson: the same shortest text that reads
    back as the same float as Python's repr, at a fraction of its cost (formatting
    floats was most of a row's time). None when a row needs what only csv.writer
    does: quoting (a comma, a quote, a line break), an empty field for a missing
    value, True/False."""
    try:
        rows = list(map(_SCALAR_ROW, events))
    except KeyError:
        return None
    tags, steps, values, times = zip(*rows)
    if not (set(map(type, steps)) <= {int} and set(map(type, values)) <= {int, float, str}
            and set(map(type, times)) <= {int, float} and set(map(type, tags)) <= {str}):
        return None
    text = P.dumps(rows)  # [["tag",1,0.5,1795383499.01],...]
    body = text[2:-2].replace(b"],[", b"\r\n").replace(b'"', b"") + b"\r\n"
    # every row exactly four fields and nothing escaped: no field held a comma,
    # a quote, a backslash or a control character
    if b"\\" in body or body.count(b"\n") != len(rows) or body.count(b",") != 3 * len(rows):
        return None
    return body


# One scalar line as the SDK's Emitter writes it, preceded by a comma or the page's start and
# followed by a comma or its end: a whole line, never a part of one (no group holds a comma, a
# quote or a brace; the line is JSON the daemon validated, so the number groups are numbers).
# Groups: wall time, tag, value (a number or a string without escapes), step.
EMITTER_SCALAR = re.compile(
    rb'(?<![^,])\{"v":1,"type":"scalar","t":([-0-9.eE+]+),"tag":"([^"\\,]*)",'
    rb'"value":([-0-9.eE+]+|"[^"\\,]*"),"step":(-?[0-9]+)\}(?![^,])')
_CSV_ORDER = operator.itemgetter(1, 3, 2, 0)    # tag, step, value, wall time


def scalars_csv_raw(lines: bytes, count: int | None = None) -> bytes | None:
    """A raw page (its ``count`` event lines joined by commas) as CSV rows, without decoding
    a line: when every line is a scalar as the Emitter writes it, its fields are cut out with
    one regex pass and joined in C, the numbers as the worker wrote them (about twice as fast
    as decoding the page). None when any line is something else: the page is decoded instead."""
    if not lines:
        return b""
    rows = EMITTER_SCALAR.findall(lines)
    if len(rows) != (count if count is not None else lines.count(b"},{") + 1):
        return None
    body = b"\r\n".join(map(b",".join, map(_CSV_ORDER, rows))) + b"\r\n"
    # a string value as csv.writer writes it ("nan" -> nan); the scan is cheaper than the copy
    return body.replace(b'"', b"") if b'"' in body else body


# the start of a line that is not a scalar (an episode, a phase...) in a raw page
_OTHER_LINE = re.compile(rb'\{"v":1,"type":"(?!scalar")')   # a literal start: a fast scan
_LINE_START = b',{"v":'


def page_csv_raw(lines: bytes, count: int | None = None) -> bytes | None:
    """A raw page (``count`` lines) as CSV rows without decoding its scalars: the stretches of
    Emitter scalars between other lines (a real run's pages hold its episodes) are cut as
    scalars_csv_raw cuts them, the other lines decoded one by one (an episode as its tags).
    None when a stretch is not plain scalars or a cut does not fall between two lines (it
    does not decode): the page is decoded instead."""
    if count is not None and lines.count(b'{"v":1,"type":"scalar",') == count:
        return scalars_csv_raw(lines, count)     # scalars only (a count is cheaper than a scan)
    matches = _OTHER_LINE.finditer(lines)
    first = next(matches, None)
    if first is None:
        return scalars_csv_raw(lines, count)
    out: list[bytes] = []
    pos = 0
    for match in itertools.chain([first], matches):
        start = match.start()
        if start < pos or (start and lines[start - 1] != 44):   # 44: a comma before a line
            continue                      # inside a line (the one taken last): not a line's start
        if start > pos:
            stretch = scalars_csv_raw(lines[pos:start - 1])
            if stretch is None:
                return None
            out.append(stretch)
        end = lines.find(_LINE_START, start)
        end = len(lines) if end < 0 else end
        try:
            event = P.loads(lines[start:end])
        except P.JSONDecodeError:
            return None
        buf = io.StringIO(newline="")
        write_rows(csv.writer(buf), [event])
        out.append(buf.getvalue().encode())
        pos = end + 1
    if pos < len(lines):
        stretch = scalars_csv_raw(lines[pos:])
        if stretch is None:
            return None
        out.append(stretch)
    return b"".join(out)


def write_page(out_csv, lines: bytes | None, events: list[dict[str, Any]] | None,
                    count: int | None = None) -> None:
    """A page of a run's events as CSV rows: its raw lines (``lines``, Client.result's
    ``events_raw``; ``count`` of them) cut without decoding where they are Emitter scalars
    (page_csv_raw), else the page decoded."""
    body = page_csv_raw(lines, count) if lines is not None else None
    if body is not None:
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
        return
    write_rows(out_csv, events if lines is None else P.loads(b"[" + lines + b"]"))


def write_rows(out_csv, events: list[dict[str, Any]]) -> None:
    """A page of events as CSV rows (tag, step, value, wall time), in the file's order;
    an episode as its tags (episode_scalars), other events skipped."""
    if events and set(map(_EVENT_TYPE, events)) == {SCALAR}:
        body = scalars_csv(events)  # all scalars, a long run's usual page
        if body is not None:
            sys.stdout.flush()
            sys.stdout.buffer.write(body)
            return
    for ev in events:
        kind = ev.get("type")
        if kind == SCALAR:
            out_csv.writerow([ev.get("tag"), ev.get("step"), ev.get("value"), ev.get("t")])
        elif kind == EPISODE:
            for tag, value in episode_scalars(ev):
                out_csv.writerow([tag, ev.get("step"), value, ev.get("t")])
