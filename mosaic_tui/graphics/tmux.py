"""tmux passthrough: getting an escape sequence past tmux to the outer terminal.

tmux swallows sequences it does not know (kitty graphics, terminal queries).
Wrapped as ``ESC P tmux; <sequence with every ESC doubled> ESC \\`` it hands
them to the terminal it runs in, if the pane allows it
(``set -g allow-passthrough on``, tmux >= 3.3).
"""
from __future__ import annotations

import os
import re

ESC = b"\x1b"
ST = b"\x1b\\"


def in_tmux(env=None) -> bool:
    env = os.environ if env is None else env
    return bool(env.get("TMUX"))


def wrap(sequence: bytes) -> bytes:
    """One sequence (or a few short ones) wrapped for tmux passthrough."""
    return b"\x1bPtmux;" + sequence.replace(ESC, ESC + ESC) + ST


# A wrapped sequence ends at the first ESC \\ whose ESC is not a doubled one.
_WRAPPED = re.compile(rb"\x1bPtmux;(.*?)(?<!\x1b)\x1b\\", re.DOTALL)


def unwrap_all(data: bytes) -> bytes:
    """The inverse of ``wrap`` over consecutive wrapped sequences, for tests."""
    return b"".join(m.group(1).replace(ESC + ESC, ESC) for m in _WRAPPED.finditer(data))
