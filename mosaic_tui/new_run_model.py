"""The new-run form's model: its fields and their specs, the values a clone starts from, what
follows a change of worker or algorithm (the algorithm and env chosen, the fields shown), the
parameter values kept across schemas, and the run config a filled form submits. Kept apart from
the screen that draws the form (mosaic_tui/screens/new_run.py), so each decision is a function
with a unit test (tests/unit/mosaic_tui/test_new_run_model.py).
"""
from __future__ import annotations

import functools
import json
import os
import shlex
from typing import Any, Iterable

from daemon import protocol as P
from mosaic_tui.widgets.schema_form import fits, types_of, value_text
from workers.sdk.config import NAME_RE, parse_run_config, read_text_file
from workers.sdk.modes import PLAY, TRAIN, plays


def _field_spec(model, name: str, description: str | None = None) -> dict[str, Any]:
    """A RunConfig field's JSON schema as a form field takes it (pydantic's anyOf for
    optional values folded into a type list), so the form checks what the daemon checks."""
    spec = dict(model.model_json_schema()["properties"][name])
    options = spec.pop("anyOf", None)
    if options:
        types: list[str] = []
        for option in options:
            types.append(option["type"])
            spec.update({k: v for k, v in option.items() if k != "type"})
        spec["type"] = types
    spec.pop("title", None)
    if description:
        spec["description"] = description
    return spec


def common_specs() -> dict[str, dict[str, Any]]:
    from workers.sdk.config import FramesConfig, LimitsConfig, RunConfig
    return {
        "worker": {"type": "string", "enum": [], "description": "the training backend"},
        "algo": {"type": "string", "enum": [], "description": "the algorithm"},
        "env": {"type": "string", "description": "the environment id"},
        "name": {"type": ["string", "null"], "pattern": NAME_RE.pattern,
                 "description": "unique run name (empty: <algo>-<env>-N)"},
        "steps": _field_spec(RunConfig, "steps", "total environment steps (empty: the algorithm's default)"),
        # empty (or "random"): the daemon draws the seed and records it in the run (seed_drawn)
        "seed": {**_field_spec(RunConfig, "seed", "the run's seed; empty or random: drawn at submit, recorded"),
                 "type": ["integer", "null"], "x-null-words": ["random"], "x-empty": "random"},
        "device": {"type": "string", "enum": ["cpu", "auto", "cuda", "cuda:0", "cuda:1"], "default": "cpu",
                   "description": "where the model trains"},
        # a worker whose runs play has no choice to offer: its runs are submitted as "play" (run_config)
        "mode": {**_field_spec(RunConfig, "mode", "train, or play a checkpoint without training"),
                 "enum": ["train", "eval"]},
        "checkpoint": _field_spec(RunConfig, "checkpoint",
                                  "eval: a file, or run:NAME for that run's latest checkpoint"),
        "eval_episodes": _field_spec(RunConfig, "eval_episodes", "eval: episodes to play"),
        "frames": _field_spec(FramesConfig, "enabled", "publish live frames (the Frames tab, `mosaic watch`)"),
        "fps": _field_spec(FramesConfig, "fps", "frames a second, at most"),
        "record": {"type": ["integer", "null"], "minimum": 1,
                   "description": "record this many finished episodes as an offline dataset in the run's "
                                  "directory (dataset.hdf5, Tianshou's replay-buffer format; empty: none)"},
        "dataset": {"type": "string", "enum": [], "description": "an offline algorithm's data: a run that "
                                                                 "recorded a dataset on this env"},
        "wall_seconds": _field_spec(LimitsConfig, "wall_seconds", "stop the run after this many seconds"),
        "max_steps": _field_spec(LimitsConfig, "max_steps", "stop the run once it reports this step"),
        "memory_mb": _field_spec(LimitsConfig, "memory_mb", "memory limit of the worker, in MB"),
        "mirror": {"type": "string", "enum": list(MIRROR_CHOICES), "default": "settings",
                   "description": "mirror the run live to W&B and/or MLflow (docs/mirrors.md); settings: as "
                                  "the home's settings.json says"},
    }


# the Mirror field's choices: the run config's ``mirror`` each stands for (None: the home's settings)
MIRROR_CHOICES: dict[str, list[str] | None] = {
    "settings": None, "none": [], **{target: [target] for target in P.MIRROR_TARGETS},
    "+".join(P.MIRROR_TARGETS): list(P.MIRROR_TARGETS)}


