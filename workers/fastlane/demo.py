"""A synthetic frame source: publishes frames that say which frame they are.

    python -m workers.fastlane.demo RUN_ID [--fps 30] [--frames N] [--size 600x400]

For the app without a training run (the Frames pane, ``mosaic watch``), for
the tests (a writer process to SIGKILL) and for the benchmarks (a writer
process at full speed). Frame n is ``pattern(n)``: one of a few random
base images with n stamped into its first 8 bytes, so a reader can check any
frame it accepted against its number, independently of the checksum.

Prints one line ``ready <segment path>`` on stdout after the first frame, and
``done <frames> <seconds> <cpu seconds>`` at the end (CPU time of the
publishing loop: on a shared machine it tells the writer's own cost apart
from time spent waiting for a core).
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

import numpy as np

from workers.fastlane.writer import FrameWriter

# 7 bases: a torn mix of frames n and n + capacity differs from both unless
# capacity is a multiple of 7 (FrameWriter capacities are powers of two).
BASES = 7


def cartpole_frame(n: int, width: int = 600, height: int = 400) -> np.ndarray:
    """A CartPole-like frame (flat colours, like gymnasium's render) with the
    cart and pole moving with n: realistic content for the app's frame figures."""
    frame = np.full((height, width, 3), 255, dtype=np.uint8)
    track = height * 3 // 4
    frame[track, :] = 0
    cart_x = int(width / 2 + width / 3 * np.sin(n / 40))
    frame[track - 15:track + 15, max(0, cart_x - 25):max(0, cart_x + 25)] = 0
    tilt = np.sin(n / 17) * 0.4                       # the pole's lean, in x per y
    rows = np.arange(track - 150, track - 10)
    xs = (cart_x + (track - 10 - rows) * tilt).astype(int)
    for dx in range(-4, 4):
        frame[rows, np.clip(xs + dx, 0, width - 1)] = (202, 152, 101)
    frame[track - 12:track - 7, max(0, cart_x - 3):max(0, cart_x + 3)] = (129, 132, 203)
    return frame


class Patterns:
    """The frames of the demo, precomputed so publishing is not slowed by drawing."""

    def __init__(self, width: int = 600, height: int = 400, seed: int = 0):
        rng = np.random.default_rng(seed)
        # For people: a diagonal gradient that shifts from base to base. For
        # the checks: random low 3 bits, so any two bases differ in most bytes
        # and a frame torn between two of them is caught by ``check``.
        yy, xx = np.mgrid[0:height, 0:width]
        self.bases = np.empty((BASES, height, width, 3), dtype=np.uint8)
        for k in range(BASES):
            phase = k * 256 // BASES
            self.bases[k, :, :, 0] = (xx * 255 // max(1, width - 1) + phase) % 256
            self.bases[k, :, :, 1] = (yy * 255 // max(1, height - 1) + phase) % 256
            self.bases[k, :, :, 2] = ((xx + yy) * 255 // max(1, width + height - 2) + 2 * phase) % 256
        self.bases ^= rng.integers(0, 8, self.bases.shape, dtype=np.uint8)

    def frame(self, n: int) -> np.ndarray:
        """Frame n, built in place in its base (valid until frame n + BASES)."""
        base = self.bases[n % BASES]
        base.reshape(-1)[:8] = np.frombuffer(n.to_bytes(8, "little"), dtype=np.uint8)
        return base

    def check(self, n: int, frame: np.ndarray) -> bool:
        """Is ``frame`` exactly frame n?"""
        flat = frame.reshape(-1)
        if int.from_bytes(flat[:8].tobytes(), "little") != n:
            return False
        return bool(np.array_equal(flat[8:], self.bases[n % BASES].reshape(-1)[8:]))


def run(run_id: str, stream: int = 0, fps: float = 0.0, frames: int = 0, seconds: float = 0.0,
        width: int = 600, height: int = 400, capacity: int = 32, out=sys.stdout,
        stop=lambda: False) -> tuple[int, float]:
    """Publish until ``frames`` (0: no limit) or ``seconds`` (0: no limit) is
    reached, or ``stop()`` says so; returns (frames published, seconds)."""
    patterns = Patterns(width, height)
    writer = FrameWriter(run_id, stream, capacity=capacity)
    interval = 1.0 / fps if fps else 0.0
    start = time.perf_counter()
    cpu_start = time.process_time()
    published = 0
    try:
        while True:
            writer.publish(patterns.frame(writer.frame_number + 1))
            published += 1
            if published == 1 and out:
                print(f"ready {writer.path}", file=out, flush=True)
            if frames and published >= frames or stop():
                break
            elapsed = time.perf_counter() - start
            if seconds and elapsed >= seconds:
                break
            if interval:
                time.sleep(max(0.0, start + published * interval - time.perf_counter()))
    finally:
        writer.close()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    if out:
        print(f"done {published} {elapsed:.6f} {cpu:.6f}", file=out, flush=True)
    return published, elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_id")
    parser.add_argument("--stream", type=int, default=0)
    parser.add_argument("--fps", type=float, default=30.0, help="0: as fast as possible")
    parser.add_argument("--frames", type=int, default=0, help="stop after N frames (0: never)")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after S seconds (0: never)")
    parser.add_argument("--size", default="600x400", help="WIDTHxHEIGHT")
    parser.add_argument("--capacity", type=int, default=32)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    # SIGTERM or SIGINT: stop after the current frame and close the segment
    # properly (readers see it CLOSED), as a worker does
    stopping = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.append(True))
    run(args.run_id, args.stream, args.fps, args.frames, args.seconds, width, height, args.capacity,
        stop=lambda: bool(stopping))
    return 0


if __name__ == "__main__":
    sys.exit(main())
