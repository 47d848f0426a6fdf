"""A fast sixel encoder: numpy for the bands and run-length coding, Pillow for colours.

    data = encode(frame, box=(800, 480))     # bytes: DCS ... ST, fits the box
    seq = SixelSequence(box, size, fill=bg)  # a live stream: seq.encode(frame) per frame

Steps, none of them a per-pixel Python loop:

1. Fit the frame into the pixel box (aspect kept, its last 6-row sixel band
   inside the box). Downscaling averages areas, upscaling repeats pixels.
2. Palette: a frame with at most 256 colours (CartPole, Atari, grid worlds)
   keeps them exactly (``ColourTable``: one lookup per pixel in a table of
   every 24-bit colour); otherwise an octree palette is built from a
   subsample and every pixel is mapped to its nearest entry (Pillow, C speed).
3. Encode (``encode_bands``): for each band of 6 rows and each colour
   present in it, the 6-bit column masks are scattered into one matrix with 6
   vectorised passes; run-length coding, colour selections and line controls
   are then laid out in one output byte array by cumulative sums, and cut
   into one chunk per band (``assemble`` joins them behind the palette).

``SixelSequence`` keeps the chunks of the previous frame and encodes again
only the bands whose rows changed. textual-image's encoder needs ~25-100 ms
for a CartPole frame here; this one's figures are in bench/bench_fastlane.py.
"""
from __future__ import annotations

import numpy as np

_CHAR_OFFSET = 63          # sixel data byte = 63 + 6-bit column mask
_RLE_MIN = 4               # '!' count char beats repeating a char from 4 on
_NONE = 256                # "no pixel here": rows past the image in its last band
TRANSPARENT = _NONE        # an index that leaves the terminal's pixel as it is
_POW10 = np.array([1, 10, 100, 1000, 10000, 100000], dtype=np.int64)


