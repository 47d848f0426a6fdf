"""What the app remembers between sessions, and the user's keymap.

Both are small JSON files in the daemon home, next to the runs they describe:

- ``<home>/ui-state.json`` (``ui-state-<hash>.json`` for another daemon driven from
  this home: ``--ssh HOST``, ``--socket``): the screen the user left (runs, a run's detail and
  its tab, compare, workers), the highlighted run, the table's sort, the
  theme and the pinned metric tags. Written on every screen change and at
  exit, atomically.
- ``<home>/keymap.json`` (and ``<config dir>/mosaic-tui/keymap.json`` for
  every home, the home's file winning): ``{"binding id": "key[,key...]"}``,
  e.g. ``{"runs.new": "N", "app.quit": "ctrl+d"}``. Binding ids are listed by
  ``?`` in the app and in docs/app.md. Its ``play`` section holds a human play's keys
  (docs/play.md): ``{"play": {"MiniGrid": {"w": "forward", "t": null}}}``, per env id, env
  name or family, ``{key: action name}`` laid over the worker's key map (``null`` unbinds).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

STATE_FILE = "ui-state.json"
KEYMAP_FILE = "keymap.json"
PLAY_SECTION = "play"      # keymap.json's human-play keys, not a binding id


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def state_path(home) -> Path:
    """The home's own daemon: ``ui-state.json``. Another daemon driven from this home (``--ssh
    HOST``, ``--socket``) has a file of its own: what was seen there, and the run left open,
    are that daemon's (one shared file listed every local run as new after a remote session)."""
    if home.own_daemon:
        return Path(home.root) / STATE_FILE
    key = hashlib.sha256((home.label or str(home.socket)).encode()).hexdigest()[:12]
    return Path(home.root) / f"ui-state-{key}.json"


def load_state(home) -> dict[str, Any]:
    return _read_json(state_path(home))


def save_state(home, state: dict[str, Any]) -> None:
    path = state_path(home)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".ui-state-", dir=str(path.parent))
        with os.fdopen(fd, "w") as f:
            json.dump(state, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: nothing to remember, nothing to break


def keymap_paths(root: Path) -> list[Path]:
    paths = []
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
    paths.append(Path(config) / "mosaic-tui" / KEYMAP_FILE)
    paths.append(Path(root) / KEYMAP_FILE)
    return paths


def load_keymap(root: Path) -> tuple[dict[str, str], list[str]]:
    """(binding id -> keys, problems found) from the keymap files, later files winning."""
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for path in keymap_paths(root):
        if not path.exists():
            continue
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if not isinstance(data, dict):
            problems.append(f"{path}: must be a JSON object of binding id -> keys")
            continue
        for key, value in data.items():
            if key == PLAY_SECTION:
                continue        # load_play_keys reads it
            if isinstance(key, str) and isinstance(value, str) and value.strip():
                keymap[key] = value.replace(" ", "")
            else:
                problems.append(f"{path}: {key!r} must map to a key string")
    return keymap, problems


def load_play_keys(root: Path) -> tuple[dict[str, dict[str, str | int | None]], list[str]]:
    """(section -> {key: action name, index or None}, problems): the ``play`` sections of the
    keymap files, the home's winning key by key. A section is an env id (``ALE/Breakout-v5``),
    an env name (``Breakout``, ``MiniGrid``) or a family (``atari``, ``minigrid``), or ``*``."""
    sections: dict[str, dict[str, str | int | None]] = {}
    problems: list[str] = []
    for path in keymap_paths(root):
        if not path.exists():
            continue
        data = _read_json(path).get(PLAY_SECTION)
        if data is None:
            continue
        if not isinstance(data, dict):
            problems.append(f"{path}: 'play' must be an object of env (id, name or family) -> {{key: action}}")
            continue
        for env, keys in data.items():
            if not isinstance(keys, dict):
                problems.append(f"{path}: play {env!r} must be an object of key -> action name")
                continue
            section = sections.setdefault(str(env), {})
            for key, action in keys.items():
                if isinstance(action, (str, int, type(None))) and not isinstance(action, bool) and key.strip():
                    section[key.strip()] = action
                else:
                    problems.append(f"{path}: play {env!r} key {key!r} must map to an action name (or null)")
    return sections, problems
