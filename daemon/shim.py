"""The per-run supervisor: one small process per run that outlives the daemon.

    python -m daemon.shim RUN_DIR [--grace S] [--cpus 0,1] [--memory-mb N] [--nice N] [--signal-file PATH]
                          -- COMMAND...

The pattern of conmon and containerd-shim. The daemon starts this in a session
of its own; it starts the worker in a process group of its own, with stdout on
``events.jsonl`` and stderr on ``stderr.log`` (so telemetry never passes
through the daemon and nothing is lost when the daemon dies), waits for it,
and records how it ended in ``exit.json``. It is a child subreaper, so
processes the worker leaves behind (env subprocesses, Ray's daemons) are
re-parented to it and killed when the worker ends: no run leaves a process. The
worker's TMPDIR is a folder of the run's own in the machine's temp dir, removed once the
worker's processes have ended: no run leaves a file there either (a killed worker cannot
remove its libraries' temporary files itself).

The worker (and so everything it starts) runs ``--nice N`` steps nicer than the
supervisor (``worker_nice`` in settings.json, default 10): a worker that keeps
every core busy must not starve the daemon and the app of CPU.

SIGTERM asks for a cancel: the worker's group gets SIGTERM, and after the grace
period every descendant gets SIGKILL. SIGUSR1 asks for a stop (checkpoint, then
end): the worker's main process alone gets it (its env processes would die of
it), and the daemon's timer, not this one, bounds how long the save may take.

``--signal-file PATH``: for a supervisor no signal can reach (a Ray job: the Jobs API sends
none but its stop's). Once a second (the wait loop's tick) it looks for PATH; a file there
naming USR1 or TERM is removed and acted on as if that signal had come. Without the option
nothing is looked for (local and Slurm runs are signalled).

The worker starts with SIGUSR1 ignored, and a stop is passed on only once the
worker catches it (/proc's SigCgt): a stop that comes early (Slurm's wall-time
warning as a job starts) waits for the worker's handler instead of killing it.

Its ``supervisor.json`` lists what it understands (``capabilities``): a run outlives the
daemon, and the daemon that re-adopts it after an upgrade may be newer than its supervisor. That
daemon sends a supervisor only what its record lists; a record without the list is from a
supervisor that takes SIGTERM alone (a SIGUSR1 would kill it: no handler).

Standard library only, and only what it needs: it starts once per run.
"""
from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time

from daemon import proctree
from daemon.home import EVENTS_FILE, EXIT_FILE, STDERR_FILE, SUPERVISOR_FILE

PR_SET_CHILD_SUBREAPER = 36
# what this supervisor understands, in its supervisor.json: "cancel" SIGTERM, "stop" SIGUSR1,
# "signal_file" --signal-file (understands() reads it back for the daemon)
CAPABILITIES = ("cancel", "stop", "signal_file")
# what a supervisor whose record lists nothing understands (one from before the list)
FIRST_CAPABILITIES = ("cancel",)


def write_json_atomic(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dirfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dirfd)
    finally:
        os.close(dirfd)


