"""daemon/mirror_process.py's pure pieces: the pages of a run's events file it reads, and the
points and checkpoints it hands each target (the points of `mosaic metrics`)."""
from __future__ import annotations

import json
import math

from daemon import mirror_process
from daemon.mirror_process import points_of, read_page


def line(**event) -> bytes:
    return (json.dumps({"t": 1.0, **event}) + "\n").encode()


def test_a_page_is_the_complete_lines_from_the_offset(tmp_path):
    path = tmp_path / "events.jsonl"
    first = line(type="scalar", tag="loss", value=0.5, step=1)
    second = line(type="scalar", tag="loss", value=0.25, step=2)
    path.write_bytes(first + second + b'{"t": 1.0, "type": "scal')   # the last line is still being written
    nxt, events = read_page(str(path), 0)
    assert nxt == len(first + second)
    assert [e["value"] for e in events] == [0.5, 0.25]
    nxt2, events = read_page(str(path), len(first))
    assert (nxt2, [e["step"] for e in events]) == (nxt, [2])
    assert read_page(str(path), nxt) == (nxt, [])        # nothing complete past it yet


def test_a_missing_events_file_is_an_empty_page(tmp_path):
    assert read_page(str(tmp_path / "events.jsonl"), 7) == (7, [])


def test_a_line_longer_than_a_page_is_stepped_over(tmp_path, monkeypatch):
    monkeypatch.setattr(mirror_process, "PAGE_BYTES", 128)
    path = tmp_path / "events.jsonl"
    long = line(type="scalar", tag="x" * 300, value=1, step=1)
    after = line(type="scalar", tag="loss", value=2, step=2)
    path.write_bytes(long + after)
    assert read_page(str(path), 0) == (len(long), [])
    nxt, events = read_page(str(path), len(long))
    assert (nxt, [e["tag"] for e in events]) == (len(long + after), ["loss"])
    path.write_bytes(long[:-1])     # the long line not ended yet: left for the next read
    assert read_page(str(path), 0) == (0, [])


def test_points_are_every_scalar_and_episode_tag_with_step_value_and_time():
    events = [{"type": "scalar", "tag": "loss", "value": 0.5, "step": 3, "t": 10.0},
              {"type": "episode", "return": 12.5, "length": 40, "step": 4, "t": 11.0,
               "agents": {"red": 7.5, "blue": 5}},
              {"type": "heartbeat", "step": 5, "t": 12.0}]
    points, checkpoints = points_of(events)
    assert points == [("loss", 3, 0.5, 10.0), ("episode/return", 4, 12.5, 11.0), ("episode/length", 4, 40.0, 11.0),
                      ("episode/return/red", 4, 7.5, 11.0), ("episode/return/blue", 4, 5.0, 11.0)]
    assert checkpoints == []


def test_a_non_finite_value_is_mirrored_and_a_stray_string_is_not():
    events = [{"type": "scalar", "tag": "a", "value": "nan", "step": 1, "t": 1.0},
              {"type": "scalar", "tag": "b", "value": "-inf", "step": 1, "t": 1.0},
              {"type": "scalar", "tag": "c", "value": "oops", "step": 1, "t": 1.0},
              {"type": "scalar", "tag": "d", "value": None, "step": 1, "t": 1.0}]
    points, _ = points_of(events)
    assert [p[0] for p in points] == ["a", "b"]
    assert math.isnan(points[0][2]) and points[1][2] == -math.inf


def test_checkpoints_are_announced_in_order_with_a_continued_runs_seam():
    events = [{"type": "checkpoint_saved", "path": "checkpoints/100.pt", "step": 100, "t": 1.0},
              {"type": "run_stopped", "checkpoint": "checkpoints/150.pt", "step": 150, "t": 2.0},
              {"type": "restarted", "checkpoint": "checkpoints/150.pt", "step": 150, "restarts": 1, "t": 3.0},
              {"type": "run_stopped", "checkpoint": "", "step": 160, "t": 4.0}]     # no checkpoint: nothing
    _, checkpoints = points_of(events)
    assert checkpoints == [{"path": "checkpoints/100.pt", "step": 100}, {"path": "checkpoints/150.pt", "step": 150},
                           {"restarted": 150}]
