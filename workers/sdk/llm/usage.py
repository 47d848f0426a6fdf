"""LLM use, counted one way for every LLM worker, and the run's token/cost budget.

``Usage`` adds up calls, invalid actions, failed calls, tokens, latencies and
cost (an episode's, a seat's or a whole run's); ``Budget`` stops a run once its
total crosses ``params.max_total_tokens`` or ``params.max_cost``: the worker
catches ``BudgetReached`` between two steps, writes a ``phase`` event named by
the reason and completes the run (a budget is a planned end, not a failure).

Standard library only: the descriptors import ``BUDGET_PARAMS`` and
``check_budget_params``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable

from workers.sdk.config import ConfigError
from workers.sdk.llm.parse import ActionStats

# the budget's params, in the schema of every LLM worker
BUDGET_PARAMS: dict[str, dict[str, Any]] = {
    "max_total_tokens": {"type": ["integer", "null"], "default": None, "minimum": 1,
                         "description": "budget: stop the run cleanly once this many tokens (in + out) are used"},
    "max_cost": {"type": ["number", "null"], "default": None, "exclusiveMinimum": 0,
                 "description": "budget: stop the run cleanly at this cost in US$ (needs price_in/price_out)"},
}


class BudgetReached(Exception):
    """The run's token or cost budget is used up: stop cleanly."""


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (nearest rank) of values; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class Usage:
    """LLM use, for an episode, a seat or the whole run."""
    stats: ActionStats = field(default_factory=ActionStats)
    errors: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float | None = None
    latencies: list[float] = field(default_factory=list)

    def add(self, decision_valid: bool, reply) -> None:
        """One call: ``reply`` is a workers.sdk.llm.client.Reply; ``decision_valid`` whether it gave a legal action."""
        self.stats.add(decision_valid)
        self.errors += 1 if reply.error else 0
        self.tokens_in += reply.tokens_in
        self.tokens_out += reply.tokens_out
        self.latencies.append(reply.latency_s)
        if reply.cost is not None:
            self.cost = (self.cost or 0.0) + reply.cost

    def state(self) -> dict[str, Any]:
        """As JSON (a stop's state: the budget counts on from it when the run continues)."""
        return {"calls": self.stats.calls, "invalid": self.stats.invalid, "errors": self.errors,
                "tokens_in": self.tokens_in, "tokens_out": self.tokens_out, "cost": self.cost,
                "latencies": list(self.latencies)}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> "Usage":
        """A Usage as ``state`` (a checkpoint's) left it: a continued run counts on."""
        stats = ActionStats()
        stats.calls, stats.invalid = state["calls"], state["invalid"]
        return cls(stats=stats, errors=state["errors"], tokens_in=state["tokens_in"],
                   tokens_out=state["tokens_out"], cost=state["cost"], latencies=list(state["latencies"]))

    @property
    def calls(self) -> int:
        """LLM calls made."""
        return self.stats.calls

    @property
    def tokens(self) -> int:
        """Tokens in and out, together."""
        return self.tokens_in + self.tokens_out

    def metrics(self) -> dict[str, float]:
        """The run's LLM scalars: calls, invalid actions and their rate, errors, tokens, latency
        percentiles and cost where known."""
        out = {"llm_calls": self.stats.calls, "invalid_actions": self.stats.invalid,
               "invalid_rate": self.stats.invalid_rate, "llm_errors": self.errors,
               "tokens_in": self.tokens_in, "tokens_out": self.tokens_out}
        if self.latencies:
            out["latency_p50"] = percentile(self.latencies, 50)
            out["latency_p99"] = percentile(self.latencies, 99)
        if self.cost is not None:
            out["cost"] = self.cost
        return out


class Budget:
    """``params.max_total_tokens`` and ``params.max_cost`` of a run, checked against its total use."""

    def __init__(self, params: dict[str, Any]):
        self.max_tokens = params.get("max_total_tokens")
        self.max_cost = params.get("max_cost")

    def check(self, tokens: int, cost: float | None) -> None:
        """Raise BudgetReached (its message is the reason the run stops) once the run's tokens (in + out)
        or cost so far cross a limit."""
        if self.max_tokens is not None and tokens >= self.max_tokens:
            raise BudgetReached(f"token budget reached: {tokens} of {self.max_tokens} tokens")
        if self.max_cost is not None and (cost or 0.0) >= self.max_cost:
            raise BudgetReached(f"cost budget reached: ${cost or 0.0:.4f} of ${self.max_cost:g}")


def check_budget_params(params: dict[str, Any], specs: Iterable[dict[str, Any]]) -> None:
    """At submit: a cost budget needs a price on at least one of the run's LLM client specs."""
    if params.get("max_cost") is not None and not any(
            spec.get("price_in") is not None or spec.get("price_out") is not None for spec in specs):
        raise ConfigError("params.max_cost", "a cost budget needs params.price_in / price_out")
