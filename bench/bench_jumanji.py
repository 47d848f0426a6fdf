"""The Jumanji worker's overhead: A2C on Snake through the daemon against jumanji's own train.py loop.

    python -m bench.bench_jumanji          # the overhead figure
    python -m bench.bench_jumanji --envs   # compile and epoch time of A2C on every env (docs/workers/jumanji.md),
                                           # one after another; --envs TSP-v1 Snake-v1: those only

A (managed): the run submitted to a daemon (bench.common.daemon_home): the
worker drives jumanji.training's setup_* and the pmapped ``agent.run_epoch``
scan, turns each epoch's metrics and evaluations into telemetry, saves a
checkpoint at the end.
B (plain): jumanji's own ``jumanji.training.train.train(cfg)`` -- the function
its hydra entry point wraps (hydra is not installed: ``hydra.main`` is made a
plain decorator, sitedir/ shims the logger packages) -- with the same config
(``a2c.jumanji_config``) and jumanji's ListLogger in place of its
terminal logger.

Both measure an epoch alike: env steps of the epoch / wall seconds of the
jitted epoch call up to ``block_until_ready`` (jumanji's Timer in B, the
worker's own clock in A). A run's figure is the median over its epochs but
the first (B's first epoch includes the JIT compilation; A compiles ahead of
time). Pairs alternate A B, B A, ...; the figure is the ratio of the medians
(goal: at least 0.97). Compile time is reported apart: A's "compiling" phase
(``time/compile_s``: the epoch function compiled ahead of time and the first
evaluations) and B's first epoch minus its median epoch.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

from bench.common import (
    ROOT,
    alike,
    alike_settings,
    alternate,
    daemon_home,
    figure,
    finished_run_events,
    median,
    print_table,
    run_bare,
)

PAIRS = 5  # run-to-run spread here is 10-20%: five pairs, alternating A B / B A
EPOCHS = 6
CONFIG = {"worker": "jumanji", "algo": "a2c", "env": "Snake-v1", "seed": 1,
          "params": {"training.num_epochs": EPOCHS, "training.num_learner_steps_per_epoch": 20,
                     "training.n_steps": 20, "training.total_batch_size": 32,
                     "evaluation.eval_total_batch_size": 32, "evaluation.greedy_eval_total_batch_size": 32,
                     "checkpoint_every": 0}}
SITEDIR = os.path.join(str(ROOT), "workers", "jumanji_worker", "sitedir")

PLAIN = """
import json, sys, time, types
config = json.loads(sys.argv[1])
hydra = types.ModuleType("hydra")
hydra.main = lambda **kwargs: (lambda function: function)  # train.py's @hydra.main, without hydra
sys.modules["hydra"] = hydra
from workers.jumanji_worker import WORKER, runtime  # runtime: the worker's process settings, as in A
from workers.jumanji_worker import a2c
config = WORKER.validate(config)
cfg = a2c.jumanji_config(config)
import jumanji.training.train as jumanji_train
from jumanji.training.loggers import ListLogger
logger = ListLogger()
jumanji_train.setup_logger = lambda cfg: logger
jumanji_train.train(cfg)
print(json.dumps({"steps_per_second": logger.history["steps_per_second"], "time": logger.history["time"]}))
"""


def plain_run() -> tuple[float, float]:
    # the worker's sitedir (its import-time shims), at the nice level and threads the daemon gives workers
    out = run_bare([sys.executable, "-c", PLAIN, json.dumps(CONFIG)],
                   extra_env={"PYTHONPATH": os.pathsep.join([SITEDIR, str(ROOT)]), "MPLBACKEND": "Agg",
                              "JAX_PLATFORMS": "cpu"})
    if out.returncode != 0:
        raise RuntimeError(f"plain run failed:\n{out.stderr[-3000:]}")
    data = json.loads(out.stdout.strip().splitlines()[-1])
    rates = data["steps_per_second"]
    steps = CONFIG["params"]["training.num_learner_steps_per_epoch"] * CONFIG["params"]["training.n_steps"] * \
        CONFIG["params"]["training.total_batch_size"]
    # the first epoch's time, less what an epoch takes once compiled
    first_epoch = steps / rates[0] - steps / median(rates[1:])
    return median(rates[1:]), first_epoch


def managed_run(client, home) -> tuple[float, float]:
    rates, compile_s = [], None
    for event in finished_run_events(client, home, json.loads(json.dumps(CONFIG))):
        if event["type"] == "scalar" and event["tag"] == "train/steps_per_second":
            rates.append(event["value"])
        if event["type"] == "scalar" and event["tag"] == "time/compile_s":
            compile_s = event["value"]
    return median(rates[1:]), compile_s


def run() -> list[dict]:
    from mosaic_tui.client import Client
    alike()
    # train.py keeps no compiled programs between runs: neither side does here (the worker
    # keeps them under <home>/cache/jax by default; the warm-cache figure is measured below)
    os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    with daemon_home(max_runs=1) as (home, _pid):
        with Client(home, name="bench-jumanji") as client:
            managed_runs, plain_runs = alternate(PAIRS, lambda: managed_run(client, home), plain_run)
    (managed, managed_compile), (plain, plain_compile) = zip(*managed_runs), zip(*plain_runs)
    del os.environ["JAX_ENABLE_COMPILATION_CACHE"]
    cold, warm = compile_cold_then_warm("Snake-v1")
    ratio = median(managed) / median(plain)
    runs = f"{PAIRS} runs each, alternating"
    return [
        figure("A2C Snake env steps/s, managed / jumanji's train.py", ratio, "ratio", ">= 0.97",
               f"medians over epochs 2-{EPOCHS}; {runs}; {alike_settings(seed=CONFIG['seed'])}", ratio >= 0.97),
        figure("managed run (daemon, telemetry, checkpoint)", median(managed), "env steps/s", "",
               f"runs: {', '.join(f'{r:.0f}' for r in managed)}", None),
        figure("jumanji's train.py loop", median(plain), "env steps/s", "",
               f"runs: {', '.join(f'{r:.0f}' for r in plain)}", None),
        figure("compiling phase, managed (epoch fn ahead of time + first evaluations)", median(managed_compile),
               "s", "", f"runs: {', '.join(f'{r:.1f}' for r in managed_compile)}", None),
        figure("first epoch's extra time in train.py (JIT compilation)", median(plain_compile), "s", "",
               f"runs: {', '.join(f'{r:.1f}' for r in plain_compile)}", None),
        figure("compiling phase, then again with the compiled programs kept (<home>/cache/jax)", warm / cold,
               "ratio", "", f"A2C Snake-v1, tiny settings, worker process: {cold:.1f} s, then {warm:.1f} s", None),
    ]


def compile_cold_then_warm(env: str) -> tuple[float, float]:
    """The worker's compiling phase in an empty compilation cache, then in the one it filled."""
    import shutil
    import tempfile
    cache = tempfile.mkdtemp(prefix="mbj-cache-", dir="/tmp")
    try:
        times = [env_times(env, extra_env={"JAX_COMPILATION_CACHE_DIR": cache}) for _ in range(2)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    failed = [t["failed"] for t in times if "failed" in t]
    if failed:
        raise RuntimeError(f"{env}: {failed[0]}")
    return times[0]["compile_s"], times[1]["compile_s"]


# --envs: each env once, through the worker process itself (no daemon), with the tests' tiny settings
TINY = {"training.num_epochs": 3, "training.num_learner_steps_per_epoch": 4, "training.n_steps": 10,
        "training.total_batch_size": 8, "evaluation.eval_total_batch_size": 4,
        "evaluation.greedy_eval_total_batch_size": 4, "checkpoint_every": 0}


ENV_TIMEOUT = 900  # seconds an env may take (BinPack-v2's transformer compiled for more than 12 minutes)
# measured before: run last, so the envs never measured come first
MEASURED_BEFORE = ("Game2048-v1", "Snake-v1", "TSP-v1", "BinPack-v2")


def env_times(env: str, timeout: float = ENV_TIMEOUT, extra_env: dict | None = None) -> dict:
    """One env's A2C run through the worker process: setup, compile and median epoch seconds,
    the machine's load average before and after; or why it failed (or where it was at the timeout)."""
    import tempfile
    run_dir = tempfile.mkdtemp(prefix="mbj-", dir="/tmp")
    load_before = os.getloadavg()[0]
    try:
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump({"worker": "jumanji", "algo": "a2c", "env": env, "params": TINY}, f)
        with open(os.path.join(run_dir, "events.jsonl"), "w") as events, \
                open(os.path.join(run_dir, "stderr.log"), "w") as stderr:
            proc = subprocess.Popen([sys.executable, "-m", "workers.jumanji_worker.cli"], cwd=run_dir, stdout=events,
                                    stderr=stderr, env={**os.environ, "PYTHONPATH": str(ROOT), **(extra_env or {})})
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
        values: dict[str, list[float]] = {}
        reason, phase = None, None
        with open(os.path.join(run_dir, "events.jsonl")) as f:
            for line in f:
                event = json.loads(line)
                if event["type"] == "scalar":
                    values.setdefault(event["tag"], []).append(event["value"])
                if event["type"] == "phase":
                    phase = event["name"]
                if event["type"] == "run_failed":
                    reason = event["reason"].splitlines()[0][:300]
        loads = {"load_before": round(load_before, 1), "load_after": round(os.getloadavg()[0], 1)}
        if code is None:
            return {"env": env, "failed": f"not done after {timeout:.0f} s, in phase {phase}",
                    **{k: v[0] for k, v in (("setup_s", values.get("time/setup_s")),
                                            ("compile_epoch_s", values.get("time/compile_epoch_s"))) if v}, **loads}
        if code != 0:
            return {"env": env, "failed": reason or f"exit {code}", **loads}
        return {"env": env, "setup_s": values["time/setup_s"][0], "compile_s": values["time/compile_s"][0],
                "epoch_s": median(values["time/epoch_s"]), "steps_per_s": median(values["train/steps_per_second"]),
                **loads}
    finally:
        subprocess.run(["rm", "-rf", run_dir])


def envs_main(out_path: str, only: list[str] | None = None) -> None:
    """Each env once, one after another (never two at once: they would share the cores), each
    compiling from scratch (no compiled programs kept from an earlier measurement)."""
    os.environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"
    from workers.jumanji_worker import catalog
    envs = only or sorted(catalog.known_envs(), key=lambda env: (env in MEASURED_BEFORE, env))
    results = []
    for env in envs:
        results.append(env_times(env))
        print(json.dumps(results[-1]), flush=True)
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)


def main() -> None:
    if "--envs" in sys.argv:  # --envs [ENV ...]: those envs only
        only = sys.argv[sys.argv.index("--envs") + 1:]
        envs_main(os.path.join(str(ROOT), "bench", "results", "jumanji_envs.json"), only or None)
        return
    print_table(run())


if __name__ == "__main__":
    main()
