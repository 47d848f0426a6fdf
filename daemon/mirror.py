"""A run mirrored to W&B and MLflow, from the daemon's side: where a run is mirrored, and its mirror
process started, watched and found unfinished.

The mirror itself is a process of its own (daemon/mirror_process.py, its targets in
daemon/mirror_targets.py), one a mirrored run, started here by ``spawn`` at nice 19 when the run
starts and again when a restarted daemon adopts it. What it kept in the run's ``mirror.json``
(each target's offset and, once, what it failed with) is read here: ``warnings`` (said on the run
by RunManager._mirror_warnings) and ``unfinished`` (mirrors a SIGKILLed daemon took with it).

Nothing of W&B or MLflow is imported here, nor the mirror process's code: the daemon imports this
module for settings.json's check and every run's start. ``python -m daemon.mirror RUN_DIR --home
HOME`` runs the mirror process (its ``__main__`` below): the command line of every version.
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from typing import Any

from daemon import protocol as P
from daemon.home import EVENTS_FILE, Home

log = logging.getLogger("mosaic.mirror")

TARGETS = P.MIRROR_TARGETS
STATE_FILE = "mirror.json"          # per target: the byte offset mirrored, its run id, where it went
LOCK_FILE = "mirror.lock"           # held by the run's one mirror process
LOG_FILE = "mirror.log"             # the mirror process's own output


# -- settings ----------------------------------------------------------------------------------
def check_settings(value: Any) -> str | None:
    """What is wrong with settings.json's ``mirrors`` (None: nothing)."""
    if not isinstance(value, dict):
        return "mirrors must be an object: {\"wandb\": {...}, \"mlflow\": {...}}"
    known = {"wandb": ("enabled", "project", "entity", "mode"),
             "mlflow": ("enabled", "tracking_uri", "experiment"), "artifact_max_mb": ()}
    for target, section in value.items():
        if target not in known:
            return f"mirrors: unknown key {target!r} (known: {', '.join(known)})"
        if target == "artifact_max_mb":
            if not isinstance(section, (int, float)) or isinstance(section, bool) or section < 0:
                return "mirrors.artifact_max_mb must be a number >= 0"
            continue
        if not isinstance(section, dict):
            return f"mirrors.{target} must be an object"
        for key, item in section.items():
            if key not in known[target]:
                return f"mirrors.{target}: unknown key {key!r} (known: {', '.join(known[target])})"
            if key == "enabled" and not isinstance(item, bool):
                return f"mirrors.{target}.enabled must be true or false"
            if key == "mode" and item not in ("auto", "online", "offline"):
                return f"mirrors.{target}.mode must be auto, online or offline"
            if key != "enabled" and item is not None and not isinstance(item, str):
                return f"mirrors.{target}.{key} must be a string or null"
    return None


def home_settings(home: Home) -> dict[str, Any]:
    """settings.json's ``mirrors`` ({} when it has none or cannot be read: the daemon checked it at start)."""
    try:
        with open(home.settings_file) as f:
            value = json.load(f).get("mirrors") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return value if isinstance(value, dict) else {}


def run_targets(config: dict[str, Any], settings: dict[str, Any]) -> list[str]:
    """Where a run is mirrored: its config's ``mirror`` list, else the targets the home enables."""
    asked = config.get("mirror")
    if asked is not None:
        return [t for t in TARGETS if t in asked]
    return [t for t in TARGETS if isinstance(settings.get(t), dict) and settings[t].get("enabled")]


def mirror_root(home_root: str) -> str:
    return os.path.join(home_root, "mirrors")



# -- the daemon's side -------------------------------------------------------------------------
# the mirror's niceness: the lowest priority, so it takes only CPU the run leaves (its points wait;
# on 2 cores at the workers' nice 10 it cost CleanRL PPO a fifth of its steps/s)
MIRROR_NICE = 19


def spawn(home: Home, run_dir: str, nice: int = MIRROR_NICE, once: bool = False) -> subprocess.Popen | None:
    """Start the run's mirror process (it waits while another one holds the run's lock)."""
    # the command line every version started its mirrors with (what ps shows, what mosaic export
    # runs): this module's __main__ hands it to daemon/mirror_process.py
    command = [sys.executable, "-m", "daemon.mirror", run_dir, "--home", str(home.root)]
    if once:
        command.append("--once")
    try:
        with open(os.path.join(run_dir, LOG_FILE), "ab") as out:
            return subprocess.Popen(command, cwd=run_dir, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                    preexec_fn=(lambda: os.nice(nice)) if nice else None)
    except OSError as exc:
        log.warning("cannot start the mirror of %s: %s", run_dir, exc)
        return None


def warnings(run_dir: str) -> list[tuple[str, str]]:
    """(target, message): what the run's targets failed with, as kept in its mirror.json; the
    daemon says each on the run (RunManager._mirror_warnings)."""
    try:
        with open(os.path.join(run_dir, STATE_FILE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return []
    return [(target, section["warned"]) for target, section in state.items()
            if isinstance(section, dict) and isinstance(section.get("warned"), str)]


def unfinished(runs_dir: str) -> list[str]:
    """The runs whose mirror.json has a target not closed at the end of the run's events: a mirror
    that was killed (with its daemon, its machine) after its run ended. Cheap: one small file a run
    that was ever mirrored, a stat of the others."""
    found = []
    try:
        entries = list(os.scandir(runs_dir))
    except OSError:
        return found
    for entry in entries:
        try:
            with open(os.path.join(entry.path, STATE_FILE)) as f:
                state = json.load(f)
            size = os.path.getsize(os.path.join(entry.path, EVENTS_FILE))
        except (OSError, ValueError):
            continue
        if any(isinstance(t, dict) and t.get("closed_offset") != size for t in state.values()):
            found.append(entry.name)
    return found


if __name__ == "__main__":
    from daemon.mirror_process import main
    sys.exit(main())
