"""Frames over the socket, for clients that cannot map the run's shared memory
(a laptop on an SSH-forwarded socket). Imported only when a client asks for
frames (numpy with it, where no run's history has loaded it yet: daemon/history.py).

A relayed frame is a ``frame`` notification (its wire form, both halves:
``daemon.protocol.encode_frame`` / ``decode_frame``):

    {"run": id, "stream": 0, "n": 1234, "width": 320, "height": 213,
     "encoding": "rgb8+zlib", "data": "<base64>"}
"""
from __future__ import annotations

from typing import Any

import numpy as np

from daemon.protocol import encode_frame
from workers.fastlane.reader import FrameReader
from workers.fastlane.writer import downscale

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
        """The newest frame if it is newer than the last one sent, else None (cheap when there is
        none: the segment's head is read, no pixels)."""
        if self.last_n is not None and self.reader.attached and self.reader.head == self.last_n:
            return None
        got = self.reader.latest()
        if got is None or got[0] == self.last_n:
            return None
        n, frame = got
        self.last_n = n
        return encode_frame(self.run_id, self.stream, n, np.ascontiguousarray(downscale(frame, self.max_dim)))

    def close(self) -> None:
        self.reader.close()
