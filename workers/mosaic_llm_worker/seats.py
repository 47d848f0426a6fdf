"""The seats of a match: each chooses one agent's moves.

- ``LLMSeat``: a prompt (instructions at the run's coordination level, then the
  observation as text) to an LLM client from workers/sdk/llm, the reply
  constrained to (or parsed into) the legal actions; one ``llm_step`` event per
  call, its reply streamed;
- ``RandomSeat``: a uniformly random legal action (seeded);
- ``StockfishSeat``: the Stockfish engine over UCI (python-chess's engine
  module) at a Skill Level and a time per move, chess only;
- ``CheckpointSeat``: a trained policy from another run's checkpoint, greedy:
  an RLlib module loaded and called with the ray worker's own eval code (its
  module, its observation layout), or (MultiGrid) a XuanCe model loaded by the
  xuance worker's ``evaluate.Policy``;
- ``HumanSeat``: a person, through the client that holds the seat (``human.py``:
  the run's control pipe, typed moves in the env's notation, refusals).

``make_seats`` seats a run's specs in the env's seat order (``catalog.seat_ids``),
each seat with its own random generator seeded from the run's seed and its index.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from workers.mosaic_llm_worker import catalog, human
from workers.sdk.guard import RunFailed
from workers.sdk.llm.client import make_client
from workers.sdk.llm.stream import StepStream
from workers.sdk.llm.usage import Usage


@dataclass
class Move:
    """A seat's choice: the env action, its name, and (LLM seats) the call behind it."""
    action: int
    name: str
    valid: bool = True
    reply: Any = None            # workers.sdk.llm.client.Reply
    prompt: Any = None
    observation: str = ""
    policy_observation: list[float] | None = None   # checkpoint seats: what the policy was given
    typed: Any = None            # human seats: what the person sent (a chess move in SAN, a number ...)
    shown: str | None = None     # human seats: the move as the person reads it (chess: SAN)


class LLMFailed(RunFailed):
    """An LLM call failed after its retries and the run says on_error = fail."""


class Seat:
    kind = ""

    def __init__(self, seat_id: str, spec: dict[str, Any], rng: random.Random):
        self.seat_id = seat_id
        self.spec = spec
        self.rng = rng
        self.role: str | None = spec.get("role")

    @property
    def label(self) -> str:
        return self.kind

    def close(self) -> None:
        pass


class RandomSeat(Seat):
    kind = "random"

    def choose(self, legal: dict[str, int]) -> Move:
        name = self.rng.choice(list(legal))
        return Move(legal[name], name)


class LLMSeat(Seat):
    kind = "llm"

    def __init__(self, seat_id, spec, rng, on_error: str):
        super().__init__(seat_id, spec, rng)
        self.client = make_client(spec["llm"])
        self.on_error = on_error
        self.usage = Usage()

    @property
    def label(self) -> str:
        return f"llm:{self.spec['llm']['backend']}:{self.client.model}"

    def choose(self, legal: dict[str, int], instructions: str, observation: str, stream: StepStream,
               step: int, episode: int, fallback: str | None = None) -> Move:
        names = list(legal)
        prompt = [{"role": "system", "content": instructions},
                  {"role": "user", "content": f"{observation}\n\nChoose one of: {', '.join(names)}\n"
                                              f"Your action:"}]
        reply = self.client.complete(prompt, choices=names, on_text=stream.on_text(step, self.seat_id))
        valid = reply.error is None and reply.valid and reply.action in legal
        self.usage.add(valid, reply)
        # an invalid or failed reply still moves: the env's do-nothing, else a random legal move
        name = reply.action if valid else (fallback if fallback in legal else self.rng.choice(names))
        stream.final(step=step, agent=self.seat_id, episode=episode, reply=reply, prompt=prompt,
                     observation=observation, action=reply.action if valid else None, valid=valid,
                     played=name, seat=self.label)
        if reply.error is not None and self.on_error == "fail":
            raise LLMFailed(f"seat {self.seat_id}: the LLM call failed: {reply.error}")
        return Move(legal[name], name, valid, reply, prompt, observation)

    def close(self) -> None:
        self.client.close()


class StockfishSeat(Seat):
    kind = "stockfish"

    def __init__(self, seat_id, spec, rng, path: str):
        super().__init__(seat_id, spec, rng)
        import chess.engine

        self.limit = chess.engine.Limit(time=spec["movetime_ms"] / 1000.0)
        self.engine = chess.engine.SimpleEngine.popen_uci(path)
        self.engine.configure({"Skill Level": spec["level"], "Threads": 1})

    @property
    def label(self) -> str:
        return f"stockfish:{self.spec['level']}"

    def choose(self, legal: dict[str, int], board) -> Move:
        move = self.engine.play(board, self.limit).move.uci()
        return Move(legal[move], move)

    def close(self) -> None:
        try:
            self.engine.quit()
        except Exception:  # noqa: BLE001 -- an engine already gone
            pass


