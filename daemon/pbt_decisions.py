"""Population-based training's pure decisions: the spec's ``pbt:`` block, who is exploited and by
whom, the perturbation and the exploit record. No I/O: daemon/pbt.py acts on what these decide.

Every random choice takes a ``random.Random`` the caller seeds (the sweep's seed and the
generation), so a decision is reproducible: a daemon restarted mid-exploit decides the same again.
"""
from __future__ import annotations

import math
import random
from typing import Any

from workers.sdk.config import ConfigError

PBT_KEYS = ("population", "interval", "quantile", "mutations", "resample_probability", "replay")
MUTATION_KEYS = ("factors", "neighbours", "resample_probability")
DEFAULT_FACTORS = [0.8, 1.2]
DEFAULT_QUANTILE = 0.25


def _err(field: str, message: str) -> ConfigError:
    return ConfigError(f"sweep.pbt.{field}" if field else "sweep.pbt", message)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _probability(field: str, value: Any) -> float:
    if not _number(value) or not 0 <= value <= 1:
        raise _err(field, "a probability from 0 to 1")
    return float(value)


def mutable_reason(name: str, schema_prop: dict[str, Any]) -> str | None:
    """None when a checkpoint can take a new value of the param; else why not, in words.

    Conservative: only real-valued params (learning rates, coefficients, discounts) change under a
    checkpoint. An integer, a boolean or a string may be a network's size, a batch's shape or an
    algorithm's variant, which a saved state cannot take."""
    kind = schema_prop.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind}
    kinds.discard("null")
    if kinds == {"number"}:
        return None
    shown = "/".join(sorted(str(k) for k in kinds)) or "untyped"
    return (f"a {shown} parameter: a checkpoint cannot take a new value of it (network sizes, batch shapes); "
            f"only number parameters mutate")


def check_pbt(raw: Any, space: dict[str, dict[str, Any]], props: dict[str, Any]) -> dict[str, Any]:
    """The ``pbt:`` block with defaults filled in; one ConfigError naming its field per mistake.
    ``space``: the sweep's checked params (each mutated param's initial distribution and bounds);
    ``props``: the worker's schema properties."""
    if not isinstance(raw, dict):
        raise _err("", "a mapping: population, interval, quantile, mutations, resample_probability")
    for key in raw:
        if key not in PBT_KEYS:
            raise _err(key, f"unknown key; known: {', '.join(PBT_KEYS)}")
    if "replay" in raw:
        return {"population": 1, "interval": 0, "quantile": DEFAULT_QUANTILE, "mutations": {},
                "replay": check_replay(raw, space, props)}
    population = raw.get("population", 4)
    if not isinstance(population, int) or isinstance(population, bool) or not 2 <= population <= 256:
        raise _err("population", "an integer from 2 to 256")
    interval = raw.get("interval")
    if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
        raise _err("interval", "the env steps between exploits, an integer >= 1")
    quantile = raw.get("quantile", DEFAULT_QUANTILE)
    if not _number(quantile) or not 0 < quantile <= 0.5:
        raise _err("quantile", "the fraction exploited (bottom) and donating (top), above 0 and at most 0.5")
    default_p = _probability("resample_probability", raw.get("resample_probability", 0.0))
    mutations_raw = raw.get("mutations")
    if mutations_raw is None:
        mutations_raw = {name: {} for name in space}
    if not isinstance(mutations_raw, dict) or not mutations_raw:
        raise _err("mutations", "a mapping of params to their perturbation (factors, neighbours, resample_probability)")
    mutations: dict[str, dict[str, Any]] = {}
    for name, m in mutations_raw.items():
        field = f"mutations.{name}"
        if name not in space:
            raise _err(field, "not one of the sweep's params (its initial values and bounds come from there)")
        reason = mutable_reason(name, props.get(name, {}))
        if reason is not None:
            raise _err(field, reason)
        if m is None:
            m = {}
        if not isinstance(m, dict):
            raise _err(field, "a mapping: factors, neighbours or resample_probability")
        for key in m:
            if key not in MUTATION_KEYS:
                raise _err(f"{field}.{key}", f"unknown key; known: {', '.join(MUTATION_KEYS)}")
        if "factors" in m and "neighbours" in m:
            raise _err(field, "factors or neighbours, not both")
        checked: dict[str, Any] = {"resample_probability": _probability(
            f"{field}.resample_probability", m.get("resample_probability", default_p))}
        if "neighbours" in m:
            values = m["neighbours"]
            if not isinstance(values, list) or len(values) < 2 or not all(_number(v) for v in values):
                raise _err(f"{field}.neighbours", "a list of at least two numbers, in order")
            if sorted(values) != values:
                raise _err(f"{field}.neighbours", "in increasing order (a value's neighbours are beside it)")
            checked["neighbours"] = values
        else:
            factors = m.get("factors", DEFAULT_FACTORS)
            if not isinstance(factors, list) or not factors or not all(_number(f) and f > 0 for f in factors):
                raise _err(f"{field}.factors", "a list of positive numbers, e.g. [0.8, 1.2]")
            checked["factors"] = factors
        mutations[name] = checked
    return {"population": population, "interval": interval, "quantile": float(quantile), "mutations": mutations}