def file_text(spec: dict[str, Any], value: Any) -> Any:
    """A param whose schema says ``x-text-file`` takes a file's text: a one-line value naming a file
    here (a path, ~ expanded) is replaced by what the file holds, read on this machine, as the
    CLI's --xuance-config reads it (the daemon may be on another: mosaic --ssh)."""
    if not spec.get("x-text-file") or not isinstance(value, str) or "\n" in value or not value.strip():
        return value
    path = os.path.expanduser(value.strip())
    if path.startswith("{") or not (os.path.isfile(path) or path.endswith((".yaml", ".yml", ".json"))):
        return value      # one line of YAML, e.g. {learning_rate: 0.001}
    return read_text_file(path)


def mirror_choice(mirror: list[str] | None) -> str:
    """The Mirror field's choice for a run config's ``mirror`` (a clone shows its run's)."""
    for choice, targets in MIRROR_CHOICES.items():
        if targets == mirror or (targets is not None and mirror is not None and set(targets) == set(mirror)):
            return choice
    return "settings"


# The Placement section: where the run runs (workers/sdk/config.py's PlacementConfig, docs/cluster.md).
# Its fields are the model's; a backend shows those the model takes for it, and the model checks them.
_PROBES = {"integer": 1, "number": 1, "boolean": True, "string": "1", "array": ["-"], "object": {}}


@functools.cache
def placement_fields() -> dict[str, list[str]]:
    """Backend -> the fields that apply to it, in the model's order: those the model takes a value
    of for that backend (it refuses partition for ray, cpus for local)."""
    from pydantic import ValidationError

    from workers.sdk.config import PlacementConfig
    schema = PlacementConfig.model_json_schema()
    backends = schema["properties"]["backend"]["enum"]
    out: dict[str, list[str]] = {backend: [] for backend in backends}
    for name in list(schema["properties"])[1:]:
        types = [t for t in types_of(_field_spec(PlacementConfig, name)) if t != "null"]
        probe = _PROBES.get(types[0] if types else "string", "1")
        for backend in backends:
            try:
                PlacementConfig.model_validate({"backend": backend, name: probe})
            except ValidationError:
                continue
            out[backend].append(name)
    return out


def placement_names() -> list[str]:
    """backend, then every other field of the model, in its order."""
    from workers.sdk.config import PlacementConfig
    return list(PlacementConfig.model_json_schema()["properties"])


def placement_specs() -> dict[str, dict[str, Any]]:
    from workers.sdk.config import PlacementConfig
    specs = {name: _field_spec(PlacementConfig, name) for name in placement_names()}
    specs["backend"]["description"] = "here, or a job of a cluster's scheduler (Slurm, Ray)"
    # typed as a shell splits it, not as a JSON array
    specs["extra_args"] = {"type": "string", "description": "more sbatch arguments, as a shell splits them: "
                                                            "--qos=high --exclusive"}
    specs["runtime_env"]["description"] = "Ray's runtime_env for the job, as JSON: {\"pip\": [\"gymnasium\"]}"
    return specs


def placement_text(name: str, value: Any) -> Any:
    """A placement value as its field shows it (extra_args: a shell line)."""
    if name == "extra_args":
        return shlex.join(value) if isinstance(value, list) else value
    return value


def check_placement(placement: dict[str, Any]) -> dict[str, Any]:
    """The placement as the model gives it (mem in upper case, what is left out left out), or the
    ConfigError the daemon and the CLI would raise for it (field "placement.mem")."""
    config = parse_run_config({"worker": "-", "algo": "-", "env": "-", "placement": placement})
    dumped = config.placement.model_dump(exclude_defaults=True)
    return {"backend": config.placement.backend, **dumped}


def home_placement(home) -> dict[str, Any] | None:
    """The home's default placement (settings.json's "placement", which the daemon fills a run's
    left-out placement from), when this app's daemon is the home's own; None if none or not known."""
    if home is None or not getattr(home, "own_daemon", False):
        return None
    try:
        with open(home.settings_file) as f:
            placement = json.load(f).get("placement")
        return check_placement(placement) if isinstance(placement, dict) else None
    except (OSError, ValueError, AttributeError):   # no file, not JSON, a wrong value: the daemon says so
        return None


NO_DATASET = "(none recorded)"
FIRST_WORKER = "cleanrl"   # the worker a new run starts on, when installed and not a clone

# the form's sections and their fields, in order
SECTIONS = [
    ("Run", ["worker", "algo", "env", "name", "steps", "seed", "device"]),
    ("Mode", ["mode", "checkpoint", "eval_episodes"]),
    ("Frames", ["frames", "fps"]),
    ("Data", ["record", "dataset"]),
    ("Limits", ["wall_seconds", "max_steps", "memory_mb"]),
    ("Mirror", ["mirror"]),
]
COMMON_FIELDS = [name for _, names in SECTIONS for name in names]


