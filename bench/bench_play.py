"""Play (docs/play.md): how fast a key reaches the screen, and how true real time keeps its rate.

- **Key to frame, turn mode**: the time from the client's ``act`` (the app sends one per key) to
  the next frame in the run's FastLane segment, where the app's Frames view reads it (the app's
  own part, the key read and the frame painted, is bench_play_terminal's: key to pixels in a
  real terminal), on MiniGrid-Empty-5x5 and
  CartPole; and the same to the frame's arrival through the daemon's relay (the path of a
  client on another machine), and both through an SSH-forwarded socket on localhost (a real
  sshd, ``ssh -N -L`` of the daemon's socket: what ``mosaic --ssh`` does; the act goes over it,
  the frame comes back over it through the relay). p50 and p99 over the presses. Goal: p99 <=
  50 ms.
- **Real-time rate**: an Atari play (ALE/Breakout-v5) in real time at 15, 30 and 60 steps a
  second with a key held (pressed again every 100 ms, as a terminal's auto-repeat does): the
  steps taken over 4 s, from moves.jsonl's times, against the rate set. Goal: within 10 %.

python -m bench.bench_play
"""
from __future__ import annotations

import json
import time
from pathlib import Path

from bench.common import daemon_home, figure, percentile, print_table

PRESSES = 60
REALTIME_RATES = (15, 30, 60)
WINDOW_S = 4.0


def _take_seat(client, run_id: str) -> None:
    from daemon import protocol as P
    deadline = time.monotonic() + 120
    while True:
        try:
            client.call(P.SEAT, run=run_id, seat="0")
            return
        except Exception:  # noqa: BLE001 -- the run is not listening yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def key_to_frame(home, client, env: str, actions: list[int], viewer_home=None) -> tuple[list[float], list[float]]:
    """(shared memory latencies, relay latencies) in ms, alternating press by press. ``viewer_home``:
    the relay's client connects there (a forwarded socket) instead of the daemon's own."""
    from daemon import protocol as P
    from workers.fastlane.reader import FrameReader
    run = client.call(P.SUBMIT, config={"worker": "human", "algo": "play", "env": env, "seed": 0,
                                        "params": {"episodes": 0}})
    _take_seat(client, run["id"])
    shm, relay = [], []
    reader = None
    deadline = time.monotonic() + 60
    while reader is None:
        try:
            reader = FrameReader(run["id"])
            if reader.latest() is None:
                reader.close()
                reader = None
                raise FileNotFoundError
        except (FileNotFoundError, OSError):
            reader = None
            if time.monotonic() > deadline:
                raise RuntimeError(f"{env}: no frames")
            time.sleep(0.05)
    from mosaic_tui.client import Client
    with Client(viewer_home or home, timeout=30, name="watcher") as watcher:
        watcher.call(P.FRAMES, run=run["id"], fps=30, max_dim=160)
        for i in range(PRESSES):
            time.sleep(0.1)
            for _ in watcher.notifications(0.001):   # what the relay sent before this press
                pass
            before = reader.latest()[0]
            started = time.perf_counter()
            client.call(P.ACT, run=run["id"], seat="0", action=actions[i % len(actions)])
            while reader.latest()[0] == before:
                time.sleep(0.0005)
            shm.append((time.perf_counter() - started) * 1000)
            for method, params in watcher.notifications(2.0):
                if method == P.NOTIFY_FRAME and params.get("n", 0) > before:
                    relay.append((time.perf_counter() - started) * 1000)
                    break
    reader.close()
    client.call(P.CANCEL, run=run["id"])
    return shm, relay