def sample(ps: dict[str, Any], rng: random.Random) -> Any:
    """One value drawn from a checked param's distribution (daemon/sweeps.py normalise_param)."""
    if "values" in ps:
        return rng.choice(ps["values"])
    if ps["kind"] == "int":
        return rng.randint(int(ps["low"]), int(ps["high"]))
    if ps["kind"] == "loguniform":
        return math.exp(rng.uniform(math.log(ps["low"]), math.log(ps["high"])))
    return rng.uniform(ps["low"], ps["high"])


def initial_params(space: dict[str, dict[str, Any]], seed: int, index: int) -> dict[str, Any]:
    """Member ``index``'s starting values: its own seeded draw (the same after a restart)."""
    rng = random.Random(f"pbt-init-{seed}-{index}")
    return {name: sample(ps, rng) for name, ps in sorted(space.items())}


def perturb(params: dict[str, Any], mutations: dict[str, dict[str, Any]], space: dict[str, dict[str, Any]],
            rng: random.Random) -> dict[str, Any]:
    """The donor's values, each mutable one perturbed: resampled from its distribution with its
    probability, else multiplied by one of its factors (kept within its range's bounds), else moved to
    a neighbour in its list. The params not named in ``mutations`` are copied as they are."""
    out = dict(params)
    for name in sorted(mutations):
        m, ps, value = mutations[name], space[name], params[name]
        if rng.random() < m["resample_probability"]:
            out[name] = sample(ps, rng)
        elif "neighbours" in m:
            values = m["neighbours"]
            i = min(range(len(values)), key=lambda k: abs(values[k] - value))
            out[name] = values[min(len(values) - 1, max(0, i + rng.choice((-1, 1))))]
        else:
            new = value * rng.choice(m["factors"])
            if "low" in ps:
                new = min(ps["high"], max(ps["low"], new))
            out[name] = new
    return out


