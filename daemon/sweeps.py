"""Sweeps: a base run config, a search space, trials of several seeds, driven by Optuna.

A sweep spec (YAML or JSON, `mosaic sweep SPEC.yaml`; docs/sweeps.md is the user's page):

    name: lr-grid                       # optional
    base: {worker: cleanrl, algo: ppo, env: CartPole-v1, steps: 20000, params: {...}}
    params:                             # each: a grid, a list, or a distribution
      learning-rate: {loguniform: [1.0e-4, 1.0e-2]}
      num-envs: [2, 4]                  # a list: categorical (grid with sampler: grid)
      gamma: {grid: [0.98, 0.99]}
      ent-coef: {uniform: [0.0, 0.02]}
      num-steps: {int: [64, 256], log: false}
      anneal-lr: {categorical: [true, false]}
    trials: 8                           # default: the grid's size; else 10
    seeds: 3                            # runs per trial: seeds base.seed, base.seed+1, ... (base seed
                                        # null or random: drawn once, at the sweep's start)
    parallel: 2                         # trials in flight at once
    sampler: tpe                        # grid | random | tpe (default: grid when every param is a grid/list)
    objective: {tag: episode/return, last: 20, agg: mean, direction: maximize}
    pruner: {type: median, startup_trials: 2, warmup_steps: 0}   # or successive_halving, or none
    pbt: {population: 4, interval: 10000, ...}   # population-based training instead (daemon/pbt.py)

The study lives in SQLite under the home (``<home>/sweeps/<id>.db``, Optuna's own
RDB storage), the sweep row and its runs (``sweep``, ``trial`` columns) in the
store: a restarted daemon finds the trials in flight, their runs (re-adopted by
the run manager as any run) and goes on. Every param is checked against the
worker's schema, with each grid value and both ends of each range, before any
run starts.

A trial's value is the mean over its seeds of each run's objective (``agg`` of
the last ``last`` values of ``tag``). While runs train, the controller reads
their new telemetry every tick and reports the trial's mean so far to Optuna at
the slowest seed's step, rounded down to a twentieth of the run's steps (the
pruners compare trials at equal steps); a trial the pruner stops has its runs cancelled with
the reason ``pruned by sweep NAME`` and the tag ``pruned``. Optuna is imported
when the first sweep is submitted or found, not at the daemon's start.
"""
from __future__ import annotations

import logging
import math
import os
import statistics
import time
from typing import Any

from daemon import protocol as P
from daemon.home import EVENTS_FILE, Home
from daemon.ingest import read_range
from daemon.search_space import optuna_distributions
from daemon.store import Store, new_ulid
from workers.sdk.config import ConfigError, draw_seed, param_name
from workers.sdk.telemetry import EPISODE, SCALAR, episode_scalars

log = logging.getLogger("mosaic.daemon.sweeps")

TICK_SECONDS = 0.5
DISTRIBUTIONS = ("grid", "uniform", "loguniform", "int", "categorical")
AGGREGATIONS = ("mean", "max", "min", "last", "median")
SAMPLERS = ("grid", "random", "tpe")
PRUNERS = ("none", "median", "successive_halving")
SPEC_KEYS = ("name", "base", "params", "trials", "seeds", "parallel", "sampler", "objective", "pruner", "seed",
             "pbt")
OBJECTIVE_KEYS = ("tag", "last", "agg", "direction")
PRUNER_KEYS = ("type", "startup_trials", "warmup_steps")
PRUNED_TAG = "pruned"
REFUSED_ATTR = "refused"   # an Optuna user attr: why the worker refused the trial's config at submit


