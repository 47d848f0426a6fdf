"""The runs table's row model: what a row shows and how rows are ordered, kept apart from the
widget that draws them (mosaic_tui/widgets/runs_table.py) so other screens use it without the
widget: a run's cells, its sort value, the filter's match, seed groups (sweeps' trials) and
their mean ± std, and which columns fit a width.
"""
from __future__ import annotations

import re
import statistics
from typing import Any, Iterable, Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style

from mosaic_tui import fmt

# (key, header); the return header names its window, set by the table
COLUMNS: list[tuple[str, str]] = [
    ("sel", " "), ("name", "name"), ("worker", "worker"), ("algo", "algo"), ("env", "env"),
    ("state", "state"), ("job", "job"), ("progress", "progress"), ("steps", "steps"), ("sps", "steps/s"),
    ("return", "avg{window}"), ("best", "best"), ("eta", "ETA"), ("elapsed", "elapsed"),
    ("returns", "returns"), ("tags", "tags"),
]
COLUMN_KEYS = [key for key, _ in COLUMNS]
# What a narrow terminal keeps, most wanted first: at 80 columns the state,
# progress, return and ETA stay, and worker and algo go first.
# NAME_FULL: the name's whole width, wanted right after the figures of the first five columns
# (a default name, dqn-CartPole-v1-3, was cut at 120 columns while the sparkline and tags stayed)
NAME_FULL = "name+"
# "job": a cluster run's job, node and wall time left (fmt.job_text), shown only while a run has one
PRIORITY = ("sel", "name", "state", "progress", "return", "eta", "elapsed", NAME_FULL, "env", "job", "best", "steps",
            "sps", "returns", "tags", "algo", "worker")
NAME_MIN = 10          # a long name is cut to this before a wanted column goes
NAME_MAX = 40          # and is never given more than this
SORT_KEYS = ("created", "name", "worker", "algo", "env", "state", "progress", "steps", "sps",
             "return", "best", "eta", "elapsed")
SPARK_WIDTH = 8           # 16 returns
PROGRESS_WIDTH = 5


class Cell:
    """A one-line cell that renders as one segment.

    A Rich Text goes through wrapping and measuring each time it renders;
    this goes straight to a segment (``segment``), cut to its column's width.
    """

    __slots__ = ("text", "style", "right")

    def __init__(self, text: str, style: str = "", right: bool = False) -> None:
        self.text = text
        self.style = style
        self.right = right

    def __str__(self) -> str:
        return self.text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cell) and (self.text, self.style, self.right) == (other.text, other.style, other.right)

    def fitted(self, width: int) -> str:
        """The text cut (with an ellipsis) or padded to ``width`` cells, aligned."""
        text = self.text
        length = cell_len(text)
        if length > width:
            text = text[:max(0, width - 1)] + "…" if width > 1 else text[:width]
            length = cell_len(text)
        pad = " " * max(0, width - length)
        return pad + text if self.right else text + pad

    @property
    def rich_style(self) -> Style:
        style = _STYLES.get(self.style)
        if style is None:
            style = _STYLES[self.style] = Style.parse(self.style) if self.style else Style()
        return style

    def __rich_console__(self, console, options):
        yield Segment(self.fitted(options.max_width), self.rich_style)

    def __rich_measure__(self, console, options):
        from rich.measure import Measurement
        n = cell_len(self.text)
        return Measurement(n, n)


_STYLES: dict[str, Style] = {}


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    return run.get("summary") or {}


