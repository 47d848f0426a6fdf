"""Experiment management through the real daemon and CLI: tags and notes, per-run resources."""
from __future__ import annotations

import json
import re
import time

from daemon import protocol as P
from tests.helpers import connect, wait_for, wait_state


def test_tags_and_notes_round_trip_filter_and_survive_a_restart(daemon, mosaic):
    a = mosaic.synthetic(5, "rate=0", name="tagged")
    b = mosaic.synthetic(5, "rate=0", name="other")
    out = mosaic.run("tag", "tagged", "+baseline", "v2", "+old", check=True).stdout
    assert out.strip() == "tagged: baseline old v2"
    assert mosaic.run("tag", "tagged", "-old", check=True).stdout.strip() == "tagged: baseline v2"
    mosaic.run("note", "tagged", "lr sweep, the one to beat", check=True)
    mosaic.run("tag", "other", "+v2", check=True)

    run = mosaic.show("tagged")
    assert run["tags"] == ["baseline", "v2"] and run["note"] == "lr sweep, the one to beat"
    assert "note: lr sweep, the one to beat" in mosaic.run("show", "tagged", check=True).stdout

    def names(*args):
        lines = mosaic.run("ls", *args, check=True).stdout.splitlines()
        return {line.split()[1] for line in lines[1:] if line.startswith("01")}
    assert names("--tag", "baseline") == {"tagged"}
    assert names("--tag", "v2") == {"tagged", "other"}
    assert names("--tag", "v2", "--tag", "baseline") == {"tagged"}
    header = mosaic.run("ls", check=True).stdout.splitlines()[0]
    assert header.split()[-1] == "TAGS"

    # bad input: one line naming the problem; nothing changed
    proc = mosaic.run("tag", "tagged", "+has space")
    assert proc.returncode == 1 and proc.stderr.startswith("mosaic: error: tag 'has space':")
    assert len(proc.stderr.strip().splitlines()) == 1
    proc = mosaic.run("note", "tagged", "x" * (P.MAX_NOTE + 1))
    assert proc.returncode == 1 and "a note is at most" in proc.stderr
    assert mosaic.show("tagged")["tags"] == ["baseline", "v2"]
    # one word each in `show` too: the user's tags are tags (as in ls), what the run logs are metrics
    shown = dict(line.strip().split(": ", 1) for line in mosaic.run("show", "tagged", check=True).stdout.splitlines()
                 if ": " in line)
    assert shown["tags"] == "baseline v2" and "labels" not in shown
    assert "synthetic/value_0" in shown["metrics"]

    # kept in the store: a restarted daemon has them, and clients following runs are told
    wait_state(daemon, a, P.SUCCEEDED)
    wait_state(daemon, b, P.SUCCEEDED)
    mosaic.run("daemon", "stop", check=True)
    mosaic.run("daemon", "start", check=True)
    with connect(daemon) as client:
        client.call(P.SUBSCRIBE, runs=True, rev=client.info["rev"])
        assert client.call(P.GET, run="tagged")["tags"] == ["baseline", "v2"]
        client.call(P.NOTE, run="tagged", text="")
        client.call(P.TAG, run="other", add=["seen"], remove=["v2"])
        seen = {}
        for method, params in client.notifications(timeout=5):
            if method == P.NOTIFY_RUN and "run" in params:
                seen[params["run"]["name"]] = params["run"]
            if "other" in seen and "tagged" in seen:
                break
        assert seen["other"]["tags"] == ["seen"] and seen["tagged"]["note"] == ""


