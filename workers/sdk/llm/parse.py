"""Actions from free replies, as BALROG's agents take them, and the invalid-action count.

BALROG (balrog/agents/*.py) extracts the action text per agent type, then the
env checks it against its language action space and plays the default action
when it is not there (``EnvWrapper.check_action_validity``). ``extract`` is the
first half, per style; ``match_choice`` the second, a little more forgiving
than an exact ``in`` (case, spaces, quotes and a trailing full stop do not make
"Go forward." invalid), but never a guess between two actions.
"""
from __future__ import annotations

import re

# the agent types' extraction styles
STYLES = ("naive", "cot", "robust")
ROBUST_ACTION = re.compile(r"<\|ACTION\|>(.*?)<\|END\|>", re.DOTALL)
ROBUST_FAILED = "Failed to obtain a valid action from the reasoning."


def filter_letters(text: str) -> str:
    """BALROG's naive sanitising: letters, white space and colons only."""
    return re.sub(r"[^a-zA-Z\s:]", "", text)


def extract(text: str, style: str, *, fallback_whole: bool = True) -> str:
    """The action text in a reply, the way BALROG's agent of that style reads it.

    naive (naive, few_shot): the reply with everything but letters, spaces and colons removed.
    cot: the same, then what follows the last ``ACTION:``.
    robust (robust_naive, robust_cot): what is between ``<|ACTION|>`` and ``<|END|>``; without the
    tags the whole reply (robust_naive) or a failure text (robust_cot: ``fallback_whole=False``).
    """
    if style == "naive":
        return filter_letters(text)
    if style == "cot":
        return filter_letters(text).split("ACTION:")[-1].strip()
    if style == "robust":
        match = ROBUST_ACTION.search(text)
        if match:
            return match.group(1).strip()
        return text.strip() if fallback_whole else ROBUST_FAILED
    raise ValueError(f"unknown extraction style {style!r}; choose from {', '.join(STYLES)}")


def _norm(text: str) -> str:
    text = re.sub(r"\s+", " ", text.strip().lower())
    return text.strip(" \t\"'`.!,;:*")


def match_choice(text: str, choices: list[str]) -> str | None:
    """The choice ``text`` names, or None.

    Exact first; then the same words ignoring case, spacing, quotes and end
    punctuation; then, for a reply that starts with a choice and goes on
    ("go forward to reach the key"), the longest choice it starts with, if the
    rest begins a new word. Nothing else: a reply mentioning two actions in
    its middle is invalid, not guessed.
    """
    if text in choices:
        return text
    normal = _norm(text)
    by_norm = {_norm(c): c for c in choices}
    if normal in by_norm:
        return by_norm[normal]
    best = None
    for key, choice in by_norm.items():
        if key and normal.startswith(key) and (len(normal) == len(key) or not normal[len(key)].isalnum()):
            if best is None or len(key) > len(_norm(best)):
                best = choice
    return best


class ActionStats:
    """LLM calls and how many gave no valid action: the invalid-action rate."""

    def __init__(self) -> None:
        self.calls = 0
        self.invalid = 0

    def add(self, valid: bool) -> None:
        """Count one parsed reply, valid or not."""
        self.calls += 1
        self.invalid += 0 if valid else 1

    @property
    def invalid_rate(self) -> float:
        """The share of replies whose action was not valid (0 before the first)."""
        return self.invalid / self.calls if self.calls else 0.0