def _err(field: str, message: str) -> ConfigError:
    return ConfigError(f"sweep.{field}" if field else "sweep", message)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def normalise_param(name: str, spec: Any) -> dict[str, Any]:
    """One param's search space as {"kind": ..., ...}; a list is a grid of those values."""
    if isinstance(spec, list):
        spec = {"grid": spec}
    if not isinstance(spec, dict) or len(spec) - ("log" in spec) != 1:
        raise _err(f"params.{name}", "give a list of values or one of " + ", ".join(DISTRIBUTIONS))
    kind = next(k for k in spec if k != "log")
    if kind not in DISTRIBUTIONS:
        raise _err(f"params.{name}", f"unknown kind {kind!r}; one of {', '.join(DISTRIBUTIONS)}")
    values = spec[kind]
    if kind in ("grid", "categorical"):
        if not isinstance(values, list) or not values:
            raise _err(f"params.{name}", f"{kind}: a non-empty list of values")
        return {"kind": kind, "values": values}
    if not (isinstance(values, list) and len(values) == 2 and all(_number(v) for v in values)
            and values[0] < values[1]):
        raise _err(f"params.{name}", f"{kind}: [low, high] with low < high")
    if kind == "loguniform" and values[0] <= 0:
        raise _err(f"params.{name}", "loguniform: low must be > 0")
    if kind == "int" and not all(float(v).is_integer() for v in values):
        raise _err(f"params.{name}", "int: integer bounds")
    return {"kind": kind, "low": values[0], "high": values[1], "log": bool(spec.get("log", False))}


