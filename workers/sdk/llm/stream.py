"""The ``llm_step`` events of LLM calls, the reply streamed as it arrives.

While a reply comes in, ``on_text`` (the client's callback) writes
``{"type": "llm_step", "partial": true, "step", "agent", "reply": <text so far>}``
at most every ``PARTIAL_INTERVAL_S`` (a 30 token/s model would otherwise write
30 lines a second, each repeating the whole reply so far). Partial events
carry neither prompt nor observation: those come once, in the final event of
the step, written by ``final`` with the action and everything else. A reader
shows the latest reply of a (step, agent) and replaces it with the final one.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from workers.sdk.llm.client import Reply, prompt_text
from workers.sdk.telemetry import Emitter

PARTIAL_INTERVAL_S = 0.25


class StepStream:
    """The ``llm_step`` events of one worker's calls: partial replies, coalesced, then each call's final event."""
    def __init__(self, emitter: Emitter, interval_s: float = PARTIAL_INTERVAL_S):
        self.emitter = emitter
        self.interval_s = interval_s
        self.partials = 0

    def on_text(self, step: int, agent: str) -> Callable[[str], None]:
        """The client's ``on_text`` for one call: partial events, coalesced."""
        last = [time.monotonic()]  # the first partial after one interval: short replies need none

        def callback(text: str) -> None:
            now = time.monotonic()
            if now - last[0] >= self.interval_s:
                last[0] = now
                self.partials += 1
                self.emitter.llm_step(step=step, agent=agent, reply=text, partial=True)
        return callback

    def final(self, *, step: int, agent: str, reply: Reply, prompt: Any, observation: str,
              action: str | None, valid: bool, episode: int | None = None, **extra: Any) -> None:
        """The step's record: everything the transcript shows."""
        self.emitter.llm_step(
            step=step, agent=agent, episode=episode, observation=observation, prompt=prompt_text(prompt),
            reply=reply.text, action=action, valid=bool(valid), tokens_in=reply.tokens_in,
            tokens_out=reply.tokens_out, latency_s=round(reply.latency_s, 4), cost=reply.cost,
            error=reply.error, **extra)
