"""BALROG's results layout (balrog/utils.py ``collect_and_summarize_results``, balrog/evaluator.py).

BALROG writes one json per episode, ``<env>/<task>/<task>_run_NN.json``, then per env
``<env>/<env>_summary.json`` (progression percentage, its standard error, episodes, tokens, the
same per task) and ``summary.json`` (the mean of the envs' progressions and its standard error):
the numbers of the BALROG leaderboard. A run here plays one task of one env (its family is
BALROG's env name, its env id the task). Its records in results.json become BALROG's episode
logs, and these are summarised with BALROG's formulas, key names and units (percent), so a
user can set the run's figures beside BALROG's and BALROG's own summariser reads the files.
"""
from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from typing import Any

TREE = "balrog"             # the run directory's folder in BALROG's output layout
SUMMARY_FILE = "summary.json"


def agent_config(algo: str, params: dict[str, Any]) -> dict[str, Any]:
    """BALROG's ``agent`` config (config.yaml's keys) for the episode logs and summary.json."""
    return {"type": algo, "max_text_history": params.get("max_text_history"),
            "max_cot_history": params.get("max_cot_history"), "max_icl_history": params.get("max_icl_history")}


def client_config(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """BALROG's ``client`` config from the run's LLM spec (no key: only what config.yaml has);
    None for the random agent, as BALROG's dummy agent has no client either."""
    if spec is None:
        return None
    return {"client_name": spec.get("backend"), "model_id": spec.get("model"), "base_url": spec.get("base_url"),
            "generate_kwargs": {"temperature": spec.get("temperature"), "max_tokens": spec.get("max_tokens")},
            "timeout": spec.get("timeout_s"), "max_retries": spec.get("retries")}


def episode_log(record: dict[str, Any], task: str, agent: dict[str, Any],
                client: dict[str, Any] | None) -> dict[str, Any]:
    """An episode's record (results.json) as BALROG's evaluator logs it. ``done`` is there only
    when the episode ended (BALROG leaves it out when the step limit cut it). Records written
    before ``done`` and ``action_frequency`` were kept have neither."""
    log: dict[str, Any] = {"task": task, "action_frequency": dict(record.get("action_frequency") or {}),
                           "input_tokens": record.get("tokens_in") or 0,
                           "output_tokens": record.get("tokens_out") or 0}
    if record.get("done"):
        log["done"] = True
    log.update(episode_return=record["episode_return"], num_steps=record["steps"],
               progression=record["progression"], process_num=None, seed=record.get("seed"),
               agent=agent, client=client)
    return log


def _mean_and_error(values: list[float]) -> tuple[float, float]:
    """BALROG's mean and standard error of the mean (population deviation; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n if n else 0.0
    deviation = math.sqrt(sum((x - mean) ** 2 for x in values) / n) if n > 1 else 0.0
    return mean, deviation / math.sqrt(n) if n > 1 else 0.0


def env_summary(logs: list[dict[str, Any]]) -> dict[str, Any]:
    """``<env>_summary.json``: the env's progression in percent, its standard error, the average
    steps, the episodes, the same per task, and the tokens."""
    tasks: dict[str, list[float]] = defaultdict(list)
    for log in logs:
        tasks[log.get("task")].append(log.get("progression", 0.0))
    mean, error = _mean_and_error([log.get("progression", 0.0) for log in logs])
    per_task = {}
    for task, progressions in tasks.items():
        task_mean, task_error = _mean_and_error(progressions)
        per_task[task] = {"progression_percentage": 100 * task_mean, "standard_error": 100 * task_error,
                          "episodes_played": len(progressions)}
    n = len(logs)
    return {"progression_percentage": 100 * mean, "standard_error": 100 * error,
            "average_steps": sum(log.get("num_steps", 0) for log in logs) / n if n else 0.0,
            "episodes_played": n, "tasks": per_task,
            "input_tokens": sum(log.get("input_tokens", 0) for log in logs),
            "output_tokens": sum(log.get("output_tokens", 0) for log in logs)}


def summary(envs: dict[str, dict[str, Any]], agent: dict[str, Any] | None,
            client: dict[str, Any] | None) -> dict[str, Any]:
    """``summary.json`` from the envs' summaries: the mean of their progressions and its
    standard error (the envs' errors combined, as BALROG does: in percent already)."""
    n = len(envs)
    average = sum(e["progression_percentage"] for e in envs.values()) / n if n else 0.0
    error = math.sqrt(sum(e["standard_error"] ** 2 for e in envs.values())) / n if n else 0.0
    return {"average_progress": average, "standard_error": error,
            "environments": {name: {"progression_percentage": e["progression_percentage"],
                                    "standard_error": e["standard_error"],
                                    "episodes_played": e["episodes_played"]} for name, e in envs.items()},
            "total_input_tokens": sum(e["input_tokens"] for e in envs.values()),
            "total_output_tokens": sum(e["output_tokens"] for e in envs.values()),
            "client": client, "agent": agent}


def write_tree(root: str, env_name: str, logs: list[tuple[int, dict[str, Any]]],
               env: dict[str, Any], overall: dict[str, Any]) -> None:
    """BALROG's output directory under ``root``: each (episode, log) as
    ``<env>/<task>/<task>_run_NN.json``, ``<env>/<env>_summary.json`` and ``summary.json``."""
    for episode, log in logs:
        folder = os.path.join(root, env_name, log["task"])
        os.makedirs(folder, exist_ok=True)
        _write(os.path.join(folder, f"{log['task']}_run_{episode:02d}.json"), log)
    os.makedirs(os.path.join(root, env_name), exist_ok=True)
    _write(os.path.join(root, env_name, f"{env_name}_summary.json"), env)
    _write(os.path.join(root, SUMMARY_FILE), overall)


def _write(path: str, data: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=4)
