"""The FastLane segment layout: the one definition both ends import.

A segment is a file in /dev/shm (tmpfs), one per run and stream, mapped by the
worker (writer, read-write) and by the app (reader, read-only). It holds a
fixed header followed by a ring of ``capacity`` slots, each slot a 64-byte slot
header and one frame. docs/fastlane.md draws the layout and explains the
protocol; the offsets below are the normative copy.

All integers are native-endian (a segment never leaves its host) and every
integer field sits at an offset that is a multiple of its size, so each load
and store of a field is one aligned machine access.

Standard library only, plus xxhash for the frame checksum (imported lazily by
the two callers of ``checksum``).
"""
from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"MOSAICFL"
VERSION = 1

# Where segments live. tmpfs, so the frames never touch a disk. Overridable for
# systems without /dev/shm (e.g. macOS: point it at a tmpfs or ramdisk).
SHM_DIR = Path(os.environ.get("MOSAIC_SHM_DIR", "/dev/shm"))

# -- header: byte offsets ---------------------------------------------------
HEADER_SIZE = 128
OFF_MAGIC = 0            # 8 bytes, MAGIC; written last when a segment is created
OFF_VERSION = 8          # u32
OFF_HEADER_SIZE = 12     # u32, HEADER_SIZE
OFF_WIDTH = 16           # u32, pixels
OFF_HEIGHT = 20          # u32, pixels
OFF_CHANNELS = 24        # u32, bytes per pixel (3 for RGB8)
OFF_PIXEL_FORMAT = 28    # u32, one of PIXEL_*
OFF_CAPACITY = 32        # u32, number of slots
OFF_STATE = 36           # u32, one of STATE_*
OFF_FRAME_BYTES = 40     # u64, width * height * channels
OFF_SLOT_STRIDE = 48     # u64, bytes from one slot to the next (multiple of 64)
OFF_GENERATION = 56      # u64, 1 for the first segment of a stream, +1 per replacement
OFF_HEAD = 64            # u64, number of the last committed frame (0: none yet)
OFF_WRITER_PID = 72      # u32, pid of the process that created the segment
#                  76      u32 reserved
OFF_CREATED_NS = 80      # u64, time.time_ns() at creation
OFF_PUBLISHED_NS = 88    # u64, time.time_ns() of the last commit (0: none yet)
#                  96..127 reserved, zero

# -- slot: byte offsets relative to the slot's start ------------------------
SLOT_HEADER_SIZE = 64    # keeps every frame 64-byte (cache line) aligned
SLOT_OFF_SEQ = 0         # u64, seqlock word: 2n-1 while frame n is written, 2n once committed
SLOT_OFF_CHECKSUM = 8    # u64, checksum(frame bytes, n), see ``checksum``
#                    16..63 reserved, zero

PIXEL_RGB8 = 1           # height x width x 3 bytes, R G B, rows top to bottom

STATE_LIVE = 0           # the writer may still publish here
STATE_REPLACED = 1       # a newer generation replaced this segment: reopen by name
STATE_CLOSED = 2         # the writer closed it cleanly; its frames stay readable

ALIGN = 64

# Run ids become file names: keep them to characters that are safe there and
# that cannot forge another run's name (no '/', no NUL, bounded length).
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
PREFIX = "mosaic-"
TMP_MARK = ".tmp."


class LayoutError(ValueError):
    """A segment that is not (or not yet) a valid FastLane segment."""


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


def check_run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id):
        raise ValueError(f"run id {run_id!r} is not usable in a segment name "
                         "(1-128 letters, digits, '.', '_' or '-', starting with a letter or digit)")
    return run_id


def segment_name(run_id: str, stream: int = 0) -> str:
    """``mosaic-<run_id>-<stream>``: the stream is the last '-'-separated field.

    Because the stream is all digits and comes last, the name of run ``a`` is
    never a prefix-match of run ``a-1``'s names (see ``NAME_RE_FOR``).
    """
    check_run_id(run_id)
    if not isinstance(stream, int) or stream < 0:
        raise ValueError(f"stream must be a non-negative int, not {stream!r}")
    return f"{PREFIX}{run_id}-{stream}"


