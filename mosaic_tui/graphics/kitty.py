"""Kitty graphics protocol encoder (kitty, WezTerm, Ghostty, Konsole...).

    data = encode(frame, cols=80, rows=24)          # bytes to write to the tty

The frame goes as raw RGB (f=24), RGBA (f=32) or PNG (f=100), base64 in
chunks of at most 4096 bytes (``m=1`` on all but the last). The terminal
scales it into ``cols`` x ``rows`` cells itself, so the frame is only ever
shrunk to ``box`` pixels (to save bytes), never enlarged here. ``compress``
adds zlib (``o=z``): a CartPole frame drops from 960 KB of base64 to a few KB,
which is what makes kitty graphics usable over SSH.

Re-sending with the same image id and placement id replaces the previous
frame in place. Inside tmux every chunk is wrapped for passthrough.
"""
from __future__ import annotations

import base64
import zlib

import numpy as np

from mosaic_tui.graphics import tmux

CHUNK = 4096                  # base64 bytes per escape sequence (protocol limit)
RGB, RGBA, PNG = 24, 32, 100


def _apc(control: str, payload: bytes = b"") -> bytes:
    return b"\x1b_G" + control.encode("ascii") + (b";" + payload if payload else b"") + b"\x1b\\"


def encode(frame: np.ndarray, cols: int | None = None, rows: int | None = None,
           image_id: int = 1, placement_id: int = 1, fmt: int = RGB, compress: bool = True,
           box: tuple[int, int] | None = None, in_tmux: bool = False) -> bytes:
    """Transmit-and-display (a=T) of one frame at the cursor, cursor not moved (C=1)."""
    pixels = np.ascontiguousarray(frame)
    height, width = pixels.shape[:2]
    if box and (width > box[0] or height > box[1]):
        from PIL import Image
        scale = min(box[0] / width, box[1] / height)
        size = (max(1, int(width * scale)), max(1, int(height * scale)))
        pixels = np.asarray(Image.fromarray(pixels).resize(size, Image.BOX))
        height, width = pixels.shape[:2]

    keys = [f"a=T,q=2,C=1,i={image_id},p={placement_id},f={fmt}"]
    if fmt == PNG:
        import io

        from PIL import Image
        out = io.BytesIO()
        Image.fromarray(pixels).save(out, format="PNG", compress_level=1)
        raw = out.getvalue()       # already deflated: no o=z
    elif fmt in (RGB, RGBA):
        channels = 3 if fmt == RGB else 4
        if pixels.ndim != 3 or pixels.shape[2] not in (3, 4):
            raise ValueError(f"need an HxWx3 or HxWx4 frame, not {pixels.shape}")
        if pixels.shape[2] != channels:
            if channels == 3:
                pixels = np.ascontiguousarray(pixels[:, :, :3])
            else:
                alpha = np.full(pixels.shape[:2] + (1,), 255, dtype=np.uint8)
                pixels = np.concatenate([pixels, alpha], axis=2)
        raw = pixels.tobytes()
        keys.append(f"s={width},v={height}")
        if compress:
            raw = zlib.compress(raw, 1)   # level 1: most of the gain, a fraction of the time
            keys.append("o=z")
    else:
        raise ValueError(f"fmt must be 24, 32 or 100, not {fmt}")
    if cols:
        keys.append(f"c={cols}")
    if rows:
        keys.append(f"r={rows}")

    payload = base64.b64encode(raw)
    chunks = [payload[i:i + CHUNK] for i in range(0, len(payload), CHUNK)] or [b""]
    sequences = []
    for index, chunk in enumerate(chunks):
        more = "1" if index < len(chunks) - 1 else "0"
        # the first chunk carries the keys; the rest only m= (the protocol
        # ignores other keys on continuation chunks)
        control = (",".join(keys) + f",m={more}") if index == 0 else f"m={more}"
        sequences.append(_apc(control, chunk))
    if in_tmux:
        sequences = [tmux.wrap(seq) for seq in sequences]
    return b"".join(sequences)


def delete(image_id: int = 1, in_tmux: bool = False) -> bytes:
    """Delete an image and its placements (d=I also frees its data)."""
    seq = _apc(f"a=d,d=I,i={image_id},q=2")
    return tmux.wrap(seq) if in_tmux else seq


def decode(data: bytes) -> tuple[dict[str, str], np.ndarray | bytes]:
    """Parse what ``encode`` wrote back into (first chunk's keys, pixels).

    Pixels are an HxWxC array for f=24/32 and the PNG bytes for f=100. Used by
    the tests; also handy to check a capture.
    """
    if data.startswith(b"\x1bPtmux;"):
        data = tmux.unwrap_all(data)
    keys: dict[str, str] = {}
    payload = []
    for i, seq in enumerate(data.split(b"\x1b\\")[:-1]):
        if not seq.startswith(b"\x1b_G"):
            raise ValueError("not a kitty graphics sequence")
        control, _, chunk = seq[3:].partition(b";")
        parsed = dict(kv.split("=", 1) for kv in control.decode("ascii").split(","))
        if i == 0:
            keys = parsed
        payload.append(chunk)
    raw = base64.b64decode(b"".join(payload))
    if keys.get("o") == "z":
        raw = zlib.decompress(raw)
    fmt = int(keys.get("f", RGB))
    if fmt == PNG:
        return keys, raw
    channels = 3 if fmt == RGB else 4
    return keys, np.frombuffer(raw, dtype=np.uint8).reshape(int(keys["v"]), int(keys["s"]), channels)
