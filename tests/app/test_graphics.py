"""Renderers and terminal detection: sixel decoded by libsixel and compared pixel
by pixel, half-block cells checked colour by colour, kitty payloads decoded
back, capability detection against simulated terminals on a pty and real tmux.
"""
from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mosaic_tui.graphics import detect, halfblock, kitty, sixel, tmux

ROOT = Path(__file__).resolve().parents[2]
SIXEL2PNG = shutil.which("sixel2png")
needs_sixel2png = pytest.mark.skipif(SIXEL2PNG is None, reason="sixel2png missing (apt-get install libsixel-bin)")


def cartpole():
    frame = np.full((400, 600, 3), 255, dtype=np.uint8)
    frame[300, :] = 0
    frame[285:315, 275:325] = 0
    frame[150:290, 296:304] = (202, 152, 101)
    frame[288:293, 297:303] = (129, 132, 203)
    return frame


def busy(height=120, width=160, seed=0):
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([xx * 255 // width, yy * 255 // height, (xx + yy) * 255 // (width + height)], -1)
    noise = np.random.default_rng(seed).integers(0, 16, (height, width, 3))
    return (base ^ noise).astype(np.uint8)


# -- sixel ---------------------------------------------------------------------------
def sixel_decode(data: bytes, tmp_path) -> np.ndarray:
    src, out = tmp_path / "image.six", tmp_path / "image.png"
    src.write_bytes(data)
    subprocess.run([SIXEL2PNG, "-i", str(src), "-o", str(out)], check=True, timeout=30)
    return np.asarray(Image.open(out).convert("RGB"))


def as_decoded(palette: np.ndarray) -> np.ndarray:
    """The RGB a decoder shows for each palette entry: sixel colours travel as
    percentages (0-100), so 8-bit values come back rounded through them."""
    percent = (palette.astype(np.int64) * 100 + 127) // 255
    return ((percent * 255 + 50) // 100).astype(np.uint8)


@needs_sixel2png
@pytest.mark.parametrize("height,width,colours", [
    (7, 5, 3),          # height not a multiple of 6: last band partly painted
    (1, 1, 1),
    (6, 300, 1),        # one long run per line
    (50, 33, 17),
    (97, 131, 256),     # every register
])
def test_sixel_indexed_images_decode_pixel_for_pixel(tmp_path, height, width, colours):
    rng = np.random.default_rng(height * 1000 + width)
    indices = rng.integers(0, colours, (height, width)).astype(np.uint8)
    indices[:, width // 2:] = indices[0, 0]                  # long runs as well as noise
    palette = rng.integers(0, 256, (colours, 3)).astype(np.uint8)
    decoded = sixel_decode(sixel.encode_indexed(indices, palette), tmp_path)
    assert decoded.shape == (height, width, 3)
    assert np.array_equal(decoded, as_decoded(palette)[indices])


@needs_sixel2png
def test_sixel_cartpole_frame_keeps_its_exact_colours(tmp_path):
    frame = cartpole()
    data = sixel.encode(frame)                               # own size, no resampling
    decoded = sixel_decode(data, tmp_path)
    assert decoded.shape == (400, 600, 3)
    # few colours: no quantisation loss beyond sixel's percent rounding
    assert np.array_equal(decoded, as_decoded(frame.reshape(-1, 3)).reshape(400, 600, 3))
    assert len(data) < 5000                                  # run-length coding at work


@needs_sixel2png
def test_sixel_busy_frame_matches_its_quantised_source(tmp_path):
    frame = busy()
    indices, palette = sixel.quantize(frame)
    assert len(palette) <= 256 and indices.max() < len(palette)
    decoded = sixel_decode(sixel.encode_indexed(indices, palette), tmp_path)
    assert np.array_equal(decoded, as_decoded(palette)[indices])
    # and the quantisation is a fair likeness of the source
    error = np.abs(palette[indices].astype(int) - frame.astype(int)).mean()
    assert error < 12


@needs_sixel2png
@pytest.mark.parametrize("box", [(800, 480), (480, 312), (200, 100), (600, 400), (700, 403)])
def test_sixel_encode_fits_the_pane(tmp_path, box):
    frame = cartpole()
    decoded = sixel_decode(sixel.encode(frame, box), tmp_path)
    height, width = decoded.shape[:2]
    assert width <= box[0] and height <= box[1]
    assert -(-height // 6) * 6 <= box[1]                      # the last band stays inside
    assert width >= box[0] - 1 or height >= box[1] - 6       # fills the box one way
    assert abs(width / height - 1.5) < 0.05                  # aspect kept
    # enlarging repeats pixels, shrinking averages them: the cart stays black
    # and the background white either way
    assert (decoded[0, 0] == 255).all()
    assert (decoded[int(height * 0.75), width // 2] == 0).all()


@needs_sixel2png
def test_sixel_respects_a_terminals_colour_registers(tmp_path):
    frame = busy()
    data = sixel.encode(frame, max_colors=16)
    assert data.count(b";2;") <= 16                          # register definitions
    indices, palette = sixel.prepare(frame, max_colors=16)
    assert len(palette) <= 16
    assert np.array_equal(sixel_decode(data, tmp_path), as_decoded(palette)[indices])


def test_sixel_quantize_keeps_close_colours_apart():
    """Pillow's palette mapping goes through 5-6-5 bit colour cells and merges
    (1, 2, 3) into (0, 0, 0); a frame of few colours must keep each one."""
    frame = np.zeros((6, 8, 3), dtype=np.uint8)
    for i, colour in enumerate([(1, 2, 3), (4, 4, 4), (8, 8, 8), (0, 0, 1), (255, 255, 254)]):
        frame[:, i] = colour
    indices, palette = sixel.quantize(frame)
    assert len(palette) == 6 and np.array_equal(palette[indices], frame)
    assert np.array_equal(sixel.packed_rgb(frame)[0, :2], [1 | 2 << 8 | 3 << 16, 4 | 4 << 8 | 4 << 16])


def boxed(frame: np.ndarray, box: tuple[int, int], fill) -> np.ndarray:
    """What a SixelSequence should draw: the frame centred in a box of fill colour."""
    out = np.empty((box[1], box[0], 3), dtype=np.uint8)
    out[:] = fill
    y0, x0 = (box[1] - frame.shape[0]) // 2, (box[0] - frame.shape[1]) // 2
    out[y0:y0 + frame.shape[0], x0:x0 + frame.shape[1]] = frame
    return out


@needs_sixel2png
def test_sixel_sequence_re_encodes_only_changed_bands_and_draws_every_frame_whole(tmp_path):
    from workers.fastlane.demo import cartpole_frame
    box, fill = (130, 96), (21, 24, 30)
    seq = sixel.SixelSequence(box, (120, 80), max_colors=256, fill=fill)
    first, moved = (np.ascontiguousarray(cartpole_frame(n)[::5, ::5]) for n in (1, 9))   # 120x80
    patched = moved.copy()
    patched[40:42, 10:20] = (1, 2, 3)              # a new colour, in rows 48-49 of the box: band 8
    same = patched.copy()
    steps = [(first, 16), (moved, None), (patched, 1), (same, 0)]
    for n, (frame, bands) in enumerate(steps):
        data = seq.encode(frame)
        if bands is not None:
            assert seq.bands_encoded == bands, n
        assert 0 < seq.bands_encoded < 16 or n in (0, 3)
        # the reused bands and the new ones make exactly the image of the whole state
        assert data == sixel.encode_indexed(seq.grid[:box[1]], seq.palette)
        assert np.array_equal(sixel_decode(data, tmp_path), as_decoded(boxed(frame, box, fill).reshape(-1, 3))
                              .reshape(box[1], box[0], 3)), n


@needs_sixel2png
def test_sixel_sequence_starts_over_when_colours_overflow_or_are_too_many(tmp_path):
    box, fill = (60, 42), (0, 0, 0)
    seq = sixel.SixelSequence(box, (60, 40), max_colors=6, fill=fill)    # fill + 5 frame colours
    for n in range(6):
        frame = np.full((40, 60, 3), 250, dtype=np.uint8)
        frame[n * 6:n * 6 + 3, :] = (10 * n + 5, 100, 200)     # a new colour each frame
        data = seq.encode(frame)
        # fill, background, then one more each frame until the 5th new colour
        # does not fit: that frame starts over with its own, every band again
        assert seq.exact and len(seq.palette) == [3, 4, 5, 6, 3, 4][n]
        assert seq.bands_encoded == (7 if n in (0, 4) else 2), n      # the old stripe and the new
        assert data == sixel.encode_indexed(seq.grid[:box[1]], seq.palette)
        assert np.array_equal(sixel_decode(data, tmp_path), as_decoded(boxed(frame, box, fill).reshape(-1, 3))
                              .reshape(box[1], box[0], 3)), n
    noisy = busy(40, 60)                           # far more colours than registers: quantised
    data = seq.encode(noisy)
    assert not seq.exact and len(seq.palette) <= 6
    assert np.array_equal(sixel_decode(data, tmp_path), as_decoded(seq.palette)[seq.grid[:box[1]]])
    back = seq.encode(frame)                       # exact colours again, in full
    assert seq.exact and seq.bands_encoded == 7
    assert back == sixel.encode_indexed(seq.grid[:box[1]], seq.palette)


def test_sixel_sequence_without_a_fill_leaves_the_margin_transparent():
    seq = sixel.SixelSequence((20, 13), (10, 6), max_colors=256, fill=None)
    frame = np.zeros((6, 10, 3), dtype=np.uint8)
    frame[:, :, 0] = 255
    data = seq.encode(frame)
    assert len(seq.palette) == 1                   # red only: no fill colour
    rows, cols = np.nonzero(seq.grid[:13] != sixel.TRANSPARENT)
    assert (rows.min(), rows.max(), cols.min(), cols.max()) == (3, 8, 5, 14)
    assert (seq.grid[13:] == sixel.TRANSPARENT).all()        # the last band's rows past the box
    assert data == sixel.encode_indexed(seq.grid[:13], seq.palette)
    with pytest.raises(ValueError, match="frame is 11x6"):
        seq.encode(np.zeros((6, 11, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="does not fit"):
        sixel.SixelSequence((20, 13), (21, 6))


def test_sixel_escape_structure():
    data = sixel.encode_indexed(np.zeros((12, 4), dtype=np.uint8), np.array([[255, 0, 0]], dtype=np.uint8))
    assert data.startswith(b'\x1bP0;1;0q"1;1;4;12#0;2;100;0;0') and data.endswith(b"\x1b\\")
    # two bands of one colour, 4 full columns each: RLE '!4~', then '-' between bands
    assert data[data.index(b"#0;2;100;0;0") + 12:] == b"#0!4~-#0!4~\x1b\\"


# -- half-block --------------------------------------------------------------------------
def cells(line):
    """Expand a line of Segments into one (char, style) per cell."""
    out = []
    for segment in line:
        out.extend((char, segment.style) for char in segment.text)
    return out


def test_halfblock_truecolor_cells_carry_top_and_bottom_pixels():
    frame = np.random.default_rng(1).integers(0, 256, (48, 80, 3), dtype=np.uint8)
    frame[:, 10:30] = frame[:, 10:11]                        # runs merge into one segment
    lines = halfblock.render_lines(frame, 80, 24)
    assert len(lines) == 24
    for row, line in enumerate(lines):
        row_cells = cells(line)
        assert len(row_cells) == 80
        for col, (char, style) in enumerate(row_cells):
            assert char == "\u2580"
            assert tuple(style.color.triplet) == tuple(frame[2 * row, col])
            assert tuple(style.bgcolor.triplet) == tuple(frame[2 * row + 1, col])
    assert len(lines[0]) < 80                                # the run of 20 equal cells is one segment


def nearest_xterm256(pixels):
    """Brute force over the 240 non-system colours of xterm's palette."""
    levels = [0, 95, 135, 175, 215, 255]
    table = [(r, g, b) for r in levels for g in levels for b in levels] + [(8 + 10 * i,) * 3 for i in range(24)]
    table = np.array(table)
    dist = ((pixels[:, None, :].astype(int) - table[None, :, :]) ** 2).sum(-1)
    return dist, table


def test_halfblock_256_colours_picks_the_nearest_palette_entry():
    pixels = np.random.default_rng(2).integers(0, 256, (2000, 3), dtype=np.uint8)
    codes = halfblock.to_xterm256(pixels)
    dist, table = nearest_xterm256(pixels)
    chosen = dist[np.arange(len(pixels)), codes - 16]
    assert np.array_equal(chosen, dist.min(axis=1))          # nearest (ties either way)

    frame = np.random.default_rng(3).integers(0, 256, (48, 80, 3), dtype=np.uint8)
    lines = halfblock.render_lines(frame, 80, 24, colors="256")
    expected = halfblock.to_xterm256(frame)
    for row, line in enumerate(lines):
        for col, (_char, style) in enumerate(cells(line)):
            assert style.color.number == expected[2 * row, col]
            assert style.bgcolor.number == expected[2 * row + 1, col]


def test_halfblock_fits_and_centres_with_blank_margins():
    frame = cartpole()                                       # 3:2 -> 72x48 half-block pixels
    lines = halfblock.render_lines(frame, 80, 24)
    assert all(sum(s.cell_length for s in line) == 80 for line in lines)
    first = cells(lines[0])
    assert [c for c, _ in first[:4]] == [" "] * 4 and first[4][0] == "\u2580"
    assert first[3][1] is None and first[-1][0] == " "
    # downscaling averages: the cart's cells are black, the sky white
    # (cart: rows 285-315, columns 275-325 of 400x600 -> pixel row 36 of 48,
    # columns 33-39 of 72, drawn from cell column 4)
    cart = cells(lines[18])[4 + 34][1]
    assert tuple(cart.color.triplet) == (0, 0, 0)
    sky = cells(lines[1])[10][1]
    assert tuple(sky.color.triplet) == (255, 255, 255)
    # a tall frame gets margins at the sides, a wide one above and below
    wide = halfblock.render_lines(np.zeros((10, 400, 3), dtype=np.uint8), 80, 24)
    assert cells(wide[0])[0][0] == " " and cells(wide[11])[0][0] == "\u2580"  # 80x2 px: one row, centred


def test_halfblock_strips_for_textual():
    strips = halfblock.render_strips(cartpole(), 80, 24)
    assert len(strips) == 24 and all(strip.cell_length == 80 for strip in strips)


# -- kitty ---------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [
    {"compress": False}, {"compress": True}, {"fmt": kitty.RGBA, "compress": False},
    {"compress": True, "in_tmux": True},
])
def test_kitty_payload_decodes_back_to_the_frame(options):
    frame = busy(97, 131)
    data = kitty.encode(frame, cols=40, rows=12, image_id=7, placement_id=3, **options)
    keys, pixels = kitty.decode(data)
    assert keys["a"] == "T" and keys["i"] == "7" and keys["p"] == "3"
    assert keys["c"] == "40" and keys["r"] == "12" and keys["s"] == "131" and keys["v"] == "97"
    assert np.array_equal(pixels[:, :, :3], frame)
    if options.get("fmt") == kitty.RGBA:
        assert (pixels[:, :, 3] == 255).all()
    # protocol framing: chunks of at most 4096 base64 bytes, m=1 until the last
    plain = tmux.unwrap_all(data) if options.get("in_tmux") else data
    sequences = plain.split(b"\x1b\\")[:-1]
    assert len(sequences) > 1
    for index, seq in enumerate(sequences):
        control, _, payload = seq[3:].partition(b";")
        assert len(payload) <= kitty.CHUNK
        assert (b"m=1" in control) == (index < len(sequences) - 1)
        if index < len(sequences) - 1:
            assert len(payload) % 4 == 0


def test_kitty_png_and_shrinking_to_a_box():
    frame = cartpole()
    keys, png = kitty.decode(kitty.encode(frame, fmt=kitty.PNG))
    assert keys["f"] == "100" and "s" not in keys
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")), frame)
    keys, pixels = kitty.decode(kitty.encode(frame, box=(300, 300)))
    assert pixels.shape == (200, 300, 3)
    keys, pixels = kitty.decode(kitty.encode(frame, box=(2000, 2000)))   # never enlarged
    assert pixels.shape == (400, 600, 3)


def test_tmux_wrap_doubles_escapes():
    seq = b"\x1b_Ga=q\x1b\\"
    wrapped = tmux.wrap(seq)
    assert wrapped == b"\x1bPtmux;\x1b\x1b_Ga=q\x1b\x1b\\\x1b\\"
    assert tmux.unwrap_all(wrapped + tmux.wrap(b"\x1b[c")) == seq + b"\x1b[c"


# -- detection -------------------------------------------------------------------------------
def test_parse_replies():
    replies = detect.parse_replies(b"\x1b_Gi=31;OK\x1b\\\x1b[6;21;10t\x1b[?1;0;16S\x1b[?62;4;22c")
    assert replies.kitty == "OK" and replies.cell_px == (10, 21) and replies.da1 == [(62, 4, 22)]
    assert replies.sixel_colors == 16
    assert detect.parse_replies(b"\x1b[?1;2c").kitty is None


class FakeTerminal:
    """The far end of a pty, answering queries like a given terminal would."""

    def __init__(self, answer):
        self.master, self.slave = pty.openpty()
        self.answer = answer              # received bytes -> reply bytes (or None)
        self.received = b""
        self._stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        import select
        while not self._stop:
            ready, _, _ = select.select([self.master], [], [], 0.02)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    return
                self.received += chunk
                if self.received.endswith(b"\x1b[c"):
                    for delay, reply in self.answer(self.received):
                        time.sleep(delay)
                        os.write(self.master, reply)

    def close(self):
        self._stop = True
        self.thread.join()
        os.close(self.master)
        os.close(self.slave)


def run_detect(answer, mode="auto", env=None, timeout=0.5):
    terminal = FakeTerminal(answer)
    before = termios.tcgetattr(terminal.slave)
    try:
        start = time.monotonic()
        caps = detect.detect(mode, fd=terminal.slave, timeout=timeout, env=env or {})
        elapsed = time.monotonic() - start
        assert termios.tcgetattr(terminal.slave) == before    # tty modes restored
        return caps, elapsed, terminal.received
    finally:
        terminal.close()


# a terminal that answers ends detect's wait at its DA1 reply: given this long a timeout, an
# answered detect that still waited for it would be plain (0.4 s against 0.5 was too thin a margin)
ANSWERED_TIMEOUT = 3.0


def test_detect_kitty_terminal():
    caps, elapsed, sent = run_detect(lambda q: [(0, b"\x1b_Gi=31;OK\x1b\\\x1b[6;20;9t\x1b[?62;22c")],
                                     timeout=ANSWERED_TIMEOUT)
    assert caps.graphics == "kitty" and caps.cell_px == (9, 20) and caps.cell_px_measured
    assert caps.colors == "truecolor"
    assert sent == (detect.KITTY_QUERY + detect.CELL_SIZE_QUERY + detect.SIXEL_COLORS_QUERY
                    + detect.BACKGROUND_QUERY + detect.DA1_QUERY)
    assert caps.background is None                          # it did not say
    assert elapsed < ANSWERED_TIMEOUT / 2                  # DA1 ended the wait, not the timeout


def test_detect_sixel_terminal_xterm_vt340_style():
    caps, elapsed, _ = run_detect(lambda q: [(0, b"\x1b[6;13;6t\x1b[?1;0;16S\x1b]11;rgb:ffff/ffff/dddd\x1b\\"
                                                 b"\x1b[?63;1;2;4;6;9;15;22c")], timeout=ANSWERED_TIMEOUT)
    assert caps.graphics == "sixel" and caps.cell_px == (6, 13) and caps.sixel and not caps.kitty
    assert caps.background == (255, 255, 221)               # OSC 11: the default background
    assert detect.parse_replies(b"\x1b]11;rgb:00/80/ff\x07").background == (0, 128, 255)
    assert caps.sixel_colors == 16                           # a real VT340's registers
    assert caps.pane_px(80, 24) == (480, 312)
    assert elapsed < ANSWERED_TIMEOUT / 2


def test_detect_plain_terminal_and_silent_terminal():
    caps, _, _ = run_detect(lambda q: [(0, b"\x1b[?1;2c")], env={"COLORTERM": "truecolor"})
    assert caps.graphics == "halfblock" and caps.colors == "truecolor"
    caps, elapsed, _ = run_detect(lambda q: [], timeout=0.3)
    assert caps.graphics == "halfblock" and not caps.cell_px_measured and caps.colors == "256"
    assert 0.25 < elapsed < 1.5


def test_detect_inside_tmux_waits_past_tmuxs_own_da1():
    def tmux_then_outer(query):
        # tmux answers the bare DA1 at once; the outer kitty's replies come later
        assert tmux.wrap(detect.KITTY_QUERY) in query and tmux.wrap(detect.CELL_SIZE_QUERY) in query
        return [(0, b"\x1b[?1;2c"), (0.1, b"\x1b_Gi=31;OK\x1b\\"), (0.02, b"\x1b[6;20;10t")]
    caps, elapsed, _ = run_detect(tmux_then_outer, env={"TMUX": "/tmp/tmux-0/default,1,0"}, timeout=1.0)
    assert caps.in_tmux and caps.graphics == "kitty" and caps.cell_px == (10, 20)
    assert 0.1 <= elapsed < 0.9

    caps, _, _ = run_detect(lambda q: [(0, b"\x1b[?1;2;4c")], env={"TMUX": "x"}, timeout=0.3)
    assert caps.graphics == "sixel" and "tmux" in caps.reason
    caps, _, _ = run_detect(lambda q: [(0, b"\x1b[?1;2c")], env={"TMUX": "x"}, timeout=0.3)
    assert caps.graphics == "halfblock" and "allow-passthrough" in caps.reason


def test_detect_overrides():
    for mode in ("halfblock", "none"):
        caps, elapsed, sent = run_detect(lambda q: [(0, b"\x1b[?1;2;4c")], mode=mode)
        assert caps.graphics == mode and sent == b""            # nothing asked
    caps, _, sent = run_detect(lambda q: [(0, b"\x1b[6;20;10t\x1b[?1;2c")], mode="sixel")
    assert caps.graphics == "sixel" and caps.cell_px == (10, 20)   # forced, cell size still asked
    with pytest.raises(ValueError):
        detect.detect("iterm")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing (apt-get install tmux)")
def test_detect_in_real_tmux(tmp_path):
    out = tmp_path / "caps.json"
    script = (
        "import json, sys, time\n"
        "from mosaic_tui.graphics.detect import detect\n"
        "t = time.monotonic(); c = detect(timeout=0.5)\n"
        f"open({str(out)!r}, 'w').write(json.dumps({{'graphics': c.graphics, 'tmux': c.in_tmux, "
        "'da1': c.replies.da1 if c.replies else None, 'elapsed': time.monotonic() - t}))\n"
    )
    (tmp_path / "probe.py").write_text(script)
    socket = f"mosaic-detect-{os.getpid()}"
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-x", "80", "-y", "24",
                    f"cd {ROOT} && {sys.executable} {tmp_path / 'probe.py'}; sleep 5"], check=True)
    try:
        deadline = time.monotonic() + 15
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        result = json.loads(out.read_text())
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    # a detached tmux has no outer terminal: tmux's own DA1 is all there is
    assert result["tmux"] and result["da1"] and result["graphics"] in ("halfblock", "sixel")
    assert result["elapsed"] < 2


def test_graphics_modules_import_light():
    code = ("import sys\n"
            "import mosaic_tui.graphics.halfblock, mosaic_tui.graphics.sixel, mosaic_tui.graphics.kitty\n"
            "import mosaic_tui.graphics.detect, workers.fastlane.reader\n"
            "heavy = [m for m in ('torch', 'ray', 'xuance', 'textual', 'gymnasium') if m in sys.modules]\n"
            "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# -- a real sixel terminal -----------------------------------------------------------------
XTERM_TOOLS = [shutil.which(tool) for tool in ("xterm", "Xvfb", "xwd")]


def xwd_to_rgb(data: bytes) -> np.ndarray:
    """An xwd screen dump (ZPixmap, 24/32 bits per pixel) as an HxWx3 array."""
    import struct
    fields = struct.unpack(">25I", data[:100])
    header_size, width, height, byte_order, bpp, bytes_per_line, ncolors = (
        fields[0], fields[4], fields[5], fields[7], fields[11], fields[12], fields[19])
    assert bpp in (24, 32), bpp
    pixels = np.frombuffer(data, dtype=np.uint8, count=bytes_per_line * height,
                           offset=header_size + ncolors * 12).reshape(height, bytes_per_line)
    pixels = pixels[:, :width * bpp // 8].reshape(height, width, bpp // 8)
    return pixels[:, :, [2, 1, 0]] if byte_order == 0 else pixels[:, :, [bpp // 8 - 3, bpp // 8 - 2, bpp // 8 - 1]]


@pytest.mark.skipif(not all(XTERM_TOOLS), reason="xterm, Xvfb or xwd missing (apt-get install xterm xvfb x11-apps)")
def test_sixel_frame_shows_in_xterm_vt340(tmp_path):
    """Detection and drawing in a real sixel terminal: xterm -ti vt340 under
    Xvfb. The screen dump must hold the encoded frame, pixel for pixel."""
    caps_file = tmp_path / "caps.json"
    script = tmp_path / "show.py"
    script.write_text(
        "import json, os, sys, time\n"
        "import numpy as np\n"
        "from mosaic_tui.graphics.detect import detect\n"
        "from mosaic_tui.graphics import sixel\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_graphics import cartpole\n"
        "caps = detect(timeout=3.0)\n"
        # hide the cursor (it would cover pixels), clear, home
        "os.write(1, b'\\x1b[?25l\\x1b[2J\\x1b[H')\n"
        "os.write(1, sixel.encode(cartpole(), caps.pane_px(40, 12), caps.sixel_colors))\n"
        f"open({str(caps_file)!r}, 'w').write(json.dumps({{'graphics': caps.graphics, "
        "'cell': caps.cell_px, 'measured': caps.cell_px_measured, 'colors': caps.sixel_colors}))\n"
        "time.sleep(60)\n")
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "800x600x24", "-nolisten", "tcp"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    xterm = None
    try:
        display = ":" + xvfb.stdout.readline().strip()
        env = dict(os.environ, DISPLAY=display, PYTHONPATH=str(ROOT))
        xterm = subprocess.Popen(["xterm", "-ti", "vt340", "-xrm", "XTerm*numColorRegisters: 256",
                                  "-geometry", "80x24+0+0", "-e", sys.executable, str(script)],
                                 env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not caps_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        caps = json.loads(caps_file.read_text())

        def painted():
            """A screenshot once xterm has painted the whole image (the pole, and nothing more
            after another look), else None."""
            shot = xwd_to_rgb(subprocess.run(["xwd", "-root", "-silent", "-display", display],
                                             capture_output=True, check=True, timeout=30).stdout)
            if not (np.abs(shot.astype(int) - np.array([202, 152, 101])) <= 3).all(axis=2).any():
                return None
            again = xwd_to_rgb(subprocess.run(["xwd", "-root", "-silent", "-display", display],
                                              capture_output=True, check=True, timeout=30).stdout)
            return again if np.array_equal(shot, again) else None
        deadline = time.monotonic() + 30
        screen = painted()
        while screen is None and time.monotonic() < deadline:
            time.sleep(0.1)
            screen = painted()
        assert screen is not None, "xterm painted no stable image in 30 s"
    finally:
        for proc in (xterm, xvfb):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert caps["graphics"] == "sixel" and caps["measured"]
    assert caps["colors"] == 256                              # the registers xterm was given
    cell_w, cell_h = caps["cell"]
    indices, palette = sixel.prepare(cartpole(), (40 * cell_w, 12 * cell_h))
    expected = as_decoded(palette)[indices]
    h, w = indices.shape
    # find the image by its one tan colour (the pole), then compare it all
    pole = np.array([202, 152, 101])

    def top_left_of_pole(image):
        ys, xs = np.nonzero((np.abs(image.astype(int) - pole) <= 3).all(axis=2))
        assert len(ys), "no pole on screen"
        return ys.min(), xs.min()

    ey, ex = top_left_of_pole(expected)
    sy, sx = top_left_of_pole(screen)
    y0, x0 = sy - ey, sx - ex
    assert y0 >= 0 and x0 >= 0
    shown = screen[y0:y0 + h, x0:x0 + w].astype(int)
    assert shown.shape == expected.shape
    close = (np.abs(shown - expected.astype(int)) <= 2).all(axis=2)
    assert close.mean() > 0.999, close.mean()


# -- half-blocks as a terminal shows them ----------------------------------------------------
def parse_capture(screen: str) -> list[list[tuple[str, object, object]]]:
    """(char, fg, bg) per cell, per line of `tmux capture-pane -e` output.

    Colours are (r, g, b) for 38;2 / 48;2, an int for 38;5 / 48;5, None for
    the default. tmux emits only changes, and the state carries over from one
    line to the next.
    """
    import re
    rows, fg, bg = [[]], None, None
    for sgr, char in re.findall(r"\x1b\[([\d;]*)m|(.)", screen, flags=re.DOTALL):
        if char == "\n":
            rows.append([])
            continue
        if char:
            rows[-1].append((char, fg, bg))
            continue
        params = [int(p) for p in sgr.split(";") if p] or [0]
        i = 0
        while i < len(params):
            p = params[i]
            if p in (38, 48) and params[i + 1] == 2:
                value, i = tuple(params[i + 2:i + 5]), i + 5
            elif p in (38, 48) and params[i + 1] == 5:
                value, i = params[i + 2], i + 3
            else:
                if p == 0:
                    fg = bg = None
                elif p == 39:
                    fg = None
                elif p == 49:
                    bg = None
                i += 1
                continue
            if p == 38:
                fg = value
            else:
                bg = value
    return rows


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux missing (apt-get install tmux)")
@pytest.mark.parametrize("colors", ["truecolor", "256"])
def test_halfblocks_in_tmux_capture_pane(tmp_path, colors):
    """Rich writes the half-block lines to a real terminal (a tmux pane); what
    tmux holds per cell is the top pixel as fg and the bottom one as bg."""
    frame = np.random.default_rng(5).integers(0, 256, (24, 40, 3), dtype=np.uint8)
    np.save(tmp_path / "frame.npy", frame)
    done = tmp_path / "done"
    (tmp_path / "draw.py").write_text(
        "import sys, time, numpy as np\n"
        "from rich.console import Console\n"
        "from mosaic_tui.graphics.halfblock import HalfBlockImage\n"
        f"frame = np.load({str(tmp_path / 'frame.npy')!r})\n"
        f"console = Console(force_terminal=True, color_system={('truecolor' if colors == 'truecolor' else '256')!r}, "
        "width=80, height=24)\n"
        f"console.print(HalfBlockImage(frame, 40, 12, colors={colors!r}), end='')\n"
        f"open({str(done)!r}, 'w').write('done')\n"
        "time.sleep(30)\n")
    socket = f"mosaic-hb-{os.getpid()}-{colors}"
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-x", "80", "-y", "24",
                    f"cd {ROOT} && {sys.executable} {tmp_path / 'draw.py'}"], check=True)
    try:
        deadline = time.monotonic() + 15
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        screen = parse_capture(subprocess.run(["tmux", "-L", socket, "capture-pane", "-p", "-e", "-t", "0"],
                                              capture_output=True, text=True, check=True).stdout)
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
    expected = frame if colors == "truecolor" else halfblock.to_xterm256(frame)
    for row in range(12):
        row_cells = screen[row][:40]
        assert len(row_cells) == 40
        for col, (char, fg, bg) in enumerate(row_cells):
            assert char == "\u2580"
            top, bottom = expected[2 * row, col], expected[2 * row + 1, col]
            if colors == "truecolor":
                assert (fg, bg) == (tuple(top), tuple(bottom)), (row, col)
            else:
                assert (fg, bg) == (int(top), int(bottom)), (row, col)


@needs_sixel2png
def test_sixel_transparent_pixels_and_whole_transparent_bands(tmp_path):
    """TRANSPARENT pixels are left unpainted, also whole bands of them (above
    the first painted band and between painted ones): the painted pixels must
    still land on their own rows."""
    rng = np.random.default_rng(7)
    height, width = 40, 23
    palette = rng.integers(0, 256, (5, 3)).astype(np.uint8)
    indices = rng.integers(1, 5, (height, width)).astype(np.uint16)
    see_through = np.zeros((height, width), dtype=bool)
    see_through[:14] = True              # two whole bands and part of the third
    see_through[18:30] = True            # two whole bands in the middle
    see_through[:, :3] = True            # a left margin
    see_through[35, 5:9] = True          # a hole
    indices[see_through] = sixel.TRANSPARENT
    data = sixel.encode_indexed(indices, palette)
    decoded = sixel_decode(data, tmp_path)
    assert decoded.shape == (height, width, 3)
    painted = ~see_through
    assert np.array_equal(decoded[painted], as_decoded(palette)[indices[painted]])
    # the decoder shows its own background wherever nothing was painted
    assert (decoded[see_through] == decoded[0, 0]).all()
    # nothing painted at all is still a valid (empty) image
    empty = sixel.encode_indexed(np.full((12, 4), sixel.TRANSPARENT, dtype=np.uint16), palette)
    assert empty.startswith(b"\x1bP") and empty.endswith(b"\x1b\\")
