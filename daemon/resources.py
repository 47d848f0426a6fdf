"""Per-run resources: one sampler task for all running runs.

Every few seconds the daemon measures each running run's process tree (the
worker under the supervisor and everything it started: env subprocesses, Ray's
actors) with psutil and appends the figures to the run's own events.jsonl as
ordinary scalars, so they are telemetry like any other: plotted, exported,
read back by `mosaic metrics`, kept after the run ends. A paused run is not sampled, nor a run
whose worker has written its last line (run_stopped, run_completed, run_failed): its teardown
is no part of the run, and a line after that one would sit between a stop and its continue.

    system/cpu_percent   CPU of the whole tree, percent of one core (200 = two cores busy)
    system/rss_mb        resident memory of the whole tree, MB
    system/threads       threads of the whole tree
    system/gpu_mem_mb    GPU memory of the tree's processes (only when NVML and a GPU are there)

The line is appended with one O_APPEND write of whole lines, as the workers'
emitters write theirs, so it never lands inside a worker's line. psutil is
imported with the first running run, not at the daemon's start.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable

from workers.sdk.telemetry import SCALAR, encode, make_event

log = logging.getLogger("mosaic.daemon.resources")

PREFIX = "system/"


class _Tree:
    """psutil.Process objects of one run, kept between samples: cpu_percent is
    measured from one call to the next on the same object."""

    def __init__(self) -> None:
        self.procs: dict[int, Any] = {}


class ResourceSampler:
    def __init__(self, interval: float, running: Callable[[], list[tuple[str, int, str, int]]]):
        """running() gives (run_id, supervisor_pid, events_path, step) of each running run."""
        self.interval = interval
        self.running = running
        self.trees: dict[str, _Tree] = {}
        self._nvml: Any = None          # None: not tried yet; False: no NVML or no GPU
        self._psutil: Any = None

    def load(self) -> None:
        """psutil imported and NVML probed now, at the daemon's start, not inside the first sample
        of a run (9 ms of the event loop held while every client's telemetry waited)."""
        if self._psutil is None:
            import psutil
            self._psutil = psutil
        self._gpu_memory()

    def sample_all(self) -> int:
        """One pass over the running runs; returns how many got a sample."""
        runs = self.running()
        if not runs:
            self.trees.clear()
            return 0
        self.load()
        gpu = self._gpu_memory()
        seen = set()
        done = 0
        for run_id, sup_pid, path, step in runs:
            seen.add(run_id)
            figures = self._measure(self.trees.setdefault(run_id, _Tree()), sup_pid, gpu)
            if figures is None:
                continue
            t = time.time()
            data = b"".join(encode(make_event(SCALAR, t=t, tag=PREFIX + name, value=value, step=step))
                            for name, value in figures.items())
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                done += 1
            except OSError as exc:  # disk full: the run's own figures matter more
                log.warning("cannot write resources of %s: %s", run_id, exc)
        for run_id in list(self.trees):
            if run_id not in seen:
                del self.trees[run_id]
        return done

    def _measure(self, tree: _Tree, sup_pid: int, gpu: dict[int, float]) -> dict[str, float] | None:
        psutil = self._psutil
        try:
            # the supervisor's descendants: the run's cost (the supervisor itself is the daemon's)
            children = psutil.Process(sup_pid).children(recursive=True)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        current: dict[int, Any] = {}
        for proc in children:
            current[proc.pid] = tree.procs.get(proc.pid, proc)
        cpu = rss = 0.0
        threads = 0
        fresh = measured = 0
        for pid, proc in current.items():
            try:
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:   # exited, not reaped: nothing left to count
                        continue
                    if pid in tree.procs:
                        cpu += proc.cpu_percent(None)
                    else:
                        proc.cpu_percent(None)  # the first call sets the mark; counted from the next sample
                        fresh += 1
                    rss += proc.memory_info().rss
                    threads += proc.num_threads()
                    measured += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        tree.procs = current
        if not current or fresh == len(current):
            return None  # nothing to measure CPU from yet: the first sample of a run comes one interval later
        if measured == 0:
            # the worker has exited and is not reaped yet (a zombie): no sample, not one of 0 MB
            return None
        figures = {"cpu_percent": round(cpu, 1), "rss_mb": round(rss / 1e6, 1), "threads": threads}
        if gpu:
            figures["gpu_mem_mb"] = round(sum(gpu.get(pid, 0.0) for pid in current), 1)
        return figures

    def _gpu_memory(self) -> dict[int, float]:
        """pid -> MB of GPU memory, through NVML when it and a GPU are there."""
        if self._nvml is False:
            return {}
        try:
            if self._nvml is None:
                import pynvml
                pynvml.nvmlInit()
                if pynvml.nvmlDeviceGetCount() == 0:
                    raise RuntimeError("no GPU")
                self._nvml = pynvml
            nvml = self._nvml
            used: dict[int, float] = {}
            for i in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(i)
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                    if p.usedGpuMemory:
                        used[p.pid] = used.get(p.pid, 0.0) + p.usedGpuMemory / 1e6
            return used
        except Exception:  # no pynvml, no driver, no GPU: CPU figures only
            self._nvml = False
            return {}
