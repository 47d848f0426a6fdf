"""Small text helpers shared by the screens and `mosaic watch` (no Textual, no numpy)."""
from __future__ import annotations

import math
from typing import Any, Sequence

from daemon.protocol import PENDING_QUEUES, RETURNS_KEPT, mean_return
from workers.sdk.modes import run_mode

# The smoothed return is the mean of the last N episode returns. The daemon
# keeps RETURNS_KEPT of them in a run's summary, so N goes up to that.
RETURN_WINDOWS = (5, 10, 20, 50, 100)
DEFAULT_RETURN_WINDOW = 20
MAX_RETURN_WINDOW = RETURNS_KEPT

STATE_STYLES = {
    "queued": "dim", "starting": "yellow", "running": "bold green", "paused": "yellow",
    "succeeded": "green", "failed": "bold red", "cancelled": "magenta", "stopped": "cyan", "lost": "red",
}

# Braille dots, bottom to top: left column 7,3,2,1 and right column 8,6,5,4.
_LEFT = (0x40, 0x04, 0x02, 0x01)
_RIGHT = (0x80, 0x20, 0x10, 0x08)


def num(value: Any) -> str:
    """A number in at most about 7 characters; '-' for nothing. The one number format of the app
    and the CLI (tables, headers, `mosaic show`, `metrics`, `sweeps`)."""
    if value is None:
        return "-"
    if isinstance(value, str):  # "nan", "inf" from the telemetry wire
        return value
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        if abs(value) >= 10_000_000:
            return f"{value / 1e6:.1f}M"
        if abs(value) >= 10_000:
            return f"{value / 1000:.1f}k"
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        if value != 0 and abs(value) >= 1e5:
            return f"{value:.2e}"
        if value != 0 and abs(value) < 1e-3:
            return f"{value:.3g}"       # a learning rate: 0.00025, 1e-05, 2.5e-06
        return f"{value:.4g}"
    return str(value)


def rate(value: Any) -> str:
    """Steps a second, by one rule wherever it is shown (the runs table, a run's header, `mosaic
    watch`, `mosaic show`): whole steps from 10 up (538.5 -> 539 beside 1038, 12.3k past 10,000),
    two significant digits under 10 (2.5, 0.04), where a whole number would say too little."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return num(value)
    if abs(value) < 10:
        return f"{value:.2g}"
    return num(math.floor(value + 0.5))


def steps_short(schema: dict[str, Any] | None, params: dict[str, Any], steps: Any) -> str | None:
    """Where a run of ``steps`` ends when its worker trains whole updates only (the schema's
    ``x-steps-per-update``: the params whose product is one update's steps; CleanRL's PPO trains
    3000 steps asked as 5 updates of 512: 2560), in words; None when it ends where asked. The
    new-run form shows it under the steps, `mosaic submit` says it on stderr."""
    names = (schema or {}).get("x-steps-per-update") or []
    if not names or isinstance(steps, bool) or not isinstance(steps, int) or steps <= 0:
        return None
    props = (schema or {}).get("properties") or {}
    sizes = [params[name] if params.get(name) is not None else (props.get(name) or {}).get("default")
             for name in names]
    if not all(type(size) is int and size > 0 for size in sizes):
        return None
    per = math.prod(sizes)
    end = steps // per * per
    if end == steps:
        return None
    update = f"whole updates of {per:,} steps ({' × '.join(f'{n} {v}' for n, v in zip(names, sizes))})"
    if end == 0:
        return f"trains {update}: {steps:,} steps is less than one, so it trains none"
    return f"trains {update}: it ends at step {end:,}, not {steps:,}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """"1 run", "2 runs", "0 runs": a count people read without "(s)"."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"


def dataset_text(dataset: dict[str, Any]) -> str:
    """A run's recorded dataset (summary.dataset): "1,200 transitions, 10 episodes"."""
    transitions, episodes = dataset.get("transitions") or 0, dataset.get("episodes") or 0
    return f"{plural(transitions, 'transition').replace(str(transitions), f'{transitions:,}', 1)}, " \
           f"{plural(episodes, 'episode')}"