def _num_key(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("-inf")


def sort_value(run: dict[str, Any], key: str, now: float, window: int = fmt.DEFAULT_RETURN_WINDOW) -> Any:
    s = _summary(run)
    if key == "created":
        return (run.get("created_at") or 0, run["id"])
    if key in ("name", "worker", "algo", "env", "state"):
        return str(run.get(key) or "")
    if key == "progress":
        p = fmt.progress(run)
        return -1.0 if p is None else p
    if key == "steps":
        return _num_key(s.get("steps"))
    if key == "sps":
        return _num_key(s.get("sps"))
    if key == "return":
        return _num_key(fmt.smoothed_return(run, window))
    if key == "best":
        return _num_key(fmt.best_return(run)[0])
    if key == "eta":
        left = fmt.eta(run)
        return -1.0 if left is None else left
    if key == "elapsed":
        e = fmt.elapsed(run, now)
        return -1.0 if e is None else e
    return 0


RANKED_BY_ENV = ("return", "best")


def groups_by_env(sort_key: str, runs: list[dict[str, Any]]) -> bool:
    """Sorting by return ranks runs of one env only: returns of different envs do not compare."""
    return sort_key in RANKED_BY_ENV and len({str(r.get("env")) for r in runs}) > 1


def haystack(run: dict[str, Any]) -> tuple[str, set[str]]:
    """What a filter looks in: the run's name, id, worker, algo, env, state, note, tags and, for a cluster
    run, its job and node (lower case); and its tags."""
    tags = {t.lower() for t in run.get("tags") or []}
    cluster = fmt.job(run) or {}   # a cluster run: its job id and node ("slurm" finds them all)
    hay = " ".join([*(str(run.get(k) or "") for k in ("name", "id", "worker", "algo", "env", "state", "note")),
                    *tags, *(str(cluster[k]) for k in ("job", "node") if cluster.get(k))]).lower()
    return hay, tags


def query_words(query: str) -> tuple[list[str], list[str]]:
    """(words to find in the haystack, tags asked for with ``tag:NAME``), lower case."""
    words = query.lower().split()
    return [w for w in words if not w.startswith("tag:")], [w[4:] for w in words if w.startswith("tag:")]


def matches(run: dict[str, Any], query: str, hay: tuple[str, set[str]] | None = None) -> bool:
    """Every word of the query appears in the run's name, id, worker, algo, env, state, tags or note;
    ``tag:NAME`` asks for a run tagged NAME exactly. ``hay``: the run's haystack, if known."""
    words, tags_wanted = query_words(query)
    if not words and not tags_wanted:
        return True
    hay, tags = hay or haystack(run)
    return all(w in hay for w in words) and all(t in tags for t in tags_wanted)


def row_cells(run: dict[str, Any], selected: bool, now: float, window: int = fmt.DEFAULT_RETURN_WINDOW) -> tuple:
    """The row's cells, in COLUMNS order."""
    s = _summary(run)
    state = run.get("state", "?")
    label = fmt.state_label(run)
    state_cell = Cell(label, "magenta" if label.endswith("*") else fmt.STATE_STYLES.get(state, ""))
    left = fmt.eta(run)
    return (
        Cell("●", "bold") if selected else Cell(" "),
        Cell(fmt.run_label(run)),
        Cell(str(run.get("worker", ""))),
        Cell(str(run.get("algo", ""))),
        Cell(str(run.get("env", ""))),
        state_cell,
        Cell(fmt.job_text(run, now), "cyan"),
        Cell(fmt.progress_text(run, PROGRESS_WIDTH)),
        Cell(fmt.num(s.get("steps")), right=True),
        Cell(fmt.rate(s.get("sps")), right=True),
        Cell(fmt.num(fmt.smoothed_return(run, window)), right=True),
        Cell(fmt.best_text(run), right=True),
        Cell(fmt.duration(left) if left is not None else "-", right=True),
        Cell(fmt.duration(fmt.elapsed(run, now)), right=True),
        Cell(fmt.sparkline(s.get("returns") or [], SPARK_WIDTH), "green"),
        Cell(" ".join(run.get("tags") or []), "cyan"),
    )


_SEED_SUFFIX = re.compile(r"-s\d+$")


def group_key(run: dict[str, Any]) -> tuple[str, int] | None:
    """The group of a sweep's run: its sweep and trial (the runs of one trial differ by their seed)."""
    if run.get("sweep") is None or run.get("trial") is None:
        return None
    return (run["sweep"], run["trial"])


def group_cells(members: list[dict[str, Any]], selected: bool, now: float, window: int) -> tuple:
    """One row for a group: the first run's cells, with the group's name and seed count, how many
    ended, and the return as mean ± std over the seeds (each seed's mean of its last ``window`` returns)."""
    first = members[0]
    cells = list(row_cells(first, selected, now, window))
    index = {key: i for i, key in enumerate(COLUMN_KEYS)}
    base = _SEED_SUFFIX.sub("", str(first.get("name", "")))
    cells[index["name"]] = Cell(f"{base} ×{len(members)}", "bold")
    states = {m.get("state") for m in members}
    if len(states) == 1:
        state = states.pop()
        cells[index["state"]] = Cell(state, fmt.STATE_STYLES.get(state, ""))
    else:
        done = sum(1 for m in members if m.get("state") in ("succeeded", "failed", "cancelled", "lost"))
        cells[index["state"]] = Cell(f"{done}/{len(members)} done", "yellow")
    returns = [v for v in (fmt.smoothed_return(m, window) for m in members) if isinstance(v, (int, float))]
    if returns:
        mean = statistics.fmean(returns)
        std = statistics.pstdev(returns) if len(returns) > 1 else 0.0
        cells[index["return"]] = Cell(f"{fmt.num(mean)}±{fmt.num(std)}", right=True)
    return tuple(cells)


# columns left out while no run has anything in them (no run is tagged yet, every run is local)
HIDDEN_WHEN_EMPTY = ("tags", "job")


# -- config-key columns: a param the user chose (C), or a sweep's swept params -----------------
CONFIG_AFTER = "env"          # shown right of the run's identity (name, worker, algo, env)
CONFIG_PRIORITY_AFTER = "return"   # kept before the rest once the state, progress and return fit


def column_order(extra: Sequence[str] = ()) -> list[str]:
    """The columns left to right: COLUMNS with the config-key columns ``extra`` after the env."""
    at = COLUMN_KEYS.index(CONFIG_AFTER) + 1
    return COLUMN_KEYS[:at] + [k for k in extra if k not in COLUMN_KEYS] + COLUMN_KEYS[at:]


def column_priority(extra: Sequence[str] = ()) -> list[str]:
    """PRIORITY with the config-key columns wanted right after the return: chosen to be seen."""
    at = PRIORITY.index(CONFIG_PRIORITY_AFTER) + 1
    return [*PRIORITY[:at], *(k for k in extra if k not in COLUMN_KEYS), *PRIORITY[at:]]


def column_header(key: str) -> str:
    """A config-key column's header: the key less its ``params.`` (``params.lr``: lr)."""
    return key[len("params."):] if key.startswith("params.") else key


def config_cell(value: Any) -> Cell:
    """A config value in its column: numbers short and right-aligned, - for none."""
    from mosaic_tui.query import value_text
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return Cell(value_text(value), right=number)


def config_sort_value(value: Any, descending: bool) -> tuple:
    """A config value's place in a sort: numbers as numbers, then text, and runs without the key
    last whichever way the table is sorted (the table sorts with ``reverse=descending``)."""
    if value is None:
        return (0, 0.0, "") if descending else (3, 0.0, "")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value:                         # NaN: no place among the numbers
            return (1, 0.0, "") if descending else (2, 0.0, "")
        return (2, float(value), "") if descending else (0, float(value), "")
    from mosaic_tui.query import value_text
    return (1, 0.0, value_text(value).lower())


def _flat_params(params: Any, prefix: str = "params.") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(params, dict):
        for key, value in params.items():
            if isinstance(value, dict) and value:
                out.update(_flat_params(value, f"{prefix}{key}."))
            else:
                out[f"{prefix}{key}"] = value
    return out


def swept_keys(runs: Iterable[dict[str, Any]]) -> list[str]:
    """The params (``params.KEY``, dotted into nested ones) whose values differ between the runs:
    a sweep's swept params, read off its runs (the seed is no param). In the order first met."""
    first: dict[str, Any] = {}
    differ: dict[str, None] = {}
    count = 0
    for run in runs:
        flat = _flat_params((run.get("config") or {}).get("params"))
        if count:
            for key in first.keys() - flat.keys():
                differ[key] = None
        for key, value in flat.items():
            if key not in first:
                if count:
                    differ[key] = None
                first[key] = value
            elif key not in differ and first[key] != value:
                differ[key] = None
        count += 1
    return [key for key in first if key in differ]


# the config's own keys worth a column (the rest are the run's columns already, or plumbing)
CONFIG_COLUMNS = ("seed", "steps", "device", "mode", "eval_episodes")


def column_choices(keys: Any, chosen: Sequence[str] = ()) -> list[str]:
    """What the column chooser lists: the columns chosen, in their order, then every param the
    runs have (``params.KEY``, dotted into nested ones, as the runs spell it), sorted, then the
    config's CONFIG_COLUMNS the runs have (``config.seed``). ``keys``: query.Keys of the runs."""
    params = []
    for canon, spellings in keys.params.items():
        if keys.kinds.get(canon, set()) <= {"json"}:
            continue                # a nested dict: its keys are listed
        params.append("params." + sorted(spellings)[0])
    config = [f"config.{k}" for k in CONFIG_COLUMNS if k in keys.config]
    return list(chosen) + [k for k in sorted(params, key=str.lower) + config if k not in chosen]


def fit_columns(natural: dict[str, int], available: int, padding: int,
                empty: frozenset[str] = frozenset(), config: Sequence[str] = ()) -> dict[str, int]:
    """Column key -> width for the columns that fit in ``available`` cells, by PRIORITY (and the
    config-key columns ``config`` right after the return, column_priority).

    Columns go strictly by priority: once one does not fit, none after it is
    shown, so a narrow column never stays while a wanted one went. The name
    is first cut down to NAME_MIN, gets its whole width (up to NAME_MAX) at
    NAME_FULL's place, and any room left over goes back to it. Columns
    in ``empty`` (of HIDDEN_WHEN_EMPTY, with no run's cell filled) take no room.
    """
    widths: dict[str, int] = {}
    name_natural = min(natural["name"], NAME_MAX)
    used = 0
    for key in column_priority(config):
        if key in empty:
            continue
        if key == NAME_FULL:
            extra = name_natural - widths["name"]
            if used + extra > available:
                break
            widths["name"] += extra
            used += extra
            continue
        width = min(name_natural, NAME_MIN) if key == "name" else natural[key]
        if used + width + 2 * padding > available and key not in ("sel", "name"):
            break
        widths[key] = width
        used += width + 2 * padding
    if "name" in widths:
        widths["name"] += max(0, min(name_natural - widths["name"], available - used))
    return {key: widths[key] for key in column_order(config) if key in widths}


CELL_PADDING = 1          # blank cells each side of a column, as DataTable's cell_padding
