"""`mosaic --ssh [user@]host`: a daemon on a server, driven from here over OpenSSH.

Nothing of MOSAIC listens on the network. OpenSSH's stream-local forwarding
(``ssh -L local.sock:remote.sock``, OpenSSH 6.7+) carries the daemon's Unix
socket to a socket here, and every command (and the app) talks to that as to a
local daemon: the same protocol, the frames through the daemon's relay. On the
server, `mosaic daemon start` first (a no-op when one runs) and `mosaic daemon
status --json` tell where its socket is. A dropped link is reopened by a
watcher thread; the app's link reconnects by itself meanwhile (its banner says
so). docs/remote.md tells the whole story.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

RESTART_SECONDS = 1.0
READY_SECONDS = 30.0


class RemoteError(RuntimeError):
    pass


def _die_with_parent():
    """preexec_fn of the ssh process: the kernel sends it SIGTERM when this client ends, however
    it ends (SIGKILL, a crash), so no forward outlives its client. Linux's PR_SET_PDEATHSIG;
    elsewhere None (the client's SIGTERM/SIGHUP handler in cli.main still stops it)."""
    try:
        import ctypes
        import signal
        prctl = ctypes.CDLL(None, use_errno=True).prctl   # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def remove_stale_sockets(folder: Path) -> list[Path]:
    """The sockets of forwards whose client is gone without removing its own (SIGKILLed: no code of
    it ran), ``ssh-<client pid>-<hash>.sock``, and those of older versions' clients (``ssh-<hash>.sock``)
    that nothing listens on: removed; the paths removed."""
    removed = []
    for path in folder.glob("ssh-*.sock"):
        pid = path.name.split("-")[1]
        if not pid.isdigit():
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                try:
                    s.connect(str(path))
                except ConnectionRefusedError:
                    path.unlink(missing_ok=True)
                    removed.append(path)
                except OSError:
                    pass
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            path.unlink(missing_ok=True)
            removed.append(path)
        except OSError:
            pass   # alive, another user's: not ours to judge
    return removed


class SSHForward:
    def __init__(self, target: str, remote_home: str | None = None, ssh_config: str | None = None,
                 remote_mosaic: str = "mosaic"):
        self.target = target
        self.remote_home = remote_home
        self.ssh_config = ssh_config
        self.remote_mosaic = remote_mosaic
        digest = hashlib.sha256(f"{target}:{remote_home}".encode()).hexdigest()[:12]
        # the client's pid in the name: a SIGKILLed client's socket is known for stale by the next one
        self.local = Path(tempfile.gettempdir()) / f"mosaic-{os.getuid()}" / f"ssh-{os.getpid()}-{digest}.sock"
        self.remote_socket: str | None = None
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._watcher: threading.Thread | None = None

    def ssh(self) -> list[str]:
        cmd = ["ssh"]
        if self.ssh_config:
            cmd += ["-F", self.ssh_config]
        # no password prompts in the middle of the app; a dead link is noticed in ~10 s
        return cmd + ["-o", "BatchMode=yes", "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2"]

    def remote(self, *args: str, timeout: float = 60) -> str:
        """Run `mosaic ARGS` on the server; its stdout."""
        line = self.remote_mosaic
        if self.remote_home:
            line += f" --home {shlex.quote(self.remote_home)}"
        line += " " + " ".join(shlex.quote(a) for a in args)
        proc = subprocess.run(self.ssh() + [self.target, line], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            raise RemoteError(f"{self.target}: `{line}` failed: {why}")
        return proc.stdout

    def start(self) -> "SSHForward":
        self.remote("daemon", "start")
        status = json.loads(self.remote("daemon", "status", "--json"))
        self.remote_socket = status["socket"]
        self.local.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(self.local.parent, 0o700)
        remove_stale_sockets(self.local.parent)
        self._open()
        self._watcher = threading.Thread(target=self._watch, name="ssh-forward", daemon=True)
        self._watcher.start()
        return self

    def _open(self) -> None:
        try:
            self.local.unlink()
        except FileNotFoundError:
            pass
        self.proc = subprocess.Popen(
            self.ssh() + ["-N", "-o", "ExitOnForwardFailure=yes", "-o", "StreamLocalBindUnlink=yes",
                          "-o", "StreamLocalBindMask=0177", "-L", f"{self.local}:{self.remote_socket}", self.target],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
            preexec_fn=_die_with_parent())
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
                raise RemoteError(f"ssh {self.target} ended: {err[-1] if err else self.proc.returncode}")
            if self._answers():
                return
            time.sleep(0.1)
        raise RemoteError(f"the forwarded socket {self.local} did not answer within {READY_SECONDS:.0f}s")

    def _answers(self) -> bool:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            try:
                s.connect(str(self.local))
                return True
            except OSError:
                return False

    def _watch(self) -> None:
        """Reopen the forwarding when ssh ends (the link dropped, the laptop slept)."""
        while not self._stop.is_set():
            if self.proc is not None and self.proc.poll() is not None and not self._stop.is_set():
                try:
                    self._open()
                    self.restarts += 1
                except RemoteError:
                    pass
            self._stop.wait(RESTART_SECONDS)

    def stop(self) -> None:
        self._stop.set()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        try:
            self.local.unlink()
        except FileNotFoundError:
            pass
