"""The Frames tab (and `mosaic watch`'s frames pane): a run's live FastLane frames.

Source: the run's shared-memory ring (``FrameReader``) when its segment exists
on this host, else the daemon's relay (``frames`` method, ~10 fps, ``frame``
notifications decoded with ``daemon.protocol.decode_frame``), for a client on another
host behind a forwarded socket. Polled at up to 30 fps by a timer that runs
only while the view is shown.

Drawing: half-blocks (two pixels per cell) by default; sixel or kitty images
when ``--graphics`` / detection chose them. Images are placed the way
textual-image places sixel: the canvas hands Textual strips that claim its
width but hold no cells (so Textual leaves those terminal cells alone), and
its last line carries one zero-width control segment: move the cursor to the
canvas' top-left cell, then the image bytes (encoders in
``mosaic_tui.graphics``; ours, because textual-image's sixel encoder is ~10x
slower than the 10 ms budget). Whenever an image could land on top of
something else (another screen is active, a toast overlaps the canvas, the
canvas is scrolled or clipped, kitty inside tmux where the outer cursor is
not the pane's) the canvas draws half-blocks instead, and kitty images are
deleted from the terminal when the canvas stops showing them. ``none`` draws
nothing.

A view that knows a frame is coming (the Play screen sent a key: ``expect_frame``)
looks for it every ``EXPECT_POLL_S`` until it comes instead of at the next poll,
and a relayed frame is drawn when it arrives; the header's frame number is
updated with every new frame, in the same paint.

Keys: space pauses/resumes; while paused, left/right (h/l) step through the
frames still in the ring (relay: the last frames received). A run with several
streams (one per episode in flight, or per env worker): the view starts on stream
0 and n goes to the next one the run has (here: its segments in /dev/shm; through
the relay: ``params.episodes_in_flight`` of its config), which the header names.
"""
from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from mosaic_tui.widgets import leaving
from mosaic_tui.widgets.text_line import TextLine

POLL_FPS = 60      # twice the usual frame rate: polling at the writer's own rate drops frames by beating
RELAY_FPS = 10
HEADER_INTERVAL = 0.25     # seconds between header updates (the fps) while no new frame comes
EXPECT_POLL_S = 0.002      # a frame expected (a key was played): looked for this often...
EXPECT_FOR_S = 0.5         # ... for at most this long
RELAY_MAX_DIM = 320
RELAY_HISTORY = 32
SOURCE_SHM = "shared memory"
SOURCE_RELAY = "relay"
STREAMS_INTERVAL = 1.0     # seconds between looks for the run's streams


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


def toasts_of(screen) -> list[Widget]:
    """The notifications shown on a screen (children of Textual's toast rack)."""
    try:
        rack = screen.get_child_by_id("textual-toastrack")
    except Exception:
        return []
    # rack > holder > toast; the holders have no region of their own
    return [toast for holder in rack.children for toast in holder.children]


class FramesHeader(TextLine):
    """The Frames tab's status line. Its own line widget: a Static's update()
    would re-lay out the screen and redraw the image under it at every poll
    (megabytes per second of sixel for a still frame)."""