def realtime_rate(home, client, rate: int) -> float:
    """Steps a second achieved over WINDOW_S with a key held."""
    from daemon import protocol as P
    run = client.call(P.SUBMIT, config={"worker": "human", "algo": "play", "env": "ALE/Breakout-v5", "seed": 0,
                                        "params": {"episodes": 0, "mode": "realtime", "rate": rate}})
    _take_seat(client, run["id"])
    time.sleep(1.0)
    end = time.monotonic() + WINDOW_S + 1.0
    while time.monotonic() < end:
        client.call(P.ACT, run=run["id"], seat="0", action=3, hold_ms=150)   # LEFT, held
        time.sleep(0.1)
    client.call(P.CANCEL, run=run["id"])
    times = [json.loads(line)["t"] for line in (home.run_dir(run["id"]) / "moves.jsonl").read_text().splitlines()]
    last = times[-1] - 0.5
    window = [t for t in times if last - WINDOW_S <= t <= last]
    return (len(window) - 1) / (window[-1] - window[0])


def over_ssh(home) -> list[dict]:
    """Key to frame through an SSH-forwarded socket on localhost: the player's act and the relayed
    frame both cross the forward (skipped, with the reason, without openssh)."""
    import os
    import shutil
    import subprocess
    import tempfile

    from daemon.home import Home
    from mosaic_tui.client import Client
    from tests.plugins.sshd import SSHD, running_sshd
    if not (os.path.exists(SSHD) and shutil.which("ssh")):
        return [figure("play key -> frame over an SSH-forwarded socket", None, "ms p99", "<= 50",
                       "skipped: openssh-server and openssh-client are needed")]
    forwarded = Path(tempfile.mkdtemp(prefix="mbssh-", dir="/tmp")) / "daemon.sock"
    with running_sshd() as (config, host, _proc):
        ssh = subprocess.Popen(["ssh", "-F", config, "-N", "-o", "ExitOnForwardFailure=yes", "-o",
                                "StreamLocalBindUnlink=yes", "-L", f"{forwarded}:{home.socket_path}", host])
        try:
            deadline = time.monotonic() + 20
            while not forwarded.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            far = Home.resolve(str(home.root), socket=str(forwarded))
            with Client(far, timeout=60, name="far-player") as player:
                shm, relay = key_to_frame(home, player, "MiniGrid-Empty-5x5-v0", [0, 1], viewer_home=far)
        finally:
            ssh.terminate()
            ssh.wait(10)
            shutil.rmtree(forwarded.parent, ignore_errors=True)
    rows = []
    for path, values in (("act over ssh, frame in shared memory", shm), ("act and relayed frame over ssh", relay)):
        p99 = percentile(values, 99)
        rows.append(figure(f"play key -> frame ({path}), turn mode: MiniGrid-Empty-5x5-v0", round(p99, 1),
                           "ms p99", "<= 50", f"p50 {percentile(values, 50):.1f} ms, {len(values)} presses",
                           p99 <= 50))
    return rows


def run() -> list[dict]:
    from mosaic_tui.client import Client
    rows = []
    with daemon_home(max_runs=4) as (home, _pid):
        with Client(home, timeout=60, name="player") as client:
            for env, actions in (("MiniGrid-Empty-5x5-v0", [0, 1]), ("CartPole-v1", [0, 1])):
                shm, relay = key_to_frame(home, client, env, actions)
                for path, values in (("shared memory", shm), ("daemon relay", relay)):
                    p99 = percentile(values, 99)
                    rows.append(figure(f"play key -> frame ({path}), turn mode: {env}", round(p99, 1), "ms p99",
                                       "<= 50", f"p50 {percentile(values, 50):.1f} ms, {len(values)} presses",
                                       p99 <= 50))
            rows += over_ssh(home)
            for rate in REALTIME_RATES:
                achieved = realtime_rate(home, client, rate)
                ratio = achieved / rate
                rows.append(figure(f"play real time, ALE/Breakout-v5 at {rate} steps/s", round(ratio, 3),
                                   "achieved / set", "0.90 - 1.10", f"{achieved:.1f} steps/s over {WINDOW_S:g} s",
                                   0.9 <= ratio <= 1.1))
    return rows


if __name__ == "__main__":
    print_table(run())