def fit_pixels(width: int, height: int, box_w: int, box_h: int) -> tuple[int, int]:
    """Size to draw a width x height frame in a box_w x box_h pixel box, aspect kept.

    Sixel paints whole bands of 6 rows; the rows of a last, partial band are
    left unpainted, but they must still fit in the box (or the terminal may
    scroll), so the height is reduced when its last band would stick out.
    """
    scale = min(box_w / width, box_h / height)
    w = max(1, int(width * scale + 1e-9))
    h = max(1, int(height * scale + 1e-9))
    if -(-h // 6) * 6 > box_h and box_h >= 6:
        h = box_h // 6 * 6
        w = max(1, min(w, int(width * h / height + 1e-9)))
    return w, h


def quantize(frame: np.ndarray, max_colors: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(indices HxW, palette Nx3 uint8) for an HxWx3 uint8 frame: its own
    colours exactly when it has at most ``max_colors``, else an octree palette."""
    table = ColourTable(max_colors)
    indices = table.index(frame)
    if indices is not None:
        return indices, table.palette()
    return octree(frame, max_colors)


def octree(frame: np.ndarray, max_colors: int) -> tuple[np.ndarray, np.ndarray]:
    """An approximate palette for a frame of many colours, and the nearest entry of each pixel."""
    from PIL import Image
    # The palette comes from a subsample of at most ~40k pixels: building
    # it is then ~0.5 ms whatever the frame size; mapping uses every pixel.
    step = max(1, int(np.sqrt(frame.shape[0] * frame.shape[1] / 40000)))
    sample = Image.fromarray(np.ascontiguousarray(frame[::step, ::step, :3]))
    tree = sample.quantize(max_colors, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    colours = np.array(tree.getpalette()[: 3 * max_colors], dtype=np.uint8).reshape(-1, 3)
    palette_image = Image.new("P", (1, 1))
    # A palette of exactly these colours: Pillow maps each pixel to the
    # nearest of them (no padding entries that could win). Pillow's mapping
    # goes through a cache of 5-6-5 bit colour cells, so it is not exact
    # for close colours, which is why exact frames use ColourTable.
    palette_image.putpalette(colours.tobytes())
    image = Image.fromarray(np.ascontiguousarray(frame[:, :, :3]))
    return np.asarray(image.quantize(palette=palette_image, dither=Image.Dither.NONE)), colours


def packed_rgb(pixels: np.ndarray) -> np.ndarray:
    """HxW uint32 keys r | g << 8 | b << 16 of an HxWx3 uint8 image.

    Each key is one unaligned 4-byte load at a 3-byte stride with the top
    byte masked off: one pass, ~10x faster than combining three channels.
    """
    height, width = pixels.shape[:2]
    n = height * width
    flat = np.ascontiguousarray(pixels[:, :, :3]).reshape(-1)
    keys = np.empty(n, dtype=np.uint32)
    if n > 1:
        loads = np.ndarray((n - 1,), dtype="<u4", buffer=flat, strides=(3,))   # the last would read past the end
        np.bitwise_and(loads, 0xFFFFFF, out=keys[:-1])
    r, g, b = (int(v) for v in flat[-3:])
    keys[-1] = r | g << 8 | b << 16
    return keys.reshape(height, width)


class ColourTable:
    """Exact palette indices for images of at most ``limit`` colours.

    A table of 2^24 entries, one per RGB colour, holds each known colour's
    index + 1 (0: unknown). It spans 32 MB of address space, but the memory
    is the kernel's zero pages until written, and only the pages of the
    colours in use (at most 256 of 4 KB) ever are. Looking up a whole frame
    is one gather (~0.3 ms for 600x400) instead of Pillow's mapping, which is
    slower and merges close colours.
    """

    def __init__(self, limit: int = 256):
        self.limit = limit
        self.table = np.zeros(1 << 24, dtype=np.uint16)
        self.keys: list[int] = []               # known colours, in index order

    def __len__(self) -> int:
        return len(self.keys)

    def palette(self) -> np.ndarray:
        keys = np.array(self.keys, dtype=np.uint32)
        return np.stack([keys & 0xFF, keys >> 8 & 0xFF, keys >> 16], axis=-1).astype(np.uint8)

    def reset(self) -> None:
        self.table[self.keys] = 0
        self.keys = []

    def index(self, pixels: np.ndarray) -> np.ndarray | None:
        """Each pixel's index (HxW uint16), adding new colours to the table;
        None (and nothing added) when they do not all fit in ``limit``."""
        keys = packed_rgb(pixels)
        found = self.table.take(keys) if self.keys else None
        missing = keys.size if found is None else keys.size - np.count_nonzero(found)
        if missing:
            if missing > 4 * self.limit:
                # many unknown pixels (a first or a busy frame): Pillow counts
                # colours in C and gives up past the limit, where np.unique would sort them all
                from PIL import Image
                counted = Image.fromarray(np.ascontiguousarray(pixels[:, :, :3])).getcolors(self.limit)
                if counted is None:
                    return None
                new = [k for k in (r | g << 8 | b << 16 for _n, (r, g, b) in counted) if not self.table[k]]
            else:
                new = np.unique(keys if found is None else keys[found == 0]).tolist()
            if len(self.keys) + len(new) > self.limit:
                return None
            self.table[new] = np.arange(len(self.keys) + 1, len(self.keys) + len(new) + 1)
            self.keys.extend(new)
            found = self.table.take(keys)
        found -= 1
        return found


def shrink(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """The frame's RGB pixels at width x height (no larger than the frame),
    by area average; the frame itself when it has that size."""
    if frame.shape[:2] == (height, width):
        return frame[:, :, :3]
    from PIL import Image
    return np.asarray(Image.fromarray(np.ascontiguousarray(frame[:, :, :3])).resize((width, height), Image.BOX))


def _resize_indices(indices: np.ndarray, width: int, height: int) -> np.ndarray:
    """Nearest-neighbour upscale of an index image (colours stay palette entries)."""
    rows = (np.arange(height) * indices.shape[0]) // height
    cols = (np.arange(width) * indices.shape[1]) // width
    return indices.take(rows, axis=0).take(cols, axis=1)


def prepare(frame: np.ndarray, box: tuple[int, int] | None = None,
            max_colors: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(indices, palette) of the image ``encode`` draws: the frame fitted into
    ``box`` (w, h) pixels (None: its own size) and quantised to at most
    ``max_colors`` (the terminal's colour registers, see detect.py)."""
    height, width = frame.shape[:2]
    box_w, box_h = box if box else (width, height + 5)
    w, h = fit_pixels(width, height, box_w, box_h)
    if w * h <= width * height:
        # shrink first (area average), then quantize fewer pixels
        return quantize(shrink(frame, w, h), max_colors)
    # quantize the original pixels, then repeat indices: cheaper than
    # quantizing the enlarged image
    indices, palette = quantize(frame, max_colors)
    return _resize_indices(indices, w, h), palette


def encode(frame: np.ndarray, box: tuple[int, int] | None = None, max_colors: int = 256) -> bytes:
    """Sixel bytes of an HxWx3 uint8 frame fitted into ``box`` (w, h) pixels
    (None: the frame's own size), in at most ``max_colors`` colours."""
    return encode_indexed(*prepare(frame, box, max_colors))


class SixelSequence:
    """Sixel images of a stream of frames of one size, centred in one box.

        seq = SixelSequence((box_w, box_h), (frame_w, frame_h), max_colors=256, fill=(21, 24, 30))
        data = seq.encode(frame)       # the whole image, every time

    Consecutive frames of a live run differ in a few rows (CartPole: the
    pole's and the cart's, about 40%). Each frame is compared with the one
    before, row by row, and only the sixel bands holding changed rows are
    indexed and encoded again; the others' bytes are reused. The palette is
    kept from frame to frame so that reused bands keep their meaning: colours
    are appended as they appear, and a frame whose colours would overflow the
    terminal's registers starts over with a palette of its own, like a first
    frame. Frames with more colours than registers get an octree palette and
    are encoded in full each time.

    The box is padded with ``fill`` (palette entry 0), or left transparent
    when it is None. The result is always ``encode_indexed(self.grid[:box_h],
    self.palette)`` of the current state.
    """

    def __init__(self, box: tuple[int, int], size: tuple[int, int], max_colors: int = 256,
                 fill: tuple[int, int, int] | None = None):
        box_w, box_h = box
        width, height = size
        if width > box_w or height > box_h:
            raise ValueError(f"a {width}x{height} frame does not fit a {box_w}x{box_h} box")
        self.width, self.height = width, height
        self.box_w, self.box_h = box_w, box_h
        self.y0, self.x0 = (box_h - height) // 2, (box_w - width) // 2
        self.fill = fill
        self.offset = 0 if fill is None else 1          # palette entries before the frame's colours
        self.colours = ColourTable(max(1, min(256, max_colors) - self.offset))
        bands = -(-box_h // 6)
        self.grid = np.full((bands * 6, box_w), _NONE if fill is None else 0, dtype=np.uint16)
        self.grid[box_h:] = _NONE        # the last band's rows below the box
        self.chunks: list[bytes] = [b""] * bands
        self.band_colours: list[int] = [0] * bands
        self.palette = self._palette(np.zeros((0, 3), dtype=np.uint8))
        self.exact = False               # the palette holds the last frame's colours exactly
        self.previous: np.ndarray | None = None
        self.data = b""
        self.bands_encoded = 0           # by the last encode(), for tests and figures

    def _palette(self, colours: np.ndarray) -> np.ndarray:
        if self.fill is None:
            return colours
        return np.vstack([np.array([self.fill], dtype=np.uint8), colours])

    def encode(self, frame: np.ndarray) -> bytes:
        """The sixel image of the box with this frame (HxWx3 uint8, the size given)."""
        if frame.shape[:2] != (self.height, self.width):
            raise ValueError(f"frame is {frame.shape[1]}x{frame.shape[0]}, "
                             f"this sequence draws {self.width}x{self.height}")
        previous, self.previous = self.previous, frame
        if previous is None or not self.exact:
            return self._redraw(frame)
        changed = np.flatnonzero(_rows_differ(previous, frame))
        if len(changed) == 0:
            self.bands_encoded = 0
            return self.data
        # the changed rows, widened to whole bands of the box
        g0 = (self.y0 + int(changed[0])) // 6 * 6
        g1 = -(-(self.y0 + int(changed[-1]) + 1) // 6) * 6
        r0, r1 = max(0, g0 - self.y0), min(self.height, g1 - self.y0)
        known = len(self.colours)
        indices = self.colours.index(frame[r0:r1])
        if indices is None:
            return self._redraw(frame)
        if len(self.colours) != known:
            self.palette = self._palette(self.colours.palette())
        self._place(indices, r0)
        return self._encode_rows(g0, g1)

    def _redraw(self, frame: np.ndarray) -> bytes:
        """Every band again, with a palette of this frame's own."""
        self.colours.reset()
        indices = self.colours.index(frame)
        self.exact = indices is not None
        if self.exact:
            colours = self.colours.palette()
        else:
            indices, colours = octree(frame, self.colours.limit)
        self.palette = self._palette(colours)
        self._place(indices, 0)
        return self._encode_rows(0, len(self.grid))

    def _place(self, indices: np.ndarray, r0: int) -> None:
        y = self.y0 + r0
        window = self.grid[y:y + len(indices), self.x0:self.x0 + self.width]
        np.add(indices, self.offset, out=window, casting="unsafe")

    def _encode_rows(self, g0: int, g1: int) -> bytes:
        chunks, colours = encode_bands(self.grid[g0:g1])
        b0 = g0 // 6
        self.chunks[b0:b0 + len(chunks)] = chunks
        self.band_colours[b0:b0 + len(colours)] = colours
        self.bands_encoded = len(chunks)
        self.data = assemble(self.box_w, self.box_h, self.palette, self.chunks, self.band_colours)
        return self.data


def _rows_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: does it differ between two HxWx3 frames (one vectorised pass)."""
    height = a.shape[0]
    if a.flags.c_contiguous and b.flags.c_contiguous and a.shape[1] * 3 % 8 == 0:
        # compare 8 bytes at a time: ~2x faster than byte by byte
        return (a.reshape(height, -1).view(np.uint64) != b.reshape(height, -1).view(np.uint64)).any(axis=1)
    return (a != b).reshape(height, -1).any(axis=1)


def _digits(values: np.ndarray) -> np.ndarray:
    """Number of decimal digits of each positive value."""
    return 1 + (values >= 10) + (values >= 100) + (values >= 1000) + (values >= 10000) + (values >= 100000)


def _put_decimal(out: np.ndarray, positions: np.ndarray, values: np.ndarray, ndigits: np.ndarray) -> None:
    """Write each value's decimal digits at out[position:position + ndigits]."""
    for d in range(int(ndigits.max(initial=0))):
        has = ndigits > d
        power = _POW10[ndigits[has] - 1 - d]
        out[positions[has] + d] = 48 + (values[has] // power) % 10


def encode_indexed(indices: np.ndarray, palette: np.ndarray) -> bytes:
    """Sixel bytes of an index image (HxW, values < len(palette) <= 256).

    The image's height need not be a multiple of 6: the rows of the last band
    past it are left unpainted, and so is every pixel whose index is
    ``TRANSPARENT`` (256, in a uint16 image).
    """
    height, width = indices.shape
    if not 0 < len(palette) <= 256:
        raise ValueError("a sixel palette has 1 to 256 colours")
    bands = -(-height // 6)
    if height % 6:
        grid = np.full((bands * 6, width), _NONE, dtype=np.uint16)
        grid[:height] = indices
    else:
        grid = indices
    chunks, colours = encode_bands(grid)
    return assemble(width, height, palette, chunks, colours)


def assemble(width: int, height: int, palette: np.ndarray, chunks: list[bytes], colours: list[int]) -> bytes:
    """The sixel image of bands encoded by ``encode_bands`` (one chunk and one
    colour bit mask per band, top to bottom)."""
    used = 0
    for mask in colours:
        used |= mask
    registers = []
    for c in range(len(palette)):
        if used >> c & 1:
            r, g, b = ((int(v) * 100 + 127) // 255 for v in palette[c])
            registers.append(f"#{c};2;{r};{g};{b}")
    # P2=1: bits that are 0 leave the screen as it is (no background fill
    # first); '"1;1;W;H' declares square pixels and the image size.
    head = f'\x1bP0;1;0q"1;1;{width};{height}{"".join(registers)}'.encode("ascii")
    # '-' moves to the next band: empty bands are skipped with one each, and
    # nothing follows the last painted band
    return head + b"-".join(chunks).rstrip(b"-") + b"\x1b\\"


def encode_bands(grid: np.ndarray) -> tuple[list[bytes], list[int]]:
    """Encode an index image whose height is a multiple of 6, band by band.

    Returns one chunk per band (its lines of sixels, ``$`` between colours,
    no ``-``) and one bit mask per band of the colours it uses.
    """
    height, width = grid.shape
    bands = height // 6
    grid = grid.astype(np.uint16, copy=False).reshape(bands, 6, width)

    # A "cell" is one band x one column: 6 pixels. Most cells are one colour
    # (sixel 63, '~'); only the mixed ones need a look at each row.
    top = grid[:, 0, :]
    uniform = (grid == top[:, None, :]).all(axis=1)
    u_band, u_col = np.nonzero(uniform & (top != _NONE))
    u_key = u_band * 256 + top[u_band, u_col]
    m_band, m_col = np.nonzero(~uniform)
    m_colours = grid[m_band, :, m_col]                    # (mixed cells, 6)
    m_keys = m_band[:, None] * 256 + m_colours
    m_keys = m_keys[m_colours != _NONE]

    # One (band, colour) pair per line of sixels, sorted by band then colour.
    present = np.bincount(np.concatenate([u_key, m_keys]), minlength=bands * 256)
    pairs = np.flatnonzero(present)
    pair_band, pair_color = pairs // 256, pairs % 256
    n_pairs = len(pairs)
    chunks = [b""] * bands
    colours = [0] * bands
    if n_pairs == 0:          # nothing painted at all
        return chunks, colours
    pair_id = np.zeros(bands * 256, dtype=np.int64)
    pair_id[pairs] = np.arange(n_pairs)

    # masks[pair, column]: the 6-bit sixel of that colour in that column.
    masks = np.zeros((n_pairs, width), dtype=np.uint8)
    masks[pair_id[u_key], u_col] = 63
    for row in range(6):
        colour = m_colours[:, row]
        ok = colour != _NONE
        # each (pair, column) occurs once per row: a plain fancy add is exact
        masks[pair_id[m_band[ok] * 256 + colour[ok]], m_col[ok]] += np.uint8(1 << row)

    # Runs along each line; column 0 always starts one, so runs never cross
    # lines. A line's trailing run of empty columns ('?') is not sent.
    starts_mask = np.ones((n_pairs, width), dtype=bool)
    starts_mask[:, 1:] = masks[:, 1:] != masks[:, :-1]
    starts = np.flatnonzero(starts_mask)
    lengths = np.diff(np.append(starts, n_pairs * width))
    run_owner, run_col = np.divmod(starts, width)
    run_value = masks.reshape(-1)[starts]
    keep = (run_value != 0) | (run_col + lengths != width)
    lengths, run_owner, run_value = lengths[keep], run_owner[keep], run_value[keep]
    run_char = run_value.astype(np.int64) + _CHAR_OFFSET
    long_run = lengths >= _RLE_MIN
    count_digits = _digits(lengths)
    token_len = np.where(long_run, 2 + count_digits, lengths)

    # Each line: '#<colour>', its runs, then '$' (back to the band's start)
    # unless it is its band's last line.
    head_digits = _digits(pair_color)
    head_len = 1 + head_digits
    last_in_band = np.ones(n_pairs, dtype=bool)
    last_in_band[:-1] = pair_band[1:] != pair_band[:-1]
    tail_len = (~last_in_band).astype(np.int64)
    body_len = np.bincount(run_owner, weights=token_len, minlength=n_pairs).astype(np.int64)
    line_len = head_len + body_len + tail_len
    line_start = np.cumsum(line_len) - line_len
    total = int(line_len.sum())

    out = np.empty(total, dtype=np.uint8)
    out[line_start] = ord("#")
    _put_decimal(out, line_start + 1, pair_color, head_digits)
    line_end = line_start + line_len
    out[line_end[~last_in_band] - 1] = ord("$")

    # where each run's token goes: its line's start + header + the tokens
    # of the same line before it
    token_start = np.cumsum(token_len) - token_len
    first_token = np.searchsorted(run_owner, np.arange(n_pairs))
    token_pos = line_start[run_owner] + head_len[run_owner] + token_start - token_start[first_token][run_owner]

    short = ~long_run
    short_len = lengths[short]
    if len(short_len):
        # expand each short run into its bytes: position + 0..len-1
        offsets = np.arange(int(short_len.sum())) - np.repeat(np.cumsum(short_len) - short_len, short_len)
        out[np.repeat(token_pos[short], short_len) + offsets] = np.repeat(run_char[short], short_len)
    if long_run.any():
        pos = token_pos[long_run]
        digits = count_digits[long_run]
        out[pos] = ord("!")
        _put_decimal(out, pos + 1, lengths[long_run], digits)
        out[pos + 1 + digits] = run_char[long_run]

    # cut the output into bands: from a band's first line to its last
    raw = out.tobytes()
    first_in_band = np.ones(n_pairs, dtype=bool)
    first_in_band[1:] = last_in_band[:-1]
    for band, start, end in zip(pair_band[first_in_band].tolist(), line_start[first_in_band].tolist(),
                                line_end[last_in_band].tolist()):
        chunks[band] = raw[start:end]
    for band, colour in zip(pair_band.tolist(), pair_color.tolist()):
        colours[band] |= 1 << colour
    return chunks, colours
