"""mosaic_tui/metrics_csv.py: `mosaic metrics --csv`'s fast paths write exactly what csv.writer writes."""
from __future__ import annotations

import csv
import io
import os
import sys

import orjson
import pytest

from mosaic_tui import metrics_csv as M
from workers.sdk import telemetry as tm


def scalar(tag: str, value, step: int, t: float = 1795383499.01) -> dict:
    return {"v": 1, "type": tm.SCALAR, "t": t, "tag": tag, "value": value, "step": step}


def episode(step: int, ret, length: int, t: float = 1795383500.5, **extra) -> dict:
    return {"v": 1, "type": tm.EPISODE, "t": t, "step": step, "return": ret, "length": length, **extra}


def emitted(events: list[dict]) -> bytes:
    """The events as the SDK's Emitter writes them (its scalar() for scalars), one line each, joined
    by commas as the daemon's raw pages are."""
    r, w = os.pipe()
    try:
        em = tm.Emitter(w, flush_interval=3600)
        for ev in events:
            if ev["type"] == tm.SCALAR:
                em.scalar(ev["tag"], ev["value"], ev["step"])
            else:
                em.emit(ev)
        em.flush()
        data = os.read(r, 1 << 20)
        em._closed = True
    finally:
        os.close(r)
        os.close(w)
    return b",".join(data.rstrip(b"\n").split(b"\n"))


def by_csv_writer(events: list[dict]) -> bytes:
    buf = io.StringIO(newline="")
    out = csv.writer(buf)
    for ev in events:
        if ev["type"] == tm.SCALAR:
            out.writerow([ev.get("tag"), ev.get("step"), ev.get("value"), ev.get("t")])
        elif ev["type"] == tm.EPISODE:
            for tag, value in tm.episode_scalars(ev):
                out.writerow([tag, ev.get("step"), value, ev.get("t")])
    return buf.getvalue().encode()


def rows(data: bytes) -> list[list[str]]:
    """CSV text as rows with the numbers as floats, so 1e-05 and 1e-5 compare equal."""
    out = []
    for row in csv.reader(io.StringIO(data.decode(), newline="")):
        out.append([row[0], row[1]] + [float(x) if x not in ("", "nan", "inf", "-inf") else x for x in row[2:]])
    return out


def test_decoded_scalars_are_the_rows_csv_writer_writes():
    events = [scalar("loss", 0.125, 1), scalar("charts/SPS", 5236, 2), scalar("x", 1e-05, 3), scalar("y", "nan", 4)]
    body = M.scalars_csv(events)
    assert body is not None and body.endswith(b"\r\n")
    assert rows(body) == rows(by_csv_writer(events))
    assert body.split(b"\r\n")[3] == b"y,4,nan,1795383499.01"


@pytest.mark.parametrize("event", [
    scalar("a,b", 1.0, 1),               # a comma: quoted by csv.writer
    scalar('say "hi"', 1.0, 1),          # a quote
    scalar("a\nb", 1.0, 1),              # a line break
    scalar("a", True, 1),                # True/False
    scalar("a", None, 1),                # an empty field
    scalar("a", 1.0, 1.5),               # a step that is no integer
    {"v": 1, "type": tm.SCALAR, "t": 1.0, "tag": "a", "step": 1},     # no value
    {**scalar("a", 1.0, 1), "t": None},                                # an empty wall time
])
def test_a_row_only_csv_writer_writes_right_leaves_the_fast_path(event):
    assert M.scalars_csv([scalar("ok", 1.0, 1), event]) is None


def test_the_emitter_scalar_pattern_matches_what_emitter_scalar_writes():
    page = emitted([scalar("loss", 0.5, 3), scalar("charts/SPS", 12, 4), scalar("n", float("nan"), 5),
                    scalar("big", 1.5e300, 6), scalar("neg", -2.25, 0)])
    found = M.EMITTER_SCALAR.findall(page)
    assert [(tag, step) for _t, tag, _v, step in found] == [
        (b"loss", b"3"), (b"charts/SPS", b"4"), (b"n", b"5"), (b"big", b"6"), (b"neg", b"0")]
    assert found[2][2] == b'"nan"'


def test_a_raw_page_of_scalars_is_cut_without_decoding_into_the_same_rows():
    events = [scalar(f"tag{i % 3}", i * 0.5, i) for i in range(20)]
    page = emitted(events)
    body = M.scalars_csv_raw(page, 20)
    assert body is not None
    assert rows(body) == rows(by_csv_writer([{**e, "t": orjson.loads(b"[" + page + b"]")[i]["t"]}
                                             for i, e in enumerate(events)]))
    assert M.scalars_csv_raw(b"") == b""


def test_a_raw_page_whose_count_does_not_match_is_decoded_instead():
    page = emitted([scalar("a", 1.0, 1), scalar("b", 2.0, 2)])
    assert M.scalars_csv_raw(page, 3) is None
    # a scalar with a field the Emitter never writes is not an Emitter line
    odd = page + b"," + orjson.dumps({**scalar("c", 1.0, 3), "extra": 1})
    assert M.scalars_csv_raw(odd) is None


def test_a_raw_page_with_episodes_and_other_events_gives_the_rows_of_the_decoded_page():
    events = [scalar("a", 1.0, 1), episode(2, 9.5, 7, agents={"p0": 4.0, "p1": 5.5}),
              scalar("a", 2.0, 3), scalar("b", 3.0, 3), {"v": 1, "type": tm.HEARTBEAT, "t": 1.0},
              {"v": 1, "type": tm.PHASE, "t": 1.0, "name": "eval", "step": 3}, scalar("a", 4.0, 5)]
    page = emitted(events)
    body = M.page_csv_raw(page, len(events))
    assert body is not None
    assert rows(body) == rows(by_csv_writer(orjson.loads(b"[" + page + b"]")))
    assert b"episode/return/p1,2,5.5," in body


def test_an_event_holding_an_event_like_object_is_cut_between_lines_only():
    # a field whose value reads like the start of a line: not a line's start, it follows no comma
    events = [scalar("a", 1.0, 1), {"v": 1, "type": tm.PHASE, "t": 1.0, "step": 2, "name": "eval",
                                    "detail": {"v": 1, "type": "episode", "step": 2}},
              episode(3, 1.0, 2), scalar("a", 2.0, 3)]
    page = emitted(events)
    body = M.page_csv_raw(page, len(events))
    assert body is not None
    assert rows(body) == rows(by_csv_writer(orjson.loads(b"[" + page + b"]")))


def test_write_page_writes_the_fast_rows_or_the_decoded_ones(capsysbinary):
    plain = emitted([scalar("a", 1.0, 1), episode(2, 3.0, 4)])
    quoted = emitted([scalar("a", 1.0, 1), scalar("a,b", 2.0, 3)])      # the last needs csv.writer's quoting
    out = csv.writer(sys.stdout)
    M.write_page(out, plain, None, 2)
    M.write_page(out, quoted, None, 2)
    M.write_page(out, None, [scalar("c", 5.0, 6, t=2.0)])
    sys.stdout.flush()
    got = capsysbinary.readouterr().out
    expected = by_csv_writer(orjson.loads(b"[" + plain + b"]") + orjson.loads(b"[" + quoted + b"]")
                             + [scalar("c", 5.0, 6, t=2.0)])
    assert rows(got) == rows(expected)
    assert b'"a,b",3,2.0' in got
