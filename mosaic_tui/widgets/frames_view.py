"""The Frames tab (and `mosaic watch`'s frames pane): a run's live FastLane frames.

Source: the run's shared-memory ring (``FrameReader``) when its segment exists
on this host, else the daemon's relay (``frames`` method, ~10 fps, ``frame``
notifications decoded with ``daemon.relay.decode``), for a client on another
host behind a forwarded socket. Polled at up to 30 fps by a timer that runs
only while the view is shown.

Drawing: half-blocks (two pixels per cell) in every mode. The mode chosen by
``--graphics`` / detection is shown in the header; sixel and kitty placement
(escape bytes outside Textual's compositor) is not done yet, so those modes
are drawn as half-blocks too and the header says so. ``none`` draws nothing.

Keys: space pauses/resumes; while paused, left/right (h/l) step through the
frames still in the ring (relay: the last frames received).
"""
from __future__ import annotations

import collections
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

POLL_FPS = 30
RELAY_FPS = 10
RELAY_MAX_DIM = 320
RELAY_HISTORY = 32
SOURCE_SHM = "shared memory"
SOURCE_RELAY = "relay"


def frames_enabled(run: dict[str, Any] | None) -> bool:
    """Does this run publish frames (its config says frames.enabled)?"""
    if not run:
        return False
    frames = (run.get("config") or {}).get("frames")
    return bool(isinstance(frames, dict) and frames.get("enabled"))


def graphics_of(app) -> tuple[str, str, str]:
    """(mode, colors, reason) the app was started with; half-blocks in truecolor by default."""
    caps = getattr(app, "graphics", None)
    if caps is None:
        return "halfblock", "truecolor", "default"
    return caps.graphics, caps.colors, caps.reason


