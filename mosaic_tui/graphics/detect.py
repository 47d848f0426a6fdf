"""What the terminal can draw, asked once before Textual starts.

    caps = detect("auto")          # or "kitty" | "sixel" | "halfblock" | "none"
    caps.graphics, caps.colors, caps.cell_px, caps.reason

One combined query goes to the tty, ending with DA1 (``ESC [ c``), which
every terminal answers; terminals answer in order, so the DA1 reply marks the
end of the replies to everything before it:

- the kitty graphics query ``ESC _G i=31,s=1,v=1,a=q,t=d,f=24;AAAA ESC \\``
  (a kitty-capable terminal replies ``ESC _G i=31;OK ESC \\``),
- ``ESC [16t``, the cell size in pixels (reply ``ESC [6;<h>;<w>t``),
- XTSMGRAPHICS ``ESC [?1;1;0S``, the number of sixel colour registers
  (reply ``ESC [?1;0;<n>S``; a real VT340 has 16, xterm 1024),
- OSC 11, the default background colour (reply ``ESC ]11;rgb:RRRR/GGGG/BBBB ST``):
  a sixel frame is padded to whole cells with it when the app's theme uses the
  terminal's own background, whose colour Textual cannot know,
- DA1: attribute 4 in the reply means sixel.

Inside tmux the kitty and cell-size queries are wrapped for passthrough, so
the outer terminal answers them; DA1 is not: tmux answers it itself, at once
and before the outer replies arrive. So in tmux its DA1 is only a hint
(attribute 4: tmux itself draws sixel, tmux >= 3.4 built with it), and
reading goes on until the outer replies came or the timeout ran out.

Must run before Textual starts: Textual's input thread would take the replies.
"""
from __future__ import annotations

import os
import re
import select
import time
from dataclasses import dataclass, field

from mosaic_tui.graphics import tmux

MODES = ("auto", "kitty", "sixel", "halfblock", "none")
DEFAULT_CELL_PX = (10, 20)     # assumed when the terminal does not say

KITTY_QUERY = b"\x1b_Gi=31,s=1,v=1,a=q,t=d,f=24;AAAA\x1b\\"
CELL_SIZE_QUERY = b"\x1b[16t"
SIXEL_COLORS_QUERY = b"\x1b[?1;1;0S"
DA1_QUERY = b"\x1b[c"
BACKGROUND_QUERY = b"\x1b]11;?\x1b\\"
DEFAULT_SIXEL_COLORS = 256     # assumed when the terminal does not say

_KITTY_REPLY = re.compile(rb"\x1b_Gi=31;([^\x1b]*)\x1b\\")
_CELL_REPLY = re.compile(rb"\x1b\[6;(\d+);(\d+)t")
_DA1_REPLY = re.compile(rb"\x1b\[\?([\d;]*)c")
_SIXEL_COLORS_REPLY = re.compile(rb"\x1b\[\?1;0;(\d+)S")
_BACKGROUND_REPLY = re.compile(rb"\x1b\]11;rgb:([0-9a-fA-F]{1,4})/([0-9a-fA-F]{1,4})/([0-9a-fA-F]{1,4})(?:\x1b\\|\x07)")


@dataclass
class Replies:
    """What came back, parsed. ``da1`` holds one tuple per DA1 reply, in order."""
    kitty: str | None = None               # "OK" or the terminal's error text
    cell_px: tuple[int, int] | None = None  # (width, height)
    sixel_colors: int | None = None        # colour registers, from XTSMGRAPHICS
    background: tuple[int, int, int] | None = None   # default background, from OSC 11
    da1: list[tuple[int, ...]] = field(default_factory=list)


@dataclass
class Capabilities:
    graphics: str                          # kitty | sixel | halfblock | none
    colors: str                            # truecolor | 256
    cell_px: tuple[int, int]               # (width, height), measured or DEFAULT_CELL_PX
    cell_px_measured: bool
    in_tmux: bool
    kitty: bool
    sixel: bool
    reason: str
    sixel_colors: int = DEFAULT_SIXEL_COLORS   # palette size to quantise sixel frames to (<= 256)
    background: tuple[int, int, int] | None = None   # the terminal's default background, if it said
    replies: Replies | None = None

    def pane_px(self, cols: int, rows: int) -> tuple[int, int]:
        """Pixel box of a pane of cols x rows cells (for the sixel encoder)."""
        return cols * self.cell_px[0], rows * self.cell_px[1]


def build_query(in_tmux: bool) -> bytes:
    """The combined query; DA1 last, and never wrapped.

    In tmux the sixel-registers query is not wrapped either: sixel inside tmux
    is drawn by tmux itself (>= 3.4), so tmux's registers are what count.
    """
    graphics = KITTY_QUERY + CELL_SIZE_QUERY
    if in_tmux:
        graphics = tmux.wrap(KITTY_QUERY) + tmux.wrap(CELL_SIZE_QUERY)
    return graphics + SIXEL_COLORS_QUERY + BACKGROUND_QUERY + DA1_QUERY


