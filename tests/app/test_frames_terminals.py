"""Frames drawn as real images inside the app, in real terminals under Xvfb.

xterm -ti vt340 (sixel) and kitty (kitty graphics) each run the real `mosaic`
app on a run's Frames tab, reattached from ui-state.json as a person
reopening the app would be. The run is a synthetic worker publishing one still
frame through FastLane, so the screen can be compared pixel by pixel with
what the app meant to draw: the same app, same terminal size and same
detected capabilities, run headless, gives the exact image bytes; a real
decoder (libsixel's sixel2png, or the kitty payload itself) turns them into
pixels; the terminal's screen dump must show those pixels at the canvas' cells.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.app.test_graphics import SIXEL2PNG, xwd_to_rgb
from tests.helpers import ROOT, wait_state

COLS, ROWS = 90, 30

pytestmark = pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("Xvfb", "xwd")),
    reason="Xvfb or xwd missing (apt-get install xvfb x11-apps)")


def still_frames_run(mosaic) -> str:
    config = {"worker": "synthetic", "algo": "emit", "env": "none", "steps": 100_000_000,
              "params": {"rate": 50, "still_frames": True},
              "frames": {"enabled": True, "fps": 30, "max_dim": 600}}
    path = Path(mosaic.home.root) / "still.json"
    path.write_text(json.dumps(config))
    return mosaic.submit(str(path))


class Display:
    """An Xvfb server; screen dumps as RGB arrays."""

    def __init__(self):
        self.proc = subprocess.Popen(["Xvfb", "-displayfd", "1", "-screen", "0", "1280x800x24",
                                      "-nolisten", "tcp"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.name = ":" + self.proc.stdout.readline().strip()
        self.clients: list[subprocess.Popen] = []

    def start(self, argv: list[str], env: dict) -> None:
        self.clients.append(subprocess.Popen(argv, env=dict(env, DISPLAY=self.name),
                                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def screen(self) -> np.ndarray:
        dump = subprocess.run(["xwd", "-root", "-silent", "-display", self.name],
                              capture_output=True, check=True, timeout=60).stdout
        return xwd_to_rgb(dump)

    def close(self) -> None:
        for proc in [*self.clients, self.proc]:
            proc.kill()
            proc.wait()


@pytest.fixture
def display():
    d = Display()
    yield d
    d.close()


def open_app_in(display: Display, terminal: list[str], home, run_id: str, tmp_path: Path) -> dict:
    """Start `mosaic` reattaching to the run's Frames tab in a terminal; the
    capabilities it detected there (`mosaic graphics --json`, same detection)."""
    (Path(home.root) / "ui-state.json").write_text(
        json.dumps({"screen": "run", "run": run_id, "tab": "frames"}))
    caps_file = tmp_path / "caps.json"
    mosaic = f"{sys.executable} -m mosaic_tui.cli --home {home.root}"
    script = f"{mosaic} graphics --json > {caps_file}; exec {mosaic}"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color")
    env.pop("TMUX", None)
    env.pop("COLORTERM", None)
    display.start([*terminal, "sh", "-c", script], env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if caps_file.exists() and caps_file.stat().st_size:
            return json.loads(caps_file.read_text())
        time.sleep(0.1)
    raise AssertionError("the terminal never ran `mosaic graphics`")


async def what_the_app_draws(home, caps: dict):
    """The image bytes, the canvas' cell region and the image cells, from the
    same app at the same size with the same capabilities, headless."""
    from mosaic_tui.app import MosaicApp
    from mosaic_tui.graphics.detect import Capabilities
    from tests.app.conftest import wait_until
    capabilities = Capabilities(
        graphics=caps["graphics"], colors=caps["colors"], cell_px=tuple(caps["cell_px"]),
        cell_px_measured=caps["cell_px_measured"], in_tmux=False, kitty=caps["graphics"] == "kitty",
        sixel=caps["graphics"] == "sixel", reason=caps["reason"], sixel_colors=caps["sixel_colors"],
        background=tuple(caps["background"]) if caps["background"] else None)
    app = MosaicApp(home, graphics=capabilities)
    async with app.run_test(size=(COLS, ROWS)) as pilot:
        await wait_until(pilot, lambda: app.screen.query("FrameCanvas")
                         and app.screen.query_one("FrameCanvas").frame is not None, timeout=60)
        canvas = app.screen.query_one("FrameCanvas")
        await pilot.pause(0.3)
        data, cells = canvas.image_sequence()
        return data.encode("ascii"), canvas.region, cells


def find(screen: np.ndarray, image: np.ndarray, x: int, y: int, slack: int = 12) -> tuple[float, int, int]:
    """Best share of matching pixels for ``image`` placed near (x, y) on the screen."""
    h, w = image.shape[:2]
    best = (0.0, x, y)
    for dy in range(-slack, slack + 1):
        for dx in range(-slack, slack + 1):
            y0, x0 = y + dy, x + dx
            if y0 < 0 or x0 < 0 or y0 + h > screen.shape[0] or x0 + w > screen.shape[1]:
                continue
            shown = screen[y0:y0 + h, x0:x0 + w].astype(int)
            share = float((np.abs(shown - image.astype(int)) <= 2).all(axis=2).mean())
            if share > best[0]:
                best = (share, x0, y0)
    return best


def wait_for_image(display: Display, image: np.ndarray, x: int, y: int, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    best = (0.0, x, y)
    while time.monotonic() < deadline:
        best = find(display.screen(), image, x, y)
        if best[0] > 0.999:
            return best
        time.sleep(1.0)
    return best


@pytest.mark.anyio
@pytest.mark.skipif(not shutil.which("xterm") or SIXEL2PNG is None,
                    reason="xterm or sixel2png missing (apt-get install xterm libsixel-bin)")
async def test_app_draws_sixel_frames_in_xterm_vt340(daemon, mosaic, display, tmp_path):
    run_id = still_frames_run(mosaic)
    wait_state(daemon, run_id, "running")
    caps = open_app_in(display, ["xterm", "-ti", "vt340", "-xrm", "XTerm*numColorRegisters: 256",
                                 "-geometry", f"{COLS}x{ROWS}+0+0", "-e"], daemon, run_id, tmp_path)
    assert caps["graphics"] == "sixel" and caps["cell_px_measured"], caps
    assert caps["background"] is not None                   # xterm answers OSC 11

    data, region, cells = await what_the_app_draws(daemon, caps)
    assert data.startswith(b"\x1bP") and data.endswith(b"\x1b\\")
    six = tmp_path / "frame.six"
    six.write_bytes(data)
    subprocess.run([SIXEL2PNG, "-i", str(six), "-o", str(tmp_path / "frame.png")], check=True, timeout=60)
    from PIL import Image
    expected = np.asarray(Image.open(tmp_path / "frame.png").convert("RGB"))
    cell_w, cell_h = caps["cell_px"]
    # the image fills its cells exactly (padded with the background)
    assert expected.shape[1] == cells.width * cell_w
    assert cells.height * cell_h - 6 < expected.shape[0] <= cells.height * cell_h
    share, x, y = wait_for_image(display, expected, (region.x + cells.x) * cell_w,
                                 (region.y + cells.y) * cell_h)
    Image.fromarray(display.screen()).save(tmp_path / "xterm.png")   # for a person to look at
    assert share > 0.999, f"{share:.4f} of the image's pixels on screen (see {tmp_path / 'xterm.png'})"
    # at the canvas' cell position (xterm adds a border of a few pixels)
    assert 0 <= x - (region.x + cells.x) * cell_w <= 4 and 0 <= y - (region.y + cells.y) * cell_h <= 4


@pytest.mark.anyio
@pytest.mark.skipif(not shutil.which("kitty"), reason="kitty missing (apt-get install kitty)")
async def test_app_draws_kitty_frames_in_kitty(daemon, mosaic, display, tmp_path):
    run_id = still_frames_run(mosaic)
    wait_state(daemon, run_id, "running")
    caps = open_app_in(display, ["kitty", "-o", "font_size=9", "-o", "window_padding_width=0",
                                 "-o", f"initial_window_width={COLS}c", "-o", f"initial_window_height={ROWS}c",
                                 "-o", "remember_window_size=no", "-o", "enable_audio_bell=no"],
                       daemon, run_id, tmp_path)
    assert caps["graphics"] == "kitty" and caps["cell_px_measured"], caps

    data, region, cells = await what_the_app_draws(daemon, caps)
    from mosaic_tui.graphics import kitty
    keys, expected = kitty.decode(data)
    # a 600x400 frame shrunk into the canvas: drawn at its own pixel size, no scaling by kitty
    assert "c" not in keys and expected.shape[1] < 600
    cell_w, cell_h = caps["cell_px"]
    share, x, y = wait_for_image(display, expected, (region.x + cells.x) * cell_w,
                                 (region.y + cells.y) * cell_h)
    from PIL import Image
    Image.fromarray(display.screen()).save(tmp_path / "kitty.png")
    assert share > 0.999, f"{share:.4f} of the image's pixels on screen (see {tmp_path / 'kitty.png'})"