class CheckpointSeat(Seat):
    """A policy of another run's checkpoint trained on the same env, played greedily.

    RLlib (the ray worker's checkpoints): tic-tac-toe and connect four take the board and its
    action mask, as the ray worker's TurnBasedEnv gives them. XuanCe (the xuance worker's,
    MultiGrid only). MultiGrid, either way: the flat 31-float view of workers/sdk/multigrid.py,
    the observation both workers train on; the seat's agent is the checkpoint's agent at the
    same index (green_0, green_1, blue_0 ... in the env's agent order)."""
    kind = "checkpoint"

    def __init__(self, seat_id, spec, rng, agent_index: int):
        super().__init__(seat_id, spec, rng)
        from pathlib import Path

        from workers.sdk.rundir import checkpoint_dir, read_checkpoint_meta

        path = Path(spec["checkpoint"])
        meta = read_checkpoint_meta(str(path)) or {}
        self.path, self.folder = path, Path(checkpoint_dir(str(path)))
        if meta.get("worker") == "xuance":
            from workers.xuance_worker.evaluate import Policy

            policy = Policy(str(path))
            self.module_id = policy.agent_keys[agent_index]
            self.act_flat = lambda flat, action_space: policy.act(self.module_id, flat)
            return
        from workers.ray_worker import evaluate

        modules = evaluate.load_modules(path)
        # board games name seats as the checkpoint names agents (player_1); MultiGrid seats are indices
        agents = meta.get("agents") or []
        agent = seat_id if seat_id in agents else agents[agent_index]
        module_id = spec.get("module") or ("main" if meta.get("policy") == "self_play"
                                           else meta["agent_to_module"].get(agent))
        if module_id not in modules:
            raise ValueError(f"seat {seat_id}: the checkpoint has no module {module_id!r} "
                             f"(it has {', '.join(modules)})")
        self.module = modules[module_id]
        self.module_id = module_id
        self.act = evaluate.act
        self.act_flat = lambda flat, action_space: evaluate.act(self.module, flat, action_space)

    @property
    def label(self) -> str:
        return f"checkpoint:{self.folder.parent.parent.name}/{self.folder.name}:{self.module_id}"

    def choose(self, legal: dict[str, int], observation: dict[str, Any], action_space) -> Move:
        """A board game's move: the observation with its action mask (illegal moves masked)."""
        import numpy as np

        obs = {"observation": np.asarray(observation["observation"], dtype=np.float32).reshape(-1),
               "action_mask": np.asarray(observation["action_mask"], dtype=np.float32)}
        action = int(self.act(self.module, obs, action_space))
        by_action = {a: n for n, a in legal.items()}
        if action not in by_action:  # the masking module should never do this; say so if it does
            name = self.rng.choice(list(legal))
            return Move(legal[name], name, valid=False)
        return Move(action, by_action[action])

    def choose_multigrid(self, legal: dict[str, int], observation: dict[str, Any], action_space) -> Move:
        """A MultiGrid action from the agent's raw observation (direction, 3x3 view), flattened as in training."""
        from workers.sdk.multigrid import MultiGridView

        flat = MultiGridView.flat(observation)
        action = int(self.act_flat(flat, action_space))
        by_action = {a: n for n, a in legal.items()}
        return Move(action, by_action[action], policy_observation=flat.tolist())


class HumanSeat(Seat):
    """A person: the client that holds the seat sends its moves (human.py); nobody holding it, it waits."""
    kind = "human"

    def __init__(self, seat_id, spec, rng, waiter: human.Waiter):
        super().__init__(seat_id, spec, rng)
        self.waiter = waiter


def describe_seat(spec: dict[str, Any]) -> str:
    """A seat as the run's record says it, before it is seated: llm:openai:gpt-4o-mini, stockfish:5 ..."""
    kind = spec["kind"]
    if kind == "llm":
        llm = spec["llm"]
        return f"llm:{llm['backend']}:{llm['model'] or 'gemma-3-270m (default)'}"
    if kind == "stockfish":
        return f"stockfish:{spec['level']}"
    if kind == "checkpoint":
        return f"checkpoint:{spec['checkpoint']}"
    return kind


def make_seats(env_id: str, seats: list[dict[str, Any]], params: dict[str, Any], seed: int,
               humans: human.Humans | None = None, emitter=None) -> list[Seat]:
    out: list[Seat] = []
    try:
        for index, (seat_id, spec) in enumerate(zip(catalog.seat_ids(env_id), seats)):
            rng = random.Random(seed * 1000 + index)
            if spec["kind"] == "llm":
                out.append(LLMSeat(seat_id, spec, rng, params["on_error"]))
            elif spec["kind"] == "random":
                out.append(RandomSeat(seat_id, spec, rng))
            elif spec["kind"] == "stockfish":
                out.append(StockfishSeat(seat_id, spec, rng, catalog.stockfish_path()))
            elif spec["kind"] == "human":
                out.append(HumanSeat(seat_id, spec, rng, human.Waiter(humans, seat_id, emitter)))
            else:
                out.append(CheckpointSeat(seat_id, spec, rng, index))
    except BaseException:
        for seat in out:
            seat.close()
        raise
    return out

