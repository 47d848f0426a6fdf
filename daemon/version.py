"""This mosaic's version: what a daemon tells its clients (``hello``, ``status``) and a client
compares with its own.

The package's version, and in a git checkout (where ``git pull`` upgrades mosaic while the
daemon and its runs keep going) the commit it runs from: the package's version stays the same
between pulls, the commit does not. ``0.1.0+g19c1b7d1a2`` from a checkout, ``0.1.0`` from a
wheel. Read once a process, from files only (no git command), standard library only.
"""
from __future__ import annotations

import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMIT_CHARS = 10


@functools.cache
def version() -> str:
    commit = checkout_commit(ROOT)
    base = package_version()
    return f"{base}+g{commit[:COMMIT_CHARS]}" if commit else base


def package_version() -> str:
    """pyproject.toml's version in a checkout, else the installed distribution's."""
    try:
        text = (ROOT / "pyproject.toml").read_text()
        found = re.search(r'(?m)^version\s*=\s*"([^"]+)"', text)
        if found:
            return found.group(1)
    except OSError:
        pass
    try:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as dist_version
        return dist_version("mosaic-tui")
    except (ImportError, PackageNotFoundError):
        return "unknown"


def checkout_commit(root: Path) -> str | None:
    """The commit a git checkout at ``root`` has checked out (a worktree's too), or None."""
    git = root / ".git"
    try:
        if git.is_file():   # a worktree or submodule: "gitdir: PATH"
            git = (root / git.read_text().split(":", 1)[1].strip()).resolve()
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None   # detached
        ref = head.split(":", 1)[1].strip()
        common = git
        if (git / "commondir").is_file():   # a worktree keeps its branches in the main repository
            common = (git / (git / "commondir").read_text().strip()).resolve()
        for where in (git, common):
            if (where / ref).is_file():
                return (where / ref).read_text().strip() or None
        for where in (git, common):
            if (where / "packed-refs").is_file():
                for line in (where / "packed-refs").read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split(" ", 1)[0]
    except (OSError, IndexError):
        return None
    return None