def segment_path(run_id: str, stream: int = 0) -> Path:
    return SHM_DIR / segment_name(run_id, stream)


def temp_path(run_id: str, stream: int, pid: int) -> Path:
    """Where a writer builds a new segment before renaming it into place."""
    return SHM_DIR / f"{segment_name(run_id, stream)}{TMP_MARK}{pid}"


def name_pattern(run_id: str) -> re.Pattern[str]:
    """Matches every file of one run: its segments and half-built temp files."""
    check_run_id(run_id)
    return re.compile(re.escape(PREFIX + run_id) + r"-(\d+)(" + re.escape(TMP_MARK) + r"\d+)?$")


@dataclass(frozen=True)
class Geometry:
    """The shape of a segment: everything needed to compute an offset."""
    width: int
    height: int
    channels: int
    capacity: int

    def __post_init__(self) -> None:
        if self.width <= 0 or self.height <= 0:
            raise LayoutError(f"bad frame size {self.width}x{self.height}")
        if self.channels != 3:
            raise LayoutError(f"only RGB8 (3 channels) is defined, not {self.channels}")
        if self.capacity < 2:
            # With one slot, the frame being written is the only frame: a
            # reader would have nothing committed to fall back to.
            raise LayoutError(f"capacity must be at least 2, not {self.capacity}")

    @property
    def frame_bytes(self) -> int:
        return self.width * self.height * self.channels

    @property
    def frame_shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, self.channels)

    @property
    def slot_stride(self) -> int:
        return _round_up(SLOT_HEADER_SIZE + self.frame_bytes, ALIGN)

    @property
    def size(self) -> int:
        return HEADER_SIZE + self.capacity * self.slot_stride

    def slot_offset(self, slot: int) -> int:
        return HEADER_SIZE + slot * self.slot_stride

    def slot_of(self, frame_number: int) -> int:
        """Frame n (counted from 1) lives in slot (n - 1) mod capacity."""
        return (frame_number - 1) % self.capacity


def checksum(data, frame_number: int) -> int:
    """xxh3-64 of the frame bytes, seeded with the frame number.

    The seed binds the bytes to their frame number: a reader that somehow
    pairs frame n's checksum with bytes of frame n+capacity (same slot, next
    lap) gets a mismatch even if both were intact. xxh3 hashes a 720 KB frame
    in ~15 us here, zlib.crc32 needs ~220 us (docs/fastlane.md).
    """
    import xxhash
    return xxhash.xxh3_64_intdigest(data, seed=frame_number)


class Fields:
    """Typed access to a mapped segment's integers, by byte offset.

    Each access is one aligned 4- or 8-byte load or store through a
    memoryview cast, so the hardware never splits it.
    """

    def __init__(self, buf: mmap.mmap):
        view = memoryview(buf)
        self._u64 = view.cast("Q")
        self._u32 = view.cast("I")
        view.release()

    def u64(self, offset: int) -> int:
        return self._u64[offset >> 3]

    def set_u64(self, offset: int, value: int) -> None:
        self._u64[offset >> 3] = value

    def u32(self, offset: int) -> int:
        return self._u32[offset >> 2]

    def set_u32(self, offset: int, value: int) -> None:
        self._u32[offset >> 2] = value

    def release(self) -> None:
        """Drop the views, so the mmap can be closed."""
        self._u64.release()
        self._u32.release()


