"""API keys: from an environment variable, or from a file only its owner can read.

A key is never part of a run's config: the config names the variable
(``api_key_env``, e.g. ``OPENAI_API_KEY``); the worker reads the variable, or
``<mosaic home>/keys/<VARIABLE>`` when the variable is not set. The file must be
mode 0600 (or stricter): a key readable by others is refused, not used.
"""
from __future__ import annotations

import os
import stat

KEYS_DIR = "keys"


class KeyRefused(ValueError):
    """No usable key (missing, or its file is readable by others)."""


def mosaic_home() -> str:
    """The mosaic home: ``$MOSAIC_HOME``, else ``~/.mosaic``."""
    return os.environ.get("MOSAIC_HOME") or os.path.expanduser("~/.mosaic")


def key_file(variable: str, home: str | None = None) -> str:
    """The path of the key file named by ``variable`` under the home's keys directory."""
    return os.path.join(home or mosaic_home(), KEYS_DIR, variable)


def read_key(variable: str, home: str | None = None) -> str | None:
    """The key named by ``variable``: the environment's value, else the key file's
    content, else None. Raises KeyRefused for a key file others can read."""
    value = os.environ.get(variable)
    if value:
        return value.strip()
    path = key_file(variable, home)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyRefused(f"{path} is readable by others (mode {stat.S_IMODE(info.st_mode):o}); "
                        f"chmod 600 it")
    with open(path, encoding="utf-8") as f:
        return f.read().strip() or None


def write_key(variable: str, value: str, home: str | None = None) -> str:
    """Store a key as ``<home>/keys/<variable>``, created 0600 (never briefly wider)."""
    path = key_file(variable, home)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value.strip() + "\n")
    os.chmod(path, 0o600)
    return path
