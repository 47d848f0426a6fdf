"""The worker's end of FastLane: publish rendered frames into the run's segment.

    writer = FrameWriter(run_id, stream=0, max_dim=400, max_fps=15)
    if writer.due():                     # ask before paying for env.render()
        writer.publish(env.render())
    ...
    writer.close()                       # the daemon unlinks with cleanup(run_id)

One writer per (run, stream). The protocol a publish follows, and why a
reader can trust what it accepts on any CPU, is in docs/fastlane.md.
"""
from __future__ import annotations

import math
import mmap
import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from workers.fastlane import layout
from workers.fastlane.layout import Fields, Geometry
from workers.fastlane.layout import cleanup as cleanup  # re-exported: writers and tests use it here

DEFAULT_CAPACITY = 32
# A ring never grows past this, whatever capacity was asked for: 32 slots of a
# 600x400 RGB frame are 23 MB of tmpfs, a 4K grid would be 800 MB.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class FrameWriter:
    """Publishes frames of one run and stream; creates the segment on the first frame.

    ``max_dim`` downscales frames whose larger side exceeds it (area average);
    ``max_fps`` drops frames that come sooner than the limit allows, so a
    training loop can render only when ``due()``.
    """

    def __init__(self, run_id: str, stream: int = 0, capacity: int = DEFAULT_CAPACITY,
                 max_dim: int | None = None, max_fps: float | None = None,
                 max_bytes: int = DEFAULT_MAX_BYTES, clock=time.monotonic):
        self.run_id = layout.check_run_id(run_id)
        self.stream = stream
        self.path: Path = layout.segment_path(run_id, stream)
        if capacity < 2:
            raise ValueError("capacity must be at least 2")
        self.capacity = capacity
        self.max_dim = max_dim
        self.max_bytes = max_bytes
        self._interval = 1.0 / max_fps if max_fps else 0.0
        self._clock = clock
        self._next_due = -math.inf
        self.frame_number = 0        # the last committed frame (continues across generations)
        self.generation = 0
        self.dropped = 0             # frames refused by the fps limiter
        self._closed = False
        self._geometry: Geometry | None = None
        self._fd: int | None = None
        self._buf: mmap.mmap | None = None
        self._fields: Fields | None = None
        self._slots: list[tuple[int, np.ndarray, np.ndarray]] = []  # (offset, HxWx3 view, flat view)

    # -- rate limiting ----------------------------------------------------
    def due(self, now: float | None = None) -> bool:
        """Would ``publish`` accept a frame now? Cheap: call it before rendering."""
        if not self._interval:
            return True
        now = self._clock() if now is None else now
        # A quarter interval of slack: a producer running at exactly the limit,
        # with jitter, must not lose every other frame.
        return now >= self._next_due - self._interval / 4

    def _consume_slot(self, now: float) -> None:
        # Deadlines advance by whole intervals, so the long-run rate never
        # exceeds max_fps; a producer that fell behind restarts from now
        # instead of bursting to catch up.
        self._next_due = max(self._next_due + self._interval, now + self._interval * 3 / 4)

    # -- publishing ---------------------------------------------------------
    def publish(self, frame, now: float | None = None) -> int | None:
        """Publish one frame (HxWx3 uint8; HxW and HxWx4 are converted).

        Returns the frame's number, or None when the fps limiter dropped it.
        A frame of a new size starts a new segment generation.
        """
        if self._closed:
            raise ValueError("publish on a closed FrameWriter")
        if self._interval:
            now = self._clock() if now is None else now
            if not self.due(now):
                self.dropped += 1
                return None
            self._consume_slot(now)
        pixels = self._fit(as_rgb8(frame))
        height, width, _ = pixels.shape
        geometry = self._geometry
        if geometry is None or geometry.width != width or geometry.height != height:
            self._new_generation(width, height)
            geometry = self._geometry
        n = self.frame_number + 1
        offset, view, flat = self._slots[geometry.slot_of(n)]
        fields = self._fields
        # The seqlock: odd while the bytes are in flux, even once committed.
        fields.set_u64(offset + layout.SLOT_OFF_SEQ, 2 * n - 1)
        np.copyto(view, pixels)
        fields.set_u64(offset + layout.SLOT_OFF_CHECKSUM, layout.checksum(flat, n))
        fields.set_u64(offset + layout.SLOT_OFF_SEQ, 2 * n)
        fields.set_u64(layout.OFF_HEAD, n)
        fields.set_u64(layout.OFF_PUBLISHED_NS, time.time_ns())
        self.frame_number = n
        return n

    def _fit(self, pixels: np.ndarray) -> np.ndarray:
        return downscale(pixels, self.max_dim)

    # -- segments -------------------------------------------------------------
    def _new_generation(self, width: int, height: int) -> None:
        """Build a segment for the new size, rename it into place, retire the old one.

        The new file is complete (magic written last) before the rename makes
        it visible under the run's name, so a reader never opens half a
        segment. The old one is marked REPLACED after the rename, so a reader
        that sees the mark and reopens the name finds the new one.
        """
        slot_bytes = Geometry(width, height, 3, 2).slot_stride
        capacity = max(2, min(self.capacity, self.max_bytes // slot_bytes))
        geometry = Geometry(width, height, 3, capacity)

        previous = self._take_over_previous()
        generation = self.generation + 1
        if previous is not None:
            prev_buf, prev_header = previous
            generation = max(generation, prev_header.generation + 1)
            self.frame_number = max(self.frame_number, prev_header.head)

        pid = os.getpid()
        tmp = layout.temp_path(self.run_id, self.stream, pid)
        try:
            os.unlink(tmp)  # left over by a killed process that had our pid
        except FileNotFoundError:
            pass
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            os.ftruncate(fd, geometry.size)  # tmpfs: sparse, pages come on first touch
            buf = mmap.mmap(fd, geometry.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            layout.write_header(buf, geometry, generation=generation, head=self.frame_number,
                                pid=pid, created_ns=time.time_ns())
            os.rename(tmp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise

        if previous is not None:
            _mark_and_close(previous[0], layout.STATE_REPLACED)
        self._release(layout.STATE_REPLACED)
        self._fd, self._buf, self._geometry = fd, buf, geometry
        self._fields = Fields(buf)
        self.generation = generation
        data = np.frombuffer(buf, dtype=np.uint8)
        self._slots = []
        for slot in range(capacity):
            start = geometry.slot_offset(slot) + layout.SLOT_HEADER_SIZE
            flat = data[start:start + geometry.frame_bytes]
            self._slots.append((geometry.slot_offset(slot), flat.reshape(geometry.frame_shape), flat))

    def _take_over_previous(self):
        """Open the segment another process left under our name (a restarted
        worker), to continue its generation and frame numbering."""
        if self._buf is not None:
            return None  # ours: retired by _release
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            if size < layout.HEADER_SIZE:
                return None
            buf = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        try:
            return buf, layout.read_header(buf, size)
        except layout.LayoutError:
            buf.close()
            return None

    def _release(self, state: int | None) -> None:
        """Unmap our segment, first setting its state for readers."""
        if self._buf is None:
            return
        self._slots = []
        if state is not None:
            self._fields.set_u32(layout.OFF_STATE, state)
        self._fields.release()
        self._fields = None
        self._buf.close()
        self._buf = None
        os.close(self._fd)
        self._fd = None

    def close(self, unlink: bool = False) -> None:
        """Mark the segment CLOSED (readers keep its frames) and unmap it.

        ``unlink=True`` also removes it, but only if the name still refers to
        our segment and not to a newer writer's.
        """
        if self._buf is not None and unlink:
            ours = os.fstat(self._fd)
            try:
                named = os.stat(self.path)
                if (named.st_dev, named.st_ino) == (ours.st_dev, ours.st_ino):
                    os.unlink(self.path)
            except FileNotFoundError:
                pass
        self._release(layout.STATE_CLOSED)
        self._geometry = None
        self._closed = True

    def unlink(self) -> None:
        self.close(unlink=True)

    def __enter__(self) -> "FrameWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _mark_and_close(buf: mmap.mmap, state: int) -> None:
    fields = Fields(buf)
    fields.set_u32(layout.OFF_STATE, state)
    fields.release()
    buf.close()


def downscale(pixels: np.ndarray, max_dim: int | None) -> np.ndarray:
    """Shrink a frame so its larger side is at most max_dim (no-op if it is already)."""
    if not max_dim:
        return pixels
    height, width, _ = pixels.shape
    largest = max(height, width)
    if largest <= max_dim:
        return pixels
    scale = max_dim / largest
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    from PIL import Image
    # BOX is an exact area average: thin lines (a CartPole pole) fade
    # instead of flickering in and out as nearest-neighbour would.
    return np.asarray(Image.fromarray(pixels).resize(size, Image.BOX))


def as_rgb8(frame) -> np.ndarray:
    """HxWx3 uint8 from what render() returns: HxW (gray), HxWx1, HxWx3, HxWx4 (alpha dropped)."""
    pixels = np.asarray(frame)
    if pixels.dtype != np.uint8:
        raise TypeError(f"frames must be uint8, not {pixels.dtype}")
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.ndim != 3 or pixels.shape[0] == 0 or pixels.shape[1] == 0:
        raise ValueError(f"a frame must be HxWxC, not shape {pixels.shape}")
    channels = pixels.shape[2]
    if channels == 3:
        return pixels
    if channels == 4:
        return pixels[:, :, :3]
    if channels == 1:
        return np.repeat(pixels, 3, axis=2)
    raise ValueError(f"a frame must have 1, 3 or 4 channels, not {channels}")


def tile(frames: Sequence, n: int | None = None, gap: int = 2) -> np.ndarray:
    """The first ``n`` frames of a vector env in a near-square grid (row-major).

    Frames of different sizes are padded to the largest; empty cells and the
    ``gap`` pixels between cells are black. One copy, no per-pixel loop.
    """
    frames = [as_rgb8(f) for f in list(frames)[: n if n else None]]
    if not frames:
        raise ValueError("tile needs at least one frame")
    count = len(frames)
    cols = math.ceil(math.sqrt(count))
    rows = math.ceil(count / cols)
    height = max(f.shape[0] for f in frames)
    width = max(f.shape[1] for f in frames)
    cell_h, cell_w = height + gap, width + gap
    grid = np.zeros((rows * cell_h - gap, cols * cell_w - gap, 3), dtype=np.uint8)
    for index, frame in enumerate(frames):
        row, col = divmod(index, cols)
        top, left = row * cell_h, col * cell_w
        grid[top:top + frame.shape[0], left:left + frame.shape[1]] = frame
    return grid
