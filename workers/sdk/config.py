"""Run configs and their validation, shared by the daemon, the app's forms and workers.

A run config is one JSON object:

    {"worker": "cleanrl", "algo": "ppo", "env": "CartPole-v1", "steps": 50000,
     "seed": 1, "device": "cpu", "name": "ppo-cartpole", "params": {"learning-rate": 0.00025}}

The top-level keys are common to every worker (``RunConfig``); ``params`` are the
algorithm's own hyperparameters, described by a JSON schema the worker
publishes (``mosaic schema WORKER ALGO``). ``check_params`` validates params
against such a schema: the daemon calls it at submit time and the app calls
it as the user types, so a form and the daemon never disagree.

Errors are ``ConfigError`` carrying the dotted field name.
"""
from __future__ import annotations

import difflib
import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class ConfigError(ValueError):
    """An invalid config; ``field`` names the offending key (dotted path)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message


class LimitsConfig(BaseModel):
    """Per-run limits the daemon enforces (docs/reliability.md)."""
    model_config = ConfigDict(extra="forbid")
    wall_seconds: float | None = Field(default=None, gt=0, description="stop the run after this long")
    max_steps: int | None = Field(default=None, gt=0, description="stop the run once it reports this step")
    memory_mb: int | None = Field(default=None, ge=64, description="address-space limit of the worker")


# Slurm's --mem: a number with an optional unit (K, M, G, T; M when none), as sbatch reads it
MEMORY_RE = re.compile(r"^[1-9][0-9]*[KMGT]?$")
# Slurm's --time: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS
TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$")


class PlacementConfig(BaseModel):
    """Where a run runs: here (``local``), or as a job of a cluster's own scheduler (docs/cluster.md).
    Each field maps to the engine's own option: Slurm's sbatch flags, Ray's submit_job arguments."""
    model_config = ConfigDict(extra="forbid")
    backend: Literal["local", "slurm", "ray"] = "local"
    partition: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.,-]+$", description="sbatch --partition")
    account: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$", description="sbatch --account")
    cpus: int | None = Field(default=None, ge=1, le=4096, description="sbatch --cpus-per-task; Ray entrypoint_num_cpus")
    mem: str | None = Field(default=None, description="sbatch --mem: 8G, 512M; Ray: entrypoint_memory")
    gpus: int | None = Field(default=None, ge=0, le=64, description="sbatch --gres=gpu:N; Ray entrypoint_num_gpus")
    time: str | None = Field(default=None, description="sbatch --time: minutes, HH:MM:SS or D-HH:MM:SS")
    extra_args: list[str] = Field(default_factory=list, description="more sbatch arguments, as given")
    requeue: bool = Field(default=False, description="stopped by Slurm's warning before the wall time (or a "
                                                     "preemption): continued as a new job of the same run")
    address: str | None = Field(default=None, description="the Ray cluster's dashboard address, http://host:8265")
    runtime_env: dict[str, Any] | None = Field(default=None, description="Ray's runtime_env for the job")
    resources: dict[str, float] | None = Field(default=None, description="Ray's entrypoint_resources: custom "
                                                                         "resources the job needs, e.g. {\"a100\": 1}")
    shared_home: bool | None = Field(default=None, description="Ray: the nodes mount the home (the default); "
                                                               "false: the run works in a directory of its node's "
                                                               "own, its events come back through the job's log")

    @field_validator("resources")
    @classmethod
    def _resources(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for name, amount in (value or {}).items():
            if name in ("CPU", "GPU", "memory"):
                raise ValueError(f"{name} is asked with cpus, gpus or mem, not among resources")
            if not name or amount < 0:
                raise ValueError(f"{name!r}: {amount} is not a resource request (a name and an amount >= 0)")
        return value

    @field_validator("mem")
    @classmethod
    def _mem(cls, value: str | None) -> str | None:
        if value is not None and not MEMORY_RE.match(value.upper()):
            raise ValueError(f"{value!r} is not an amount of memory: a number with K, M, G or T, e.g. 8G")
        return None if value is None else value.upper()

    @field_validator("time")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None and not TIME_RE.match(value):
            raise ValueError(f"{value!r} is not a wall time: minutes, HH:MM:SS or D-HH:MM:SS, e.g. 2:00:00")
        return value

    @model_validator(mode="after")
    def _for_its_backend(self) -> "PlacementConfig":
        slurm_only = [name for name in ("partition", "account", "time") if getattr(self, name) is not None]
        slurm_only += [name for name in ("extra_args", "requeue") if getattr(self, name)]
        ray_only = [name for name in ("address", "runtime_env", "resources") if getattr(self, name) is not None]
        ray_only += ["shared_home"] if self.shared_home is not None else []
        if self.backend != "slurm" and slurm_only:
            raise ValueError(f"{', '.join(slurm_only)} {'is' if len(slurm_only) == 1 else 'are'} for backend slurm, "
                             f"not {self.backend}")
        if self.backend != "ray" and ray_only:
            raise ValueError(f"{', '.join(ray_only)} {'is' if len(ray_only) == 1 else 'are'} for backend ray, "
                             f"not {self.backend}")
        if self.backend == "local" and any(getattr(self, n) is not None for n in ("cpus", "mem", "gpus")):
            raise ValueError("cpus, mem and gpus are requests to a cluster's scheduler: backend slurm or ray")
        return self


class FramesConfig(BaseModel):
    """Live frames through FastLane (see docs/fastlane.md)."""
    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    fps: float = Field(default=15.0, gt=0, le=120)
    max_dim: int = Field(default=400, ge=16, le=4096)
    grid: int = Field(default=1, ge=1, le=64)


class RecordConfig(BaseModel):
    """Record the run's transitions as an offline dataset (workers/sdk/dataset.py): whole
    episodes, until ``episodes`` have finished or they hold at least ``steps`` transitions."""
    model_config = ConfigDict(extra="forbid")
    episodes: int | None = Field(default=None, ge=1, le=1000000, description="finished episodes to record")
    steps: int | None = Field(default=None, ge=1, le=100000000, description="transitions to record, at least")

    @model_validator(mode="after")
    def _one(self) -> "RecordConfig":
        if (self.episodes is None) == (self.steps is None):
            raise ValueError("give one of episodes or steps")
        return self


# drawn seeds stay below 2**31 - 2**16: every library takes them (numpy's legacy RandomState, torch, jax,
# ALE), with room for a sweep's seeds (base seed + k)
SEED_DRAWN_BELOW = 2**31 - 2**16
RANDOM_SEED = "random"


def draw_seed(config: dict[str, Any]) -> dict[str, Any]:
    """The config with ``seed: null`` or ``seed: "random"`` made a drawn seed, recorded as drawn."""
    seed = config.get("seed", 1)
    if seed is None or (isinstance(seed, str) and seed.strip().lower() == RANDOM_SEED):
        import secrets
        return {**config, "seed": secrets.randbelow(SEED_DRAWN_BELOW), "seed_drawn": True}
    return config


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RunConfig(BaseModel):
    """The keys every run has, whatever its worker."""
    model_config = ConfigDict(extra="forbid")

    worker: str
    algo: str
    env: str
    steps: int | None = Field(default=None, gt=0, description="total environment steps")
    # a run that asked for a random seed (seed: null, or "random") gets one drawn by the daemon at
    # submit (draw_seed), recorded here with seed_drawn, so the run can be repeated exactly
    seed: int = Field(default=1, ge=0)
    seed_drawn: bool = False
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:\d+)?|auto)$")
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # "eval" loads `checkpoint` and plays `eval_episodes` episodes without training; "play": a worker
    # whose agents learn nothing in the run plays its episodes (workers/sdk/modes.py)
    mode: Literal["train", "eval", "play"] = "train"
    checkpoint: str | None = None
    eval_episodes: int = Field(default=10, ge=1, le=100000)
    frames: FramesConfig = Field(default_factory=FramesConfig)
    # record the run's transitions into its directory (dataset.hdf5); off when None
    record: RecordConfig | None = None
    # an offline algorithm's data: another run's recorded dataset, by run name or id
    # (the daemon makes it the absolute path of that run's dataset.hdf5 at submit)
    dataset: str | None = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    # where it runs: here, or as a Slurm or Ray job (settings.json's "placement" fills what a run leaves out)
    placement: PlacementConfig = Field(default_factory=PlacementConfig)
    # mirrored live to W&B and/or MLflow by the daemon (daemon/mirror.py, docs/mirrors.md); None:
    # as the home's settings.json says (mirrors.<target>.enabled), [] none. The targets are
    # daemon.protocol.MIRROR_TARGETS (this module imports no daemon; tests/daemon/test_mirrors.py keeps them one)
    mirror: list[Literal["wandb", "mlflow"]] | None = None
    # set by the daemon, not the user
    run_id: str | None = None
    # set by the daemon when it continues a stopped run (mosaic continue): the checkpoint the
    # same run goes on from, its step counters included (``checkpoint`` starts a new run from one)
    continue_from: str | None = None
    # set with continue_from when that checkpoint is older than the last step the run logged (a
    # failed run goes on from its last periodic checkpoint): the steps up to this one are trained
    # again but not logged again, so the history holds each step once (telemetry.Emitter)
    logged_until: int | None = None
    # with logged_until: the scalars (by tag) and episodes the history holds at that very step; the
    # old process may have died between two lines of it, and the missing ones are logged this time
    logged_at_until: dict[str, Any] | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError("must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value


# pydantic's error types, said the way check_value says them (the form and the
# CLI print the same line for the same mistake, whichever validator caught it)
_PYDANTIC_TYPES = {
    "int_type": "integer", "int_parsing": "integer", "int_from_float": "integer",
    "float_type": "number", "float_parsing": "number", "bool_type": "boolean", "bool_parsing": "boolean",
    "string_type": "string", "dict_type": "object", "model_type": "object", "list_type": "array",
}
_PYDANTIC_BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
                    "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}


def _pydantic_message(err: dict[str, Any]) -> str:
    kind, ctx = err["type"], err.get("ctx") or {}
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "is required"
    if kind in _PYDANTIC_BOUNDS:
        key, op = _PYDANTIC_BOUNDS[kind]
        return f"must be {op} {_number(ctx[key])}"
    if kind in _PYDANTIC_TYPES:
        return f"{must_be([_PYDANTIC_TYPES[kind]])}, not {_typed(err.get('input'))}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected'].replace(' or ', ', ')}"
    if kind == "string_pattern_mismatch":
        return f"must match {ctx['pattern']}"
    if kind == "value_error":
        return str(ctx.get("error", err["msg"]))
    return err["msg"]


def parse_run_config(data: Any) -> RunConfig:
    """Validate the common keys; raise ConfigError naming the first bad field."""
    if not isinstance(data, dict):
        raise ConfigError("", "a run config must be a JSON object")
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(".".join(str(p) for p in err["loc"]), _pydantic_message(err)) from None
    if config.mode == "eval" and not config.checkpoint:
        raise ConfigError("checkpoint", "is required when mode is 'eval'")
    return config


def eval_config(trained: dict[str, Any], checkpoint: str, episodes: int | None = None) -> dict[str, Any]:
    """A trained run's config as an evaluation of a checkpoint (``mosaic eval``, the
    app's Artifacts tab): the same worker, algorithm, env, params, seed and device;
    not its training steps, limits or frames, which the caller sets."""
    config = {key: trained[key] for key in ("worker", "algo", "env", "seed", "device", "params") if key in trained}
    config.update(mode="eval", checkpoint=checkpoint)
    if episodes is not None:
        config["eval_episodes"] = episodes
    return config


# -- params against a JSON schema ------------------------------------------
_TYPES = {
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def _types_of(spec: dict[str, Any]) -> list[str]:
    t = spec.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


_ARTICLES = {"integer": "an integer", "number": "a number", "boolean": "a boolean", "string": "a string",
             "array": "an array", "object": "an object", "null": "null"}


def must_be(types: list[str]) -> str:
    """"must be an integer", "must be a number or null": how every type mistake is said."""
    return "must be " + " or ".join(_ARTICLES.get(t, t) for t in types)


def _number(value: Any) -> str:
    """A bound as people write it: 0 rather than 0.0, 0.001 as is."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def _typed(value: Any) -> str:
    return repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r}"


def integral(raw: str) -> int | None:
    """An integer typed as a user types it: 10000, 10_000, 1e4, 1.0e4, 50000.0; None if it
    is not one (1.5, 1e-3, 'abc')."""
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        value = float(raw)
    except ValueError:
        return None
    if not math.isfinite(value) or not value.is_integer():
        return None
    return int(value)


def read_text_file(path: str) -> str:
    """A file a run takes as text (a XuanCe YAML), read where the user is: the CLI and the form read
    it alike, and the daemon, maybe on another machine, never reads the user's files."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError("", f"{path} is not a text file (UTF-8)") from None


def coerce_text(spec: dict[str, Any], text: str) -> Any:
    """Turn what a user typed (a form field, ``--set k=v``) into a typed value."""
    types = _types_of(spec)
    raw = text.strip()
    # x-null-words: more words that mean null in this field (the form's seed: "random")
    if "null" in types and raw.lower() in ("", "none", "null", *spec.get("x-null-words", ())):
        return None
    if "boolean" in types:
        low = raw.lower()
        if low in ("true", "yes", "1", "on"):
            return True
        if low in ("false", "no", "0", "off"):
            return False
    if "integer" in types:
        value = integral(raw)
        if value is not None:
            return value
    if "number" in types:
        try:
            return float(raw)
        except ValueError:
            pass
    if "array" in types or "object" in types:
        import json
        try:
            return json.loads(raw)
        except ValueError:
            pass
    if "string" in types or not types:
        return text
    raise ConfigError("", f"{must_be([t for t in types if t != 'null'])}, not {text!r}")


def check_value(name: str, spec: dict[str, Any], value: Any) -> Any:
    """Check one value against its property schema; return it (ints widened for numbers)."""
    types = _types_of(spec)
    if types and not any(_TYPES[t](value) for t in types if t in _TYPES):
        raise ConfigError(name, f"{must_be(types)}, not {_typed(value)}")
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(repr(c) for c in spec["enum"])
        raise ConfigError(name, f"must be one of {choices}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(name, "must be a finite number")
        if "minimum" in spec and value < spec["minimum"]:
            raise ConfigError(name, f"must be >= {_number(spec['minimum'])}")
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            raise ConfigError(name, f"must be > {_number(spec['exclusiveMinimum'])}")
        if "maximum" in spec and value > spec["maximum"]:
            raise ConfigError(name, f"must be <= {_number(spec['maximum'])}")
        if "exclusiveMaximum" in spec and value >= spec["exclusiveMaximum"]:
            raise ConfigError(name, f"must be < {_number(spec['exclusiveMaximum'])}")
        if "number" in types and "integer" not in types and isinstance(value, int):
            value = float(value)
    if isinstance(value, str) and "pattern" in spec and not re.search(spec["pattern"], value):
        raise ConfigError(name, f"must match {spec['pattern']}")
    return value


# -- names users type ----------------------------------------------------------
def fold(name: str) -> str:
    """A name with case, '-' and '_' made the same: learning-starts == learning_starts, ppo == PPO."""
    return name.replace("-", "_").lower()


def did_you_mean(typed: str, names: list[str]) -> str:
    """"; did you mean 'x'?" for the names closest to what was typed, or ""."""
    # a name's first word counts too: "sax" is close to "sac", so to sac_continuous_action
    by_fold: dict[str, str] = {}
    for name in names:
        by_fold.setdefault(fold(name), name)
        by_fold.setdefault(fold(name).split("_")[0], name)
    close = difflib.get_close_matches(fold(typed), list(by_fold), n=5, cutoff=0.6)
    found = list(dict.fromkeys(by_fold[c] for c in close))[:3]
    if not found:
        return ""
    return "; did you mean " + " or ".join(repr(n) for n in found) + "?"


def param_name(props: dict[str, Any], key: str) -> str | None:
    """The schema's own spelling of a parameter a user typed ('-'/'_' and case folded);
    None if there is none, or several (a schema with both spellings: only exact works)."""
    if key in props:
        return key
    matches = [name for name in props if fold(name) == fold(key)]
    return matches[0] if len(matches) == 1 else None


def canonical_params(schema: dict[str, Any], params: Any) -> Any:
    """Params with each key in the schema's own spelling where the typed one is
    unambiguous; other keys are left for check_params to refuse."""
    if not isinstance(params, dict):
        return params
    props = schema.get("properties") or {}
    out: dict[str, Any] = {}
    for key, value in params.items():
        name = param_name(props, key) or key
        if name in out:  # learning-rate and learning_rate both given
            raise ConfigError(f"params.{key}", f"is given twice (also as {name!r})")
        out[name] = value
    return out


def check_params(schema: dict[str, Any], params: dict[str, Any], prefix: str = "params") -> dict[str, Any]:
    """Validate params against an object schema; return them with defaults filled in."""
    if not isinstance(params, dict):
        raise ConfigError(prefix, "must be an object")
    props: dict[str, Any] = schema.get("properties", {})
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in props:
            raise ConfigError(f"{prefix}.{key}", "unknown field" + did_you_mean(key, list(props)))
        out[key] = check_value(f"{prefix}.{key}", props[key], value)
    for key in schema.get("required", []):
        if key not in out:
            raise ConfigError(f"{prefix}.{key}", "is required")
    for key, spec in props.items():
        if key not in out and "default" in spec:
            out[key] = spec["default"]
    return out
