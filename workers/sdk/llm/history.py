"""BALROG's HistoryPromptBuilder (balrog/prompt_builder/history.py), messages as dicts.

The instructions are the first user message; then the last ``max_text_history``
observations and the actions between them, alternating user/assistant; the
newest observation is headed "Current Observation:" and carries the
short-term context (NetHack's message line, for instance); an action the agent
reasoned about shows, for the last ``max_cot_history`` of them, as
"Previous plan:" with the reasoning instead of the bare action.
"""
from __future__ import annotations

from collections import deque
from typing import Any


class HistoryPromptBuilder:
    """The chat messages of one agent's prompt: the instructions, then its recent observations and actions."""
    def __init__(self, max_text_history: int = 16, system_prompt: str | None = None, max_cot_history: int = 1,
                 keep_prefix: bool = False):
        self.max_text_history = max_text_history
        self.system_prompt = system_prompt
        self.max_cot_history = max_cot_history
        # keep_prefix: the window grows to max_text_history observations, then drops its older
        # half at once, so that consecutive prompts share everything but their end (a model's KV
        # cache reuses that prefix); BALROG's window slides one step, changing the prompt right
        # after the instructions every call. Never more than max_text_history are shown.
        self.keep_prefix = keep_prefix
        self._events: deque[dict[str, Any]] = deque(maxlen=max(max_text_history, 1) * 2)
        self._last_short_term_obs = ""
        self.previous_reasoning: str | None = None

    def update_instruction_prompt(self, instruction: str) -> None:
        """The system prompt: the env's instructions."""
        self.system_prompt = instruction

    def update_observation(self, obs: dict[str, str]) -> None:
        """``obs``: {"long_term_context": ..., "short_term_context": ...} (BALROG's obs["text"])."""
        self._last_short_term_obs = obs.get("short_term_context", "")
        if self.keep_prefix:
            seen = sum(event["type"] == "observation" for event in self._events)
            if seen >= self.max_text_history:  # the one coming would be one too many: keep the newest half
                while seen > max(self.max_text_history // 2, 1) - 1 and self._events:
                    seen -= self._events.popleft()["type"] == "observation"
        self._events.append({"type": "observation", "text": obs.get("long_term_context", "")})

    def update_action(self, action: str) -> None:
        """Record the action played (with the reasoning that led to it)."""
        self._events.append({"type": "action", "action": action, "reasoning": self.previous_reasoning})

    def update_reasoning(self, reasoning: str) -> None:
        """The reasoning of the reply whose action comes next."""
        self.previous_reasoning = reasoning

    def reset(self) -> None:
        """Forget the episode's observations and actions (a new episode)."""
        self._events.clear()
        self.previous_reasoning = None

    def get_prompt(self, icl_episodes: bool = False) -> list[dict[str, str]]:
        """The chat messages of the next call: the instructions, then the latest observations and
        actions (up to ``max_text_history``), as BALROG's HistoryPromptBuilder makes them."""
        messages: list[dict[str, str]] = []
        if self.system_prompt and not icl_episodes:
            messages.append({"role": "user", "content": self.system_prompt})
        events = list(self._events)
        text_ids, needed = set(), self.max_text_history
        for i in range(len(events) - 1, -1, -1):
            if events[i]["type"] == "observation" and needed > 0 and events[i].get("text") is not None:
                text_ids.add(i)
                needed -= 1
        cot_ids, needed = set(), self.max_cot_history
        for i in range(len(events) - 1, -1, -1):
            if events[i]["type"] == "action" and needed > 0 and events[i].get("reasoning") is not None:
                cot_ids.add(i)
                needed -= 1
        for i, event in enumerate(events):
            if event["type"] == "observation":
                parts = []
                if i == len(events) - 1:
                    parts.append("Current Observation:")
                    if self._last_short_term_obs:
                        parts.append(self._last_short_term_obs)
                else:
                    parts.append("Observation:")
                if i in text_ids:
                    parts.append(event["text"])
                messages.append({"role": "user", "content": "\n".join(parts)})
            else:
                content = ("Previous plan:\n" + event["reasoning"]) if i in cot_ids else event["action"]
                messages.append({"role": "assistant", "content": content})
        return messages
