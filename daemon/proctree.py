"""Process facts read from /proc: start times (to tell a pid from its reuse) and trees.

Standard library only; imported by the per-run supervisor, which must start fast.
"""
from __future__ import annotations

import os
import signal


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'
    rparen = data.rfind(")")
    return [data[: data.find(" ")], data[data.find("(") + 1: rparen]] + data[rparen + 2:].split()


def start_time(pid: int) -> int | None:
    """Start time of pid in clock ticks since boot (field 22), or None if gone.

    A pid plus its start time names one process for the life of the machine:
    a reused pid has a later start time.
    """
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return int(fields[21])


def state(pid: int) -> str | None:
    """Single-letter state (R, S, T, Z, ...) or None if gone."""
    fields = _stat_fields(pid)
    return None if fields is None else fields[2]


def is_alive(pid: int, expected_start: int | None = None) -> bool:
    fields = _stat_fields(pid)
    if fields is None or fields[2] in ("Z", "X"):
        return False
    return expected_start is None or int(fields[21]) == expected_start


def parent_map() -> dict[int, int]:
    """pid -> ppid for every process visible in /proc."""
    parents: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            parents[int(entry.name)] = int(fields[3])
    return parents


def descendants(root: int) -> list[int]:
    """Every live descendant of root (not root itself), parents before children."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_map().items():
        children.setdefault(ppid, []).append(pid)
    out: list[int] = []
    stack = list(children.get(root, ()))
    while stack:
        pid = stack.pop(0)
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def marked(name: str, value: str) -> list[int]:
    """Live processes whose environment holds ``name=value`` (what each was started with: every
    process a run's supervisor started holds its MOSAIC_RUN_ID, those that left its tree too),
    this one left out; another user's are not readable, so not listed."""
    needle = f"{name}={value}\0".encode()
    me = os.getpid()
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if b"\0" + needle in b"\0" + env + b"\0" and is_alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def signal_tree(root: int, sig: int, include_root: bool = False) -> list[int]:
    """Send sig to root's descendants (and root); return the pids signalled."""
    targets = descendants(root)
    if include_root:
        targets.insert(0, root)
    sent = []
    for pid in targets:
        try:
            os.kill(pid, sig)
            sent.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def stop_tree(root: int, passes: int = 50) -> list[int]:
    """SIGSTOP root's descendants until a pass finds none it has not stopped.

    One pass lists the tree, then signals it: a process forked in between (its
    parent still running) would escape. Once every process of a pass is
    stopped none of them can fork, so the next pass sees whatever was born
    meanwhile, and the tree is still when a pass finds nothing new.
    """
    stopped: set[int] = set()
    for _ in range(passes):
        new = [pid for pid in descendants(root) if pid not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return sorted(stopped)


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
