"""The app's end of FastLane: read verified frames from a run's segment.

    reader = FrameReader(run_id, stream=0)
    got = reader.latest()          # (frame_number, HxWx3 uint8, read-only) or None
    history = reader.frames_in_ring()   # oldest first, for pause / step back

A frame is returned only after its slot's sequence number read the same even
value before and after the copy AND the checksum of the private copy matches
the one the writer stored for that frame number; docs/fastlane.md explains why
that rejects every torn frame on weakly ordered CPUs too.

The reader maps the segment read-only, so the app cannot damage a ring. It
never raises because the writer is missing, gone or replaced: it attaches
when a segment appears, follows a new generation, and keeps showing the last
frames it has when the segment disappears.
"""
from __future__ import annotations

import mmap
import os
import time

import numpy as np

from workers.fastlane import layout
from workers.fastlane.layout import Fields, Header

# How many times latest() re-reads head when a frame was overwritten while it
# was being copied (the writer lapped the reader) before settling for the
# last accepted frame.
RETRIES = 3


class _Mapping:
    """One mapped segment (one generation), read-only."""

    def __init__(self, buf: mmap.mmap, header: Header, ident: tuple[int, int]):
        self.buf = buf
        self.header = header
        self.geometry = header.geometry
        self.ident = ident                  # (st_dev, st_ino), to notice a replaced name
        self.fields = Fields(buf)
        data = np.frombuffer(buf, dtype=np.uint8)
        g = self.geometry
        self.slots = []                     # (offset, flat frame view)
        for slot in range(g.capacity):
            start = g.slot_offset(slot) + layout.SLOT_HEADER_SIZE
            self.slots.append((g.slot_offset(slot), data[start:start + g.frame_bytes]))

    def close(self) -> None:
        self.slots = []
        self.fields.release()
        self.buf.close()


def _open(path) -> _Mapping | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, PermissionError):
        return None
    try:
        stat = os.fstat(fd)
        if stat.st_size < layout.HEADER_SIZE:
            return None
        buf = mmap.mmap(fd, stat.st_size, mmap.MAP_SHARED, mmap.PROT_READ)
    finally:
        os.close(fd)  # the mapping keeps the segment alive, even once unlinked
    try:
        header = layout.read_header(buf, stat.st_size)
    except layout.LayoutError:
        buf.close()
        return None
    return _Mapping(buf, header, (stat.st_dev, stat.st_ino))


