"""BALROG's agent types (balrog/agents/*.py), on the shared LLM layer.

Each agent adds the observation (and the action before it) to BALROG's history
prompt builder, appends its instruction to the last message, asks the model,
and takes the action text out of the reply the way the upstream agent does
(``workers.sdk.llm.parse.extract``). The env then checks it against the legal
actions and plays the default action for an invalid one, as BALROG's
``check_action_validity`` does (runtime.py).

Constrained decoding where the backend has it: naive and few_shot replies are
bound to the bare actions, robust_naive's to ``<|ACTION|>action<|END|>``;
cot and robust_cot think first, so their replies are free and parsed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable

from workers.sdk.llm.client import LLMClient, Reply
from workers.sdk.llm.history import HistoryPromptBuilder
from workers.sdk.llm.parse import extract

# The instructions, verbatim from upstream
NAIVE_INSTRUCTION = """
You always have to output one of the above actions at a time and no other text. You always have to output an action until the episode terminates.
""".strip()
COT_INSTRUCTION = """
First think about what's the best course of action step by step.
Finally, provide a single output action at the end of the message in the form of: ACTION: <action>
""".strip()
ROBUST_NAIVE_INSTRUCTION = """
You must choose exactly one of the listed actions and output it strictly in the following format:

<|ACTION|>YOUR_CHOSEN_ACTION<|END|>

Replace YOUR_CHOSEN_ACTION with the chosen action. Output no other text, explanation, or reasoning.
""".strip()
ROBUST_COT_INSTRUCTION = """
First, think about the best course of action.
Then, you must choose exactly one of the listed actions and output it strictly in the following format:

<|ACTION|>YOUR_CHOSEN_ACTION<|END|>

Replace YOUR_CHOSEN_ACTION with the chosen action.
""".strip()


@dataclass
class Decision:
    """What an agent did at a step: the prompt it sent, the model's reply, the action text it read."""
    prompt: list[dict[str, str]]
    reply: Reply
    candidate: str


class Agent:
    instruction = NAIVE_INSTRUCTION
    style = "naive"          # parse.extract's style
    constrained = "bare"     # how choices bind the reply: "bare", "tagged" or None (free)
    fallback_whole = True

    def __init__(self, client: LLMClient | None, builder: HistoryPromptBuilder):
        self.client = client
        self.builder = builder

    def reset(self) -> None:
        self.builder.reset()

    def messages(self, observation: dict[str, str], prev_action: str | None) -> list[dict[str, str]]:
        if prev_action:
            self.builder.update_action(prev_action)
        self.builder.update_observation(observation)
        messages = self.builder.get_prompt()
        if messages and messages[-1]["role"] == "user":
            messages[-1] = {"role": "user", "content": messages[-1]["content"] + "\n\n" + self.instruction}
        return messages

    def choices(self, legal: list[str]) -> list[str] | None:
        if self.constrained == "bare":
            return list(legal)
        if self.constrained == "tagged":
            return [f"<|ACTION|>{action}<|END|>" for action in legal]
        return None

    def act(self, observation: dict[str, str], prev_action: str | None, legal: list[str],
            on_text: Callable[[str], None] | None = None) -> Decision:
        messages = self.messages(observation, prev_action)
        reply = self.client.complete(messages, choices=self.choices(legal), on_text=on_text)
        return Decision(messages, reply, self.read(reply.text))

    def read(self, text: str) -> str:
        return extract(text, self.style, fallback_whole=self.fallback_whole)


class NaiveAgent(Agent):
    pass


class ChainOfThoughtAgent(Agent):
    instruction = COT_INSTRUCTION
    style = "cot"
    constrained = None

    def read(self, text: str) -> str:
        self.builder.update_reasoning(text)  # upstream: the plan shows in the next prompts
        return super().read(text)


class RobustNaiveAgent(Agent):
    instruction = ROBUST_NAIVE_INSTRUCTION
    style = "robust"
    constrained = "tagged"


class RobustCoTAgent(Agent):
    instruction = ROBUST_COT_INSTRUCTION
    style = "robust"
    constrained = None
    fallback_whole = False


class FewShotAgent(Agent):
    """Naive, after demonstration episodes (upstream FewShotAgent: the ICL prompt, then the history)."""

    def __init__(self, client: LLMClient | None, builder: HistoryPromptBuilder,
                 demos: list[list[tuple[str, str]]], max_icl_history: int):
        super().__init__(client, builder)
        self.demos = demos
        self.max_icl_history = max_icl_history

    def icl_prompt(self) -> list[dict[str, str]]:
        system = (self.builder.system_prompt or "").replace(
            "PLAY", "First, observe the demonstrations provided and learn from them!")
        messages = [{"role": "user", "content": system}]
        used = 0
        for number, episode in enumerate(self.demos, start=1):
            steps = episode[:max(0, self.max_icl_history - used)]
            messages.append({"role": "user", "content": f"****** START OF DEMONSTRATION EPISODE {number} ******"})
            for observation, action in steps:
                messages.append({"role": "user", "content": "Obesrvation:\n" + observation})  # sic, upstream
                messages.append({"role": "assistant", "content": action})
            messages.append({"role": "user", "content": f"****** END OF DEMONSTRATION EPISODE {number} ******"})
            used += len(steps)
            if used >= self.max_icl_history:
                break
        messages.append({"role": "user", "content": "****** Now it's your turn to play the game! ******"})
        return messages

    def messages(self, observation, prev_action):
        if prev_action:
            self.builder.update_action(prev_action)
        self.builder.update_observation(observation)
        messages = self.icl_prompt() + self.builder.get_prompt(icl_episodes=True)
        if messages[-1]["role"] == "user":
            messages[-1] = {"role": "user", "content": messages[-1]["content"] + "\n\n" + self.instruction}
        return messages


class RandomAgent(Agent):
    """The baseline: a uniformly random legal action, no model (upstream's dummy agent always waits)."""

    def __init__(self, seed: int):
        super().__init__(None, HistoryPromptBuilder())
        self.rng = random.Random(seed)

    def act(self, observation, prev_action, legal, on_text=None) -> Decision:
        action = self.rng.choice(legal)
        return Decision([], Reply(text=action, action=action, valid=True), action)


AGENTS: dict[str, dict[str, Any]] = {
    "naive": {"cls": NaiveAgent, "llm": True,
              "description": "the action alone, no reasoning (BALROG's naive agent); constrained to the actions"},
    "cot": {"cls": ChainOfThoughtAgent, "llm": True,
            "description": "chain of thought, then 'ACTION: <action>'; the last plan stays in the prompt"},
    "robust_naive": {"cls": RobustNaiveAgent, "llm": True,
                     "description": "the action between <|ACTION|> and <|END|>; constrained to that form"},
    "robust_cot": {"cls": RobustCoTAgent, "llm": True,
                   "description": "think, then <|ACTION|>action<|END|>; no tags: an invalid action"},
    "few_shot": {"cls": FewShotAgent, "llm": True,
                 "description": "naive after demonstration episodes (BabyAI: its bot's; or a run's transcript)"},
    "random": {"cls": RandomAgent, "llm": False, "description": "a random legal action: the baseline, no model"},
}