def envs_for(caps: dict[str, Any], algo: str | None) -> list[str]:
    """The environments a worker offers for an algorithm (a list, or a dict by algorithm)."""
    envs = caps.get("envs") or []
    if isinstance(envs, dict):
        return list(envs.get(algo) or [])
    return list(envs)


def default_env(envs: list[str], caps: dict[str, Any]) -> str:
    if "CartPole-v1" in envs:
        return "CartPole-v1"
    if envs:
        return envs[0]
    families = caps.get("env_families") or []
    return families[0] if families == ["none"] else ""


# -- the form's start ---------------------------------------------------------------------------
def initial_values(config: dict[str, Any] | None) -> dict[str, Any]:
    """The common fields' first values: a clone's config (all of it but the name, which is
    unique), or nothing for a new run (the Mirror field: the home's settings)."""
    cfg = config or {}
    frames = cfg.get("frames") or {}
    limits = cfg.get("limits") or {}
    return {
        **{k: cfg.get(k) for k in ("worker", "algo", "env", "steps", "seed", "device", "mode", "checkpoint",
                                   "eval_episodes")},
        "frames": frames.get("enabled"), "fps": frames.get("fps"),
        "record": (cfg.get("record") or {}).get("episodes"), "dataset": cfg.get("dataset"),
        **{k: limits.get(k) for k in ("wall_seconds", "max_steps", "memory_mb")},
        "mirror": mirror_choice(cfg.get("mirror")),
    }


def frames_extra(config: dict[str, Any] | None) -> dict[str, Any]:
    """A clone's frames settings the form has no field for: submitted again as they were."""
    frames = (config or {}).get("frames") or {}
    return {k: v for k, v in frames.items() if k not in ("enabled", "fps")}


def offered_workers(workers: list[dict[str, Any]], all_workers: bool, clone_worker: str | None) -> list[dict[str, Any]]:
    """The workers the form offers: available ones with an algorithm; a test worker (hidden) only
    when asked for (--all-workers) or when the run being cloned is one of its."""
    return [w for w in workers if w.get("available") and (w.get("capabilities") or {}).get("algorithms")
            and (all_workers or not w.get("hidden") or w["name"] == clone_worker)]


def first_worker(names: list[str], clone_worker: str | None) -> str:
    """A clone's worker, else CleanRL (single-file RL, the usual first run), else the first offered."""
    return next(w for w in (clone_worker, FIRST_WORKER, names[0]) if w in names)


# -- what follows a change of worker or algorithm -----------------------------------------------
def algo_choice(caps: dict[str, Any], current: str | None, clone_algo: str | None = None) -> tuple[list[str], str]:
    """(choices, chosen) of the algorithm field for a worker just chosen: the algorithm shown if the
    worker has it, else its first. ``clone_algo``: the form's first choice, a clone's algorithm,
    offered even when it is a user's own script the worker does not list."""
    algos = list(caps.get("algorithms") or [])
    wanted = current
    if clone_algo:
        wanted = clone_algo
        if wanted not in algos and caps.get("user_scripts"):
            algos.append(wanted)
    return algos, (wanted if wanted in algos else (algos[0] if algos else ""))


def env_after(envs: list[str], caps: dict[str, Any], current: str | None) -> str | None:
    """The env to put in the env field once the worker or algorithm changed; None: keep the one
    typed (it is one the algorithm offers, or the worker lists none to check it against)."""
    if not current or (envs and current not in envs):
        return default_env(envs, caps)
    return None


def shown_fields(caps: dict[str, Any], algo: str | None) -> dict[str, bool]:
    """Which of the optional common fields the worker's capabilities make sense of: frames for a
    worker that draws them, the eval mode for one that saves checkpoints, a dataset to learn from
    for an offline algorithm and one to record for the others (when the worker records)."""
    offline = algo in (caps.get("offline_algorithms") or [])
    shown = {name: bool(caps.get("frames")) for name in ("frames", "fps")}
    shown |= {name: bool(caps.get("checkpoints")) for name in ("mode", "checkpoint", "eval_episodes")}
    shown["record"] = bool(caps.get("record")) and not offline
    shown["dataset"] = offline
    return shown


# -- parameter values kept across schemas ---------------------------------------------------------
def kept_from(shown: tuple[str, str], worker: str) -> str:
    """Where kept values were chosen, as the form says it: the algorithm, with its worker when the
    worker changed too."""
    shown_worker, shown_algo = shown
    return shown_algo if shown_worker == worker else f"{shown_worker} {shown_algo}"


