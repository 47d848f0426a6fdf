"""The GPU check (issue 46): a daemon, then each worker for a fixed number of steps on CUDA and on
the CPU, through `mosaic submit`, with steps/s and NVML's memory and utilisation per run.

Run by scripts/gpu_check (which makes the venv from the wheelhouse first); by hand:

    python scripts/gpu_check.py --out DIR [--devices cuda,cpu] [--only NAME,...] [--timeout S]

Writes results.json, results.md, env.json and runs/<case>-<device>/ into DIR (the run's
record, its stderr tail, its system/* scalars). Both are rewritten after every run, so a check cut
short still leaves what it measured. A run that is refused, fails or times out is recorded with
its reason and the check goes on with the next.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# name, worker, algo, env, steps, params; each runs once per device. Steps are fixed and small: the
# whole matrix on both devices fits a few minutes of GPU machine time.
CASES: list[dict[str, Any]] = [
    {"name": "cleanrl-ppo-cartpole", "worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1",
     "steps": 16384, "params": {}},
    {"name": "cleanrl-dqn-atari-breakout", "worker": "cleanrl", "algo": "dqn_atari",
     "env": "BreakoutNoFrameskip-v4", "steps": 4000,
     "params": {"learning-starts": 1000, "buffer-size": 10000, "train-frequency": 4},
     "needs": ["ale_py", "cv2"]},
    {"name": "tianshou-dqn-cartpole", "worker": "tianshou", "algo": "dqn", "env": "CartPole-v1",
     "steps": 10000, "params": {}},
    {"name": "xuance-mappo-mpe-spread", "worker": "xuance", "algo": "mappo", "env": "simple_spread_v3",
     "steps": 10000, "params": {}},
    {"name": "rllib-ppo-cartpole", "worker": "ray", "algo": "PPO", "env": "CartPole-v1",
     "steps": 8000, "params": {}, "cuda_params": {"num_gpus": 1}},
    {"name": "jumanji-a2c-minesweeper", "worker": "jumanji", "algo": "a2c", "env": "Minesweeper-v0",
     "steps": 2560, "unit": 2560, "params": {"training.num_learner_steps_per_epoch": 4, "training.n_steps": 10,
                               "training.total_batch_size": 64,
                               "evaluation.eval_total_batch_size": 8,
                               "evaluation.greedy_eval_total_batch_size": 8}},
]


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------- NVML: what the resources panel reads

class Nvml:
    """Device-wide utilisation and memory, sampled every half second while a run runs (the daemon's
    own per-run figure, system/gpu_mem_mb, comes from the same library and is read from the run's
    scalars)."""

    def __init__(self) -> None:
        self.nvml: Any = None
        self.error: str | None = None
        try:
            import pynvml
            pynvml.nvmlInit()
            if pynvml.nvmlDeviceGetCount() == 0:
                raise RuntimeError("NVML lists no GPU")
            self.nvml = pynvml
        except Exception as exc:  # no nvidia-ml-py, no driver, no GPU
            self.error = f"{type(exc).__name__}: {exc}"
        self.samples: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def describe(self) -> dict[str, Any]:
        if self.nvml is None:
            return {"available": False, "error": self.error}
        n = self.nvml
        out = {"available": True, "driver": _s(n.nvmlSystemGetDriverVersion()), "gpus": []}
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            mem = n.nvmlDeviceGetMemoryInfo(h)
            out["gpus"].append({"index": i, "name": _s(n.nvmlDeviceGetName(h)),
                                "memory_total_mb": round(mem.total / 1e6), "memory_used_mb": round(mem.used / 1e6)})
        return out

    def sample(self) -> dict[str, float]:
        n = self.nvml
        util = mem_used = 0.0
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            util = max(util, float(n.nvmlDeviceGetUtilizationRates(h).gpu))
            mem_used += n.nvmlDeviceGetMemoryInfo(h).used / 1e6
        return {"t": time.time(), "util": util, "mem_mb": mem_used}

    def start(self) -> None:
        self.samples = []
        if self.nvml is None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.samples.append(self.sample())
                except Exception:
                    pass
                self._stop.wait(0.5)
        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(5)
            self._thread = None
        if not self.samples:
            return {}
        utils = [s["util"] for s in self.samples]
        busy = [u for u in utils if u > 0]
        return {"nvml_samples": len(utils), "gpu_util_mean": round(sum(utils) / len(utils), 1),
                "gpu_util_max": max(utils), "gpu_util_mean_busy": round(sum(busy) / len(busy), 1) if busy else 0.0,
                "gpu_mem_used_max_mb": round(max(s["mem_mb"] for s in self.samples))}


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


# ---------------------------------------------------------------- the environment

def probe(timeout: float) -> dict[str, Any]:
    """Versions and what torch and jax see, each in a child (a broken CUDA library fails the probe, not
    the check)."""
    code = r"""