def exploit_pairs(members: list[dict[str, Any]], quantile: float, maximize: bool,
                  rng: random.Random) -> list[tuple[str, str]]:
    """(recipient, donor) pairs: each member of the bottom ``quantile`` copies one member of the top.

    ``members``: {"id", "step", "score"}, ``step`` the step the score stands at. A member without a
    score takes no part. A recipient is never judged against a member that trained longer: its donor
    is drawn among the top members whose step is at most its own, and when none is, it is left
    alone. Ties are broken by id, so the outcome depends on the seeded ``rng`` alone."""
    scored = [m for m in members if m.get("score") is not None]
    if len(scored) < 2:
        return []
    ranked = sorted(scored, key=lambda m: (-m["score"] if maximize else m["score"], m["id"]))
    k = min(len(ranked) // 2, max(1, int(len(ranked) * quantile)))
    top, bottom = ranked[:k], ranked[-k:]
    pairs = []
    for recipient in bottom:
        donors = [d for d in top if d["step"] <= recipient["step"]]
        if donors:
            pairs.append((recipient["id"], rng.choice(donors)["id"]))
    return pairs


def generation_rng(seed: int, generation: int) -> random.Random:
    return random.Random(f"pbt-{seed}-{generation}")


def exploit_record(generation: int, recipient: dict[str, Any], donor: dict[str, Any],
                   new_params: dict[str, Any]) -> dict[str, Any]:
    """What an exploit did, as a lineage event and the continue's seam carry it: who copied whom, at
    which of the donor's steps and checkpoint, the scores compared, and each value that changed."""
    changed = {name: {"old": recipient["params"].get(name), "new": value}
               for name, value in sorted(new_params.items()) if recipient["params"].get(name) != value}
    return {"generation": generation, "recipient": recipient["id"], "donor": donor["id"],
            "donor_step": donor["stop_step"], "donor_checkpoint": donor["checkpoint"],
            "recipient_score": recipient["score"], "donor_score": donor["score"],
            "donor_params": dict(sorted(donor["params"].items())), "params": dict(sorted(new_params.items())),
            "changed": changed}


# -- the population stopped and continued (mosaic stop/continue SWEEP) ------------------
def ready_to_decide(members: list[dict[str, Any]], boundary: int) -> bool:
    """Whether a generation is decided now: every live member (``{"state", "step"}``) stopped at or
    past the boundary. One stopped short of it (``mosaic stop`` on the member or the population)
    is waited for: it is judged only once it has trained as far as the others."""
    return bool(members) and all(m["state"] == "stopped" and m["step"] >= boundary for m in members)


def members_to_continue(members: list[dict[str, Any]], boundary: int, total: int,
                        decision_pending: bool) -> list[str]:
    """The ids ``mosaic continue SWEEP`` starts again: the stopped members (``{"id", "state", "step"}``,
    live ones only) that have not reached the generation's boundary, or all stopped ones in the
    last generation (it runs to the end of the budget). The members at the boundary wait for the
    decision, which continues them, each from its own or its donor's checkpoint; with a decision
    already written none is continued here (the controller applies it: a member continued
    beside it would take its exploit for applied)."""
    if decision_pending:
        return []
    last = boundary >= total
    return [m["id"] for m in members if m["state"] == "stopped" and (last or m["step"] < boundary)]



# -- the schedule: exported, and replayed as a fixed schedule on a new run ------------------
def check_replay(raw: dict[str, Any], space: dict[str, dict[str, Any]], props: dict[str, Any]) -> list[dict[str, Any]]:
    """``pbt: {replay: [{step, params}, ...]}``: a fixed schedule (a member's, ``member_schedule``) for
    one run, whose params change at each step through a stop and a continue from its own checkpoint
    (Ray Tune's PopulationBasedTrainingReplay). The starting values are the sweep's params, one value each."""
    others = sorted(k for k in raw if k != "replay")
    if others:
        raise _err(others[0], "not with replay: a replay is one run following a fixed schedule")
    changes = raw["replay"]
    if not isinstance(changes, list) or not changes:
        raise _err("replay", "a list of changes, each {step, params}, in increasing steps")
    for name, ps in space.items():
        if len(ps.get("values") or []) != 1:
            raise _err("replay", f"params.{name}: one starting value ({{grid: [VALUE]}}), not a search space")
    out, last = [], 0
    for i, change in enumerate(changes):
        field = f"replay.{i}"
        if not isinstance(change, dict) or set(change) != {"step", "params"}:
            raise _err(field, "a mapping with step and params")
        step, params = change["step"], change["params"]
        if not isinstance(step, int) or isinstance(step, bool) or step <= last:
            raise _err(f"{field}.step", f"an env step after the one before ({last})")
        if not isinstance(params, dict) or not params:
            raise _err(f"{field}.params", "the values from that step on")
        for name, value in params.items():
            if name not in space:
                raise _err(f"{field}.params.{name}", "not one of the sweep's params")
            reason = mutable_reason(name, props.get(name, {}))
            if reason is not None:
                raise _err(f"{field}.params.{name}", reason)
            if not _number(value):
                raise _err(f"{field}.params.{name}", "a number")
        out.append({"step": step, "params": dict(params)})
        last = step
    return out


def member_schedule(initial: dict[str, Any], lineage: list[dict[str, Any]], member_id: str) -> list[dict[str, Any]]:
    """A member's hyperparameter schedule over its steps: its starting values at step 0, then each
    exploit it took (a skipped one changed nothing), in order: the values from the donor's step on,
    and whom it copied."""
    out: list[dict[str, Any]] = [{"step": 0, "params": dict(sorted(initial.items()))}]
    for record in sorted((r for r in lineage if r.get("recipient") == member_id and not r.get("skipped")),
                         key=lambda r: r["generation"]):
        out.append({"step": record["donor_step"], "params": dict(record["params"]), "generation": record["generation"],
                    "donor": record["donor"], "donor_name": record.get("donor_name"),
                    "donor_step": record["donor_step"]})
    return out


def replay_spec(spec: dict[str, Any], index: int, schedule: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """A sweep spec replaying member ``index``'s schedule on a new run: the member's base and seed,
    its starting values, and each later change as a fixed step (``check_replay``)."""
    base = {**spec["base"], "seed": (spec["base"].get("seed") or 0) + index}
    return {"name": name, "base": base,
            "params": {n: {"grid": [v]} for n, v in schedule[0]["params"].items()},
            "objective": dict(spec["objective"]), "seed": spec["seed"],
            "pbt": {"replay": [{"step": c["step"], "params": dict(c["params"])} for c in schedule[1:]]}}
