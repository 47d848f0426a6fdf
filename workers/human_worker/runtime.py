"""The human worker's entry point (the worker process only): ``play(config, emitter)``.

The env steps on the human's actions, which come through the run's control pipe
(workers/sdk/control.py) from the client that holds seat "0":

- **turn**: one step per action; the env waits (for ever) for the next;
- **realtime**: the env steps ``rate`` times a second with the action held now: a key stays
  held ``hold_ms`` after its last press (the terminal's auto-repeat renews it; a client that
  sees key releases sends ``null`` at once), then the env's no-op (or, without one, the last
  action is not repeated: the env waits, as in turn mode).

While nobody holds the seat, the env does not step: the episode waits. Each step is a ``play``
event (the app draws it), a line of ``moves.jsonl`` and, at an episode's end, an ``episode``
event; the frames go through FastLane after every step.
"""
from __future__ import annotations

import json
import time
from typing import Any

from workers.human_worker import catalog, keymaps
from workers.sdk.control import Controls
from workers.sdk.dataset import env_recorder
from workers.sdk.frames import env_frames
from workers.sdk.registration import prepare_process, register_family_of
from workers.sdk.telemetry import Emitter

SEAT = "0"
MOVES_FILE = "moves.jsonl"     # in the run directory: every action taken, as taken
IDLE_S = 1.0                   # how often a waiting play beats its heart and looks for a stop


def make_env(env_id: str, family: str | None) -> Any:
    import gymnasium as gym

    register_family_of(env_id)   # Atari, ViZDoom, MultiGrid, Jumanji's gym ids
    if family == "minigrid":
        import minigrid  # noqa: F401 -- registers MiniGrid's and BabyAI's ids
    return gym.make(env_id, render_mode="rgb_array")


class Play:
    """One human seat on one env: the episode's counters, the frames and the logs."""

    def __init__(self, config: dict[str, Any], emitter: Emitter):
        import gymnasium as gym

        self.config, self.emitter = config, emitter
        self.p = config["params"]
        self.family = catalog.family_of(config["env"])
        self.recorder = env_recorder(config)
        env = make_env(config["env"], self.family)
        if not isinstance(env.action_space, gym.spaces.Discrete):
            env.close()
            raise ValueError(f"{config['env']} has {type(env.action_space).__name__} actions: a person plays "
                             f"discrete actions from the keyboard")
        self.keymap = keymaps.keymap_for(config["env"], self.family, env)
        self.env = self.recorder.wrap(env) if self.recorder is not None else env
        self.frames = env_frames(config)
        self.controls = Controls(".")
        self.moves = open(MOVES_FILE, "a", encoding="utf-8", buffering=1)
        self.step = self.episode = self.length = 0
        self.episode_return = 0.0

    def close(self) -> None:
        self.controls.close()
        self.moves.close()
        if self.frames is not None:
            self.frames.close()
        self.env.close()

    @property
    def held_by(self) -> str | None:
        return self.controls.seats.get(SEAT)

    def publish(self) -> None:
        if self.frames is not None:
            self.frames.maybe_publish(self.env.render)

    def reset(self) -> None:
        seed = self.config["seed"] if self.episode == 0 else None
        self.env.reset(seed=seed)
        self.length, self.episode_return = 0, 0.0
        self.publish()
        self.emitter.play(self.step, self.episode, SEAT, waiting=True, held_by=self.held_by, **{"return": 0.0})

    def act(self, action: int) -> bool:
        """One env step; True when the episode ended."""
        _, reward, terminated, truncated, _ = self.env.step(action)
        self.step += 1
        self.length += 1
        self.episode_return += float(reward)
        self.publish()
        ended = bool(terminated or truncated)
        name = self.keymap["actions"][action] if action < len(self.keymap["actions"]) else str(action)
        self.moves.write(json.dumps({"episode": self.episode, "step": self.step, "seat": SEAT, "action": action,
                                     "action_name": name, "reward": float(reward), "t": round(time.time(), 4)}) + "\n")
        self.emitter.play(self.step, self.episode, SEAT, action=action, action_name=name, reward=float(reward),
                          waiting=not ended, held_by=self.held_by, ended=ended, **{"return": self.episode_return})
        if ended:
            self.emitter.episode(self.step, self.episode_return, self.length)
            self.episode += 1
        return ended

    def refuse(self, action: Any) -> None:
        self.emitter.play(self.step, self.episode, SEAT, refused=True, waiting=True, held_by=self.held_by,
                          message=f"{action!r} is not an action of {self.config['env']} (0 to "
                                  f"{len(self.keymap['actions']) - 1})")

    def valid(self, action: Any) -> bool:
        return isinstance(action, int) and not isinstance(action, bool) and 0 <= action < self.env.action_space.n

    def done(self) -> bool:
        episodes, steps = self.p["episodes"], self.config.get("steps")
        return bool(episodes and self.episode >= episodes) or bool(steps and self.step >= steps)

    def seat_changed(self) -> None:
        self.emitter.play(self.step, self.episode, SEAT, waiting=True, held_by=self.held_by)


def _turns(play: Play) -> None:
    while not play.done():
        seen = play.held_by
        message = play.controls.next_action(SEAT, IDLE_S)
        if play.held_by != seen:
            play.seat_changed()
        if message is None:
            play.emitter.heartbeat(play.step, every=IDLE_S)
            continue
        action = message.get("action")
        if action is None:      # a release: nothing to do in turn mode
            continue
        if not play.valid(action):
            play.refuse(action)
            continue
        if play.act(action) and not play.done():
            play.reset()


def _realtime(play: Play) -> None:
    period = 1.0 / play.p["rate"]
    noop = play.keymap.get("noop")
    held, held_until = None, 0.0
    next_tick = time.monotonic()
    while not play.done():
        seen = play.held_by
        for message in play.controls.poll(max(0.0, next_tick - time.monotonic())):
            if message.get("type") != "act" or str(message.get("seat")) != SEAT:
                continue
            action = message.get("action")
            if action is None:
                held = None
            elif play.valid(action):
                held = action
                held_until = time.monotonic() + (message.get("hold_ms") or play.p["hold_ms"]) / 1000
            else:
                play.refuse(action)
        if play.held_by != seen:
            play.seat_changed()
        now = time.monotonic()
        if now < next_tick:
            continue
        if play.held_by is None:      # nobody at the keyboard: the episode waits
            play.emitter.heartbeat(play.step, every=IDLE_S)
            next_tick = now + period
            continue
        if held is not None and now > held_until:
            held = None
        action = held if held is not None else noop
        if action is None:            # no key, and the env has no do-nothing: it waits
            next_tick += period
            if next_tick < now - period:   # far behind (a pause): start the clock again
                next_tick = now + period
            continue
        if play.act(action) and not play.done():
            play.reset()
            held = None
        next_tick += period
        if next_tick < now - period:
            next_tick = now + period


def play(config: dict[str, Any], emitter: Emitter) -> int:
    prepare_process()
    game = Play(config, emitter)
    p = config["params"]
    emitter.run_started("human", "play", config["env"], total_steps=config.get("steps"), mode=p["mode"])
    try:
        emitter.keymap(SEAT, game.keymap["actions"], game.keymap["keys"], p["mode"], rate=float(p["rate"]),
                       hold_ms=p["hold_ms"], noop=game.keymap.get("noop"))
        game.reset()
        (_realtime if p["mode"] == catalog.REALTIME else _turns)(game)
        if game.recorder is not None:
            game.recorder.finish(emitter)
    finally:
        game.close()
    emitter.run_completed(step=game.step)
    return 0
