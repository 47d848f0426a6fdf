"""FastLane ring: torn-frame detection, wrap-around, resize, cleanup after SIGKILL.

Segments live in the real /dev/shm (the SIGKILL test is about what is left
there), under run ids unique to each test.
"""
from __future__ import annotations

import mmap
import os
import signal
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from workers.fastlane import layout
from workers.fastlane.demo import Patterns
from workers.fastlane.reader import FrameReader
from workers.fastlane.writer import FrameWriter, as_rgb8, cleanup, tile

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def run_id():
    rid = f"test-{uuid.uuid4().hex[:12]}"
    yield rid
    cleanup(rid)


def frames(count, height=40, width=60, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(count)]


class RawSegment:
    """Direct read-write access to a segment, to play a broken writer."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDWR)
        self.buf = mmap.mmap(fd, os.fstat(fd).st_size)
        os.close(fd)
        self.header = layout.read_header(self.buf, len(self.buf))
        self.geometry = self.header.geometry

    def slot_offset(self, n):
        return self.geometry.slot_offset(self.geometry.slot_of(n))

    def get_u64(self, offset):
        return struct.unpack_from("=Q", self.buf, offset)[0]

    def set_u64(self, offset, value):
        struct.pack_into("=Q", self.buf, offset, value)

    def seq_of(self, n):
        return self.get_u64(self.slot_offset(n) + layout.SLOT_OFF_SEQ)

    def set_seq(self, n, value):
        self.set_u64(self.slot_offset(n) + layout.SLOT_OFF_SEQ, value)

    def data_offset(self, n):
        return self.slot_offset(n) + layout.SLOT_HEADER_SIZE

    def close(self):
        self.buf.close()


# -- layout --------------------------------------------------------------------
def test_header_fields_sit_at_the_documented_offsets(run_id):
    writer = FrameWriter(run_id, stream=3, capacity=4)
    writer.publish(frames(1, 40, 60)[0])
    path = Path(f"/dev/shm/mosaic-{run_id}-3")
    assert path == writer.path and path.exists()
    raw = path.read_bytes()
    assert raw[0:8] == b"MOSAICFL"
    version, header_size, width, height, channels, fmt, capacity, state = struct.unpack_from("=8I", raw, 8)
    assert (version, header_size, width, height, channels, fmt, capacity, state) == (1, 128, 60, 40, 3, 1, 4, 0)
    frame_bytes, stride, generation, head = struct.unpack_from("=4Q", raw, 40)
    assert frame_bytes == 60 * 40 * 3 and stride % 64 == 0 and stride >= 64 + frame_bytes
    assert (generation, head) == (1, 1)
    assert struct.unpack_from("=I", raw, 72)[0] == os.getpid()
    # frame 1 is in slot 0: seq 2 (committed), checksum of its bytes seeded with 1
    seq, checksum = struct.unpack_from("=2Q", raw, 128)
    assert seq == 2
    assert checksum == layout.checksum(raw[128 + 64:128 + 64 + frame_bytes], 1)
    assert len(raw) == 128 + 4 * stride
    writer.close()


def test_run_ids_that_could_escape_or_collide_are_refused():
    for bad in ("../etc", "a/b", "", "-x", "x" * 200, "a\0b"):
        with pytest.raises(ValueError):
            layout.segment_name(bad)
    # run "a" never matches the files of run "a-1"
    pattern = layout.name_pattern("a")
    assert pattern.match("mosaic-a-0") and pattern.match("mosaic-a-12.tmp.345")
    assert not pattern.match("mosaic-a-1-0") and not pattern.match("mosaic-ab-0")


# -- reading and writing -----------------------------------------------------------
def test_reader_gets_the_published_frame_exactly(run_id):
    reader = FrameReader(run_id)
    assert reader.latest() is None                      # no writer yet
    writer = FrameWriter(run_id, capacity=4)
    first, second = frames(2)
    assert writer.publish(first) == 1
    n, frame = reader.latest()
    assert n == 1 and np.array_equal(frame, first)
    assert not frame.flags.writeable                    # a private, read-only copy
    writer.publish(second)
    n, frame = reader.latest()
    assert n == 2 and np.array_equal(frame, second)
    assert reader.latest()[1] is frame                  # nothing new: same object, no copy
    writer.close()
    reader.close()


def test_wrap_around_keeps_the_last_capacity_frames(run_id):
    writer = FrameWriter(run_id, capacity=4)
    sent = frames(10)
    for f in sent:
        writer.publish(f)
    reader = FrameReader(run_id)
    ring = reader.frames_in_ring()
    assert [n for n, _ in ring] == [7, 8, 9, 10]
    for n, frame in ring:
        assert np.array_equal(frame, sent[n - 1])
    assert reader.read(6) is None and reader.read(11) is None
    assert np.array_equal(reader.read(7), sent[6])
    # many laps later the numbering still maps to the right slots
    for i in range(1000):
        writer.publish(sent[i % 10])
    n, frame = reader.latest()
    assert n == 1010 and np.array_equal(frame, sent[999 % 10])
    writer.close()


def test_a_writer_dead_mid_write_leaves_an_odd_slot_that_is_never_accepted(run_id):
    writer = FrameWriter(run_id, capacity=4)
    sent = frames(5)
    for f in sent:
        writer.publish(f)
    raw = RawSegment(writer.path)
    # frame 6 was being written into frame 2's slot when the writer died:
    # seq odd, half the bytes new, head still 5
    raw.set_seq(6, 2 * 6 - 1)
    start = raw.data_offset(6)
    raw.buf[start:start + 100] = b"\xff" * 100
    reader = FrameReader(run_id)
    n, frame = reader.latest()
    assert n == 5 and np.array_equal(frame, sent[4])
    assert [n for n, _ in reader.frames_in_ring()] == [3, 4, 5]
    assert reader.stats["torn"] >= 1

    # the head frame's own slot odd (killed while re-committing): fall back to 4
    raw.set_seq(5, 2 * 5 - 1)
    fresh = FrameReader(run_id)
    n, frame = fresh.latest()
    assert n == 4 and np.array_equal(frame, sent[3])
    assert fresh.read(5) is None
    raw.close()
    writer.close()


def test_bytes_changed_after_the_commit_fail_the_checksum(run_id):
    writer = FrameWriter(run_id, capacity=4)
    sent = frames(5)
    for f in sent:
        writer.publish(f)
    raw = RawSegment(writer.path)
    offset = raw.data_offset(5) + 1234
    original = raw.buf[offset]
    raw.buf[offset] = original ^ 0x01                     # one bit, sequence number untouched
    reader = FrameReader(run_id)
    n, frame = reader.latest()
    assert n == 4 and np.array_equal(frame, sent[3])
    assert reader.read(5) is None
    assert reader.stats["checksum"] >= 1
    raw.buf[offset] = original                             # repaired: accepted again
    assert np.array_equal(reader.read(5), sent[4])
    raw.close()
    writer.close()


def test_the_checksum_binds_bytes_to_their_frame_number(run_id):
    writer = FrameWriter(run_id, capacity=4)
    for f in frames(5):
        writer.publish(f)
    raw = RawSegment(writer.path)
    # Pretend slot 0 (frame 5, intact bytes and checksum) holds frame 9: a
    # reader must not accept frame 5's bytes under number 9.
    raw.set_seq(5, 2 * 9)
    raw.set_u64(layout.OFF_HEAD, 9)
    reader = FrameReader(run_id)
    assert reader.read(9) is None
    assert reader.stats["checksum"] == 1
    got = reader.latest()
    assert got is None or got[0] != 9
    raw.close()
    writer.close()


def test_a_frame_size_change_starts_a_generation_that_readers_follow(run_id):
    writer = FrameWriter(run_id, capacity=4)
    reader = FrameReader(run_id)
    big, small = frames(1, 40, 60)[0], frames(1, 20, 30, seed=1)[0]
    writer.publish(big)
    assert reader.latest()[0] == 1 and reader.generation == 1
    old = RawSegment(writer.path)
    writer.publish(small)
    # the old segment is marked, the name points to the new one
    assert struct.unpack_from("=I", old.buf, layout.OFF_STATE)[0] == layout.STATE_REPLACED
    n, frame = reader.latest()
    assert n == 2 and frame.shape == (20, 30, 3) and np.array_equal(frame, small)
    assert reader.generation == 2 and reader.shape == (20, 30, 3)
    assert layout.run_files(run_id) == [f"mosaic-{run_id}-0"]   # no temp file left
    old.close()
    writer.close()


def test_a_restarted_writer_takes_over_and_keeps_counting(run_id):
    first = FrameWriter(run_id, capacity=4)
    for f in frames(3):
        first.publish(f)
    first._release(None)        # gone without closing, as after a crash
    reader = FrameReader(run_id)
    assert reader.latest()[0] == 3
    second = FrameWriter(run_id, capacity=4)
    f = frames(1, seed=9)[0]
    assert second.publish(f) == 4
    assert second.generation == 2
    n, frame = reader.latest()
    assert n == 4 and np.array_equal(frame, f) and reader.generation == 2
    second.close()


def test_reader_survives_the_segment_disappearing(run_id):
    writer = FrameWriter(run_id, capacity=4)
    sent = frames(3)
    for f in sent:
        writer.publish(f)
    reader = FrameReader(run_id, recheck_interval=0.0)
    assert reader.latest()[0] == 3
    writer.close()
    assert reader.state == layout.STATE_CLOSED
    cleanup(run_id)
    n, frame = reader.latest()                              # the last frame is still shown
    assert n == 3 and np.array_equal(frame, sent[2])
    assert reader.gone
    assert [n for n, _ in reader.frames_in_ring()] == [1, 2, 3]
    reader.close()


def test_close_unlink_leaves_a_newer_writers_segment_alone(run_id):
    old = FrameWriter(run_id, capacity=4)
    old.publish(frames(1)[0])
    newer = FrameWriter(run_id, capacity=4)
    newer.publish(frames(1)[0])                              # replaces old's segment
    old.close(unlink=True)
    assert newer.path.exists()
    newer.close(unlink=True)
    assert not newer.path.exists()


# -- writer options --------------------------------------------------------------------
def test_fps_limit_drops_early_frames_but_not_a_producer_at_the_limit(run_id):
    now = [0.0]
    writer = FrameWriter(run_id, capacity=4, max_fps=10, clock=lambda: now[0])
    frame = frames(1)[0]
    assert writer.publish(frame) == 1
    now[0] = 0.05
    assert not writer.due() and writer.publish(frame) is None
    # a producer at exactly 10 fps with +-10 ms of jitter loses nothing
    rng = np.random.default_rng(0)
    accepted = sum(writer.publish(frame, now=0.1 * k + rng.uniform(-0.01, 0.01)) is not None
                   for k in range(1, 101))
    assert accepted == 100
    # a producer at 100 fps for 10 s gets ~10 fps, never more
    start = writer.frame_number
    for k in range(1, 1001):
        writer.publish(frame, now=11.0 + 0.01 * k)
    assert 95 <= writer.frame_number - start <= 101
    writer.close()


def test_max_dim_downscales_by_area_average(run_id):
    writer = FrameWriter(run_id, capacity=4, max_dim=30)
    # 2x2 blocks of one colour each: halving averages each block to its colour
    blocks = np.random.default_rng(3).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    frame = blocks.repeat(2, axis=0).repeat(2, axis=1)       # 40x60
    writer.publish(frame)
    n, got = FrameReader(run_id).latest()
    assert got.shape == (20, 30, 3) and np.array_equal(got, blocks)
    writer.close()


def test_frames_are_converted_to_rgb8():
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    assert np.array_equal(as_rgb8(gray)[:, :, 2], gray)
    rgba = np.zeros((3, 4, 4), dtype=np.uint8)
    assert as_rgb8(rgba).shape == (3, 4, 3)
    with pytest.raises(TypeError):
        as_rgb8(np.zeros((3, 4, 3), dtype=np.float32))
    with pytest.raises(ValueError):
        as_rgb8(np.zeros((3, 4, 2), dtype=np.uint8))


def test_tile_lays_out_the_first_n_envs_in_a_grid():
    envs = [np.full((10, 20, 3), i + 1, dtype=np.uint8) for i in range(6)]
    grid = tile(envs, 5, gap=2)
    assert grid.shape == (2 * 10 + 2, 3 * 20 + 2 * 2, 3)     # 3 columns, 2 rows
    for i in range(5):
        row, col = divmod(i, 3)
        cell = grid[row * 12:row * 12 + 10, col * 22:col * 22 + 20]
        assert (cell == i + 1).all()
    assert (grid[12:, 44:] == 0).all()                        # the empty sixth cell
    assert (grid[10:12] == 0).all()                           # the gap
    assert tile(envs[:1]).shape == (10, 20, 3)


# -- processes -------------------------------------------------------------------------
def _demo_writer(run_id, *args):
    proc = subprocess.Popen([sys.executable, "-m", "workers.fastlane.demo", run_id, *args],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("ready "), line
    return proc


def test_demo_writer_closes_its_segment_on_sigterm_and_attach_follows_it(run_id):
    reader = FrameReader(run_id, recheck_interval=0.0)
    assert not reader.attach()                      # nothing published yet
    proc = _demo_writer(run_id, "--fps", "200", "--size", "64x48", "--capacity", "4")
    try:
        assert reader.attach() and reader.state == layout.STATE_LIVE
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
        assert proc.returncode == 0 and out.startswith("done "), out
        # stopped between frames: the segment is marked CLOSED and its last frame is intact
        assert reader.state == layout.STATE_CLOSED
        assert reader.latest() is not None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.close()
        cleanup(run_id)


def test_cleanup_after_sigkill_leaves_nothing_in_dev_shm(run_id):
    proc = _demo_writer(run_id, "--fps", "200", "--size", "64x48", "--capacity", "8")
    # a second stream and a half-built temp file, as a killed writer may leave
    proc2 = _demo_writer(run_id, "--stream", "1", "--fps", "200", "--size", "32x24")
    Path(layout.temp_path(run_id, 2, 99999)).write_bytes(b"partial")
    neighbour = f"{run_id}-1"                                  # prefix-alike run: must survive
    other = FrameWriter(neighbour, capacity=2)
    other.publish(frames(1)[0])
    try:
        reader = FrameReader(run_id)
        deadline = time.monotonic() + 10
        while (reader.latest() or (0,))[0] < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.latest()[0] >= 5
        for p in (proc, proc2):
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        before = reader.latest()
        # the killed writer's segment is still there and still readable
        assert len(layout.run_files(run_id)) == 3
        assert reader.latest()[0] == before[0]
        removed = cleanup(run_id)
        assert sorted(removed) == sorted([f"mosaic-{run_id}-0", f"mosaic-{run_id}-1",
                                          f"mosaic-{run_id}-2.tmp.99999"])
        assert not [n for n in os.listdir("/dev/shm") if n.startswith(f"mosaic-{run_id}-")
                    and layout.name_pattern(run_id).match(n)]
        assert layout.run_files(run_id) == []
        assert other.path.exists()
        reader.close()
    finally:
        for p in (proc, proc2):
            if p.poll() is None:
                p.kill()
                p.wait()
        other.close()
        cleanup(neighbour)


def test_stress_a_reader_flat_out_accepts_no_torn_frame(run_id):
    """A writer process at full speed into a 2-slot ring, this process polling
    as fast as it can; every accepted frame is checked against the frame its
    number says it is (independently of the checksum)."""
    width, height = 600, 400          # CartPole's size: a copy is long enough to be overtaken
    proc = _demo_writer(run_id, "--fps", "0", "--seconds", "3", "--capacity", "2",
                        "--size", f"{width}x{height}")
    patterns = Patterns(width, height)
    reader = FrameReader(run_id, recheck_interval=0.05)
    accepted = torn_accepted = 0
    last = None
    deadline = time.monotonic() + 60
    try:
        # the writer marks its segment CLOSED when its 3 seconds are over
        while reader.state != layout.STATE_CLOSED and time.monotonic() < deadline:
            got = reader.latest()
            if got is not None and got is not last:
                last = got
                accepted += 1
                if not patterns.check(*got):
                    torn_accepted += 1
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    published = int(out.split()[1])
    assert published > 1000
    assert accepted > 0
    assert torn_accepted == 0, (torn_accepted, accepted, reader.stats)


def test_the_check_used_by_the_stress_test_does_catch_a_torn_frame():
    patterns = Patterns(50, 40)
    a = patterns.frame(10).copy()
    b = patterns.frame(12).copy()
    torn = a.copy()
    torn[20:] = b[20:]
    assert patterns.check(10, a)
    assert not patterns.check(10, torn)
    assert not patterns.check(11, a)