def remember_typed(typed: dict[str, tuple[Any, str]], fields: Iterable[tuple[str, Any, bool]],
                   where: str) -> dict[str, tuple[Any, str]]:
    """``typed`` (name -> (value, where chosen)) after leaving a schema whose fields were
    (name, raw value, is the default): a value the user chose is remembered, a default forgets it."""
    typed = dict(typed)
    for name, raw, is_default in fields:
        if is_default:
            typed.pop(name, None)
        else:
            typed[name] = (raw, where)
    return typed


def param_value(name: str, spec: dict[str, Any], clone: dict[str, Any] | None,
                typed: dict[str, tuple[Any, str]]) -> tuple[Any, str | None]:
    """(value, note) a new schema's field starts from: a clone's own value (on its first schema),
    else a value the user chose under an earlier schema when the new field takes it, noted with
    where it was chosen and the default it replaces; else the schema's default (None)."""
    if clone is not None:
        return clone.get(name), None
    if name in typed:
        kept, where = typed[name]
        if fits(spec, kept):
            return kept, f"kept from {where} (default {value_text(spec.get('default')) or 'none'})"
    return None, None


# -- what is submitted --------------------------------------------------------------------------
def run_config(values: dict[str, Any], seed_shown: bool, extra_frames: dict[str, Any],
               placement: dict[str, Any] | None, params: dict[str, Any],
               caps: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run config of a valid form: ``values`` are the common fields shown (name -> value),
    ``params`` the parameters', ``caps`` the worker's capabilities (a worker whose runs play is
    submitted in mode ``play``). Left out: what is empty (the daemon's defaults), the eval settings
    of a training run, a dataset not chosen, the Mirror field's settings choice. A seed field left
    empty asks the daemon to draw one (seed None)."""
    config = {k: values[k] for k in ("worker", "algo", "env", "name", "steps", "seed", "device")
              if values.get(k) is not None}
    if seed_shown and values.get("seed") is None:
        config["seed"] = None       # a random seed, drawn by the daemon
    config["mode"] = values.get("mode") or (PLAY if plays(caps or {}) else TRAIN)
    if values.get("checkpoint"):
        config["checkpoint"] = values["checkpoint"]
    if config["mode"] == "eval":
        config["eval_episodes"] = values["eval_episodes"]
    if values.get("record"):
        config["record"] = {"episodes": values["record"]}
    if values.get("dataset") not in (None, "", NO_DATASET):
        config["dataset"] = values["dataset"]
    if values.get("frames"):
        config["frames"] = {**extra_frames, "enabled": True, "fps": values["fps"]}
    limits = {k: values[k] for k in ("wall_seconds", "max_steps", "memory_mb") if values.get(k) is not None}
    if limits:
        config["limits"] = limits
    if MIRROR_CHOICES.get(values.get("mirror")) is not None:
        config["mirror"] = MIRROR_CHOICES[values["mirror"]]
    if placement is not None:
        config["placement"] = placement
    config["params"] = params
    return config


def status_line(errors: list[str], carried: list[str], typed: dict[str, tuple[Any, str]]) -> tuple[str, bool]:
    """(text, invalid) of the form's status line: the first of the fields to fix, or ready, with the
    values kept from an earlier schema named."""
    if errors:
        count = len(errors)
        return f"{count} {'field' if count == 1 else 'fields'} to fix: {errors[0]}", True
    text = "ready: ctrl+s submits"
    if carried:
        n = len(carried)
        where = typed[carried[0]][1]
        text += f" · {n} {'value' if n == 1 else 'values'} kept from {where}: {', '.join(carried)}"
    return text, False


def refused_field(field: str) -> tuple[str, str] | None:
    """Where the daemon's refusal of the config shows, for the field its error names:
    ("param", NAME) for a parameter, ("common", FIELD ID) for a field of the form, None for none.
    frames.enabled is the Frames field, frames.fps fps, limits.X X; placement.mem is the Placement
    section's mem, placement alone its backend."""
    top, _, rest = field.partition(".")
    if top == "params":
        return ("param", rest) if rest else None
    if not top:
        return None
    name = {"frames.enabled": "frames"}.get(field, rest if top in ("frames", "limits") else top)
    if top == "placement":
        name = f"placement-{rest or 'backend'}"
    return "common", f"f-{name}"


def refusal_text(field: str, message: str) -> str:
    """The daemon's message without the field it begins with (shown under that field)."""
    return message.split(": ", 1)[1] if message.startswith(f"{field}: ") else message