class Shim:
    def __init__(self, run_dir: str, command: list[str], grace: float,
                 cpus: list[int] | None = None, memory_mb: int | None = None, nice: int = 0,
                 signal_file: str | None = None):
        self.run_dir = os.path.abspath(run_dir)
        self.signal_file = signal_file
        self.command = command
        self.grace = grace
        self.cpus = cpus
        self.memory_mb = memory_mb
        self.nice = nice
        self.worker_pid = 0
        self.cancel_requested = False
        self.stop_requested = False
        self.stop_pending = False   # a stop the worker was not yet listening for
        self.kill_deadline: float | None = None
        self.tmp_dir: str | None = None

    def _spawn(self) -> int:
        events_fd = os.open(os.path.join(self.run_dir, EVENTS_FILE),
                            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        stderr_fd = os.open(os.path.join(self.run_dir, STDERR_FILE),
                            os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                os.setpgid(0, 0)
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGCHLD):
                    signal.signal(sig, signal.SIG_DFL)
                signal.signal(signal.SIGUSR1, signal.SIG_IGN)   # until the worker listens for a stop
                os.dup2(null_fd, 0)
                os.dup2(events_fd, 1)
                os.dup2(stderr_fd, 2)
                os.chdir(self.run_dir)
                # a native crash (SIGSEGV in llama.cpp, torch, XLA) leaves the crashing thread's
                # Python frames on stderr, so the failure reason can name the library (daemon/crash.py)
                os.environ.setdefault("PYTHONFAULTHANDLER", "1")
                if self.tmp_dir:
                    os.environ["TMPDIR"] = self.tmp_dir
                if self.cpus:
                    os.sched_setaffinity(0, self.cpus)
                if self.memory_mb:
                    import resource
                    limit = self.memory_mb * 1024 * 1024
                    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                if self.nice:
                    os.nice(self.nice)  # relative to the supervisor; the kernel caps it at 19
                os.execvp(self.command[0], self.command)
            except BaseException as exc:  # exec failed: say why on the run's stderr
                os.write(2, f"mosaic supervisor: cannot start {self.command[0]}: {exc}\n".encode())
            os._exit(127)
        for fd in (events_fd, stderr_fd, null_fd):
            os.close(fd)
        return pid

    def _on_term(self, signum, frame) -> None:
        if self.cancel_requested:
            return
        self.cancel_requested = True
        try:
            os.killpg(self.worker_pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
        # Descendants that left the group (setsid: Ray) get the same request.
        proctree.signal_tree(os.getpid(), signal.SIGTERM)
        self.kill_deadline = time.monotonic() + self.grace
        signal.setitimer(signal.ITIMER_REAL, max(self.grace, 0.01))

    def _on_stop(self, signum, frame) -> None:
        self.stop_requested = self.stop_pending = True
        self._pass_stop()

    def _pass_stop(self) -> None:
        """The stop to the worker, once it catches SIGUSR1 (else it stays pending, asked again
        each second by run()'s loop)."""
        if not self.worker_pid or not catches(self.worker_pid, signal.SIGUSR1):
            return
        self.stop_pending = False
        try:
            os.kill(self.worker_pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            pass

    def _on_alarm(self, signum, frame) -> None:
        # Grace is over: no process of this run survives.
        proctree.signal_tree(os.getpid(), signal.SIGKILL)

    def _read_signal_file(self) -> None:
        """--signal-file: a request there is acted on as the signal it names, then removed."""
        try:
            with open(self.signal_file) as f:
                name = f.read().strip().upper().removeprefix("SIG")
            os.unlink(self.signal_file)
        except (OSError, ValueError):
            return
        if name == "USR1":
            self._on_stop(signal.SIGUSR1, None)
        elif name == "TERM":
            self._on_term(signal.SIGTERM, None)

    def _reap_rest(self) -> None:
        """Stop and reap whatever the worker left behind: SIGTERM, then SIGKILL."""
        me = os.getpid()
        if not proctree.descendants(me):
            return
        proctree.signal_tree(me, signal.SIGTERM)
        deadline = time.monotonic() + min(self.grace, 5.0)
        killed = False
        while proctree.descendants(me):
            if not killed and time.monotonic() >= deadline:
                proctree.signal_tree(me, signal.SIGKILL)
                killed = True
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
            time.sleep(0.05)

    def run(self) -> int:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        signal.signal(signal.SIGALRM, self._on_alarm)
        signal.signal(signal.SIGUSR1, self._on_stop)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)

        started_at = time.time()
        # the run's own temp dir, inside the machine's (TMPDIR): what its libraries leave there when the
        # worker is killed (W&B's import-time dirs, multiprocessing's pymp-*) goes with the run
        remove_dead_tmp_dirs()
        try:
            self.tmp_dir = tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-")
        except OSError:
            self.tmp_dir = None   # a full /tmp: the worker uses the machine's, as it would anyway
        self.worker_pid = self._spawn()
        write_json_atomic(os.path.join(self.run_dir, SUPERVISOR_FILE), {
            "supervisor_pid": os.getpid(),
            "supervisor_start": proctree.start_time(os.getpid()),
            "worker_pid": self.worker_pid,
            "worker_start": proctree.start_time(self.worker_pid),
            "started_at": started_at,
            "capabilities": list(CAPABILITIES),
        })
        if self.signal_file:
            try:   # a request left from an earlier start of the run is not this one's
                os.unlink(self.signal_file)
            except OSError:
                pass

        status = usage = None
        worker_fd = os.pidfd_open(self.worker_pid)
        ended = False
        while not ended:
            if self.signal_file:
                self._read_signal_file()
            if self.stop_pending:
                self._pass_stop()
            # readable when the worker ends; the timeout: a pending stop asked again, every second
            select.select([worker_fd], [], [], 1.0)
            while True:   # reap every child that ended (the worker's orphans come to us too)
                try:
                    pid, wstatus, rusage = os.wait4(-1, os.WNOHANG)
                except ChildProcessError:
                    ended = True
                    break
                if pid == 0:
                    break
                if pid == self.worker_pid:
                    status, usage, ended = wstatus, rusage, True
        os.close(worker_fd)
        self._reap_rest()
        signal.setitimer(signal.ITIMER_REAL, 0)
        if self.tmp_dir:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

        record: dict = {"ended_at": time.time(), "worker_pid": self.worker_pid,
                        "cancel_requested": self.cancel_requested, "stop_requested": self.stop_requested}
        if usage is not None:
            # the worker's CPU time and peak RSS (with the children it waited for): what the
            # run cost the machine, read by benches and kept with the run's end
            record.update(cpu_s=round(usage.ru_utime + usage.ru_stime, 3),
                          max_rss_mb=round(usage.ru_maxrss / 1024, 1))  # ru_maxrss is in KiB
        if status is None:
            record.update(returncode=None, signal=None, reason="worker vanished")
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            record.update(returncode=-sig, signal=sig, signal_name=proctree.signal_name(sig))
        else:
            record.update(returncode=os.WEXITSTATUS(status), signal=None)
        write_json_atomic(os.path.join(self.run_dir, EXIT_FILE), record)
        return 0


TMP_PREFIX = "mosaic-run-"


def remove_dead_tmp_dirs() -> list[str]:
    """The temp dirs of supervisors that were killed (SIGKILL: they could not remove theirs), named
    mosaic-run-<supervisor pid>-*: removed when that pid is gone and the dir is this user's."""
    parent = tempfile.gettempdir()
    removed = []
    try:
        names = [n for n in os.listdir(parent) if n.startswith(TMP_PREFIX)]
    except OSError:
        return removed
    for name in names:
        pid = name[len(TMP_PREFIX):].partition("-")[0]
        path = os.path.join(parent, name)
        try:
            if not pid.isdigit() or os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue
    return removed


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (the SigCgt mask of /proc/PID/status)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


def understands(record: dict, capability: str) -> bool:
    """Whether the supervisor that wrote ``record`` (a run's supervisor.json) understands
    ``capability`` (CAPABILITIES): one whose record lists none is from before the list."""
    return capability in (record.get("capabilities") or FIRST_CAPABILITIES)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv or len(argv) < 3:
        print("usage: python -m daemon.shim RUN_DIR [--grace S] [--cpus 0,1] [--memory-mb N] [--nice N] "
              "[--signal-file PATH] -- COMMAND...",
              file=sys.stderr)
        return 2
    sep = argv.index("--")
    head, command = argv[:sep], argv[sep + 1:]
    options = {"--grace": "10", "--cpus": "", "--memory-mb": "", "--nice": "0", "--signal-file": ""}
    for flag in options:
        if flag in head:
            i = head.index(flag)
            options[flag] = head[i + 1]
            del head[i:i + 2]
    cpus = [int(c) for c in options["--cpus"].split(",") if c]
    memory = int(options["--memory-mb"]) if options["--memory-mb"] else None
    return Shim(head[0], command, float(options["--grace"]), cpus or None, memory,
                int(options["--nice"]), options["--signal-file"] or None).run()


if __name__ == "__main__":
    sys.exit(main())
