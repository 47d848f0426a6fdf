"""A fast sixel encoder: numpy for the bands and run-length coding, Pillow for colours.

    data = encode(frame, box=(800, 480))     # bytes: DCS ... ST, fits the box

Steps, none of them a per-pixel Python loop:

1. Fit the frame into the pixel box (aspect kept, its last 6-row sixel band
   inside the box). Downscaling averages areas, upscaling repeats pixels.
2. Palette: a frame with at most 256 colours (CartPole, Atari, grid worlds)
   keeps them exactly; otherwise an octree palette is built from a subsample
   and every pixel is mapped to its nearest entry (Pillow, C speed).
3. Encode (``encode_indexed``): for each band of 6 rows and each colour
   present in it, the 6-bit column masks are scattered into one matrix with 6
   vectorised passes; run-length coding, colour selections and line controls
   are then laid out in one output byte array by cumulative sums.

textual-image's encoder needs ~25-100 ms for the same job here; this one's
figures are in bench/bench_graphics.py.
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
    """(indices HxW uint8, palette Nx3 uint8) for an HxWx3 uint8 frame."""
    from PIL import Image
    image = Image.fromarray(np.ascontiguousarray(frame[:, :, :3]))
    exact = image.getcolors(max_colors)      # None when there are more colours
    if exact is not None:
        colours = np.array([rgb for _count, rgb in exact], dtype=np.uint8)
    else:
        # The palette comes from a subsample of at most ~40k pixels: building
        # it is then ~0.5 ms whatever the frame size; mapping uses every pixel.
        step = max(1, int(np.sqrt(frame.shape[0] * frame.shape[1] / 40000)))
        sample = Image.fromarray(np.ascontiguousarray(frame[::step, ::step, :3]))
        octree = sample.quantize(max_colors, method=Image.Quantize.FASTOCTREE,
                                 dither=Image.Dither.NONE)
        colours = np.array(octree.getpalette()[: 3 * max_colors], dtype=np.uint8).reshape(-1, 3)
    palette_image = Image.new("P", (1, 1))
    # A palette of exactly these colours: Pillow maps each pixel to the
    # nearest of them (no padding entries that could win).
    palette_image.putpalette(colours.tobytes())
    indices = np.asarray(image.quantize(palette=palette_image, dither=Image.Dither.NONE))
    return indices, colours


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
    if (w, h) == (width, height):
        return quantize(frame, max_colors)
    if w * h < width * height:
        from PIL import Image
        # shrink first (area average), then quantize fewer pixels
        small = np.asarray(Image.fromarray(np.ascontiguousarray(frame[:, :, :3])).resize((w, h), Image.BOX))
        return quantize(small, max_colors)
    # quantize the original pixels, then repeat indices: cheaper than
    # quantizing the enlarged image
    indices, palette = quantize(frame, max_colors)
    return _resize_indices(indices, w, h), palette


def encode(frame: np.ndarray, box: tuple[int, int] | None = None, max_colors: int = 256) -> bytes:
    """Sixel bytes of an HxWx3 uint8 frame fitted into ``box`` (w, h) pixels
    (None: the frame's own size), in at most ``max_colors`` colours."""
    return encode_indexed(*prepare(frame, box, max_colors))


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
        grid = indices.astype(np.uint16, copy=False)
    grid = grid.reshape(bands, 6, width)

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
    if n_pairs == 0:          # nothing painted at all
        return f'\x1bP0;1;0q"1;1;{width};{height}'.encode("ascii") + b"\x1b\\"
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
    # or '-' after the band's last colour (next band); nothing after the last.
    head_digits = _digits(pair_color)
    head_len = 1 + head_digits
    last_in_band = np.ones(n_pairs, dtype=bool)
    last_in_band[:-1] = pair_band[1:] != pair_band[:-1]
    # '-' once per band moved down: several when whole bands are transparent
    tail_len = np.ones(n_pairs, dtype=np.int64)
    tail_len[:-1] = np.where(last_in_band[:-1], np.diff(pair_band), 1)
    tail_len[-1] = 0
    body_len = np.bincount(run_owner, weights=token_len, minlength=n_pairs).astype(np.int64)
    line_len = head_len + body_len + tail_len
    line_start = np.cumsum(line_len) - line_len
    total = int(line_len.sum())

    out = np.empty(total, dtype=np.uint8)
    out[line_start] = ord("#")
    _put_decimal(out, line_start + 1, pair_color, head_digits)
    line_end = line_start + line_len
    dollar = ~last_in_band[:-1]
    out[line_end[:-1][dollar] - 1] = ord("$")
    dashes = tail_len[:-1][~dollar]
    if len(dashes):
        first = np.repeat(line_end[:-1][~dollar] - dashes, dashes)
        out[first + np.arange(int(dashes.sum())) - np.repeat(np.cumsum(dashes) - dashes, dashes)] = ord("-")

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

    used = np.unique(pair_color)
    percent = (palette[used].astype(np.int64) * 100 + 127) // 255
    registers = "".join(f"#{c};2;{r};{g};{b}" for c, (r, g, b) in zip(used.tolist(), percent.tolist()))
    # P2=1: bits that are 0 leave the screen as it is (no background fill
    # first); '"1;1;W;H' declares square pixels and the image size.
    head = f'\x1bP0;1;0q"1;1;{width};{height}{registers}'.encode("ascii")
    # bands above the first painted one are skipped with '-' too
    lead = b"-" * int(pair_band[0]) if n_pairs else b""
    return head + lead + out.tobytes() + b"\x1b\\"
