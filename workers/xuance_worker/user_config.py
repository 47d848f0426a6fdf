"""A user's own XuanCe YAML (``params.xuance_config``): checked at submit, merged under the run's params.

XuanCe users keep their settings in YAML files shaped like XuanCe's own
(``xuance/configs/<algo>/<family>/<env_id>.yaml``). ``mosaic submit --xuance-config FILE``
sends the file's text with the run as ``params.xuance_config`` (the daemon may be on
another machine: it never reads the client's files), and the descriptor merges it at
submit: the params the run gives win over the file, the file wins over XuanCe's
defaults for the algorithm and env. The merged values are the run's params, so
``config.json`` shows them; the worker passes them to XuanCe as every param is passed,
and keeps the text as ``xuance_config.yaml`` in the run directory.

Keys of the file:

- XuanCe's keys of the algorithm's schema (and mosaic's own params): merged, each
  checked against its property (an unknown key is refused, with the closest names);
- the keys that say what the file is for (``agent``, ``env_name``, ``env_id``, ``runner``):
  they must agree with the run (a file written for another algorithm or env is refused);
- ``running_steps``, ``seed``, ``env_seed``, ``device``: the run's own (``--steps``, ``--seed``,
  ``--device``) win, as the params do; ``running_steps`` is the run's steps when it gives none;
- the worker's own settings (``logger``, ``log_dir``, ``render``...): left out, as XuanCe's
  values for them are never used here.

Light: PyYAML and the standard library (the daemon runs it).
"""
from __future__ import annotations

from typing import Any

import workers.xuance_worker.catalog as catalog  # the module, not the package: __init__ imports this one
from workers.sdk.config import ConfigError, RunConfig, check_value, did_you_mean

PARAM = "xuance_config"
FIELD = f"params.{PARAM}"
# where the worker keeps the text, in the run directory
FILE_NAME = "xuance_config.yaml"
# Keys of XuanCe's config that say which algorithm and env it is for: a file may carry them with the run's values.
IDENTITY_KEYS = ("agent", "env_name", "env_id", "runner")


def parse(text: Any) -> dict[str, Any]:
    """The file's mapping; ConfigError in one line for text that is not one."""
    import yaml
    if not isinstance(text, str):
        raise ConfigError(FIELD, "must be the text of a XuanCe YAML file (mosaic submit --xuance-config FILE)")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(FIELD, f"is not valid YAML: {problem}{where}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(FIELD, f"must hold a mapping of XuanCe's keys (key: value), not a {type(data).__name__}")
    return data


def run_values(config: RunConfig, family: str, env_id: str, template: str) -> dict[str, Any]:
    """What the worker gives XuanCe for IDENTITY_KEYS (run_setup.parser_args)."""
    return {"agent": catalog.merged_config(template).get("agent"), "env_name": catalog.ENV_NAME[family],
            "env_id": env_id, "runner": catalog.RUNNER[family]}


def merge(config: RunConfig, properties: dict[str, Any], expected: dict[str, Any]) -> None:
    """Check the file in ``config.params`` against the schema's ``properties`` and merge it under
    the params given; ``expected``: ``run_values``. Every offending key is named in one line."""
    values = parse(config.params.get(PARAM))
    known = [key for key in properties if key != PARAM]
    unknown, disagree, merged = [], [], {}
    for key, value in values.items():
        key = str(key)
        if key == "running_steps" and config.steps is None:
            check_value(f"{FIELD}: running_steps", {"type": "integer", "minimum": 1}, value)
            config.steps = value  # the file's steps, as XuanCe would take them
        elif key in IDENTITY_KEYS:
            if value != expected[key]:
                disagree.append(f"{key} is {value!r} in the file, {expected[key]!r} in the run "
                                f"(set by {catalog.OWNED_KEYS[key]})")
        elif key in catalog.OWNED_KEYS:
            continue  # the run's (seed, device) or the worker's own (logger, log_dir, render...)
        elif key not in known:
            hint = did_you_mean(key, known)
            unknown.append(f"{key!r}" + (f" ({hint[2:]})" if hint else ""))
        else:
            try:
                merged[key] = check_value(key, properties[key], value)
            except ConfigError as exc:
                raise ConfigError(FIELD, f"{key}: {exc.message}") from None
    if unknown:
        raise ConfigError(FIELD, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for "
                                 f"XuanCe's {config.algo} on {config.env}")
    if disagree:
        raise ConfigError(FIELD, "; ".join(disagree))
    config.params = {**merged, **config.params}


def schema_property() -> dict[str, Any]:
    return {
        "type": ["string", "null"], "default": None, "x-text-file": True,   # the form reads a named file
        "description": "your own XuanCe config: the text of a YAML file like XuanCe's (mosaic submit "
                       "--xuance-config FILE; in the form, the file's path), or one line of YAML "
                       "({learning_rate: 0.001, gamma: 0.95}); "
                       "the params given here win over it, it wins over XuanCe's defaults; kept in the run "
                       f"directory as {FILE_NAME}",
    }
