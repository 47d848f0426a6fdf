"""A PBT sweep's lineage as something to draw: each member's hyperparameter schedule over steps (the
value in force from each step on), every copy (donor → recipient, at the donor's step), and the lanes
of a tree (members as rows over steps, banded by the value in force, a mark at each copy).

Read from the daemon's sweep reply (``sweep_get`` of a PBT sweep: ``members``, ``lineage``,
``generation``; daemon/pbt.py ``describe``). A member's starting values are the ones its first
applied exploit replaced (the record's ``changed`` olds), else its values now. Pure: the widget
(mosaic_tui/widgets/lineage_view.py) draws what these return.
"""
from __future__ import annotations

import math
from typing import Any

LEVELS = 8              # the shades a lane's band takes, low value to high
PAST_END = "·"          # a lane's steps the member has not trained yet
DONOR_MARK = "●"        # the donor's lane at a copy
CONNECTOR = "│"         # the lanes between donor and recipient at a copy
SKIPPED_MARK = "×"      # an exploit decided but not applied (the donor's checkpoint gone, the member ended)
MANY_MARK = "◆"         # a recipient's mark when its donor's number does not fit in one digit
REPLAY_MARK = "▸"       # a replayed schedule's change (a replay sweep: one member, no donor)


def has_lineage(sweep: dict[str, Any]) -> bool:
    """Whether the reply carries a PBT lineage (an older daemon's reply has none)."""
    return isinstance(sweep.get("members"), list) and isinstance(sweep.get("lineage"), list)


def is_pbt(sweep: dict[str, Any]) -> bool:
    return "pbt" in (sweep.get("spec") or {})


def member_index(sweep: dict[str, Any]) -> dict[str, int]:
    """Run id -> member number."""
    return {m["id"]: m["member"] for m in sweep.get("members", [])}


