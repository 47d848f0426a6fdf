"""Where a daemon keeps its state, and where its socket is.

Everything a daemon writes lives under its home, so two homes are two fully
separate installations (tests give each test its own). Clients compute the same
paths from the same home, so this module is shared by both sides.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from workers.sdk.rundir import CHECKPOINT_DIR, TENSORBOARD_DIR  # noqa: F401  (the run directory's names)

# sun_path is 108 bytes including the trailing NUL.
MAX_SOCKET_PATH = 107


def _checkout_root() -> Path | None:
    """The source checkout this code runs from, if it runs from one."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if pyproject.is_file() and (root / ".git").exists():
        try:
            if 'name = "mosaic-tui"' in pyproject.read_text():
                return root
        except OSError:
            return None
    return None


def default_home() -> Path:
    env = os.environ.get("MOSAIC_HOME")
    if env:
        return Path(env)
    root = _checkout_root()
    if root is not None:
        return root / "var"
    import platformdirs
    return Path(platformdirs.user_data_dir("mosaic-tui", appauthor=False))


@dataclass(frozen=True)
class Home:
    root: Path
    # a socket given by the user (--socket, $MOSAIC_SOCKET): a daemon elsewhere,
    # e.g. a server's, forwarded here by `ssh -L` (docs/remote.md)
    socket: Path | None = None
    # what the user calls that daemon, where the socket alone does not say (`--ssh HOST`:
    # "HOST:<its socket>"); messages name it, and the app keeps its memory of it apart
    label: str | None = None

    @classmethod
    def resolve(cls, home: str | os.PathLike | None = None, socket: str | os.PathLike | None = None,
                label: str | None = None) -> "Home":
        path = Path(home) if home else default_home()
        socket = socket or os.environ.get("MOSAIC_SOCKET") or None
        return cls(path.expanduser().absolute(), Path(socket).expanduser().absolute() if socket else None, label)

    @property
    def where(self) -> str:
        """The daemon this home talks to, as a message names it."""
        if self.label:
            return self.label
        if self.socket is not None:
            return f"the socket {self.socket}"
        return str(self.root)

    @property
    def own_daemon(self) -> bool:
        """Whether this home talks to its own daemon (not a forwarded or other one's socket)."""
        return self.socket is None or self.socket == replace(self, socket=None).socket_path

    @property
    def db(self) -> Path:
        return self.root / "mosaic.db"

    @property
    def runs_dir(self) -> Path:
        return self.root / "runs"

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    @property
    def logs_dir(self) -> Path:
        return self.root / "logs"

    @property
    def daemon_log(self) -> Path:
        return self.logs_dir / "daemon.log"

    @property
    def state_dir(self) -> Path:
        """0700 directory holding the socket, the lock and the pid file."""
        return self.root / "run"

    @property
    def lock_file(self) -> Path:
        return self.state_dir / "daemon.lock"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "daemon.pid"

    @property
    def settings_file(self) -> Path:
        return self.root / "settings.json"

    @property
    def shutdown_stops_file(self) -> Path:
        """The runs a daemon stopped when told to shut down (stop_runs_on_shutdown), to continue
        at its next start (continue_after_shutdown)."""
        return self.state_dir / "shutdown-stops.json"

    @property
    def socket_path(self) -> Path:
        """The socket, inside the home when the path fits in sun_path.

        A deep home would overflow the 107-byte limit; then the socket lives in
        a per-user 0700 directory under the temp dir, named by a hash of the
        home, so every client derives the same path without asking anyone.
        """
        if self.socket is not None:
            return self.socket
        preferred = self.state_dir / "daemon.sock"
        if len(os.fsencode(preferred)) <= MAX_SOCKET_PATH:
            return preferred
        digest = hashlib.sha256(os.fsencode(self.root)).hexdigest()[:20]
        return Path(tempfile.gettempdir()) / f"mosaic-{os.getuid()}" / f"{digest}.sock"

    def ensure(self) -> None:
        """Create the home's directories with their permissions."""
        for path in (self.root, self.runs_dir, self.logs_dir):
            path.mkdir(parents=True, exist_ok=True)
        for private in {self.state_dir, self.socket_path.parent}:
            private.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(private, 0o700)


# Files of one run directory (<home>/runs/<id>/). The worker runs with this
# directory as its working directory.
CONFIG_FILE = "config.json"          # the validated config the worker reads
EVENTS_FILE = "events.jsonl"         # worker stdout: telemetry, the source of truth
STDERR_FILE = "stderr.log"           # worker stderr
STDOUT_FILE = "stdout.log"           # stray prints of libraries (see workers.sdk.telemetry.take_stdout)
SUPERVISOR_FILE = "supervisor.json"  # pids and start times, written by the per-run supervisor
EXIT_FILE = "exit.json"              # exit status, written by the per-run supervisor
CHECKPOINTS_DIR = CHECKPOINT_DIR    # the names the workers use (workers/sdk/rundir.py)