def check_spec(spec: Any, runs) -> dict[str, Any]:
    """The spec with defaults filled in; every mistake a ConfigError naming its field
    (``sweep.params.learning-rate``). ``runs`` is the RunManager: its ``validate`` checks
    the base config with each param's values, as a submit would."""
    if not isinstance(spec, dict):
        raise _err("", "a sweep spec must be a mapping")
    for key in spec:
        if key not in SPEC_KEYS:
            raise _err(key, f"unknown key; known: {', '.join(sorted(SPEC_KEYS))}")
    base = spec.get("base")
    if not isinstance(base, dict):
        raise _err("base", "the base run config (worker, algo, env, steps, params) is required")
    desc, checked = runs.validate(base)
    schema = desc.schema(checked["algo"], checked.get("env"))
    props = schema.get("properties", {})
    raw_params = spec.get("params")
    if not isinstance(raw_params, dict) or not raw_params:
        raise _err("params", "a mapping of parameter names to grids, lists or distributions is required")
    space: dict[str, dict[str, Any]] = {}
    for typed, pspec in raw_params.items():
        name = param_name(props, str(typed))
        if name is None:
            raise _err(f"params.{typed}", f"not a parameter of {desc.name} {checked['algo']}")
        space[name] = normalise_param(name, pspec)
    # each value the sweep can give, checked as the worker checks a submit
    for name, ps in space.items():
        probes = ps["values"] if "values" in ps else [ps["low"], ps["high"]]
        for value in probes:
            if ps["kind"] == "int":
                value = int(value)
            try:
                runs.validate({**base, "params": {**(base.get("params") or {}), name: value}})
            except ConfigError as exc:
                raise _err(f"params.{name}", f"{value!r}: {exc.message}") from None
    pbt = None
    if "pbt" in spec:   # population-based training (daemon/pbt.py): members, not Optuna's trials
        from daemon.pbt_decisions import check_pbt
        for key in ("trials", "seeds", "parallel", "sampler", "pruner"):
            if key in spec:
                raise _err(key, "not with pbt: the population is pbt.population, each member one run")
        if not (desc.capabilities() or {}).get("stop"):
            raise _err("pbt", f"worker {desc.name} cannot stop and continue, which each exploit needs")
        pbt = check_pbt(spec["pbt"], space, props)
        if not base.get("steps"):
            raise _err("base.steps", "the budget of each member, in env steps, is required with pbt")
    all_grid = all(ps["kind"] == "grid" for ps in space.values())
    sampler = spec.get("sampler") or ("grid" if all_grid else "tpe")
    if pbt is not None:
        sampler = "random"
        spec = {**spec, "trials": pbt["population"], "parallel": pbt["population"]}
    if sampler not in SAMPLERS:
        raise _err("sampler", f"one of {', '.join(SAMPLERS)}")
    if sampler == "grid" and not all_grid:
        raise _err("sampler", "grid needs every param as a grid or a list")
    grid_size = math.prod(len(ps["values"]) for ps in space.values()) if all_grid else None
    trials = spec.get("trials", grid_size if sampler == "grid" else 10)
    seeds = spec.get("seeds", 1)
    parallel = spec.get("parallel", 1)
    for field, value, high in (("trials", trials, 10000), ("seeds", seeds, 100), ("parallel", parallel, 256)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise _err(field, f"an integer from 1 to {high}")
    objective = spec.get("objective") or {}
    if not isinstance(objective, dict):
        raise _err("objective", "a mapping: tag, last, agg, direction")
    for key in objective:
        if key not in OBJECTIVE_KEYS:
            raise _err(f"objective.{key}", f"unknown key; known: {', '.join(OBJECTIVE_KEYS)}")
    objective = {"tag": objective.get("tag", "episode/return"), "last": objective.get("last", 20),
                 "agg": objective.get("agg", "mean"), "direction": objective.get("direction", "maximize")}
    if not isinstance(objective["tag"], str) or not objective["tag"]:
        raise _err("objective.tag", "a metric tag, e.g. episode/return")
    if not isinstance(objective["last"], int) or isinstance(objective["last"], bool) or objective["last"] < 1:
        raise _err("objective.last", "an integer >= 1")
    if objective["agg"] not in AGGREGATIONS:
        raise _err("objective.agg", f"one of {', '.join(AGGREGATIONS)}")
    if objective["direction"] not in ("maximize", "minimize"):
        raise _err("objective.direction", "maximize or minimize")
    pruner = spec.get("pruner") or {"type": "none"}
    if isinstance(pruner, str):
        pruner = {"type": pruner}
    if not isinstance(pruner, dict) or pruner.get("type", "none") not in PRUNERS:
        raise _err("pruner", f"one of {', '.join(PRUNERS)}")
    for key in pruner:
        if key not in PRUNER_KEYS:
            raise _err(f"pruner.{key}", f"unknown key; known: {', '.join(PRUNER_KEYS)}")
    pruner = {"type": pruner.get("type", "none"), "startup_trials": pruner.get("startup_trials", 2),
              "warmup_steps": pruner.get("warmup_steps", 0)}
    for field in ("startup_trials", "warmup_steps"):
        if not isinstance(pruner[field], int) or isinstance(pruner[field], bool) or pruner[field] < 0:
            raise _err(f"pruner.{field}", "an integer >= 0")
    name = spec.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise _err("name", "a non-empty string")
    seed = spec.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise _err("seed", "an integer (the sampler's seed)")
    checked_spec = {"name": name, "base": checked_base(base), "params": space, "trials": trials, "seeds": seeds,
                    "parallel": parallel, "sampler": sampler, "objective": objective, "pruner": pruner, "seed": seed,
                    "grid_size": grid_size}
    if pbt is not None:
        checked_spec["pbt"] = pbt
    return checked_spec


def checked_base(base: dict[str, Any]) -> dict[str, Any]:
    """The base as the user wrote it, less what each run sets itself; a random seed is drawn once
    here, so every trial's seeds are the same ones (trials differ by their params only)."""
    return draw_seed({k: v for k, v in base.items() if k not in ("name", "run_id")})


def aggregate(values: list[float], agg: str) -> float | None:
    values = [v for v in values if _number(v)]
    if not values:
        return None
    if agg == "mean":
        return statistics.fmean(values)
    if agg == "median":
        return statistics.median(values)
    if agg == "max":
        return max(values)
    if agg == "min":
        return min(values)
    return values[-1]


MARKS_KEPT = 64   # bucket steps a RunReader keeps (the pruner reports at 20 of them a run)


class RunReader:
    """Follows one run's values of the objective tag (incrementally, from its events file).

    ``every``: the steps between the pruner's reports. ``at_step[b]`` holds the last values as they
    stood at step b (values logged at steps up to b), closed once a value past b arrives: the
    pruner compares trials at the same step, and a trial read a little later than another must
    not be judged by the values it logged since (with returns that rise and fall within a bucket
    that decided which trial was pruned, not the trial's quality).
    """

    def __init__(self, path: str, tag: str, keep: int, every: int = 0):
        self.path = path
        self.tag = tag
        self.offset = 0
        self.values: list[float] = []
        self.keep = keep
        self.step = 0
        self.every = every
        self.at_step: dict[int, list[float]] = {}

    def read(self, end: int) -> None:
        while self.offset < end:
            nxt, _raws, events = read_range(self.path, self.offset, end, 4 * 1024 * 1024)
            if nxt <= self.offset:
                break
            self.offset = nxt
            for ev in events:
                kind = ev.get("type")
                if kind == SCALAR and ev.get("tag") == self.tag:
                    new = [ev.get("value")]
                elif kind == EPISODE and self.tag.startswith("episode/"):
                    new = [v for t, v in episode_scalars(ev) if t == self.tag]
                else:
                    continue
                step = ev.get("step")
                if isinstance(step, int):
                    if self.every and self.values:
                        # every whole bucket step passed since the last value: the values as they stood there
                        # (the latest MARKS_KEPT only: a run far past its sweep's steps would keep them all)
                        marks = range(-(-self.step // self.every) * self.every, step, self.every)
                        for mark in marks[-MARKS_KEPT:]:
                            self.at_step[mark] = self.values[-self.keep:]
                        for mark in sorted(self.at_step)[:-MARKS_KEPT]:
                            del self.at_step[mark]
                    self.step = max(self.step, step)
                self.values.extend(new)
                del self.values[:-self.keep]

    def closed_step(self) -> int:
        """The latest bucket step whose values are final (0: none yet)."""
        return max(self.at_step, default=0)

    def value_at(self, step: int, agg: str) -> float | None:
        return aggregate(self.at_step.get(step, []), agg)


class SweepController:
    """Keeps every running sweep's trials in flight; one tick for all sweeps."""

    def __init__(self, home: Home, store: Store, runs):
        self.home = home
        self.store = store
        self.runs = runs
        self.studies: dict[str, Any] = {}          # sweep id -> optuna Study
        self.readers: dict[str, RunReader] = {}    # run id -> its objective reader
        self.reported: dict[tuple[str, int], int] = {}  # (sweep, trial number) -> last step reported
        self._loop = None
        self._handle = None
        from daemon.pbt import PBTController
        self.pbt = PBTController(home, store, runs)

    # -- lifecycle -------------------------------------------------------------
    def start(self, loop) -> None:
        self._loop = loop
        if any(s["state"] == "running" for s in self.store.list_sweeps()):
            self._schedule(0.0)

    def _schedule(self, delay: float = TICK_SECONDS) -> None:
        if self._handle is None and self._loop is not None:
            self._handle = self._loop.call_later(delay, self._tick)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def study_path(self, sweep_id: str) -> str:
        return str(self.home.root / "sweeps" / f"{sweep_id}.db")

    def _study(self, sweep: dict[str, Any]):
        study = self.studies.get(sweep["id"])
        if study is not None:
            return study
        import optuna  # only when a sweep exists: ~0.4 s of imports kept off the daemon's start
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        spec = sweep["spec"]
        space = spec["params"]
        if spec["sampler"] == "grid":
            sampler = optuna.samplers.GridSampler({n: ps["values"] for n, ps in space.items()}, seed=spec["seed"])
        elif spec["sampler"] == "random":
            sampler = optuna.samplers.RandomSampler(seed=spec["seed"])
        else:
            sampler = optuna.samplers.TPESampler(seed=spec["seed"], n_startup_trials=min(10, spec["trials"]))
        pr = spec["pruner"]
        if pr["type"] == "median":
            pruner = optuna.pruners.MedianPruner(n_startup_trials=pr["startup_trials"], n_warmup_steps=pr["warmup_steps"])
        elif pr["type"] == "successive_halving":
            pruner = optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, pr["warmup_steps"]))
        else:
            pruner = optuna.pruners.NopPruner()
        os.makedirs(os.path.dirname(self.study_path(sweep["id"])), exist_ok=True)
        study = optuna.create_study(study_name=sweep["id"], storage=f"sqlite:///{self.study_path(sweep['id'])}",
                                    sampler=sampler, pruner=pruner, direction=spec["objective"]["direction"],
                                    load_if_exists=True)
        self.studies[sweep["id"]] = study
        return study

    distributions = staticmethod(optuna_distributions)

    # -- submit ----------------------------------------------------------------
    def submit(self, spec: Any) -> dict[str, Any]:
        checked = check_spec(spec, self.runs)
        sweep_id = new_ulid()
        name = checked["name"] or f"sweep-{checked['base'].get('algo', 'x')}-{sweep_id[-6:].lower()}"
        if self.store.resolve_sweep(name) and self.store.resolve_sweep(name)[0]["name"] == name:
            raise _err("name", f"a sweep named {name!r} exists already")
        checked["name"] = name
        sweep = self.store.create_sweep({"id": sweep_id, "name": name, "spec": checked, "state": "running",
                                         "created_at": time.time()})
        if "pbt" not in checked:
            self._study(sweep)
        self._schedule(0.0)
        return self.describe(sweep)

    def stop(self, sweep: dict[str, Any]) -> dict[str, Any]:
        """``mosaic stop SWEEP``: a PBT population stopped whole, to continue later (daemon/pbt.py)."""
        self._check_pbt_control(sweep, "running", "stop")
        problems = self.pbt.stop(sweep)
        return {**self.describe(self.store.get_sweep(sweep["id"])), "problems": problems}

    def continue_(self, sweep: dict[str, Any]) -> dict[str, Any]:
        """``mosaic continue SWEEP``: a stopped PBT population goes on where it was."""
        self._check_pbt_control(sweep, "stopped", "continue")
        problems = self.pbt.resume(sweep)
        self._schedule(0.0)
        return {**self.describe(self.store.get_sweep(sweep["id"])), "problems": problems}

    @staticmethod
    def _check_pbt_control(sweep: dict[str, Any], state: str, verb: str) -> None:
        if "pbt" not in sweep["spec"]:
            raise P.RPCError(P.BAD_STATE, f"sweep {sweep['name']} is no PBT sweep: its trials {verb} one run at a "
                                          f"time (mosaic {verb} RUN), or it is cancelled whole (mosaic sweeps "
                                          f"{sweep['name']} --cancel)")
        if sweep["state"] != state:
            raise P.RPCError(P.BAD_STATE, f"sweep {sweep['name']} is {sweep['state']}, not {state}")

    def cancel(self, sweep: dict[str, Any]) -> dict[str, Any]:
        if sweep["state"] in ("running", "stopped"):
            self.store.update_sweep(sweep["id"], state="cancelled", ended_at=time.time())
            for run in self.store.sweep_runs(sweep["id"]):
                if run["state"] == P.QUEUED or run["state"] in P.ACTIVE_STATES:
                    self.runs.cancel(run, reason=f"sweep {sweep['name']} cancelled")
        return self.describe(self.store.get_sweep(sweep["id"]))

    # -- the tick ----------------------------------------------------------------
    def _tick(self) -> None:
        self._handle = None
        busy = False
        for sweep in self.store.list_sweeps():
            if sweep["state"] != "running":
                continue
            try:
                if "pbt" in sweep["spec"]:
                    self.pbt.advance(sweep)
                else:
                    self._advance(sweep)
            except Exception:  # a sweep's bug costs that sweep a tick, never the daemon
                log.exception("sweep %s", sweep["id"])
            busy = True
        if busy:
            self._schedule()

    def _advance(self, sweep: dict[str, Any]) -> None:
        import optuna
        spec = sweep["spec"]
        study = self._study(sweep)
        runs_by_trial: dict[int, list[dict[str, Any]]] = {}
        for run in self.store.sweep_runs(sweep["id"]):
            runs_by_trial.setdefault(run["trial"], []).append(run)
        in_flight = 0
        trials = study.get_trials(deepcopy=False)
        for frozen in trials:
            if frozen.state != optuna.trial.TrialState.RUNNING:
                continue
            runs = runs_by_trial.get(frozen.number, [])
            if not runs:
                # asked but never submitted (the daemon stopped in between): nothing to wait for
                study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
                continue
            # reported at whole twentieths of the run's steps: the pruner compares trials at the same step
            bucket = max(1, int(spec["base"].get("steps") or 1000) // 20)
            values, steps, final = [], [], True
            for run in runs:
                reader = self.readers.get(run["id"])
                if reader is None:
                    reader = self.readers[run["id"]] = RunReader(
                        str(self.home.run_dir(run["id"]) / EVENTS_FILE), spec["objective"]["tag"],
                        spec["objective"]["last"], every=bucket)
                reader.read(self.runs.ingested_offset(run))
                value = aggregate(reader.values, spec["objective"]["agg"])
                if value is not None:
                    values.append(value)
                steps.append(reader.step)
                # a stopped run is unfinished: its trial waits for it to be continued (mosaic continue)
                final = final and run["state"] in P.FINAL_STATES and run["state"] != P.STOPPED
            if final:
                for run in runs:
                    self.readers.pop(run["id"], None)
                if any(PRUNED_TAG in (r.get("tags") or []) for r in runs):
                    study.tell(frozen.number, state=optuna.trial.TrialState.PRUNED)
                elif values and any(r["state"] == P.SUCCEEDED for r in runs):
                    study.tell(frozen.number, statistics.fmean(values))
                else:
                    study.tell(frozen.number, state=optuna.trial.TrialState.FAIL)
                continue
            in_flight += 1
            # pruning from live telemetry: the trial's mean at the last bucket step all its seeds have passed,
            # each seed's values as they stood at that step
            key = (sweep["id"], frozen.number)
            readers = [self.readers[run["id"]] for run in runs]
            step = min(reader.closed_step() for reader in readers)
            at_step = [reader.value_at(step, spec["objective"]["agg"]) for reader in readers]
            last_step = int(spec["base"].get("steps") or 0)
            # a run at its last step is done: its value is told, never pruned (a cancel would only race its exit)
            if spec["pruner"]["type"] != "none" and None not in at_step and step > self.reported.get(key, 0) \
                    and not (last_step and min(steps) >= last_step):
                self.reported[key] = step
                trial = optuna.trial.Trial(study, frozen._trial_id)
                trial.report(statistics.fmean(at_step), step)
                if trial.should_prune():
                    log.info("sweep %s: trial %s pruned at step %s", sweep["name"], frozen.number, step)
                    for run in runs:
                        self.runs.update_record(run["id"], tags=sorted(set(run.get("tags") or []) | {PRUNED_TAG}))
                        fresh = self.store.get(run["id"])
                        if fresh["state"] == P.QUEUED or fresh["state"] in P.ACTIVE_STATES:
                            self.runs.cancel(fresh, reason=f"pruned by sweep {sweep['name']} at step {step}")
        # a trial asked but never submitted (the daemon stopped in between) is asked again
        started = len(trials) - sum(1 for t in trials if t.state == optuna.trial.TrialState.FAIL
                                    and not runs_by_trial.get(t.number) and REFUSED_ATTR not in t.user_attrs)
        while in_flight < spec["parallel"] and started < spec["trials"]:
            self._start_trial(sweep, study)
            in_flight += 1
            started += 1
        if in_flight == 0 and started >= spec["trials"]:
            self.store.update_sweep(sweep["id"], state="finished", ended_at=time.time())
            log.info("sweep %s finished", sweep["name"])

    def _start_trial(self, sweep: dict[str, Any], study) -> None:
        from optuna.trial import TrialState
        spec = sweep["spec"]
        trial = study.ask(self.distributions(spec["params"]))
        base = spec["base"]
        seed0 = base.get("seed") or 0
        for k in range(spec["seeds"]):
            config = {**base, "params": {**(base.get("params") or {}), **trial.params}, "seed": seed0 + k,
                      "name": f"{sweep['name']}-t{trial.number}-s{seed0 + k}"}
            try:
                # checked=True: a cluster's scheduler was asked once, at the sweep's submit (daemon/server.py)
                self.runs.submit(config, sweep=sweep["id"], trial=trial.number, checked=True)
            except ConfigError as exc:  # values fine alone, refused together (checked one by one up front)
                log.warning("sweep %s trial %s: %s", sweep["name"], trial.number, exc)
                # counted as one of the sweep's trials, with the reason: a sweep whose samples are all
                # refused must end, not ask Optuna for new ones for ever
                trial.set_user_attr(REFUSED_ATTR, str(exc))
                study.tell(trial.number, state=TrialState.FAIL)
                return

    # -- reading -------------------------------------------------------------
    def run_objective(self, run: dict[str, Any], spec: dict[str, Any]) -> float | None:
        """A run's objective now (from its events file)."""
        reader = RunReader(str(self.home.run_dir(run["id"]) / EVENTS_FILE), spec["objective"]["tag"],
                           spec["objective"]["last"])
        reader.read(self.runs.ingested_offset(run))
        return aggregate(reader.values, spec["objective"]["agg"])

    def describe(self, sweep: dict[str, Any], details: bool = False) -> dict[str, Any]:
        """The sweep's record; with details, its trials (ranked) with their runs and importances."""
        out = {"id": sweep["id"], "name": sweep["name"], "state": sweep["state"], "created_at": sweep["created_at"],
               "ended_at": sweep.get("ended_at"), "spec": sweep["spec"]}
        runs = self.store.sweep_runs(sweep["id"])
        out["runs"] = len(runs)
        out["groups"] = len({r["trial"] for r in runs})
        if not details:
            return out
        spec = sweep["spec"]
        if "pbt" in spec:
            # the members as one-run trials (what the sweep views and exports read), and the lineage
            out.update(self.pbt.describe(sweep))
            trials = []
            for member, run in zip(out["members"], sorted(runs, key=lambda r: r["trial"])):
                value = self.run_objective(run, spec)
                trials.append({"trial": member["member"], "state": run["state"], "params": member["params"],
                               "value": value, "refused": None, "mean": value, "std": 0.0 if value is not None else None,
                               "min": value, "max": value,
                               "runs": [{"id": run["id"], "name": run["name"], "state": run["state"],
                                         "seed": run["config"].get("seed"), "tags": run.get("tags") or [],
                                         "note": run.get("note") or "", "objective": value}]})
            sign = -1 if spec["objective"]["direction"] == "maximize" else 1
            trials.sort(key=lambda t: (t["mean"] is None, sign * (t["mean"] or 0.0)))
            out.update(trials=trials, importances={})
            return out
        study = self._study(sweep)
        by_trial: dict[int, list[dict[str, Any]]] = {}
        for run in runs:
            by_trial.setdefault(run["trial"], []).append(run)
        trials = []
        for t in study.get_trials(deepcopy=False):
            members = by_trial.get(t.number, [])
            objectives = [self.run_objective(r, spec) for r in members]
            finite = [v for v in objectives if v is not None]
            refused = t.user_attrs.get(REFUSED_ATTR)
            trials.append({
                "trial": t.number, "state": "refused" if refused else t.state.name.lower(), "params": t.params,
                "value": t.value, "refused": refused,
                "mean": statistics.fmean(finite) if finite else None,
                "std": statistics.pstdev(finite) if len(finite) > 1 else (0.0 if finite else None),
                "min": min(finite) if finite else None, "max": max(finite) if finite else None,
                "runs": [{"id": r["id"], "name": r["name"], "state": r["state"], "seed": r["config"].get("seed"),
                          "tags": r.get("tags") or [], "note": r.get("note") or "", "objective": v} for r, v in zip(members, objectives)],
            })
        sign = -1 if spec["objective"]["direction"] == "maximize" else 1
        trials.sort(key=lambda t: (t["mean"] is None, sign * (t["mean"] or 0.0)))
        out["trials"] = trials
        out["importances"] = {}
        complete = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
        if len(complete) >= 2 and len(spec["params"]) >= 1:
            try:
                import optuna
                out["importances"] = optuna.importance.get_param_importances(study)
            except Exception as exc:  # too few distinct values for the evaluator
                out["importances_error"] = str(exc)
        return out