class FrameCanvas(Widget):
    """Draws one frame centred in its box: half-blocks, or a sixel/kitty image
    placed outside Textual's cells (see the module docstring)."""

    DEFAULT_CSS = """
    FrameCanvas {
        height: 1fr;
        width: 1fr;
    }
    """

    KITTY_IMAGE_ID = 7301    # one image per app: a new frame replaces it in place

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.frame = None
        self.key: Any = None
        self.color_mode = "truecolor"
        self.image_mode = "halfblock"    # halfblock | sixel | kitty: what the terminal can draw
        self.cell_px: tuple[int, int] = (10, 20)
        self.sixel_colors = 256
        self.in_tmux = False
        self.terminal_background: tuple[int, int, int] | None = None
        self.drawn_as = "halfblock"      # what the last render drew (the header shows it)
        self._strips: list[Strip] = []
        self._strips_for: Any = None
        self._image: str = ""
        self._image_for: Any = None
        self._sixel = None               # graphics.sixel.SixelSequence of the current geometry
        self._sixel_key: Any = None
        self._placed_for: Any = None      # (frame shape, width, height) of the last image placed
        self._kitty_shown = False

    def configure(self, caps) -> None:
        """Take the terminal's capabilities (graphics.detect.Capabilities or None)."""
        if caps is None:
            return
        self.color_mode = caps.colors
        self.image_mode = caps.graphics if caps.graphics in ("sixel", "kitty") else "halfblock"
        self.cell_px = tuple(caps.cell_px)
        self.sixel_colors = caps.sixel_colors
        self.in_tmux = caps.in_tmux
        self.terminal_background = caps.background

    def show(self, key: Any, frame) -> None:
        if key == self.key and frame is self.frame:
            return
        old, old_for = self._strips, self._strips_for
        self.key, self.frame = key, frame
        self._strips_for = None
        width, height = self.size
        if (self.image_mode == "halfblock" and frame is not None and old_for is not None
                and old_for[2:] == (width, height, self.color_mode)):
            # Repaint only the lines that changed: in most envs the background
            # stands still and a few things move, so Textual composes and the
            # terminal receives a fraction of the frame.
            new = self.halfblock_strips()
            for y, (before, after) in enumerate(zip(old, new)):
                if before != after:
                    self.refresh(Region(0, y, width, 1))
            return
        if (self.image_mode in ("sixel", "kitty") and self.drawn_as == self.image_mode
                and frame is not None and self._placed_for == (frame.shape, width, height)):
            # Same place, same size: the image rides on the last line, and the
            # lines around it do not change. Repainting that line alone spares
            # Textual composing the whole canvas for every frame.
            self.refresh(Region(0, height - 1, width, 1))
            return
        self.refresh()

    # -- half-blocks -------------------------------------------------------------
    def halfblock_strips(self) -> list[Strip]:
        """The frame as half-block strips filling the canvas, cached per frame and size."""
        width, height = self.size
        wanted = (self.key, id(self.frame), width, height, self.color_mode)
        if self._strips_for != wanted:
            from mosaic_tui.graphics.halfblock import render_strips
            self._strips = render_strips(self.frame, width, height, self.color_mode,
                                         margin_style=self.rich_style)
            self._strips_for = wanted
        return self._strips

    def _halfblock_lines(self, crop: Region) -> list[Strip]:
        # Not through Widget.render_lines: its per-line styling and filters
        # cost more than drawing the frame (every cell is its own segment);
        # the canvas has no border or padding, and the strips carry their colours.
        strips = self.halfblock_strips()[crop.y:crop.bottom]
        if crop.x or crop.width != self.size.width:
            strips = [strip.crop(crop.x, crop.right) for strip in strips]
        return strips

    # -- images ------------------------------------------------------------------
    def placement_blocker(self, crop: Region) -> str | None:
        """Why an image cannot be placed now (None: it can)."""
        if self.image_mode == "kitty" and self.in_tmux:
            return "kitty through tmux"
        try:
            screen = self.screen
            if not screen.is_active or self.app.screen is not screen:
                return "another screen is on top"
            if crop.size != self.size or crop.offset != (0, 0):
                return "partly hidden"
            region = self.region
            visible = screen.find_widget(self).visible_region
            if visible != region:
                return "partly hidden"
            for toast in toasts_of(screen):
                if toast.region.overlaps(region):
                    return "a notification is on top"
        except Exception:
            return "not on screen"
        return None

    def image_sequence(self) -> tuple[str, Region]:
        """(escape text, cell region it covers relative to the canvas), cached per frame and size."""
        width, height = self.size
        wanted = (self.key, id(self.frame), width, height, self.image_mode, self.cell_px, self.sixel_colors)
        if self._image_for != wanted:
            self._image, self._image_cells = self._encode(width, height)
            self._image_for = wanted
        return self._image, self._image_cells

    def _encode(self, cols: int, rows: int) -> tuple[str, Region]:
        cell_w, cell_h = self.cell_px
        frame_h, frame_w = self.frame.shape[:2]
        from mosaic_tui.graphics import sixel
        # the image's pixel size in the canvas' pixel box (aspect kept)
        w, h = sixel.fit_pixels(frame_w, frame_h, cols * cell_w, rows * cell_h)
        if self.image_mode == "sixel" and w > frame_w:
            # Sixel is never enlarged: the terminal cannot scale it, so every
            # added pixel is sent and encoded again for each frame (4x the
            # bytes and time at 2x) and shows nothing the frame does not have.
            w, h = sixel.fit_pixels(frame_w, frame_h, frame_w, frame_h + 5)
        used_cols, used_rows = min(cols, -(-w // cell_w)), min(rows, -(-h // cell_h))
        cells = Region((cols - used_cols) // 2, (rows - used_rows) // 2, used_cols, used_rows)
        if self.image_mode == "sixel":
            # Pad the image to whole cells with the canvas' background, so no
            # part of those cells keeps what was there before; transparent
            # where that colour is unknown (a theme using the terminal's own
            # background, and the terminal did not answer OSC 11).
            box_w, box_h = used_cols * cell_w, used_rows * cell_h
            box_h -= box_h % 6 if box_h > 6 else 0     # whole sixel bands only
            pixels = sixel.shrink(self.frame, w, h)[:box_h, :box_w]
            fill = self._background_rgb()
            key = (box_w, box_h, pixels.shape[:2], fill, self.sixel_colors)
            if self._sixel_key != key:
                # a sequence re-encodes only the bands a new frame changed
                self._sixel = sixel.SixelSequence((box_w, box_h), (pixels.shape[1], pixels.shape[0]),
                                                  self.sixel_colors, fill)
                self._sixel_key = key
            data = self._sixel.encode(pixels)
        else:
            from mosaic_tui.graphics import kitty
            if w * h < frame_w * frame_h:
                # shrink here (fewer bytes); the terminal draws it at its pixel size
                data = kitty.encode(self.frame, image_id=self.KITTY_IMAGE_ID, box=(w, h))
            else:
                # the terminal scales it up to the cells
                data = kitty.encode(self.frame, used_cols, used_rows, image_id=self.KITTY_IMAGE_ID)
        return data.decode("ascii"), cells

    def on_unmount(self) -> None:
        self.kitty_delete()

    def _background_rgb(self) -> tuple[int, int, int] | None:
        _, background = self.background_colors     # what shows behind the canvas
        if background.ansi is None and background.a > 0:
            return background.r, background.g, background.b
        if background.ansi == -1 and self.terminal_background is not None:
            return self.terminal_background        # the terminal's default, from OSC 11
        return None

    def kitty_delete(self) -> None:
        """Take a kitty image off the terminal (images live above the text layer)."""
        if not self._kitty_shown:
            return
        self._kitty_shown = False
        from mosaic_tui.graphics import kitty
        driver = getattr(self.app, "_driver", None)
        if driver is not None:
            driver.write(kitty.delete(self.KITTY_IMAGE_ID, self.in_tmux).decode("ascii"))

    def render(self):
        # before the first frame: blank (Widget.render would write the class name)
        return ""

    def render_lines(self, crop: Region) -> list[Strip]:
        if self.frame is None or not self.size.area:
            return super().render_lines(crop)      # blank, in the widget's background
        if self.image_mode == "halfblock":
            self.drawn_as = "halfblock"
            return self._halfblock_lines(crop)
        blocker = self.placement_blocker(crop)
        if blocker is not None:
            self.kitty_delete()
            self._placed_for = None
            self.drawn_as = f"halfblock ({blocker})"
            return self._halfblock_lines(crop)
        data, cells = self.image_sequence()
        region = self.region
        from rich.control import Control
        from rich.segment import ControlType, Segment
        move = Control.move_to(region.x + cells.x, region.y + cells.y).segment.text
        # zero-width control segments: Textual's cuts and crops never split them
        image = Segment(move + data, None, [(ControlType.CURSOR_FORWARD, 0)])
        style = self.rich_style
        width = crop.width
        if self.image_mode == "kitty":
            # kitty draws images above the text layer: blank cells below it are fine
            lines = [Strip.blank(width, style) for _ in range(crop.height)]
        else:
            # sixel pixels replace cells: blank around the image, skip over it
            # (a cursor-forward Textual does not count) so it does not flicker
            skip = Segment(f"\x1b[{cells.width}C", None, [(ControlType.CURSOR_FORWARD, cells.width)])
            around = Strip([Segment(" " * cells.x, style), skip,
                            Segment(" " * (width - cells.right), style)], cell_length=width)
            lines = [around if cells.y <= y < cells.bottom else Strip.blank(width, style)
                     for y in range(crop.height)]
        last = lines[-1]
        lines[-1] = Strip([*last, image], cell_length=width)
        self.drawn_as = self.image_mode
        self._placed_for = (self.frame.shape, width, self.size.height)
        self._kitty_shown = self.image_mode == "kitty"
        return lines


class FramesView(Widget, can_focus=True):
    relay_fps: float = RELAY_FPS      # the rate asked of the daemon's relay

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
        Binding("n", "next_stream", "Next stream", id="frames.next_stream"),
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
        self._toasts = 0
        self._header_at = 0.0
        self._canvas: FrameCanvas | None = None
        self._expect_until = 0.0
        self._expected = 0               # frames expected (keys played) and not come yet
        self._expect_task = None
        self._streams: list[int] = [stream]    # the run's streams, looked for every STREAMS_INTERVAL
        self._streams_at = 0.0

    def compose(self) -> ComposeResult:
        yield FramesHeader(id="frames-header")
        yield FrameCanvas()

    @property
    def canvas(self) -> FrameCanvas:
        if self._canvas is None:
            self._canvas = self.query_one(FrameCanvas)
        return self._canvas

    @property
    def mode(self) -> str:
        return graphics_of(self.app)[0]

    def on_mount(self) -> None:
        if leaving(self):
            return      # its screen was removed while it was being built: its children may be missing
        mode, colors, _ = graphics_of(self.app)
        self.canvas.color_mode = colors
        self.canvas.configure(getattr(self.app, "graphics", None))
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
        self.canvas.kitty_delete()

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
        home = getattr(self.app, "home", None)
        remote = getattr(home, "socket", None) is not None  # a --socket daemon may be another host's
        if self.force_relay is not True and not remote and self._segment_here():
            from workers.fastlane.reader import FrameReader
            self._stop_relay()
            self.reader = FrameReader(self.run_id, self.stream)
            self.source = SOURCE_SHM
        elif self.force_relay is not False:
            self.source = SOURCE_RELAY

    def _link(self):
        return getattr(self.app, "link", None)

    def streams(self) -> list[int]:
        """The run's streams: its segments on this host, or through the relay the episodes its
        config plays at once (the relay cannot list them); the one shown always among them."""
        now = time.monotonic()
        if now - self._streams_at < STREAMS_INTERVAL:
            return self._streams
        self._streams_at = now
        found: set[int] = {self.stream}
        if self.source != SOURCE_RELAY:
            try:
                from workers.fastlane import layout
                found.update(layout.list_streams(self.run_id))
            except Exception:
                pass
        else:
            run = (getattr(self._link(), "runs", None) or {}).get(self.run_id) or {}
            in_flight = ((run.get("config") or {}).get("params") or {}).get("episodes_in_flight")
            if type(in_flight) is int and in_flight > 1:
                found.update(range(in_flight))
        self._streams = sorted(found)
        return self._streams

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
                await link.call(P.FRAMES, run=self.run_id, stream=self.stream, fps=self.relay_fps,
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
        from daemon.protocol import decode_frame as decode
        try:
            frame = decode(params)
        except Exception as exc:
            self._error = f"bad relayed frame: {exc}"
            return
        got = (int(params.get("n", 0)), frame)
        self._relay_latest = got
        self._relay_history.append(got)
        if not self.paused:
            self.call_later(self.poll)      # drawn now, not at the next poll

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
        if not self.is_mounted:
            return
        if self.app.screen is not self.screen:
            self.canvas.kitty_delete()     # a kitty image would sit on top of that screen
            return
        toasts = len(toasts_of(self.screen))
        if toasts != self._toasts:
            # a notification came or went: the image must be drawn again, whole
            # (or as half-blocks while one covers it)
            self._toasts = toasts
            self.canvas.refresh()
        if self.paused:
            return
        self._choose_source()
        got = self._latest()
        now = time.monotonic()
        new = got is not None and (self.current is None or got[0] != self.current[0]
                                   or got[1] is not self.current[1])
        if new:
            self.current = got
            self._arrivals.append(now)
            self._expected = max(0, self._expected - 1)
        elif now - self._header_at < HEADER_INTERVAL:
            return                       # no new frame: the fps alone, 4 updates a second
        self._header_at = now
        # the header first: its repaint then reaches the screen before the canvas' does, and
        # the screen paints both at once (after the canvas alone, the number came a paint later)
        self.update_header()
        if new:
            self.canvas.show(got[0], got[1])
            self.frame_shown()

    def frame_shown(self) -> None:
        """A new frame went to the canvas (a hook: the Play screen repaints its panel after it)."""

    def expect_frame(self, seconds: float = EXPECT_FOR_S) -> None:
        """A frame is on its way (a key was played): look for it every EXPECT_POLL_S until it
        comes, or for ``seconds``, instead of waiting for the next poll (up to 1/poll_fps).
        Keys pressed faster than their frames come: looked for until as many frames came."""
        self._expect_until = time.monotonic() + seconds
        self._expected += 1
        if self._expect_task is None and self.is_mounted:
            self._expect_task = self.run_worker(self._look_for_frames(), group="frames-expect")

    async def _look_for_frames(self) -> None:
        try:
            while self._expected > 0 and time.monotonic() < self._expect_until and not self.paused:
                await asyncio.sleep(EXPECT_POLL_S)
                if self._newer_frame():
                    self.poll()
        finally:
            self._expected = 0
            self._expect_task = None

    def _newer_frame(self) -> bool:
        """Is there a frame newer than the one shown? (cheap: the ring's head, no pixels)"""
        current = self.current[0] if self.current is not None else None
        if self.source == SOURCE_SHM and self.reader is not None and self.reader.attached:
            return self.reader.head != current
        return True         # not attached yet, or the relay: poll() finds out

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
        streams = self.streams()
        if len(streams) > 1:
            text.append(f"  stream {self.stream} ({streams.index(self.stream) + 1} of {len(streams)}, n: next)",
                        style="bold")
        label = f"  graphics: {mode}"
        drawn = self.canvas.drawn_as if self.is_mounted else mode
        if mode == "halfblock":
            label += f" ({colors})"
        elif mode in ("sixel", "kitty") and drawn != mode:
            label += f" (drawn as half-blocks: {drawn.partition('(')[2].rstrip(')') or 'no frame'})"
        text.append(label, style="dim")
        if self._error:
            text.append(f"  {self._error}", style="bold red")
        return text

    def update_header(self) -> None:
        try:
            self.query_one(FramesHeader).update(self.header_text())
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

    def action_next_stream(self) -> None:
        """Show the run's next stream (after the last, the first): its own reader or relay, from
        its newest frame."""
        self._streams_at = 0.0
        streams = self.streams()
        if len(streams) < 2:
            return
        self._stop_relay()
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        self.stream = streams[(streams.index(self.stream) + 1) % len(streams)]
        self.source, self.current, self._last_check = None, None, 0.0
        self._relay_latest = None
        self._relay_history.clear()
        self._arrivals.clear()
        self.paused, self.held, self.index = False, [], -1
        self._header_at = 0.0
        self.poll()
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
