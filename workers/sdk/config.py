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

import math
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

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


class FramesConfig(BaseModel):
    """Live frames through FastLane (see docs/fastlane.md)."""
    model_config = ConfigDict(extra="forbid")
    enabled: bool = False
    fps: float = Field(default=15.0, gt=0, le=120)
    max_dim: int = Field(default=400, ge=16, le=4096)
    grid: int = Field(default=1, ge=1, le=64)


NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RunConfig(BaseModel):
    """The keys every run has, whatever its worker."""
    model_config = ConfigDict(extra="forbid")

    worker: str
    algo: str
    env: str
    steps: int | None = Field(default=None, gt=0, description="total environment steps")
    seed: int = Field(default=1, ge=0)
    device: str = Field(default="cpu", pattern=r"^(cpu|cuda(:\d+)?|auto)$")
    name: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    # "eval" loads `checkpoint` and plays `eval_episodes` episodes without training
    mode: Literal["train", "eval"] = "train"
    checkpoint: str | None = None
    eval_episodes: int = Field(default=10, ge=1, le=100000)
    frames: FramesConfig = Field(default_factory=FramesConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    # set by the daemon, not the user
    run_id: str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not NAME_RE.match(value):
            raise ValueError("must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value


def parse_run_config(data: Any) -> RunConfig:
    """Validate the common keys; raise ConfigError naming the first bad field."""
    if not isinstance(data, dict):
        raise ConfigError("", "a run config must be a JSON object")
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        message = err["msg"]
        if err["type"] == "extra_forbidden":
            message = "unknown field"
        raise ConfigError(field, message) from None
    if config.mode == "eval" and not config.checkpoint:
        raise ConfigError("checkpoint", "is required when mode is 'eval'")
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


def coerce_text(spec: dict[str, Any], text: str) -> Any:
    """Turn what a user typed (a form field, ``--set k=v``) into a typed value."""
    types = _types_of(spec)
    raw = text.strip()
    if "null" in types and raw.lower() in ("", "none", "null"):
        return None
    if "boolean" in types:
        low = raw.lower()
        if low in ("true", "yes", "1", "on"):
            return True
        if low in ("false", "no", "0", "off"):
            return False
    if "integer" in types:
        try:
            return int(raw)
        except ValueError:
            pass
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
    raise ConfigError("", f"'{text}' is not {' or '.join(t for t in types if t != 'null')}")


def check_value(name: str, spec: dict[str, Any], value: Any) -> Any:
    """Check one value against its property schema; return it (ints widened for numbers)."""
    types = _types_of(spec)
    if types and not any(_TYPES[t](value) for t in types if t in _TYPES):
        want = " or ".join(types)
        raise ConfigError(name, f"must be {want}, not {type(value).__name__} {value!r}")
    if "enum" in spec and value not in spec["enum"]:
        choices = ", ".join(repr(c) for c in spec["enum"])
        raise ConfigError(name, f"must be one of {choices}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(name, "must be a finite number")
        if "minimum" in spec and value < spec["minimum"]:
            raise ConfigError(name, f"must be >= {spec['minimum']}")
        if "exclusiveMinimum" in spec and value <= spec["exclusiveMinimum"]:
            raise ConfigError(name, f"must be > {spec['exclusiveMinimum']}")
        if "maximum" in spec and value > spec["maximum"]:
            raise ConfigError(name, f"must be <= {spec['maximum']}")
        if "exclusiveMaximum" in spec and value >= spec["exclusiveMaximum"]:
            raise ConfigError(name, f"must be < {spec['exclusiveMaximum']}")
        if "number" in types and "integer" not in types and isinstance(value, int):
            value = float(value)
    if isinstance(value, str) and "pattern" in spec and not re.search(spec["pattern"], value):
        raise ConfigError(name, f"must match {spec['pattern']}")
    return value


def check_params(schema: dict[str, Any], params: dict[str, Any], prefix: str = "params") -> dict[str, Any]:
    """Validate params against an object schema; return them with defaults filled in."""
    if not isinstance(params, dict):
        raise ConfigError(prefix, "must be an object")
    props: dict[str, Any] = schema.get("properties", {})
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in props:
            raise ConfigError(f"{prefix}.{key}", "unknown field")
        out[key] = check_value(f"{prefix}.{key}", props[key], value)
    for key in schema.get("required", []):
        if key not in out:
            raise ConfigError(f"{prefix}.{key}", "is required")
    for key, spec in props.items():
        if key not in out and "default" in spec:
            out[key] = spec["default"]
    return out
