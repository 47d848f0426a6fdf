"""Play (docs/play.md): key to pixels, the real app in a real terminal.

    python -m bench.bench_play_terminal [--presses N] [--rounds N] [--local-only] [--ssh-only]
                                        [--checkout DIR] [--profile FILE]

``mosaic play MiniGrid-Empty-5x5-v0`` (half-blocks, truecolor) runs in a pseudo-terminal of
120x40 that this process reads: it is the terminal. Every byte the app writes is stamped when it
is read, the keys ← and → (the agent turns: every press changes the picture) are written to the
pty one at a time, and the bytes are parsed afterwards with pyte, a VT100 emulator, chunk by chunk:
the latency of a press is the time from its key's write to the read of the first chunk after
which the cells of the frame (characters and colours) differ from what they were before the key,
and, beside it, the first chunk after which the header's "frame N" shows the new number.
Nothing is parsed while a press is being timed, so the parse's cost is not in the figure.

Locally (the frames from shared memory) and through ``mosaic --ssh`` to a real sshd on
localhost (tests/plugins/sshd.py; the act and the frames cross the forwarded socket, the frames through
the daemon's relay). p50 and p99 over the presses, with the load average before and after
each round. Goal: p99 <= 50 ms locally, <= 100 ms over SSH, on a quiet machine.

``--checkout DIR`` runs the app (and, over SSH, the server's mosaic) from another checkout of
the project (``git archive REV | tar -x -C DIR``): alternate it with this one for an A/B under the
same load. ``--profile FILE`` records the app with py-spy during the presses (a flame graph SVG).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from bench.common import ROOT, figure, kill_processes_under, percentile, print_table, stop_runs

COLS, ROWS = 120, 40
SIDE = 38                     # the Play screen's side panel (mosaic_tui/screens/play.py)
ENV = "MiniGrid-Empty-5x5-v0"
KEYS = (b"\x1b[D", b"\x1b[C")     # left, right: turn left, turn right
PRESSES = 60
WAIT_S = 0.7                 # after a key, read this long before parsing anything...
MAX_WAIT_S = 3.0             # ... and look at most this long for its frame
GAP = (0.12, 0.25)           # seconds between presses (spread, so no press falls on the same phase of a timer)
GOAL_LOCAL_MS = 50
GOAL_SSH_MS = 100
NICE = 0                     # --nice N: this process, and so the app, the daemon, its worker and sshd


def load() -> str:
    return f"{os.getloadavg()[0]:.2f}"


class Terminal:
    """A program in a pty of COLS x ROWS; this process is its terminal. A thread reads the pty and
    stamps every chunk; the chunks are parsed (pyte) only when asked."""

    def __init__(self, argv: list[str], cwd: str, env: dict[str, str]):
        import pyte
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     start_new_session=True, close_fds=True)
        os.close(slave)
        self.chunks: list[tuple[float, bytes]] = []
        self.parsed = 0
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        # what the app asks the terminal (a device attributes query...): answered like a terminal
        self.screen.write_process_input = lambda data: os.write(self.master, data.encode())
        self._stop = False
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:
                return
            if not data:
                return
            self.chunks.append((time.perf_counter(), data))

    def feed(self, upto: int | None = None) -> None:
        end = len(self.chunks) if upto is None else upto
        while self.parsed < end:
            self.stream.feed(self.chunks[self.parsed][1])
            self.parsed += 1

    def text(self) -> str:
        self.feed()
        return "\n".join(self.screen.display)

    def wait_for(self, *needles: str, timeout: float = 120.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError(f"the app did not show {needles!r}; the screen:\n{text}")

    def send(self, data: bytes) -> float:
        t = time.perf_counter()
        os.write(self.master, data)
        return t

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.master, b"\x1b")      # Back: the seat is left
            time.sleep(0.3)
            os.write(self.master, b"q")
        deadline = time.monotonic() + 15
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._stop = True
        self._reader.join(5)
        os.close(self.master)


def frame_rows(screen) -> tuple[int, int]:
    """(header row, first row below the canvas): the canvas lies between them, left of the side panel."""
    header = next((y for y, line in enumerate(screen.display) if re.match(r"\s*frame \d+", line)), 1)
    foot = next((y for y, line in enumerate(screen.display)
                 if y > header and re.match(r"\s*(turn:|realtime )", line)), ROWS - 3)
    return header, foot


def frame_cells(screen, rows: tuple[int, int]) -> tuple:
    header, foot = rows
    return tuple(tuple((c.data, c.fg, c.bg) for c in (screen.buffer[y][x] for x in range(COLS - SIDE)))
                 for y in range(header + 1, foot))


def frame_number(screen, rows: tuple[int, int]) -> int | None:
    found = re.match(r"\s*frame (\d+)", screen.display[rows[0]])
    return int(found.group(1)) if found else None


def _answer(term: Terminal, t0: float, rows, before_cells, before_n, got_pixels: float | None = None,
            got_header: float | None = None) -> tuple[float | None, float | None]:
    """(pixels ms, header ms): the chunks not parsed yet, parsed one by one (those parsed already
    showed no change); None: not yet."""
    for index in range(term.parsed, len(term.chunks)):
        term.feed(index + 1)
        t = term.chunks[index][0]
        if got_pixels is None and frame_cells(term.screen, rows) != before_cells:
            got_pixels = (t - t0) * 1000
        n = frame_number(term.screen, rows)
        if got_header is None and n is not None and n != before_n:
            got_header = (t - t0) * 1000
        if got_pixels is not None and got_header is not None:
            break
    return got_pixels, got_header


def presses(term: Terminal, count: int, warmup: int = 2) -> tuple[list[float], list[float], int]:
    """(key -> frame pixels ms, key -> header frame number ms, presses that changed nothing visible
    within MAX_WAIT_S)."""
    import random
    rng = random.Random(0)
    pixels, header, missed = [], [], 0
    for i in range(warmup + count):
        time.sleep(rng.uniform(*GAP))
        term.feed()
        rows = frame_rows(term.screen)
        before_cells = frame_cells(term.screen, rows)
        before_n = frame_number(term.screen, rows)
        t0 = term.send(KEYS[i % 2])
        # nothing is parsed until WAIT_S has passed (the key lit on the side panel, the frame,
        # the key unlit at 0.3 s): the reader thread alone runs, and stamps the chunks
        time.sleep(WAIT_S)
        got_pixels, got_header = _answer(term, t0, rows, before_cells, before_n)
        deadline = time.monotonic() + MAX_WAIT_S - WAIT_S
        while (got_pixels is None or got_header is None) and time.monotonic() < deadline:
            time.sleep(0.2)
            # the chunks parsed already showed no change: only the new ones are looked at
            got_pixels, got_header = _answer(term, t0, rows, before_cells, before_n, got_pixels, got_header)
        term.feed()
        if i < warmup:
            continue
        if got_pixels is None:
            missed += 1
            continue
        pixels.append(got_pixels)
        if got_header is not None:
            header.append(got_header)
    return pixels, header, missed


def _env(checkout: Path) -> dict[str, str]:
    env = dict(os.environ, TERM="xterm-256color", COLORTERM="truecolor", COLUMNS=str(COLS), LINES=str(ROWS),
               PYTHONPATH=str(checkout))
    for name in ("NO_COLOR", "TMUX", "TEXTUAL_FPS"):
        env.pop(name, None)
    return env


def play_argv(home_root: str, *before_play: str) -> list[str]:
    return [sys.executable, "-m", "mosaic_tui.cli", "--home", home_root, "--graphics", "halfblock",
            *before_play, "play", ENV, "--seed", "0", "--episodes", "0"]


@contextlib.contextmanager
def profiled(pid: int, out: str | None):
    if not out:
        yield
        return
    spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "-r", "200",
                            "-o", out, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(2)
        with contextlib.suppress(subprocess.TimeoutExpired):
            spy.wait(30)
        if spy.poll() is None:
            spy.kill()


@contextlib.contextmanager
def daemon_of(checkout: Path):
    """A fresh home and a daemon of ``checkout``'s code (both sides of an A/B run their own); its
    runs cancelled, the daemon stopped and the home removed afterwards."""
    from daemon.home import Home
    path = tempfile.mkdtemp(prefix="mbpt-", dir="/tmp")
    if NICE:
        # the worker at the daemon's priority, so the whole chain runs at NICE
        Home.resolve(path).settings_file.write_text(json.dumps({"worker_nice": 0}))
    cli = [sys.executable, "-m", "mosaic_tui.cli", "--home", path, "daemon"]
    subprocess.run([*cli, "start"], cwd=str(checkout), env=_env(checkout), check=True, capture_output=True,
                   timeout=120)
    try:
        yield Home.resolve(path)
    finally:
        stop_runs(Home.resolve(path))
        subprocess.run([*cli, "stop"], cwd=str(checkout), env=_env(checkout), capture_output=True, timeout=60)
        kill_processes_under(path)
        shutil.rmtree(path, ignore_errors=True)


def measured_round(term: Terminal, count: int, profile: str | None, *ready: str) -> dict:
    """The presses of one round once the screen shows every ``ready`` text; the terminal closed after."""
    try:
        term.wait_for(*ready)
        time.sleep(1.0)
        before = load()
        with profiled(term.proc.pid, profile):
            pixels, header, missed = presses(term, count)
        return {"pixels": pixels, "header": header, "missed": missed, "load": (before, load())}
    finally:
        term.close()


def local_round(checkout: Path, count: int, profile: str | None = None) -> dict:
    with daemon_of(checkout) as home:
        return measured_round(Terminal(play_argv(str(home.root)), str(checkout), _env(checkout)), count, profile,
                              "you hold the seat", "frame 1")


def ssh_round(checkout: Path, count: int, profile: str | None = None) -> dict | str:
    from tests.plugins.sshd import SSHD, running_sshd
    if not (os.path.exists(SSHD) and shutil.which("ssh")):
        return "skipped: openssh-server and openssh-client are needed"
    remote = (f"cd {shlex.quote(str(checkout))} && PYTHONPATH={shlex.quote(str(checkout))} "
              f"{shlex.quote(sys.executable)} -m mosaic_tui.cli")
    with daemon_of(checkout) as server, running_sshd() as (config, host, _sshd):
        laptop = tempfile.mkdtemp(prefix="mbpt-", dir="/tmp")
        try:
            argv = play_argv(laptop, "--ssh", host, "--ssh-config", config, "--remote-mosaic", remote,
                             "--remote-home", str(server.root))
            return measured_round(Terminal(argv, str(checkout), _env(checkout)), count, profile,
                                  "you hold the seat", "frame 1", "relay")
        finally:
            shutil.rmtree(laptop, ignore_errors=True)


def rows_for(where: str, goal: int, results: list[dict], label: str = "") -> list[dict]:
    pixels = [v for r in results for v in r["pixels"]]
    header = [v for r in results for v in r["header"]]
    missed = sum(r["missed"] for r in results)
    loads = ", ".join(f"{a} -> {b}" for r in results for a, b in [r["load"]])
    p99 = percentile(pixels, 99)
    name = f"play key -> frame pixels in a real terminal ({where}), turn mode: {ENV}{label}"
    anchor = (f"p50 {percentile(pixels, 50):.1f} ms, max {max(pixels):.1f} ms; header frame number p50/p99 "
              f"{percentile(header, 50):.1f}/{percentile(header, 99):.1f} ms; {len(pixels)} presses"
              f"{f', {missed} without a visible change' if missed else ''}; load avg {loads}")
    return [figure(name, round(p99, 1), "ms p99", f"<= {goal}", anchor, p99 <= goal)]


def run(presses_: int = PRESSES, rounds: int = 1, local: bool = True, ssh: bool = True,
        checkout: Path = ROOT, profile: str | None = None, label: str = "") -> list[dict]:
    rows = []
    if local:
        results = [local_round(checkout, presses_, profile) for _ in range(rounds)]
        rows += rows_for("local, shared memory", GOAL_LOCAL_MS, results, label)
    if ssh:
        results = [ssh_round(checkout, presses_, profile and profile.replace(".svg", "-ssh.svg"))
                   for _ in range(rounds)]
        if any(isinstance(r, str) for r in results):
            rows.append(figure(f"play key -> frame pixels in a real terminal (mosaic --ssh){label}", None,
                               "ms p99", f"<= {GOAL_SSH_MS}", next(r for r in results if isinstance(r, str))))
        else:
            rows += rows_for("mosaic --ssh, the daemon's relay", GOAL_SSH_MS, results, label)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_play_terminal")
    parser.add_argument("--presses", type=int, default=PRESSES)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--local-only", action="store_true")
    parser.add_argument("--ssh-only", action="store_true")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="run the app from this checkout")
    parser.add_argument("--profile", help="py-spy flame graph of the app during the presses (.svg)")
    parser.add_argument("--nice", type=int, default=0,
                        help="run the app, the daemon, the worker and sshd at this nice value (a negative one, "
                             "as root: a busy machine's other processes yield to them, as on a quiet machine)")
    args = parser.parse_args(argv)
    global NICE
    NICE = args.nice
    if NICE:
        os.nice(NICE)       # inherited by everything started from here
    label = ("" if args.checkout == ROOT else f" [{args.checkout}]") + (f" [nice {NICE}]" if NICE else "")
    print_table(run(args.presses, args.rounds, not args.ssh_only, not args.local_only, args.checkout.resolve(),
                    args.profile, label))
    return 0


if __name__ == "__main__":
    sys.exit(main())
