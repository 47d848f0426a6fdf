"""Fault injection: strangers, fuzzed input, abusive workers, slow clients, load, full disks.

Each test records its fault and outcome for docs/reliability.md (see
tests/reliability_report.py).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon import proctree
from daemon import protocol as P
from daemon.home import Home
from tests import reliability_report as report
from tests.helpers import ROOT, Mosaic, connect, wait_for, wait_state, worker_scalar

pytestmark = pytest.mark.reliability


def _daemon_pid(home) -> int:
    return int(home.pid_file.read_text())


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _all_events(client, run_id, types) -> list[dict]:
    """read_events, paged to the end."""
    events, offset = [], 0
    while True:
        page = client.call(P.EVENTS, run=run_id, types=types, **{"from": offset})
        events += page["events"]
        if page["next"] >= page["end"]:
            return events
        assert page["next"] > offset, "read_events made no progress"
        offset = page["next"]


def _subscribed_backlog(home, run_id) -> list[dict]:
    """Every event of a finished run as a subscriber from offset 0 is sent it."""
    events = []
    with connect(home) as c:
        c.call(P.SUBSCRIBE, events=[run_id])
        for method, params in c.notifications(timeout=60):
            if method == P.NOTIFY_EVENTS:
                events += params["events"]
            elif method == P.NOTIFY_SYNCED:
                return events
    raise AssertionError("no synced notification")


def _scalar_steps(home, run_id) -> list[int]:
    """The steps of the worker's scalars (the daemon's system/* samples share the file)."""
    steps = []
    with open(home.run_dir(run_id) / "events.jsonl", "rb") as f:
        for line in f:
            if b'"type":"scalar"' in line[:200] and b'"tag":"system/' not in line[:200]:
                steps.append(json.loads(line)["step"])
    return steps


# -- access ---------------------------------------------------------------------
STRANGER = ("import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(sys.argv[1])\n"
            "except PermissionError:\n"
            "    print('EACCES'); sys.exit(0)\n"
            "try:\n"
            "    s.sendall(b'{\"id\":1,\"method\":\"submit\",\"params\":{\"config\":{\"worker\":\"synthetic\",'\n"
            "              b'\"algo\":\"emit\",\"env\":\"none\",\"steps\":10}}}\\n')\n"
            "except (BrokenPipeError, ConnectionResetError):\n"
            "    pass  # refused before the request was even sent\n"
            "print(s.makefile().readline().strip())\n")


def _as_nobody(path: str) -> str:
    proc = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "/usr/bin/python3", "-c", STRANGER, path], capture_output=True, text=True, timeout=30)
    return proc.stdout.strip() + proc.stderr.strip()


@pytest.mark.skipif(os.getuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, setpriv and a system python to act as another user")
def test_another_user_is_refused_and_nothing_runs(daemon, mosaic):
    sock = str(daemon.socket_path)
    # the private directory keeps strangers out before the daemon is even asked
    assert _as_nobody(sock) == "EACCES"
    # with the directory and socket opened up, the daemon's SO_PEERCRED check refuses
    os.chmod(daemon.root, 0o755)
    os.chmod(daemon.socket_path.parent, 0o755)
    os.chmod(sock, 0o666)
    try:
        reply = json.loads(_as_nobody(sock))
    finally:
        os.chmod(daemon.socket_path.parent, 0o700)
        os.chmod(sock, 0o600)
    assert reply["error"]["message"] == "permission denied: not the daemon's user"
    assert "no runs" in mosaic.run("ls", check=True).stdout  # the submit was never executed
    report.record("access", "connection from another user (nobody via setpriv)",
                  "refused by the 0700 directory, and by SO_PEERCRED when opened up; nothing executed")


# -- bad input on the socket ------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20)
requests = st.fixed_dictionaries(
    {"method": st.sampled_from(sorted(P.METHODS - {P.SHUTDOWN})) | st.text(max_size=12)},
    optional={"id": st.integers() | st.text(max_size=5) | st.none() | st.floats(allow_nan=False),
              "params": st.dictionaries(st.sampled_from(["run", "config", "from", "events", "cursors", "worker",
                                                         "algo", "stream", "tags", "runs", "rev", "max_bytes"]),
                                        json_values, max_size=4) | json_values,
              "jsonrpc": st.just("2.0")})
lines = (st.binary(max_size=300)
         | requests.map(lambda r: json.dumps(r).encode())
         | requests.map(lambda r: json.dumps(r).encode()[: max(1, len(json.dumps(r)) // 2)])  # truncated
         | st.integers(1, 5000).map(lambda n: b"[" * n + b"]" * n)  # deep nesting
         | st.integers(1, 5000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n))


def test_fuzzed_requests_get_answers_and_disturb_nobody(daemon, mosaic):
    pid = _daemon_pid(daemon)
    run_id = mosaic.synthetic(200000, "rate=500", "tags=1", "episode_every=0")
    wait_state(daemon, run_id, P.RUNNING)
    watcher = connect(daemon, "watcher")
    watcher.call(P.SUBSCRIBE, events=[run_id])
    counter = {"inputs": 0}
    fuzz = socket.socket(socket.AF_UNIX)
    fuzz.settimeout(20)
    fuzz.connect(str(daemon.socket_path))
    buf = [b""]

    def reply_to(req_id: int) -> dict:
        while True:
            while b"\n" in buf[0]:
                line, buf[0] = buf[0].split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("id") == req_id and "result" in msg:
                    return msg
            chunk = fuzz.recv(1 << 20)
            assert chunk, "the daemon closed the fuzz connection"
            buf[0] += chunk

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(lines, min_size=1, max_size=4))
    def run(batch):
        counter["inputs"] += len(batch)
        fuzz.sendall(b"\n".join(b.replace(b"\n", b" ") for b in batch) + b"\n")
        # whatever came before, the connection still answers a good request
        fuzz.sendall(b'\n{"id":"probe","method":"status"}\n'.replace(b'"probe"', b"424242"))
        assert reply_to(424242)["result"]["pid"] == pid

    run()
    fuzz.close()
    # the watcher kept receiving its run's lines, contiguous and in order
    cursor, steps = 0, []
    for method, params in watcher.notifications(timeout=2):
        if method == P.NOTIFY_EVENTS:
            assert params["from"] == cursor
            cursor = params["to"]
            steps += [e["step"] for e in params["events"] if worker_scalar(e)]
        if len(steps) > 500:
            break
    watcher.close()
    assert steps and steps == list(range(steps[0], steps[0] + len(steps)))
    assert _rss_mb(pid) < 150
    mosaic.run("cancel", run_id, check=True)
    report.record("socket", "fuzzed request lines (hypothesis): random bytes, truncated JSON, deep nesting, "
                  "wrong types, unknown methods", "daemon answered every probe; another subscriber undisturbed; "
                  f"RSS {_rss_mb(pid):.0f} MB", lines_lost=0, inputs=counter["inputs"])


def test_a_thousand_connections_opened_and_dropped(daemon):
    pid = _daemon_pid(daemon)
    fds_before = len(os.listdir(f"/proc/{pid}/fd"))
    busy = 0
    for i in range(1000):
        s = socket.socket(socket.AF_UNIX)
        while True:
            try:
                s.connect(str(daemon.socket_path))
                break
            except BlockingIOError:  # accept queue full for a moment: a real client retries
                busy += 1
                time.sleep(0.01)
        kind = i % 4
        if kind == 1:
            s.sendall(b'{"id":1,"method":"sub')  # half a request
        elif kind == 2:
            s.sendall(b'{"id":1,"method":"list"}\n')  # ask, never read
        elif kind == 3:
            s.shutdown(socket.SHUT_WR)  # half-closed
        s.close()
    with connect(daemon) as c:
        wait_for(lambda: c.call(P.STATUS)["clients"] == 1, 20, what="dropped clients to be gone")
    assert len(os.listdir(f"/proc/{pid}/fd")) <= fds_before + 2
    report.record("socket", "1,000 connections opened and dropped (half requests, unread replies, half-closed)",
                  f"daemon serves on; no file descriptor leaked ({busy} connects found the queue full "
                  "for a moment and retried)", inputs=1000)


def test_half_closed_client_still_gets_its_answer(daemon):
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(daemon.socket_path))
    s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"status"}\n')
    s.shutdown(socket.SHUT_WR)
    data = s.makefile("rb").readline()
    assert json.loads(data)["id"] == 7
    s.close()
    report.record("socket", "client half-closes right after its request", "the reply is still delivered")


# -- bad input from workers ---------------------------------------------------
def test_garbage_and_over_long_lines_from_a_worker(daemon, mosaic):
    pid = _daemon_pid(daemon)
    garbage = mosaic.synthetic(2000, "rate=0", "tags=1", "episode_every=0", "garbage_every=10")
    huge = mosaic.synthetic(3, "rate=0", "tags=1", "episode_every=0", "payload_bytes=10485760")
    for run_id in (garbage, huge):
        assert mosaic.run("wait", run_id, "--timeout", "120").returncode == 0
    g = mosaic.show(garbage)["summary"]
    assert g["invalid"] == 200 and g["steps"] == 2000 and g["completed"]
    h = mosaic.show(huge)["summary"]
    assert h["invalid"] == 3 and h["completed"]  # three 10 MB lines counted, the run went on
    with connect(daemon) as c:
        events = _all_events(c, huge, ["invalid", "run_completed"])
        parsed = {run_id: _all_events(c, run_id, None) for run_id in (garbage, huge)}
    assert [e["type"] for e in events] == ["invalid"] * 3 + ["run_completed"]
    # a subscriber served the backlog gets what read_events parses, invalid events
    # and all: the stretches taken verbatim (not parsed twice) end where garbage begins
    def same(events):  # an invalid event's time is when it was read, the rest is the file's
        return [{k: v for k, v in e.items() if not (k == "t" and e["type"] == "invalid")} for e in events]
    for run_id in (garbage, huge):
        assert same(_subscribed_backlog(daemon, run_id)) == same(parsed[run_id])
    assert all("longer than" in e["error"] for e in events[:3])
    assert _rss_mb(pid) < 150
    report.record("worker output", "non-JSON lines, binary garbage, 10 MB lines",
                  "each stored in the file, counted and shown as an invalid event; the run went on",
                  lines_lost=0)


def test_partial_line_at_a_crash(daemon, mosaic, tmp_path):
    run_id = mosaic.synthetic(10_000_000, "rate=200")
    wait_state(daemon, run_id, P.RUNNING)
    # the worker dies in the middle of a line: append half an event, then SIGKILL it
    sup = json.loads((daemon.run_dir(run_id) / "supervisor.json").read_text())
    os.kill(sup["worker_pid"], signal.SIGSTOP)
    with open(daemon.run_dir(run_id) / "events.jsonl", "ab") as f:
        f.write(b'{"v":1,"type":"scalar","t":1.0,"tag":"cut')
    os.kill(sup["worker_pid"], signal.SIGKILL)
    run = wait_state(daemon, run_id, P.FAILED)
    assert run["reason"] == "worker killed by SIGKILL"
    with connect(daemon) as c:
        events = _all_events(c, run_id, ["invalid"])
    assert events[-1]["error"] == "partial line at exit" and '"tag":"cut' in events[-1]["raw"]
    size = (daemon.run_dir(run_id) / "events.jsonl").stat().st_size
    assert run["ingest_offset"] == size  # everything accounted for
    report.record("worker output", "worker SIGKILLed in the middle of writing a line",
                  "the partial line is kept and shown as invalid; run failed with the signal named", lines_lost=0)


def test_a_worker_printing_a_gigabyte_as_fast_as_it_can(daemon, mosaic):
    pid = _daemon_pid(daemon)
    steps = 10_000
    run_id = mosaic.synthetic(steps, "rate=0", "tags=1", "episode_every=0", "payload_bytes=100000")
    peak = 0.0
    slowest = 0.0
    with connect(daemon) as c:
        while True:
            t0 = time.monotonic()
            run = c.call(P.GET, run=run_id)
            slowest = max(slowest, time.monotonic() - t0)
            peak = max(peak, _rss_mb(pid))
            if run["state"] in P.FINAL_STATES:
                break
            time.sleep(0.05)
    size = (daemon.run_dir(run_id) / "events.jsonl").stat().st_size
    assert size > 1e9
    assert run["state"] == P.SUCCEEDED and run["summary"]["lines"] == steps + 2
    assert run["ingest_offset"] == size
    assert peak < 200, f"daemon RSS peaked at {peak:.0f} MB"
    assert slowest < 30, f"the daemon stalled for {slowest:.1f}s during the flood"  # speed: see bench/
    report.record("worker output", f"a worker writing {size / 1e9:.1f} GB of telemetry as fast as it can",
                  f"every line ingested; daemon RSS peak {peak:.0f} MB; slowest request {slowest * 1000:.0f} ms",
                  lines_lost=0)


# -- slow clients and load ---------------------------------------------------------
SUBSCRIBER = """
import json, sys
from daemon import protocol as P
from daemon.home import Home
from mosaic_tui.client import Client
c = Client(Home.resolve(sys.argv[1]), timeout=120)
c.call(P.SUBSCRIBE, events=[sys.argv[2]])
print("ready", flush=True)
want, got, cursor, ok = int(sys.argv[3]), [], 0, True
for method, params in c.notifications(timeout=60):
    if method == P.NOTIFY_EVENTS:
        ok &= params["from"] == cursor
        cursor = params["to"]
        got += [e["step"] for e in params["events"] if e["type"] == "scalar" and not e["tag"].startswith("system/")]
    if len(got) >= want:
        break
print(json.dumps({"ok": ok and got == list(range(1, want + 1)), "n": len(got)}), flush=True)
"""


def test_a_stopped_client_stalls_nobody_and_resyncs(daemon, mosaic):
    pid = _daemon_pid(daemon)
    total = 200_000
    run_id = mosaic.synthetic(total, "rate=0", "tags=1", "episode_every=0", "payload_bytes=300")
    slow = subprocess.Popen([sys.executable, "-c", SUBSCRIBER, str(daemon.root), run_id, str(total)],
                            stdout=subprocess.PIPE, text=True, cwd=str(ROOT))
    assert slow.stdout.readline().strip() == "ready"
    os.kill(slow.pid, signal.SIGSTOP)  # like a suspended app
    try:
        with connect(daemon, "fast") as fast:
            fast.call(P.SUBSCRIBE, events=[run_id])
            got = []
            for method, params in fast.notifications(timeout=30):
                if method == P.NOTIFY_EVENTS:
                    got += [e["step"] for e in params["events"] if worker_scalar(e)]
                if len(got) >= total:
                    break
            assert got == list(range(1, total + 1))
            peak = _rss_mb(pid)
            assert peak < 200
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    result = json.loads(slow.communicate(timeout=120)[0].strip().splitlines()[-1])
    assert result == {"ok": True, "n": total}
    report.record("clients", "a subscriber stopped with SIGSTOP while a run writes 200,000 lines (~70 MB)",
                  f"the other client got every line at once; daemon RSS {peak:.0f} MB; the stopped one resynced "
                  "from disk after SIGCONT", lines_lost=0)


def test_sixty_four_runs_and_eight_clients(home, mosaic):
    # resources sampled often, as a slow machine would see them: their system/* lines share the
    # stream and must not be taken for the worker's
    home.settings_file.write_text(json.dumps({"resource_sample_seconds": 0.5}))
    mosaic.run("daemon", "start", "--max-runs", "64", check=True)
    pid = _daemon_pid(home)
    runs_n, steps = 64, 1500
    clients = [connect(home, f"client-{i}") for i in range(8)]
    for c in clients:
        c.call(P.SUBSCRIBE, events="*", runs=True)
    with connect(home) as c:
        ids = [c.call(P.SUBMIT, config={"worker": "synthetic", "algo": "emit", "env": "none", "steps": steps,
                                        "params": {"rate": 500, "tags": 1, "episode_every": 0}})["id"]
               for _ in range(runs_n)]
    peak = 0.0
    counts = [dict.fromkeys(ids, 0) for _ in clients]
    deadline = time.monotonic() + 240
    pending = set(range(len(clients)))
    while pending and time.monotonic() < deadline:
        for i in list(pending):
            for method, params in clients[i].notifications(timeout=0.05):
                if method == P.NOTIFY_EVENTS:
                    counts[i][params["run"]] += sum(1 for e in params["events"] if worker_scalar(e))
            if all(v == steps for v in counts[i].values()):
                pending.discard(i)
        peak = max(peak, _rss_mb(pid))
    for c in clients:
        c.close()
    short = {i: {r: n for r, n in counts[i].items() if n != steps} for i in pending}
    assert not pending, f"some client did not receive every line exactly once: {short}"
    for run_id in ids:
        assert mosaic.show(run_id)["state"] == P.SUCCEEDED
    assert peak < 250
    mosaic.run("daemon", "stop")
    report.record("load", "64 concurrent runs and 8 attached clients",
                  f"all {runs_n * steps:,} lines to each of the 8 clients; daemon RSS peak {peak:.0f} MB",
                  lines_lost=0)


# -- crashes -----------------------------------------------------------------------
def test_sigkill_daemon_with_three_runs(home, mosaic):
    mosaic.run("daemon", "start", check=True)
    specs = [(4000, "0"), (9000, "0"), (600, "4")]  # (steps, exit code)
    ids = [mosaic.synthetic(n, "rate=800", "tags=1", "episode_every=0", f"exit_code={code}") for n, code in specs]
    for run_id in ids:
        wait_state(home, run_id, P.RUNNING)
    trees = {}
    for run_id in ids:
        sup = json.loads((home.run_dir(run_id) / "supervisor.json").read_text())
        trees[run_id] = [sup["supervisor_pid"], sup["worker_pid"]]
    pid = _daemon_pid(home)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (home.run_dir(ids[2]) / "exit.json").exists(), 60, what="a run to end with no daemon")
    mosaic.run("daemon", "start", check=True)  # re-adopts
    for run_id, (n, code) in zip(ids, specs):
        mosaic.run("wait", run_id, "--timeout", "120")
        run = mosaic.show(run_id)
        assert run["exit_code"] == int(code)
        assert run["state"] == (P.SUCCEEDED if code == "0" else P.FAILED)
        assert _scalar_steps(home, run_id) == list(range(1, n + 1))  # each line exactly once
        assert run["summary"]["steps"] == n
    left = sum(1 for pids in trees.values() for p in pids if proctree.is_alive(p))
    assert left == 0
    mosaic.run("daemon", "stop")
    report.record("crash", "daemon SIGKILLed while three runs train (one ends while no daemon runs)",
                  "runs kept training, were re-adopted; the one that ended got its real exit code 4",
                  lines_lost=0, processes_left=left)


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGSEGV"])
def test_worker_killed_others_untouched(daemon, mosaic, sig):
    victim = mosaic.synthetic(10_000_000, "rate=300", "children=2")
    other = mosaic.synthetic(3000, "rate=1000", "tags=1", "episode_every=0")
    wait_state(daemon, victim, P.RUNNING)
    sup = json.loads((daemon.run_dir(victim) / "supervisor.json").read_text())
    tree = wait_for(lambda: (lambda d: d if len(d) >= 3 else None)(proctree.descendants(sup["supervisor_pid"])))
    os.kill(sup["worker_pid"], getattr(signal, sig))
    run = wait_state(daemon, victim, P.FAILED)
    assert run["reason"] == f"worker killed by {sig}" and run["exit_signal"] == sig
    left = [p for p in tree + [sup["supervisor_pid"]] if proctree.is_alive(p)]
    assert left == []
    assert mosaic.run("wait", other, "--timeout", "60").returncode == 0
    assert _scalar_steps(daemon, other) == list(range(1, 3001))
    report.record("crash", f"a worker killed by {sig} (with two child processes)",
                  "run failed with the signal named, its children killed, the other run untouched",
                  lines_lost=0, processes_left=len(left))


def test_worker_exhausting_memory(daemon, mosaic):
    run_id = mosaic.submit("--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "10",
                           "--set", "allocate_mb=4000", "--memory-mb", "400")
    mosaic.run("wait", run_id, "--timeout", "60")
    run = mosaic.show(run_id)
    assert run["state"] == P.FAILED and "MemoryError" in run["stderr_tail"]
    report.record("crash", "a worker exhausting its memory limit (4 GB asked, 400 MB allowed)",
                  "run failed with exit code 1 and the MemoryError in its stderr tail")


# -- disk --------------------------------------------------------------------------
def _mount_tmpfs(path: str, size: str) -> bool:
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path],
                          capture_output=True).returncode == 0


@pytest.mark.skipif(os.getuid() != 0, reason="mounting a small tmpfs needs root")
def test_disk_full_and_read_only_home():
    base = tempfile.mkdtemp(prefix="mh-full-", dir="/tmp")
    if not _mount_tmpfs(base, "24m"):
        pytest.skip("cannot mount a tmpfs here")
    home = Home.resolve(base)
    m = Mosaic(home)
    try:
        m.run("daemon", "start", check=True)
        reserve = os.path.join(base, "reserve")
        with open(reserve, "wb") as f:
            f.write(b"\0" * 4 * 1024 * 1024)
        run_id = m.synthetic(1_000_000, "rate=0", "tags=1", "episode_every=0", "payload_bytes=2000")
        wait_for(lambda: (home.run_dir(run_id) / "exit.json").exists()
                 or m.show(run_id)["state"] in P.FINAL_STATES or os.statvfs(base).f_bavail == 0,
                 120, what="the disk to fill")
        proc = m.run("submit", "--worker", "synthetic", "--algo", "emit", "--env", "none", "--steps", "5")
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1
        assert ("disk is full" in proc.stderr or "No space left" in proc.stderr
                or "database or disk is full" in proc.stderr), proc.stderr
        # the user frees space: the daemon records the outcome it had kept
        os.unlink(reserve)
        run = wait_state(home, run_id, P.FINAL_STATES, timeout=60)
        assert run["state"] == P.FAILED and "disk is full" in run["reason"], run["reason"]
        integrity = subprocess.run(["sqlite3", str(home.db), "PRAGMA integrity_check"], capture_output=True,
                                   text=True).stdout.strip() if shutil.which("sqlite3") else "ok"
        assert integrity == "ok"
        # read-only home: the daemon stopped, the filesystem remounted read-only
        m.run("daemon", "stop", check=True)
        subprocess.run(["pkill", "-KILL", "-f", f"daemon.shim {base}"])
        subprocess.run(["mount", "-o", "remount,ro", base], check=True)
        proc = m.run("ls")
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "Read-only file system" in proc.stderr and "Traceback" not in proc.stderr
        report.record("disk", "home on a 24 MB tmpfs filled by a run; then remounted read-only",
                      f"run failed with reason '{run['reason']}' once space was freed; submits refused with "
                      "one clear line; database integrity ok; a read-only home refused with one line")
    finally:
        m.run("daemon", "stop")
        subprocess.run(["pkill", "-KILL", "-f", f"daemon.shim {base}"])
        time.sleep(0.3)
        subprocess.run(["umount", "-l", base])
        shutil.rmtree(base, ignore_errors=True)