import json, sys, platform
out = {"python": sys.version.split()[0], "platform": platform.platform()}
try:
    import numpy; out["numpy"] = numpy.__version__
except Exception as e: out["numpy"] = repr(e)
try:
    import torch
    out["torch"] = torch.__version__; out["torch_cuda"] = torch.version.cuda
    out["torch_cuda_available"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        out["torch_device"] = torch.cuda.get_device_name(0)
        x = torch.randn(2048, 2048, device="cuda"); (x @ x).sum().item(); out["torch_matmul_cuda"] = "ok"
except Exception as e: out["torch_error"] = repr(e)
try:
    import jax
    out["jax"] = jax.__version__; out["jax_backend"] = jax.default_backend()
    out["jax_devices"] = [str(d) for d in jax.devices()]
except Exception as e: out["jax_error"] = repr(e)
try:
    import ray; out["ray"] = ray.__version__
except Exception as e: out["ray_error"] = repr(e)
print(json.dumps(out))
"""
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
        if p.returncode == 0:
            return json.loads(p.stdout.strip().splitlines()[-1])
        return {"probe_error": p.stderr[-2000:]}
    except Exception as exc:
        return {"probe_error": repr(exc)}


# ---------------------------------------------------------------- the daemon and its runs

class Mosaic:
    def __init__(self, home: Path):
        self.home = home
        self.env = dict(os.environ, MOSAIC_HOME=str(home))
        self.argv = [sys.executable, "-m", "mosaic_tui.cli"]

    def __call__(self, *args: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=timeout,
                           env=self.env, cwd=ROOT)
        if check and p.returncode != 0:
            raise RuntimeError(f"mosaic {' '.join(args)}: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-1500:]}")
        return p

    def json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self(*args, "--json", timeout=timeout).stdout)


def rates(show: dict[str, Any], metrics: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    """steps/s two ways: the run's steps over its wall time (imports, env making, compiling included),
    and over its training window (the first to the last point with a step, system/* left out)."""
    out: dict[str, Any] = {}
    steps = (show.get("summary") or {}).get("steps") or 0
    out["steps"] = steps
    if show.get("started_at") and show.get("ended_at"):
        wall = show["ended_at"] - show["started_at"]
        out["wall_s"] = round(wall, 2)
        out["steps_per_s_wall"] = round(steps / wall, 1) if wall > 0 else None
    pts = [p for tag, series in metrics.items() if not tag.startswith("system/") for p in series
           if p.get("step") is not None and p.get("t") is not None]
    if len(pts) >= 2:
        first = min(pts, key=lambda p: p["t"])
        last = max(pts, key=lambda p: p["t"])
        span = last["t"] - first["t"]
        if span > 0 and last["step"] > first["step"]:
            out["train_window_s"] = round(span, 2)
            out["steps_per_s"] = round((last["step"] - first["step"]) / span, 1)
    for tag in ("system/gpu_mem_mb", "system/cpu_percent", "system/rss_mb"):
        vals = [p["value"] for p in metrics.get(tag, [])]
        if vals:
            out[tag.split("/", 1)[1] + "_max"] = max(vals)
    return out


def run_case(mosaic: Mosaic, nvml: Nvml, case: dict[str, Any], device: str, timeout: float,
             scale: float, out: Path) -> dict[str, Any]:
    name = f"{case['name']}-{device}"
    rec: dict[str, Any] = {"case": case["name"], "device": device, "worker": case["worker"],
                           "algo": case["algo"], "env": case["env"]}
    missing = [m for m in case.get("needs", []) if not _importable(m)]
    if missing:
        rec.update(status="skipped", reason=f"not installed: {', '.join(missing)}")
        return rec
    params = dict(case["params"])
    if device.startswith("cuda"):
        params.update(case.get("cuda_params", {}))
    config = {"worker": case["worker"], "algo": case["algo"], "env": case["env"],
              "steps": _scaled(case, scale), "seed": 1, "device": device,
              "name": name, "params": params}
    rec["config"] = config
    rundir = out / "runs" / name
    rundir.mkdir(parents=True, exist_ok=True)
    cfg_path = rundir / "config.json"
    cfg_path.write_text(json.dumps(config, indent=1))
    t0 = time.time()
    nvml.start()
    try:
        p = mosaic("submit", str(cfg_path), check=False, timeout=120)
        if p.returncode != 0:
            rec.update(status="refused", reason=(p.stderr or p.stdout).strip()[-1500:])
            return rec
        run_id = p.stdout.strip().splitlines()[-1]
        rec["run_id"] = run_id
        w = mosaic("wait", run_id, "--timeout", str(int(timeout)), check=False, timeout=timeout + 60)
        show = mosaic.json("show", run_id)
        if show["state"] not in ("succeeded", "failed", "cancelled", "stopped"):
            mosaic("cancel", run_id, check=False, timeout=60)
            rec["timed_out"] = True
            for _ in range(30):
                show = mosaic.json("show", run_id)
                if show["state"] not in ("running", "queued", "starting", "pausing", "paused"):
                    break
                time.sleep(1)
        rec["status"] = "ok" if show["state"] == "succeeded" else ("timeout" if rec.get("timed_out") else show["state"])
        if rec["status"] != "ok":
            rec["reason"] = show.get("reason") or w.stdout.strip()[-500:]
        try:
            metrics = mosaic.json("metrics", run_id, timeout=120)
        except Exception as exc:
            metrics = {}
            rec["metrics_error"] = repr(exc)
        rec.update(rates(show, metrics))
        (rundir / "show.json").write_text(json.dumps(show, indent=1))
        (rundir / "system.json").write_text(json.dumps({k: v for k, v in metrics.items() if k.startswith("system/")}))
        src = mosaic.home / "runs" / run_id
        for fname in ("stderr.log", "stdout.log"):
            if (src / fname).exists():
                (rundir / fname).write_text((src / fname).read_text(errors="replace")[-20000:])
        return rec
    except Exception as exc:  # the check itself went wrong on this run: say so, go on
        rec.update(status="error", reason=f"{type(exc).__name__}: {exc}")
        return rec
    finally:
        rec.update(nvml.stop())
        rec["check_s"] = round(time.time() - t0, 1)


def _scaled(case: dict[str, Any], scale: float) -> int:
    """The case's steps times scale, in whole units (Jumanji's A2C trains whole epochs)."""
    unit = case.get("unit", 1)
    return max(unit, round(case["steps"] * scale / unit) * unit)


def _importable(module: str) -> bool:
    p = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, timeout=120)
    return p.returncode == 0


# ---------------------------------------------------------------- jax on its own: Jumanji env steps

JAX_DIRECT = r"""
import json, sys, time
import jax, jax.numpy as jnp, jumanji
env = jumanji.make("Snake-v1")
B, N = 1024, 200
keys = jax.random.split(jax.random.PRNGKey(0), B)
state, ts = jax.jit(jax.vmap(env.reset))(keys)
n = env.action_spec.num_values
@jax.jit
def roll(state, key):
    def body(carry, k):
        s = carry
        a = jax.random.randint(k, (B,), 0, n)
        s, t = jax.vmap(env.step)(s, a)
        return s, t.reward.sum()
    return jax.lax.scan(body, state, jax.random.split(key, N))
t0 = time.time(); s, r = roll(state, jax.random.PRNGKey(1)); jax.block_until_ready(r); compile_s = time.time() - t0
t0 = time.time(); s, r = roll(s, jax.random.PRNGKey(2)); jax.block_until_ready(r); dt = time.time() - t0
print(json.dumps({"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
                  "env": "Snake-v1", "batch": B, "steps": B * N, "compile_s": round(compile_s, 2),
                  "steps_per_s": round(B * N / dt, 1)}))
"""


def jax_direct(platform: str, timeout: float) -> dict[str, Any]:
    """Random-action Snake-v1 steps, vmapped and scanned under jit, on one jax platform: jax's CUDA
    backend exercised even where the Jumanji worker cannot be given the GPU (see results.md)."""
    rec: dict[str, Any] = {"case": "jax-jumanji-snake-random (no daemon)", "device": platform}
    env = dict(os.environ, JAX_PLATFORMS=platform)
    try:
        p = subprocess.run([sys.executable, "-c", JAX_DIRECT], capture_output=True, text=True,
                           timeout=timeout, env=env)
        if p.returncode == 0:
            rec.update(status="ok", **json.loads(p.stdout.strip().splitlines()[-1]))
        else:
            rec.update(status="failed", reason=p.stderr.strip()[-1500:])
    except subprocess.TimeoutExpired:
        rec.update(status="timeout", reason=f"over {timeout:.0f} s")
    return rec


# ---------------------------------------------------------------- the report

def write(out: Path, results: list[dict[str, Any]], env: dict[str, Any], started: float) -> None:
    doc = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
           "elapsed_s": round(time.time() - started, 1), "env": env, "results": results}
    (out / "results.json").write_text(json.dumps(doc, indent=1))
    gpus = (env.get("nvml") or {}).get("gpus") or []
    lines = ["# GPU check", "",
             f"Python {env.get('python')}, torch {env.get('torch')} (CUDA {env.get('torch_cuda')}, "
             f"available: {env.get('torch_cuda_available')}), jax {env.get('jax')} ({env.get('jax_backend')}), "
             f"numpy {env.get('numpy')}; GPU: {', '.join(g['name'] + ' ' + str(g['memory_total_mb']) + ' MB' for g in gpus) or 'none (NVML: ' + str((env.get('nvml') or {}).get('error')) + ')'}.",
             f"Started {doc['started']}, {doc['elapsed_s']} s so far.", "",
             "steps/s: over the training window (first to last point with a step); wall: the run's "
             "steps over its whole time (imports, env making, compiling). GPU memory of the run: "
             "`system/gpu_mem_mb`, the daemon's NVML sample of the run's processes (the resources panel's "
             "figure); util and device memory: NVML sampled by this script every 0.5 s during the run.", "",
             "| case | device | status | steps | steps/s | steps/s (wall) | wall s | run GPU MB (max) | GPU util % mean/max | device GPU MB (max) | reason |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        util = (f"{r['gpu_util_mean']}/{r['gpu_util_max']}" if "gpu_util_mean" in r else "")
        reason = str(r.get("reason") or "").replace("\n", " ").replace("|", "/")[:160]
        lines.append(f"| {r['case']} | {r['device']} | {r.get('status')} | {r.get('steps', '')} | "
                     f"{r.get('steps_per_s', '')} | {r.get('steps_per_s_wall', '')} | {r.get('wall_s', '')} | "
                     f"{r.get('gpu_mem_mb_max', '')} | {util} | {r.get('gpu_mem_used_max_mb', '')} | {reason} |")
    (out / "results.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="results folder ($OUT on the device machine)")
    ap.add_argument("--home", help="the daemon's home (default: build/gpu-check-home, emptied first)")
    ap.add_argument("--devices", default="cuda,cpu", help="comma-separated, in order (default cuda,cpu)")
    ap.add_argument("--only", help="comma-separated case names (prefixes), default all")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per run before it is cancelled")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every case's steps")
    ap.add_argument("--no-jax-direct", action="store_true", help="skip the jax-only Jumanji step rate")
    args = ap.parse_args(argv)

    started = time.time()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(args.home or ROOT / "build" / "gpu-check-home").resolve()
    devices = [d for d in args.devices.split(",") if d]
    cases = CASES
    if args.only:
        wanted = args.only.split(",")
        cases = [c for c in CASES if any(c["name"].startswith(w) for w in wanted)]

    nvml = Nvml()
    env = probe(timeout=300)
    env["nvml"] = nvml.describe()
    env["devices"] = devices
    log(f"environment: {json.dumps(env)}")
    (out / "env.json").write_text(json.dumps(env, indent=1))
    results: list[dict[str, Any]] = []
    write(out, results, env, started)

    if home.exists():
        shutil.rmtree(home)
    home.mkdir(parents=True)
    # samples of each run's processes every second (the default 5 s misses short runs); every run
    # alone, so NVML's device figures belong to it
    (home / "settings.json").write_text(json.dumps({"resource_sample_seconds": 1, "max_concurrent_runs": 1}))
    mosaic = Mosaic(home)
    try:
        p = mosaic("daemon", "start", timeout=120, check=False)
        log(p.stdout.strip() or p.stderr.strip())
        if p.returncode != 0:
            # settings.json refused (an unknown key): start without it rather than not at all
            (home / "settings.json").write_text(json.dumps({"resource_sample_seconds": 1}))
            mosaic("daemon", "start", timeout=120)
        for device in devices:
            for case in cases:
                log(f"{case['name']} on {device} ...")
                rec = run_case(mosaic, nvml, case, device, args.timeout, args.scale, out)
                results.append(rec)
                log(f"  -> {rec.get('status')}: {rec.get('steps_per_s')} steps/s "
                    f"(wall {rec.get('steps_per_s_wall')}), {rec.get('reason', '')!s:.300}")
                write(out, results, env, started)
        if not args.no_jax_direct:
            for device in devices:
                platform = "cuda" if device.startswith("cuda") else "cpu"
                log(f"jax-only Jumanji steps on {platform} ...")
                nvml.start()
                rec = jax_direct(platform, args.timeout)
                rec.update(nvml.stop())
                results.append(rec)
                log(f"  -> {rec.get('status')}: {rec.get('steps_per_s')} steps/s {rec.get('reason', '')!s:.300}")
                write(out, results, env, started)
    finally:
        p = mosaic("daemon", "stop", timeout=120, check=False)
        log(p.stdout.strip() or p.stderr.strip())
        try:
            shutil.copy(home / "logs" / "daemon.log", out / "daemon.log")
        except OSError:
            pass
        write(out, results, env, started)
    log(f"results: {out / 'results.md'}")
    print((out / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