class FrameCanvas(Widget):
    """Draws one frame as half-blocks, centred in its box; caches the strips."""

    DEFAULT_CSS = """
    FrameCanvas {
        height: 1fr;
        width: 1fr;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.frame = None
        self.key: Any = None
        self.color_mode = "truecolor"
        self._strips: list[Strip] = []
        self._strips_for: Any = None

    def show(self, key: Any, frame) -> None:
        if key == self.key and frame is self.frame:
            return
        self.key, self.frame = key, frame
        self._strips_for = None
        self.refresh()

    def clear(self) -> None:
        self.show(None, None)

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        if self.frame is None or width <= 0 or height <= 0:
            return Strip.blank(width)
        wanted = (self.key, id(self.frame), width, height, self.color_mode)
        if self._strips_for != wanted:
            from mosaic_tui.graphics.halfblock import render_strips
            self._strips = render_strips(self.frame, width, height, self.color_mode)
            self._strips_for = wanted
        return self._strips[y] if y < len(self._strips) else Strip.blank(width)


class FramesView(Widget, can_focus=True):
    DEFAULT_CSS = """
    FramesView {
        height: 1fr;
        width: 1fr;
        layout: vertical;
    }
    FramesView > #frames-header {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    FramesView:focus > #frames-header {
        background: $boost;
    }
    """

    BINDINGS = [
        Binding("space", "toggle_pause", "Pause frames", id="frames.pause"),
        Binding("left,h", "step(-1)", "Back", id="frames.back"),
        Binding("right,l", "step(1)", "Forward", id="frames.forward"),
    ]

    def __init__(self, run_id: str, stream: int = 0, *, relay: bool | None = None,
                 poll_fps: float = POLL_FPS, **kwargs) -> None:
        super().__init__(**kwargs)
        self.run_id = run_id
        self.stream = stream
        self.force_relay = relay          # None: shared memory when the segment exists here
        self.poll_fps = poll_fps
        self.source: str | None = None
        self.reader = None
        self.paused = False
        self.held: list[tuple[int, Any]] = []   # frames to step through while paused
        self.index = -1
        self.current: tuple[int, Any] | None = None
        self._relay_client = None
        self._relay_latest: tuple[int, Any] | None = None
        self._relay_history: collections.deque = collections.deque(maxlen=RELAY_HISTORY)
        self._arrivals: collections.deque = collections.deque(maxlen=64)
        self._timer = None
        self._last_check = 0.0
        self._error: str | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="frames-header")
        yield FrameCanvas()

    @property
    def canvas(self) -> FrameCanvas:
        return self.query_one(FrameCanvas)

    @property
    def mode(self) -> str:
        return graphics_of(self.app)[0]

    def on_mount(self) -> None:
        mode, colors, _ = graphics_of(self.app)
        self.canvas.color_mode = colors
        self.canvas.display = mode != "none"
        self._timer = self.set_interval(1.0 / self.poll_fps, self.poll, name="frames", pause=True)
        self.update_header()

    def on_show(self) -> None:
        if self._timer is not None:
            self._timer.resume()
        self.poll()

    def on_hide(self) -> None:
        if self._timer is not None:
            self._timer.pause()
        self._stop_relay()

    def on_unmount(self) -> None:
        self._stop_relay()
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # -- sources ---------------------------------------------------------------
    def _segment_here(self) -> bool:
        try:
            from workers.fastlane import layout
            return layout.segment_path(self.run_id, self.stream).exists()
        except Exception:
            return False

    def _choose_source(self) -> None:
        now = time.monotonic()
        if self.source == SOURCE_SHM or now - self._last_check < 1.0 and self.source is not None:
            return
        self._last_check = now
        if self.force_relay is not True and self._segment_here():
            from workers.fastlane.reader import FrameReader
            self._stop_relay()
            self.reader = FrameReader(self.run_id, self.stream)
            self.source = SOURCE_SHM
        elif self.force_relay is not False:
            self.source = SOURCE_RELAY

    def _link(self):
        return getattr(self.app, "link", None)

    def _ensure_relay(self) -> None:
        link = self._link()
        if link is None or not link.connected or link.client is None:
            return
        if self._relay_client is link.client:
            return          # the relay ends with the connection: ask again after a reconnect
        self._relay_client = link.client
        link.frame_listeners[(self.run_id, self.stream)] = self._on_relayed
        from daemon import protocol as P

        async def ask() -> None:
            try:
                await link.call(P.FRAMES, run=self.run_id, stream=self.stream, fps=RELAY_FPS,
                                max_dim=RELAY_MAX_DIM)
                self._error = None
            except Exception as exc:    # RPCError, lost connection: shown, retried after reconnect
                self._error = getattr(exc, "message", None) or str(exc)
        self.run_worker(ask(), group="frames-relay", exclusive=True)

    def _stop_relay(self) -> None:
        link = self._link()
        if self._relay_client is None or link is None:
            return
        client, self._relay_client = self._relay_client, None
        link.frame_listeners.pop((self.run_id, self.stream), None)
        if link.connected and link.client is client:
            from daemon import protocol as P

            async def stop() -> None:
                try:
                    await link.call(P.FRAMES, run=self.run_id, stream=self.stream, fps=0)
                except Exception:
                    pass
            try:
                self.app.run_worker(stop(), group="frames-relay-stop")
            except Exception:
                pass

    def _on_relayed(self, params: dict[str, Any]) -> None:
        from daemon.relay import decode
        try:
            frame = decode(params)
        except Exception as exc:
            self._error = f"bad relayed frame: {exc}"
            return
        got = (int(params.get("n", 0)), frame)
        self._relay_latest = got
        self._relay_history.append(got)

    def _latest(self) -> tuple[int, Any] | None:
        if self.source == SOURCE_SHM and self.reader is not None:
            return self.reader.latest()
        if self.source == SOURCE_RELAY:
            self._ensure_relay()
            return self._relay_latest
        return None

    def _ring(self) -> list[tuple[int, Any]]:
        if self.source == SOURCE_SHM and self.reader is not None:
            return self.reader.frames_in_ring()
        return list(self._relay_history)

    # -- polling ---------------------------------------------------------------
    def poll(self) -> None:
        if not self.is_mounted or self.paused:
            return
        if self.app.screen is not self.screen:
            return
        self._choose_source()
        got = self._latest()
        if got is not None and (self.current is None or got[0] != self.current[0]
                                or got[1] is not self.current[1]):
            self.current = got
            self._arrivals.append(time.monotonic())
            self.canvas.show(got[0], got[1])
        self.update_header()

    def fps(self) -> float:
        now = time.monotonic()
        recent = [t for t in self._arrivals if now - t <= 2.0]
        if len(recent) < 2:
            return 0.0
        span = recent[-1] - recent[0]
        return (len(recent) - 1) / span if span > 0 else 0.0

    def header_text(self) -> Text:
        mode, colors, reason = graphics_of(self.app)
        text = Text()
        if self.current is None:
            text.append("no frame yet", style="dim")
        else:
            n, frame = self.current
            h, w = frame.shape[:2]
            text.append(f"frame {n}", style="bold")
            text.append(f"  {w}x{h}")
            if not self.paused:
                text.append(f"  {self.fps():.1f} fps")
        if self.paused:
            where = f" {self.index + 1}/{len(self.held)}" if self.held else ""
            text.append(f"  paused{where}", style="bold yellow")
        text.append(f"  {self.source or 'waiting for the ring'}", style="dim" if self.source else "italic")
        drawn = "half-blocks" if mode in ("halfblock", "sixel", "kitty") else "hidden"
        label = f"  graphics: {mode}"
        if mode in ("sixel", "kitty"):
            label += f" (drawn as {drawn})"
        elif mode == "halfblock":
            label += f" ({colors})"
        text.append(label, style="dim")
        if self._error:
            text.append(f"  {self._error}", style="bold red")
        return text

    def update_header(self) -> None:
        try:
            self.query_one("#frames-header", Static).update(self.header_text())
        except Exception:
            pass

    # -- actions -----------------------------------------------------------------
    def action_toggle_pause(self) -> None:
        if self.paused:
            self.paused = False
            self.held, self.index = [], -1
            self.poll()
            return
        self.paused = True
        self.held = self._ring()
        if self.current is not None:
            numbers = [n for n, _ in self.held]
            if self.current[0] in numbers:
                self.index = numbers.index(self.current[0])
            else:
                self.held.append(self.current)
                self.held.sort(key=lambda item: item[0])
                self.index = [n for n, _ in self.held].index(self.current[0])
        else:
            self.index = len(self.held) - 1
        self.update_header()

    def action_step(self, delta: int) -> None:
        if not self.paused:
            self.action_toggle_pause()
        if not self.held:
            return
        self.index = max(0, min(len(self.held) - 1, self.index + delta))
        self.current = self.held[self.index]
        self.canvas.show(self.current[0], self.current[1])
        self.update_header()