def write_header(buf: mmap.mmap, geometry: Geometry, generation: int, head: int,
                 pid: int, created_ns: int) -> None:
    """Fill a fresh (zeroed) segment's header; the magic goes in last."""
    fields = Fields(buf)
    try:
        fields.set_u32(OFF_VERSION, VERSION)
        fields.set_u32(OFF_HEADER_SIZE, HEADER_SIZE)
        fields.set_u32(OFF_WIDTH, geometry.width)
        fields.set_u32(OFF_HEIGHT, geometry.height)
        fields.set_u32(OFF_CHANNELS, geometry.channels)
        fields.set_u32(OFF_PIXEL_FORMAT, PIXEL_RGB8)
        fields.set_u32(OFF_CAPACITY, geometry.capacity)
        fields.set_u32(OFF_STATE, STATE_LIVE)
        fields.set_u64(OFF_FRAME_BYTES, geometry.frame_bytes)
        fields.set_u64(OFF_SLOT_STRIDE, geometry.slot_stride)
        fields.set_u64(OFF_GENERATION, generation)
        fields.set_u64(OFF_HEAD, head)
        fields.set_u32(OFF_WRITER_PID, pid)
        fields.set_u64(OFF_CREATED_NS, created_ns)
        buf[OFF_MAGIC:OFF_MAGIC + len(MAGIC)] = MAGIC
    finally:
        fields.release()


@dataclass(frozen=True)
class Header:
    geometry: Geometry
    generation: int
    state: int
    head: int
    writer_pid: int
    created_ns: int
    published_ns: int


def read_header(buf: mmap.mmap, file_size: int) -> Header:
    """Parse and validate a mapped segment's header; LayoutError if it is not one."""
    if file_size < HEADER_SIZE:
        raise LayoutError(f"segment of {file_size} bytes is shorter than its header")
    if buf[OFF_MAGIC:OFF_MAGIC + len(MAGIC)] != MAGIC:
        raise LayoutError("bad magic (not a FastLane segment, or still being created)")
    fields = Fields(buf)
    try:
        version = fields.u32(OFF_VERSION)
        if version != VERSION:
            raise LayoutError(f"segment version {version}, this code reads {VERSION}")
        if fields.u32(OFF_HEADER_SIZE) != HEADER_SIZE:
            raise LayoutError("unexpected header size")
        if fields.u32(OFF_PIXEL_FORMAT) != PIXEL_RGB8:
            raise LayoutError(f"unknown pixel format {fields.u32(OFF_PIXEL_FORMAT)}")
        geometry = Geometry(width=fields.u32(OFF_WIDTH), height=fields.u32(OFF_HEIGHT),
                            channels=fields.u32(OFF_CHANNELS), capacity=fields.u32(OFF_CAPACITY))
        if (fields.u64(OFF_FRAME_BYTES) != geometry.frame_bytes
                or fields.u64(OFF_SLOT_STRIDE) != geometry.slot_stride):
            raise LayoutError("frame size fields disagree with width/height/channels")
        if file_size < geometry.size:
            raise LayoutError(f"segment of {file_size} bytes is shorter than its {geometry.size}-byte layout")
        return Header(geometry=geometry,
                      generation=fields.u64(OFF_GENERATION),
                      state=fields.u32(OFF_STATE),
                      head=fields.u64(OFF_HEAD),
                      writer_pid=fields.u32(OFF_WRITER_PID),
                      created_ns=fields.u64(OFF_CREATED_NS),
                      published_ns=fields.u64(OFF_PUBLISHED_NS))
    finally:
        fields.release()


def run_files(run_id: str) -> list[str]:
    """Names in SHM_DIR that belong to one run: segments and temp files."""
    pattern = name_pattern(run_id)
    try:
        names = os.listdir(SHM_DIR)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if pattern.match(name))


def list_streams(run_id: str) -> list[int]:
    """The streams of a run that have a segment now, for a reader to pick from."""
    pattern = name_pattern(run_id)
    streams = set()
    for name in run_files(run_id):
        match = pattern.match(name)
        if match and not match.group(2):
            streams.add(int(match.group(1)))
    return sorted(streams)


def cleanup(run_id: str) -> list[str]:
    """Unlink every segment of a run (all streams, and half-built temp files).

    The daemon calls this when a run ends, however it ended: a worker killed
    with SIGKILL cannot clean up after itself. Readers that still map a
    segment keep their frames until they close it. Returns the names removed.
    Standard library only, so the daemon can call it without importing numpy.
    """
    removed = []
    for name in run_files(run_id):
        try:
            os.unlink(SHM_DIR / name)
            removed.append(name)
        except FileNotFoundError:
            pass
    return removed