class FrameReader:
    """Reads one run and stream. Not thread-safe: use it from one thread."""

    def __init__(self, run_id: str, stream: int = 0, recheck_interval: float = 0.25,
                 clock=time.monotonic):
        self.run_id = layout.check_run_id(run_id)
        self.stream = stream
        self.path = layout.segment_path(run_id, stream)
        self.recheck_interval = recheck_interval
        self._clock = clock
        self._map: _Mapping | None = None
        self._last: tuple[int, np.ndarray] | None = None
        self._last_key: tuple[int, int] | None = None   # (generation, frame number)
        self._failed_key: tuple[int, int] | None = None
        self._failed_at = 0.0
        self._checked_at = -float("inf")
        self.gone = False                   # the segment's name no longer exists
        # accepted: frames returned; torn: sequence number odd or changed
        # during the copy; checksum: sequence fine but bytes do not match.
        self.stats = {"accepted": 0, "torn": 0, "checksum": 0}

    # -- attaching and following ----------------------------------------------
    @property
    def attached(self) -> bool:
        return self._map is not None

    @property
    def generation(self) -> int:
        return self._map.header.generation if self._map else 0

    @property
    def shape(self) -> tuple[int, int, int] | None:
        return self._map.geometry.frame_shape if self._map else None

    @property
    def capacity(self) -> int:
        return self._map.geometry.capacity if self._map else 0

    @property
    def state(self) -> int | None:
        return self._map.fields.u32(layout.OFF_STATE) if self._map else None

    @property
    def writer_pid(self) -> int | None:
        return self._map.header.writer_pid if self._map else None

    @property
    def head(self) -> int:
        return self._map.fields.u64(layout.OFF_HEAD) if self._map else 0

    @property
    def published_ns(self) -> int:
        """Wall-clock time of the last commit (0: none), to tell a stalled writer."""
        return self._map.fields.u64(layout.OFF_PUBLISHED_NS) if self._map else 0

    def _follow(self) -> None:
        """Attach, or move to a newer generation, when there is reason to look.

        Looking at the name is a syscall, so it happens only when not attached
        (a failed stat costs about a microsecond), when the writer marked our segment REPLACED, or every
        ``recheck_interval`` seconds (a replacement whose mark we missed, the
        segment unlinked by cleanup, a restarted worker).
        """
        now = self._clock()
        if self._map is not None:
            replaced = self._map.fields.u32(layout.OFF_STATE) == layout.STATE_REPLACED
            if not replaced and now - self._checked_at < self.recheck_interval:
                return
        self._checked_at = now
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            self.gone = True
            return  # keep the old mapping: its frames are still worth showing
        self.gone = False
        if self._map is not None and (stat.st_dev, stat.st_ino) == self._map.ident:
            return
        fresh = _open(self.path)
        if fresh is None:
            return
        if self._map is not None:
            self._map.close()
        self._map = fresh
        self._failed_key = None

    def attach(self) -> bool:
        """Attach (or follow a new generation) now, if there is reason to look; whether attached."""
        self._follow()
        return self._map is not None

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> "FrameReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading ------------------------------------------------------------------
    def _read(self, n: int) -> np.ndarray | None:
        """Frame n if its slot holds it intact, as a private read-only copy."""
        m = self._map
        geometry = m.geometry
        offset, flat = m.slots[geometry.slot_of(n)]
        fields = m.fields
        seq_before = fields.u64(offset + layout.SLOT_OFF_SEQ)
        if seq_before != 2 * n:
            # Odd: being written (or its writer died mid-write). Other even
            # values: the slot already holds a later lap (or never held n).
            if seq_before & 1 or seq_before > 2 * n:
                self.stats["torn"] += 1
            return None
        copy = np.empty(geometry.frame_shape, dtype=np.uint8)
        np.copyto(copy.reshape(-1), flat)
        stored = fields.u64(offset + layout.SLOT_OFF_CHECKSUM)
        seq_after = fields.u64(offset + layout.SLOT_OFF_SEQ)
        if seq_after != seq_before:
            self.stats["torn"] += 1
            return None
        # The decisive check, on the copy we return: without memory barriers
        # the loads above may be reordered, the checksum may not.
        if layout.checksum(copy, n) != stored:
            self.stats["checksum"] += 1
            return None
        copy.flags.writeable = False
        return copy

    def read(self, n: int) -> np.ndarray | None:
        """Frame number n of the current generation, if still in the ring and intact."""
        self._follow()
        if self._map is None or n <= 0:
            return None
        head = self.head
        if n > head or n <= head - self._map.geometry.capacity:
            return None
        return self._read(n)

    def latest(self) -> tuple[int, np.ndarray] | None:
        """The newest intact frame: (frame number, frame), or None if there is none yet.

        Returns the previous result (the same objects) when nothing newer can
        be had, so polling faster than the writer publishes costs two loads.
        """
        self._follow()
        m = self._map
        if m is None:
            return self._last
        generation = m.header.generation
        head = m.fields.u64(layout.OFF_HEAD)
        if head == 0 or (generation, head) == self._last_key:
            return self._last
        if (generation, head) == self._failed_key and \
                self._clock() - self._failed_at < self.recheck_interval:
            return self._last
        for _ in range(RETRIES):
            frame = self._read(head)
            if frame is not None:
                return self._accept(generation, head, frame)
            newer = m.fields.u64(layout.OFF_HEAD)
            if newer == head:
                break
            head = newer
        # head did not move, yet its frame failed: its bytes changed after the
        # commit, or (weakly ordered CPU) the commit is not visible here yet,
        # or a new generation has no frame so far. Retry it only after
        # recheck_interval; meanwhile the newest older intact frame that is
        # newer than what we have is the best answer.
        self._failed_key, self._failed_at = (generation, head), self._clock()
        floor = self._last_key[1] if self._last_key and self._last_key[0] == generation else 0
        for n in range(head - 1, max(floor, head - m.geometry.capacity), -1):
            frame = self._read(n)
            if frame is not None:
                return self._accept(generation, n, frame)
        return self._last

    def _accept(self, generation: int, n: int, frame: np.ndarray) -> tuple[int, np.ndarray]:
        self.stats["accepted"] += 1
        self._last = (n, frame)
        self._last_key = (generation, n)
        return self._last

    def frames_in_ring(self) -> list[tuple[int, np.ndarray]]:
        """Every intact frame still in the ring, oldest first (frames being
        overwritten meanwhile are skipped). Copies: hold them while paused."""
        self._follow()
        m = self._map
        if m is None:
            return []
        head = m.fields.u64(layout.OFF_HEAD)
        frames = []
        for n in range(max(1, head - m.geometry.capacity + 1), head + 1):
            frame = self._read(n)
            if frame is not None:
                frames.append((n, frame))
        return frames
