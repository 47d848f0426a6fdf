"""Frames over the socket, for clients that cannot map the run's shared memory
(a laptop on an SSH-forwarded socket). Imported only when a client asks for
frames: it brings numpy into the daemon, which otherwise never loads it.

A relayed frame is a ``frame`` notification:

    {"run": id, "stream": 0, "n": 1234, "width": 320, "height": 213,
     "encoding": "rgb8+zlib", "data": "<base64>"}

``data`` is the frame's rows of RGB bytes, zlib-compressed (level 1: cheap for
the daemon, ~5-20x smaller for rendered envs), then base64. ``decode`` is the
client's half.
"""
from __future__ import annotations

import base64
import zlib
from typing import Any

import numpy as np

from workers.fastlane.reader import FrameReader
from workers.fastlane.writer import downscale

ENCODING = "rgb8+zlib"
MAX_FPS = 30.0


class Relay:
    """Reads the newest frame of one run and stream, encoded for the socket."""

    def __init__(self, run_id: str, stream: int, max_dim: int):
        self.run_id = run_id
        self.stream = stream
        self.max_dim = max_dim
        self.reader = FrameReader(run_id, stream)
        self.last_n: int | None = None

    def next_frame(self) -> dict[str, Any] | None:
        """The newest frame if it is newer than the last one sent, else None."""
        got = self.reader.latest()
        if got is None or got[0] == self.last_n:
            return None
        n, frame = got
        self.last_n = n
        small = np.ascontiguousarray(downscale(frame, self.max_dim))
        height, width, _ = small.shape
        return {"run": self.run_id, "stream": self.stream, "n": n, "width": width, "height": height,
                "encoding": ENCODING, "data": base64.b64encode(zlib.compress(small.tobytes(), 1)).decode()}

    def close(self) -> None:
        self.reader.close()


def decode(params: dict[str, Any]) -> np.ndarray:
    """A ``frame`` notification's pixels as an HxWx3 uint8 array."""
    if params.get("encoding") != ENCODING:
        raise ValueError(f"unknown frame encoding {params.get('encoding')!r}")
    raw = zlib.decompress(base64.b64decode(params["data"]))
    return np.frombuffer(raw, dtype=np.uint8).reshape(params["height"], params["width"], 3)