def duration(seconds: float | None) -> str:
    """1m05s style elapsed time."""
    if seconds is None or seconds < 0:
        return "-"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86400:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d{(seconds % 86400) // 3600:02d}h"


def progress(run: dict[str, Any]) -> float | None:
    """Fraction done; a succeeded run is done, whatever step its worker stopped at.

    A worker may end short of total_steps (CleanRL trains whole batches:
    1000 steps of 512-step batches end at 512) or have no total at all (an eval).
    """
    if run.get("state") == "succeeded":
        return 1.0
    s = run.get("summary") or {}
    total = s.get("total_steps") or (run.get("config") or {}).get("steps")
    if not total:
        return None
    return min(1.0, (s.get("steps") or 0) / total)


def progress_text(run: dict[str, Any], width: int = 0) -> str:
    frac = progress(run)
    if frac is None:
        return "-"
    pct = f"{100 * frac:3.0f}%"
    if width <= 0:
        return pct
    eighths = int(round(frac * width * 8))
    full, part = divmod(eighths, 8)
    bar = "█" * full + (" ▏▎▍▌▋▊▉"[part] if part and full < width else "")
    return f"{bar:<{width}} {pct}"


def elapsed(run: dict[str, Any], now: float) -> float | None:
    """Seconds the run has trained: from its start to its end (or now), less the time it spent paused.

    The one definition of elapsed: the runs table, the run header, `mosaic ls`,
    `mosaic show` and `mosaic watch` all call it. The daemon records
    ``paused_seconds`` (pauses that ended) and ``paused_at`` (the pause going
    on, or the one a run ended in).
    """
    start = run.get("started_at")
    if not start:
        return None
    end = run.get("ended_at") or now
    paused = run.get("paused_seconds") or 0.0
    since = run.get("paused_at")
    if since:
        paused += max(0.0, end - since)
    return max(0.0, end - start - paused)


def smoothed_return(run: dict[str, Any], window: int = DEFAULT_RETURN_WINDOW) -> float | None:
    """The mean of the last ``window`` finite episode returns, None before the first episode."""
    summary = run.get("summary") or {}
    if "mean_return" in summary:  # a row of the daemon's brief listing, asked for with this window
        return summary["mean_return"]
    return mean_return(summary.get("returns") or [], window)


def best_return(run: dict[str, Any]) -> tuple[float | None, int | None]:
    """(best episode return, the step it came at) from the daemon's summary."""
    s = run.get("summary") or {}
    return s.get("best_return"), s.get("best_step")


def best_text(run: dict[str, Any]) -> str:
    best, step = best_return(run)
    if best is None:
        return "-"
    return f"{num(best)}@{num(step)}" if step is not None else num(best)


def eta(run: dict[str, Any]) -> float | None:
    """Seconds left at the recent steps/s, for a running run with a total; None otherwise."""
    if run.get("state") not in ("running", "starting"):
        return None
    s = run.get("summary") or {}
    total = s.get("total_steps") or (run.get("config") or {}).get("steps")
    sps = s.get("sps")
    if not total or not isinstance(sps, (int, float)) or sps <= 0:
        return None
    return max(0.0, (total - (s.get("steps") or 0)) / sps)


def state_label(run: dict[str, Any]) -> str:
    """The state as every view shows it (table, run header, ls, show): a running run that is
    JIT-compiling (Jumanji: minutes without a step, which is no stall) says "compiling…", a
    cluster run its scheduler has not started yet says so ("pending (Priority)", queue_label),
    and one whose cancel is under way is marked with *."""
    state = run.get("state", "?")
    if still_running(run):   # lost, its processes running on unsupervised: `mosaic cancel` ends them
        return "lost, still running*" if run.get("cancel_requested") else "lost, still running"
    queued = queue_label(run)
    if queued:
        return f"{queued}*" if run.get("cancel_requested") else queued
    if run.get("cancel_requested") and state in ("running", "starting", "paused"):
        return f"{state}*"
    if state == "running" and (run.get("summary") or {}).get("phase") == "compiling":
        return "compiling…"
    return state


def still_running(run: dict[str, Any]) -> bool:
    """A lost run (its supervisor died without an exit record) whose processes run on: the daemon
    lists them in its resources (``orphans``) until they end."""
    return run.get("state") == "lost" and bool((run.get("resources") or {}).get("orphans"))


# -- a run placed on a cluster (docs/cluster.md): the scheduler's view, from the run's resources --
def job(run: dict[str, Any]) -> dict[str, Any] | None:
    """The run's resources when it is (or was) a job of a cluster's scheduler ("job": "slurm:123",
    "queue", "queue_reason", "node", "ends_at", "time_limit"), else None: a local run."""
    resources = run.get("resources") or {}
    return resources if resources.get("job") else None


QUEUE_REASON_CHARS = 24   # a state column's reason; the scheduler's whole words are in show and the header


def queue_label(run: dict[str, Any]) -> str | None:
    """"pending (Priority)": a submitted cluster run its scheduler holds in its queue (the run is
    starting to the daemon), with the scheduler's reason, short; None for any other run or state."""
    resources = job(run)
    # any other queue word (RUNNING, or an ended job's STOPPED or CANCELLED while the daemon reads
    # its end) leaves the daemon's own state to speak
    if resources is None or run.get("state") != "starting" or str(resources.get("queue")) not in PENDING_QUEUES:
        return None
    queue = str(resources["queue"])
    reason = str(resources.get("queue_reason") or "")
    if len(reason) > QUEUE_REASON_CHARS:
        reason = reason[:QUEUE_REASON_CHARS - 1] + "…"
    return f"{queue.lower()} ({reason})" if reason else queue.lower()


def queue_message(run: dict[str, Any]) -> str | None:
    """The scheduler's own words for why it holds a run's job (Ray: "Job has not started yet. It may
    be waiting for resources..."), whole; None when it says nothing more than queue_label's reason."""
    if queue_label(run) is None:
        return None
    resources = job(run) or {}
    if resources.get("queue_message"):
        return str(resources["queue_message"])
    reason = str(resources.get("queue_reason") or "")
    return reason if len(reason) > QUEUE_REASON_CHARS else None


def hms(seconds: float) -> str:
    """1:58:03, as a wall time is read (hours go past 24: 26:00:00)."""
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{(seconds % 3600) // 60:02d}:{seconds % 60:02d}"


def time_left(run: dict[str, Any], now: float) -> float | None:
    """Seconds until the job's wall time runs out: a cluster run running on its node, whose
    scheduler said when its time ends (resources.ends_at); None otherwise."""
    resources = job(run)
    if resources is None or run.get("ended_at") or resources.get("queue") != "RUNNING":
        return None
    ends = resources.get("ends_at")
    if not isinstance(ends, (int, float)) or isinstance(ends, bool):
        return None
    return max(0.0, ends - now)


def job_text(run: dict[str, Any], now: float) -> str:
    """The run's job as one short text: "slurm:123 on node1 1:58:03 left"; "" for a local run."""
    resources = job(run)
    if resources is None:
        return ""
    parts = [str(resources["job"])]
    if resources.get("node"):
        parts.append(f"on {resources['node']}")
    left = time_left(run, now)
    if left is not None:
        parts.append(f"{hms(left)} left")
    return " ".join(parts)


def derived(run: dict[str, Any], now: float, window: int = DEFAULT_RETURN_WINDOW) -> dict[str, Any]:
    """What the table and `mosaic show` work out of a run's record, for `--json` to carry too
    (a script piping `ls --json` to jq gets the same figures as the table, by the same functions)."""
    best, best_step = best_return(run)
    out = {"state": state_label(run), "mode": run_mode(run), "progress": progress(run),
           "mean_return": smoothed_return(run, window),
           "return_window": window, "best_return": best, "best_step": best_step,
           "eta_s": eta(run), "elapsed_s": elapsed(run, now)}
    if job(run) is not None:   # a cluster run: the time its job has left
        out["time_left_s"] = time_left(run, now)
    return out


def is_eval(run: dict[str, Any]) -> bool:
    return (run.get("config") or {}).get("mode") == "eval"


def mode_mark(run: dict[str, Any]) -> str | None:
    """The word that marks a run that trains nothing: ``eval`` (a checkpoint played back) or
    ``play`` (an LLM agent, a match, a person; an older record's "train" of these read as play)."""
    mode = run_mode(run)
    return None if mode == "train" else mode


def run_label(run: dict[str, Any]) -> str:
    """The run's name, marked when it trains nothing (an evaluation, a play)."""
    name = str(run.get("name", ""))
    mark = mode_mark(run)
    return f"{name} [{mark}]" if mark else name


def system_figures(run: dict[str, Any]) -> tuple[str, str, str]:
    """(cpu, rss, threads) of the run's last resource sample as text ("-" for none yet)."""
    system = (run.get("summary") or {}).get("system") or {}
    cpu, rss, threads = system.get("cpu_percent"), system.get("rss_mb"), system.get("threads")
    return (f"{cpu:.0f}%" if isinstance(cpu, (int, float)) else "-",
            f"{rss:.0f}MB" if isinstance(rss, (int, float)) else "-",
            str(threads) if isinstance(threads, int) else "-")


def system_text(run: dict[str, Any]) -> str:
    """The run's process tree, as the run header shows it: ``cpu 97% 412MB 18 threads``; "" before a sample."""
    if not (run.get("summary") or {}).get("system"):
        return ""
    cpu, rss, threads = system_figures(run)
    gpu = ((run.get("summary") or {}).get("system") or {}).get("gpu_mem_mb")
    text = f"cpu {cpu} {rss} {threads} threads"
    return text + (f" gpu {gpu:.0f}MB" if isinstance(gpu, (int, float)) else "")


def failure_reason(run: dict[str, Any]) -> str | None:
    """Why a failed (or lost) run ended: the daemon's reason, else what the worker said."""
    if run.get("state") not in ("failed", "lost"):
        return None
    return run.get("reason") or (run.get("summary") or {}).get("failed_reason") or "no reason recorded"


def finite(values: Sequence[Any]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def sparkline(values: Sequence[Any], width: int = 16) -> str:
    """A braille sparkline: two values a character, four dot levels each."""
    vals = finite(values)
    if not vals or width <= 0:
        return ""
    vals = vals[-2 * width:]
    lo, hi = min(vals), max(vals)
    span = hi - lo
    levels = [2 if span == 0 else 1 + int(round(3 * (v - lo) / span)) for v in vals]
    if len(levels) % 2:
        levels.insert(0, 0)
    chars = []
    for left, right in zip(levels[0::2], levels[1::2]):
        code = 0x2800
        for i in range(left):
            code |= _LEFT[i]
        for i in range(right):
            code |= _RIGHT[i]
        chars.append(chr(code))
    return "".join(chars)


def short_id(run_id: str) -> str:
    return run_id[:10]


_SUFFIXES = {1: "k", 2: "M", 3: "G", 4: "T"}


def eng(value: float, digits: int = 3) -> str:
    """A number in at most 8 columns for an axis: 35.6k, -2.1M, 0.25, 1.2e-4.

    At most ``digits`` significant digits (fewer when they are zeros); k/M/G/T
    from a thousand up, scientific notation below 0.01.
    """
    if not math.isfinite(value):
        return str(value)
    if value == 0:
        return "0"
    a = abs(value)
    if a < 0.01 or a >= 1e15:
        mantissa, _, exponent = f"{value:.{digits - 1}e}".partition("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    group = max(0, min(4, int(math.floor(math.log10(a) / 3))))
    scaled = value / 1000 ** group
    text = _fixed(scaled, digits)
    if abs(float(text)) >= 1000 and group < 4:      # 999.96k rounds to 1000k: 1M
        group += 1
        text = _fixed(value / 1000 ** group, digits)
    return text + _SUFFIXES.get(group, "")


def _fixed(value: float, digits: int) -> str:
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(value))))) if value else 0
    text = f"{value:.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def eng_value(text: str) -> float:
    """The number an eng() text stands for (axis labels are checked against their ticks)."""
    for group, suffix in _SUFFIXES.items():
        if text.endswith(suffix):
            return float(text[:-1]) * 1000 ** group
    return float(text)


def sweep_csv_rows(sweep: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """One row per run of a sweep: its trial, seed, state, params and objective."""
    names = list(sweep["spec"]["params"])
    header = ["sweep", "trial", "trial_state", "run_id", "run", "seed", "state", "run_tags", "run_note"] + names + \
        [f"objective:{sweep['spec']['objective']['tag']}"]
    rows = []
    for t in sorted(sweep["trials"], key=lambda t: t["trial"]):
        for run in t["runs"]:
            rows.append([sweep["name"], t["trial"], t["state"], run["id"], run["name"], run["seed"], run["state"],
                         " ".join(run.get("tags") or []), run.get("note") or ""]
                        + [t["params"].get(n, "") for n in names]
                        + ["" if run["objective"] is None else run["objective"]])
    return header, rows
