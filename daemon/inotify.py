"""Minimal inotify through ctypes: the daemon learns that a worker wrote a line
without polling. The fd is non-blocking and goes into the asyncio loop with
``loop.add_reader``.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import struct

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_CREATE = 0x00000100
IN_DELETE_SELF = 0x00000400
IN_IGNORED = 0x00008000
IN_Q_OVERFLOW = 0x00004000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_EVENT = struct.Struct("iIII")  # wd, mask, cookie, len

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


class Inotify:
    def __init__(self) -> None:
        fd = _libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_init1: {os.strerror(err)}")
        self.fd = fd

    def add_watch(self, path: str, mask: int = IN_MODIFY | IN_CLOSE_WRITE) -> int:
        wd = _libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"inotify_add_watch {path}: {os.strerror(err)}")
        return wd

    def rm_watch(self, wd: int) -> None:
        _libc.inotify_rm_watch(self.fd, wd)

    def read(self) -> tuple[set[int], bool]:
        """Drain pending events: (watch descriptors that fired, queue overflowed)."""
        fired: set[int] = set()
        overflow = False
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                break
            if not data:
                break
            pos = 0
            while pos + _EVENT.size <= len(data):
                wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
                pos += _EVENT.size + length
                if mask & IN_Q_OVERFLOW:
                    overflow = True
                elif not mask & IN_IGNORED:
                    fired.add(wd)
        return fired, overflow

    def close(self) -> None:
        os.close(self.fd)