def parse_replies(data: bytes) -> Replies:
    replies = Replies()
    kitty = _KITTY_REPLY.search(data)
    if kitty:
        replies.kitty = kitty.group(1).decode("ascii", "replace")
    cell = _CELL_REPLY.search(data)
    if cell:
        height, width = int(cell.group(1)), int(cell.group(2))
        if width > 0 and height > 0:
            replies.cell_px = (width, height)
    registers = _SIXEL_COLORS_REPLY.search(data)
    if registers and int(registers.group(1)) > 0:
        replies.sixel_colors = int(registers.group(1))
    background = _BACKGROUND_REPLY.search(data)
    if background:
        # 1-4 hex digits per channel, scaled to 8 bits
        replies.background = tuple(int(h, 16) * 255 // (16 ** len(h) - 1) for h in background.groups())
    for match in _DA1_REPLY.finditer(data):
        replies.da1.append(tuple(int(p) for p in match.group(1).split(b";") if p))
    return replies


def _complete(data: bytes, in_tmux: bool) -> bool:
    replies = parse_replies(data)
    if not in_tmux:
        return bool(replies.da1)
    # tmux's own DA1 came first; the outer terminal's answers are what we wait for
    return replies.kitty is not None and replies.cell_px is not None


def query_terminal(fd: int, in_tmux: bool, timeout: float) -> tuple[Replies, bytes]:
    """Send the combined query on a tty fd and read replies until done or timeout.

    The tty is in non-canonical, no-echo mode meanwhile (the replies must not
    show up on screen) and restored afterwards.
    """
    import termios
    saved = termios.tcgetattr(fd)
    raw = termios.tcgetattr(fd)
    raw[3] &= ~(termios.ICANON | termios.ECHO)
    raw[6][termios.VMIN] = 0
    raw[6][termios.VTIME] = 0
    data = b""
    try:
        termios.tcsetattr(fd, termios.TCSANOW, raw)
        os.write(fd, build_query(in_tmux))
        deadline = time.monotonic() + timeout
        while not _complete(data, in_tmux):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                break
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
    return parse_replies(data), data


def _window_cell_px(fd: int) -> tuple[int, int] | None:
    """Cell size from TIOCGWINSZ's pixel fields, when the terminal fills them."""
    import fcntl
    import struct
    import termios
    try:
        rows, cols, xpixel, ypixel = struct.unpack(
            "HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return None
    if rows and cols and xpixel and ypixel:
        return xpixel // cols, ypixel // rows
    return None


def _colors(env, replies: Replies | None) -> str:
    if env.get("COLORTERM", "").lower() in ("truecolor", "24bit"):
        return "truecolor"
    if replies is not None and replies.kitty == "OK":
        return "truecolor"  # every kitty-graphics terminal does 24-bit colour
    return "256"


def choose(mode: str, replies: Replies | None, in_tmux: bool) -> tuple[str, str]:
    """(graphics, reason) from the override and what the terminal said."""
    if mode != "auto":
        return mode, f"--graphics {mode}"
    if replies is None:
        return "halfblock", "no terminal to ask"
    da1 = replies.da1
    if replies.kitty == "OK":
        where = "the terminal outside tmux" if in_tmux else "the terminal"
        return "kitty", f"{where} answered the kitty graphics query"
    if in_tmux:
        tmux_da1 = da1[0] if da1 else ()
        if 4 in tmux_da1:
            return "sixel", "tmux reports sixel (attribute 4 in its DA1)"
        if not da1:
            return "halfblock", "no DA1 reply inside tmux"
        return "halfblock", ("no kitty reply through tmux (is 'allow-passthrough' on?) "
                             "and tmux draws no sixel")
    if not da1:
        return "halfblock", "the terminal did not answer DA1"
    if 4 in da1[-1]:
        return "sixel", "DA1 lists sixel (attribute 4)"
    return "halfblock", "no kitty graphics reply and no sixel in DA1"


def requested_mode(args=None, env=None) -> str:
    """The mode asked for: ``--graphics``, else ``$MOSAIC_GRAPHICS``, else auto."""
    env = os.environ if env is None else env
    return getattr(args, "graphics", None) or env.get("MOSAIC_GRAPHICS") or "auto"


def detect(mode: str = "auto", *, fd: int | None = None, timeout: float = 0.3,
           env=None) -> Capabilities:
    """Ask the terminal (unless ``mode`` makes that pointless) and decide.

    ``fd`` is the tty to use (default: /dev/tty, opened and closed here).
    ``timeout`` bounds the wait for replies; a terminal that answers DA1
    ends it early, which is every terminal but a few outside tmux.
    """
    if mode not in MODES:
        raise ValueError(f"graphics mode must be one of {', '.join(MODES)}, not {mode!r}")
    env = os.environ if env is None else env
    inside_tmux = tmux.in_tmux(env)
    replies = None
    cell_px = None
    # halfblock and none draw no pixels: nothing to ask, start instantly
    if mode in ("auto", "kitty", "sixel"):
        own = fd is None
        try:
            if own:
                fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            fd = None
        if fd is not None:
            try:
                if os.isatty(fd):
                    replies, _ = query_terminal(fd, inside_tmux, timeout)
                    cell_px = replies.cell_px or _window_cell_px(fd)
            except OSError:
                replies = None
            finally:
                if own:
                    os.close(fd)
    graphics, reason = choose(mode, replies, inside_tmux)
    return Capabilities(
        graphics=graphics,
        colors=_colors(env, replies),
        cell_px=cell_px or DEFAULT_CELL_PX,
        cell_px_measured=cell_px is not None,
        in_tmux=inside_tmux,
        kitty=bool(replies and replies.kitty == "OK"),
        sixel=bool(replies and replies.da1 and 4 in (replies.da1[0] if inside_tmux else replies.da1[-1])),
        reason=reason,
        sixel_colors=min(256, (replies and replies.sixel_colors) or DEFAULT_SIXEL_COLORS),
        background=replies.background if replies else None,
        replies=replies,
    )