def copies(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """Every exploit, in the order decided: generation, step (the donor's, where the recipient went on
    from), donor and recipient member numbers, the values changed, and whether it was skipped."""
    index = member_index(sweep)
    out = []
    for record in sweep.get("lineage", []):
        if record.get("recipient") not in index or record.get("donor") not in index:
            continue
        out.append({"generation": record.get("generation"), "step": int(record.get("donor_step") or 0),
                    "donor": index[record["donor"]], "recipient": index[record["recipient"]],
                    "changed": record.get("changed") or {}, "params": record.get("params") or {},
                    "donor_score": record.get("donor_score"), "recipient_score": record.get("recipient_score"),
                    "skipped": record.get("skipped")})
    return out


def schedules(sweep: dict[str, Any]) -> dict[int, list[dict[str, Any]]]:
    """Each member's schedule: segments {"start", "end", "params", "donor", "generation"}, the first
    from step 0 with its starting values (donor None), then one per applied copy from the donor's step.
    The last segment ends at the member's step now."""
    applied: dict[int, list[dict[str, Any]]] = {}
    for c in copies(sweep):
        if not c["skipped"]:
            applied.setdefault(c["recipient"], []).append(c)
    out: dict[int, list[dict[str, Any]]] = {}
    for member in sweep.get("members", []):
        mine = applied.get(member["member"], [])
        if mine:
            first = mine[0]
            start = {**first["params"], **{k: v.get("old") for k, v in first["changed"].items()}}
        else:
            start = dict(member.get("params") or {})
        segments = [{"start": 0, "params": start, "donor": None, "generation": None}]
        for c in mine:
            segments.append({"start": c["step"], "params": dict(c["params"]), "donor": c["donor"],
                             "generation": c["generation"]})
        changes = replayed(sweep)   # a replay sweep's one member: each change it has taken
        if changes:
            segments[0]["params"] = _before(sweep, member)
        for change in changes:
            segments.append({"start": change["step"], "params": {**segments[-1]["params"], **change["params"]},
                             "donor": None, "generation": None, "replay": True})
        for seg, nxt in zip(segments, segments[1:]):
            seg["end"] = nxt["start"]
        segments[-1]["end"] = max(int(member.get("step") or 0), segments[-1]["start"])
        out[member["member"]] = segments
    return out


def replayed(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """A replay sweep's changes its member has taken so far ({step, params}), in order; none for a
    population (``replay`` and ``replayed`` in the reply: daemon/pbt.py ``describe``)."""
    changes = sweep.get("replay") or []
    taken = sorted({r.get("change") for r in sweep.get("replayed") or [] if isinstance(r.get("change"), int)})
    return [changes[k] for k in taken if 0 <= k < len(changes)]


def _before(sweep: dict[str, Any], member: dict[str, Any]) -> dict[str, Any]:
    """A replayed member's starting values: the spec's one value of each param (a replay's params are
    one-value grids), else its values now."""
    out = dict(member.get("params") or {})
    for name, ps in sweep["spec"]["params"].items():
        if len(ps.get("values") or []) == 1:
            out[name] = ps["values"][0]
    return out


def value_range(sweep: dict[str, Any], param: str) -> tuple[float, float, bool] | None:
    """(low, high, log) a band's shade is scaled on: the param's range in the spec, widened to every
    value the schedules reached; None when the param is not a number."""
    ps = sweep["spec"]["params"].get(param) or {}
    values: list[float] = []
    for segments in schedules(sweep).values():
        values.extend(v for v in (s["params"].get(param) for s in segments) if _number(v))
    if "low" in ps:
        values += [ps["low"], ps["high"]]
    elif "values" in ps:
        values += [v for v in ps["values"] if _number(v)]
    if not values:
        return None
    log = ps.get("kind") == "loguniform" and min(values) > 0
    return float(min(values)), float(max(values)), log


def level(value: Any, bounds: tuple[float, float, bool] | None) -> int | None:
    """The shade (0..LEVELS-1) of a value within bounds; None for a value that is not a number."""
    if bounds is None or not _number(value):
        return None
    low, high, log = bounds
    if log:
        low, high, value = math.log(low), math.log(high), math.log(value)
    if high <= low:
        return LEVELS // 2
    # a hair over: a value halfway on a log scale is not rounded into the shade below
    return max(0, min(LEVELS - 1, int((value - low) / (high - low) * LEVELS + 1e-9)))


def total_steps(sweep: dict[str, Any]) -> int:
    """The steps a lane spans: each member's budget, or further when a member went past it."""
    budget = int(sweep["spec"]["base"].get("steps") or 0)
    return max([budget, 1] + [int(m.get("step") or 0) for m in sweep.get("members", [])])


def column(step: int, total: int, width: int) -> int:
    return max(0, min(width - 1, step * width // max(1, total)))


def lanes(sweep: dict[str, Any], param: str, width: int) -> list[dict[str, Any]]:
    """One lane per member, ``width`` cells over the steps 0..total: each cell {"char", "level"} (level
    None past the member's step: not trained yet), a recipient's copy marked with its donor's number,
    the donor's lane with DONOR_MARK and the lanes between with CONNECTOR, each segment's value
    written after its start when it fits."""
    total = total_steps(sweep)
    bounds = value_range(sweep, param)
    plan = schedules(sweep)
    rows: list[dict[str, Any]] = []
    order = sorted(plan)
    for member in order:
        cells = [{"char": PAST_END, "level": None} for _ in range(width)]
        segments = plan[member]
        for seg in segments:
            shade = level(seg["params"].get(param), bounds)
            first = column(seg["start"], total, width)
            last = column(seg["end"], total, width) if seg["end"] > seg["start"] else first - 1
            for x in range(first, last + 1):
                cells[x] = {"char": " ", "level": shade if shade is not None else 0}
        for seg in segments:   # the labels after the marks: a later segment's label may overwrite an earlier one's
            label = short(seg["params"].get(param))
            marked = seg["donor"] is not None or seg.get("replay")
            first = column(seg["start"], total, width) + (2 if marked else 0)   # after "N "
            end = column(seg["end"], total, width)
            if end - first + 1 >= len(label) + 1:
                for k, ch in enumerate(label):
                    cells[first + k]["char"] = ch
        for seg in segments[1:]:
            if seg.get("replay"):
                x = column(seg["start"], total, width)
                cells[x] = {"char": REPLAY_MARK, "level": cells[x]["level"], "copy": True}
        member_row = {"member": member, "cells": cells, "value": segments[-1]["params"].get(param),
                      "step": segments[-1]["end"]}
        rows.append(member_row)
    position = {m: i for i, m in enumerate(order)}
    for c in copies(sweep):
        if c["donor"] not in position or c["recipient"] not in position:
            continue
        x = column(c["step"], total, width)
        d, r = position[c["donor"]], position[c["recipient"]]
        for i in range(min(d, r) + 1, max(d, r)):
            if rows[i]["cells"][x]["char"] in (" ", PAST_END):
                rows[i]["cells"][x] = {"char": CONNECTOR, "level": rows[i]["cells"][x]["level"]}
        rows[d]["cells"][x] = {"char": DONOR_MARK, "level": rows[d]["cells"][x]["level"]}
        mark = SKIPPED_MARK if c["skipped"] else (str(c["donor"]) if c["donor"] < 10 else MANY_MARK)
        rows[r]["cells"][x] = {"char": mark, "level": rows[r]["cells"][x]["level"], "copy": True}
    return rows


def boundaries(sweep: dict[str, Any]) -> list[int]:
    """The steps at which the population is compared (every interval, short of the budget)."""
    interval = int((sweep["spec"].get("pbt") or {}).get("interval") or 0)   # 0 in a replay's spec
    budget = int(sweep["spec"]["base"].get("steps") or 0)
    return list(range(interval, budget, interval)) if interval > 0 else []


def axis(sweep: dict[str, Any], width: int) -> str:
    """A ruler under the lanes: a tick at each boundary."""
    total = total_steps(sweep)
    cells = ["─"] * width
    for step in boundaries(sweep):
        cells[column(step, total, width)] = "┴"
    return "".join(cells)


def copy_lines(sweep: dict[str, Any]) -> list[str]:
    """Each copy in a line, the latest first (what a live sweep's reader looks for): generation, step,
    recipient and donor, the scores compared, the values it changed."""
    out = []
    for c in reversed(copies(sweep)):
        changed = ", ".join(f"{k} {short(v.get('old'))}→{short(v.get('new'))}" for k, v in c["changed"].items())
        line = f"g{c['generation']} @{short(c['step'])}  m{c['recipient']} copied m{c['donor']}"
        if c["donor_score"] is not None and c["recipient_score"] is not None:
            line += f" ({short(c['recipient_score'])} < {short(c['donor_score'])})"
        line += f"  {changed or 'values kept'}"
        if c["skipped"]:
            line += f"  [{c['skipped']}]"
        out.append(line)
    return out


def mutated_params(sweep: dict[str, Any]) -> list[str]:
    """The params a band can show: the mutated ones first, then the other swept ones."""
    mutations = list((sweep["spec"].get("pbt") or {}).get("mutations") or {})
    return mutations + [p for p in sweep["spec"]["params"] if p not in mutations]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def short(value: Any) -> str:
    """A number in at most 6 characters (steps as 1.2k, values to 3 significant digits)."""
    if not _number(value):
        return "-" if value is None else str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1000:
        v = abs(value)
        sign = "-" if value < 0 else ""
        if v >= 1_000_000:
            return f"{sign}{v / 1_000_000:.3g}M"
        if v >= 1000:
            return f"{sign}{v / 1000:.3g}k"
        return f"{value:.0f}"
    return f"{value:.3g}"