def test_resources_of_a_runs_process_tree_become_system_scalars(home, mosaic):
    home.ensure()
    home.settings_file.write_text(json.dumps({"resource_sample_seconds": 0.3}))
    mosaic.run("daemon", "start", check=True)
    try:
        # a run that lasts a few seconds (200 steps/s)
        run_id = mosaic.synthetic(1200, "rate=200", name="busy")
        wait_for(lambda: (mosaic.show("busy")["summary"].get("system") or {}).get("threads"), 30,
                 what="a resource sample in the run's summary")
        wide = mosaic.run("ls", "--wide", check=True).stdout.splitlines()
        header = re.split(r"\s{2,}", wide[0].strip())
        row = dict(zip(header, re.split(r"\s{2,}", wide[1].strip())))
        assert row["RSS"].endswith("MB") and float(row["RSS"][:-2]) > 5, row
        assert int(row["THREADS"]) >= 1 and row["CPU"].endswith("%")
        assert "resources: cpu " in mosaic.run("show", "busy", check=True).stdout
        # the run header (the app's run screen) shows the daemon's sample while the run is live
        from mosaic_tui.screens.run import header_text
        record = mosaic.show("busy")
        live = str(header_text({**record, "state": P.RUNNING}, time.time()))
        assert re.search(r"  cpu \d+% \d+MB \d+ threads", live), live
        assert "threads" not in str(header_text({**record, "state": P.SUCCEEDED}, time.time()))
        wait_state(home, run_id, P.SUCCEEDED)
        data = json.loads(mosaic.run("metrics", "busy", "--json", check=True).stdout)
        for tag in ("system/cpu_percent", "system/rss_mb", "system/threads"):
            assert tag in data, sorted(data)
        rss = [p["value"] for p in data["system/rss_mb"]]
        assert len(rss) >= 2 and all(v > 5 for v in rss)
        # the samples are no progress: steps and the step count stay the worker's own
        run = mosaic.show("busy")
        assert run["summary"]["steps"] == 1200 and run["state"] == P.SUCCEEDED
        assert all(p["step"] <= 1200 for p in data["system/threads"])
    finally:
        mosaic.run("daemon", "stop")


def test_tensorboard_writes_event_files_from_the_store_and_serves_the_runs_by_name(daemon, mosaic):
    import urllib.request

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    first = mosaic.synthetic(30, "rate=0", "tags=1", "episode_every=10", name="tb-one")
    second = mosaic.synthetic(20, "rate=0", "tags=1", "episode_every=10", name="tb-two")
    wait_state(daemon, first, P.SUCCEEDED)
    wait_state(daemon, second, P.SUCCEEDED)
    out = mosaic.run("tensorboard", "tb-one", "tb-two", "--no-launch", check=True).stdout
    assert "tb-one: 36 points" in out and "tb-two: 24 points" in out   # 30 scalars + 3 episodes x (return, length)
    # classic scalars, as torch's SummaryWriter writes them: the accumulator's Scalars() reads every
    # point with its default size guidance (which keeps 10,000 scalars and only 10 tensors)
    acc = EventAccumulator(str(daemon.root / "tensorboard" / "tb-one"))
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"synthetic/value_0", "episode/return", "episode/length"}
    values = acc.Scalars("synthetic/value_0")
    assert [e.step for e in values] == list(range(1, 31)) and values[-1].value == 30.0
    assert [e.value for e in acc.Scalars("episode/return")] == [10.0, 20.0, 30.0]
    assert [e.step for e in acc.Scalars("episode/length")] == [10, 20, 30]
    # launched: TensorBoard answers on its port with the run names
    proc = mosaic.run("tb", "tb-one", "tb-two", "--detach", check=True, timeout=120)
    url = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout)
    pid = int(re.search(r"pid (\d+)", proc.stdout).group(1))
    try:
        assert f"ssh -N -L {url.group(1)}:127.0.0.1:{url.group(1)}" in proc.stdout
        with urllib.request.urlopen(url.group(0) + "data/runs", timeout=10) as r:
            runs = json.loads(r.read())
        # --logdir_spec names each run NAME/. (its directory) and NAME/worker (the worker's own files)
        assert {r.split("/")[0] for r in runs} == {"tb-one", "tb-two"}, runs
    finally:
        import os
        import signal
        os.killpg(pid, signal.SIGTERM)


def test_a_run_whose_worker_has_exited_but_is_not_reaped_gets_no_sample():
    """Between a worker's exit and its supervisor's wait it is a zombie: no memory, no threads. A
    sample then would be a 0 MB point at the run's end: there is none."""
    import subprocess
    import sys

    from daemon.resources import ResourceSampler, _Tree
    parent = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n    os._exit(0)\n"
        "print(pid, flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        wait_for(lambda: open(f"/proc/{child}/stat").read().split(")")[1].split()[0] == "Z", 10,
                 what="the child to be a zombie")
        sampler = ResourceSampler(1.0, lambda: [])
        sampler.load()
        tree = _Tree()
        import psutil
        tree.procs = {child: psutil.Process(child)}   # seen before: not a first sample
        assert sampler._measure(tree, parent.pid, {}) is None
    finally:
        parent.kill()
        parent.wait()
