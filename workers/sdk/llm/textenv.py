"""What an LLM agent plays: an env that speaks text. One class a family (babyai, crafter, ...).

BALROG's env wrappers give, per step, ``obs["text"] = {"long_term_context",
"short_term_context"}``, a language action space, a default action played in
place of an invalid one, an instruction prompt, and stats (progression). A
``TextEnv`` is that, as one small interface:

    env = make_text_env("BabyAI-GoToRedBall-v0", seed=0)
    text = env.reset(seed=0)                  # {"long_term_context": ..., "short_term_context": ...}
    env.actions, env.default_action, env.instruction_prompt()
    text, reward, terminated, truncated = env.step("go forward")
    env.progression(), env.success(), env.render()   # render: an RGB array or None
"""
from __future__ import annotations

import importlib
from typing import Any

from workers.sdk.llm import families


class TextEnv:
    """The interface every text env has (the module's docstring shows it); one subclass a family."""
    family = ""
    default_action = ""
    max_steps = 0

    @property
    def actions(self) -> list[str]:
        """The legal actions now, as text (TextWorld's change each step)."""
        raise NotImplementedError

    def instruction_prompt(self) -> str:
        """The env's instructions to the agent: its goal and its actions (BALROG's wording)."""
        raise NotImplementedError

    def reset(self, seed: int | None = None) -> dict[str, str]:
        """Start an episode; its first observation as {"long_term_context", "short_term_context"}."""
        raise NotImplementedError

    def step(self, action: str) -> tuple[dict[str, str], float, bool, bool]:
        """Play ``action``, one of ``actions`` (the runtime plays ``default_action`` in place of an
        invalid reply): (observation text, reward, terminated, truncated)."""
        raise NotImplementedError

    def progression(self) -> float:
        """BALROG's progression, 0..1."""
        return 0.0

    def success(self) -> bool:
        """Whether the episode was won: its progression reached 1."""
        return self.progression() >= 1.0

    def render(self) -> Any:
        """The env as an RGB array for the Frames tab, or None when it has no picture."""
        return None

    def close(self) -> None:
        """Release the env."""
        pass


def make_text_env(env_id: str, seed: int | None = None, **kwargs: Any) -> TextEnv:
    """The TextEnv of an env id, by its family (families.family_of)."""
    family = families.family_of(env_id)
    if family is None:
        raise ValueError(f"no text family plays {env_id!r}")
    module = importlib.import_module(families.FAMILIES[family]["module"])
    return module.make(env_id, seed=seed, **kwargs)


def as_text(observation: dict[str, str]) -> str:
    """An observation as one text (the transcript's): long-term, then short-term context."""
    parts = [observation.get("long_term_context", ""), observation.get("short_term_context", "")]
    return "\n\n".join(part.strip() for part in parts if part and part.strip())
