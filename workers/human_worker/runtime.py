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
import re
import time
from typing import Any

from workers.human_worker import catalog, keymaps
from workers.sdk import minigrid
from workers.sdk.control import Controls
from workers.sdk.dataset import env_recorder
from workers.sdk.envs import MINIGRID_ENVS
from workers.sdk.frames import env_frames
from workers.sdk.packages import upstream
from workers.sdk.registration import prepare_process, register_family_of
from workers.sdk.telemetry import Emitter

SEAT = "0"
MOVES_FILE = "moves.jsonl"     # in the run directory: every action taken, as taken
IDLE_S = 1.0                   # how often a waiting play beats its heart and looks for a stop
MAX_COMMAND = 200              # characters of a typed command (a text env's action)


def make_env(env_id: str, family: str | None, rate: float = 15.0) -> Any:
    """The env a person plays, made for the family: frames as RGB (``render()``), and where the
    env has words for the player, ``info["message"]`` (NLE's message line, the game's text of
    TextWorld, Crafter's achievements) and ``info["legal"]`` (TextWorld's admissible commands)."""
    import gymnasium as gym

    if family == "textworld":
        return TextWorldEnv(env_id)
    if family == "crafter":
        return crafter_env()
    if family in ("minihack", "nethack"):
        import nle  # noqa: F401 -- registers NetHack*
        if family == "minihack":
            import minihack  # noqa: F401 -- registers MiniHack-*
        # "pixel": NLE's own tiles of the tty screen, as an RGB array
        return nle_messages(gym.make(env_id, render_mode="pixel"))
    register_family_of(env_id)   # Atari, ViZDoom, MultiGrid, Jumanji's gym ids
    if env_id in MINIGRID_ENVS:  # the flat view a learner on this id sees: a recorded play trains it
        return minigrid.make(env_id, render_mode="rgb_array")
    if family == "minigrid":
        import minigrid as minigrid_package  # noqa: F401 -- registers MiniGrid's and BabyAI's ids
    if family == "vizdoom":
        # Doom runs 35 tics a second: a step lasts as many tics as the play's rate leaves (real time)
        return gym.make(env_id, render_mode="rgb_array", frame_skip=max(1, round(DOOM_TICS / rate)))
    if family == "multigrid":
        return solo_multigrid(env_id)
    if env_id in catalog.CELL_ENVS:
        return CellChoice(gym.make(env_id, render_mode="rgb_array"))
    if family == "jumanji":
        try:
            return gym.make(env_id, render_mode="rgb_array")
        except TypeError:    # an env without a matplotlib viewer (SlidingTilePuzzle...): played without frames
            return gym.make(env_id)
    return gym.make(env_id, render_mode="rgb_array", **catalog.DISCRETE_VARIANTS.get(env_id, {}))


def _cell_choice_class():
    import gymnasium as gym
    import numpy as np

    class CellChoice(gym.Wrapper):
        """A board whose one action is a cell (Jumanji's Minesweeper: MultiDiscrete([rows, cols]))
        as one Discrete action per cell, named "row col", which the person types. ``info["legal"]``:
        the cells still hidden (the env's action mask: the first rows x cols values of the flattened
        observation, gymnasium's Dict keys being sorted and ``action_mask`` the first)."""

        def __init__(self, env):
            super().__init__(env)
            self.rows, self.cols = (int(n) for n in env.action_space.nvec)
            self.action_space = gym.spaces.Discrete(self.rows * self.cols)
            self.cell_names = [f"{r} {c}" for r in range(self.rows) for c in range(self.cols)]

        def said(self, obs) -> dict:
            mask = np.asarray(obs).reshape(-1)[:self.rows * self.cols]
            return {"legal": [name for name, open_ in zip(self.cell_names, mask) if open_ > 0]}

        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, **self.said(obs)}

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(np.array(divmod(int(action), self.cols)))
            return obs, reward, terminated, truncated, {**info, **self.said(obs)}

    return CellChoice


def CellChoice(env):  # noqa: N802 -- made like the class it returns (gymnasium is imported lazily)
    return _cell_choice_class()(env)


DOOM_TICS = 35
CRAFTER_FRAME = (256, 256)     # Crafter draws its 9x9 view at any size; its observation stays 64x64
CRAFTER_OBJECTIVE = "survive and unlock Crafter's {count} achievements: {names}"


def nle_message(obs: Any) -> str:
    """NLE's ``message`` observation (the top line NetHack writes), as text."""
    return bytes(obs["message"]).rstrip(b"\0").decode("latin-1").strip() if "message" in obs else ""


def nle_task(env: Any) -> str | None:
    """An NLE task's goal as its class's docstring words it ("This task requires the agent to get on
    top of a staircase down (>)."); None for a task whose docstring gives a reward formula only."""
    task = type(env.unwrapped)
    if not task.__module__.startswith("nle."):
        return None
    found = re.search(r"This task requires the agent to ([^.]+)\.", " ".join((task.__doc__ or "").split()))
    return found.group(1) if found else None


def nle_messages(env: Any) -> Any:
    import gymnasium as gym

    class NLEMessages(gym.Wrapper):
        """info["message"]: the message line after each reset and step."""
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, {**info, "message": nle_message(obs)}

        def step(self, action):
            obs, reward, terminated, truncated, info = self.env.step(action)
            return obs, reward, terminated, truncated, {**info, "message": nle_message(obs)}

    return NLEMessages(env)


def crafter_env(seed: int | None = None) -> Any:
    """Crafter (old gym API, 4-tuple steps) as a gymnasium Env: its 17 actions by
    ``crafter.constants.actions``; a step that unlocks achievements says which in its message."""
    import crafter
    import gymnasium as gym
    import numpy as np

    class Crafter(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
        render_mode = "rgb_array"
        action_names = list(crafter.constants.actions)

        def __init__(self):
            self.env = crafter.Env(seed=seed)
            self.action_space = gym.spaces.Discrete(len(self.action_names))
            self.observation_space = gym.spaces.Box(0, 255, tuple(self.env.observation_space.shape), np.uint8)
            self.achieved: set[str] = set()

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            if seed is not None:   # crafter seeds its worlds when made
                self.env = crafter.Env(seed=seed)
            self.achieved = set()
            return self.env.reset(), {"objective": CRAFTER_OBJECTIVE.format(
                count=len(crafter.constants.achievements), names=", ".join(crafter.constants.achievements))}

        def step(self, action):
            obs, reward, done, info = self.env.step(int(action))
            new = sorted(name for name, count in info["achievements"].items() if count and name not in self.achieved)
            self.achieved.update(new)
            dead = info.get("discount", 1.0) == 0
            message = "you died" if dead else f"achievement: {', '.join(new)}" if new else ""
            return obs, float(reward), bool(done and dead), bool(done and not dead), (
                {"message": message} if message else {})

        def render(self):
            return self.env.render(size=CRAFTER_FRAME)

    return Crafter()


def solo_multigrid(env_id: str) -> Any:
    """A MOSAIC MultiGrid solo drill (one agent: ``MosaicMultiGrid-S-G-1v0-v1``...) as a
    single-agent gymnasium Env: its dict API keyed by agent 0 unwrapped; actions by
    mosaic_multigrid's ``Action``."""
    import gymnasium as gym
    from mosaic_multigrid.core.actions import Action

    from workers.sdk import multigrid

    class SoloMultiGrid(gym.Env):
        metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
        render_mode = "rgb_array"
        actions = list(Action)

        def __init__(self):
            self.env = multigrid.make(env_id)
            self.action_space = self.env.action_space[0]
            self.observation_space = self.env.observation_space[0]

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            obs, _ = self.env.reset(seed=seed)
            return obs[0], {}

        def step(self, action):
            obs, reward, terminated, truncated, _ = self.env.step({0: int(action)})
            return obs[0], float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

        def render(self):
            return self.env.render()

        def close(self):
            self.env.close()

    return SoloMultiGrid()


class TextWorldEnv:
    """A TextWorld game (BALROG's textworld-coin/-treasure/-cooking, made by
    workers/sdk/llm/textworld.py) stepped by typed commands: ``info["message"]`` is the game's
    text, ``info["legal"]`` its admissible commands. A command outside them goes to the game all
    the same: the game answers it in its own words ("That's not a verb I recognise.")."""
    MAX_STEPS = 200

    def __init__(self, env_id: str):
        from workers.sdk.llm.textworld import TextWorldText

        self.game = TextWorldText(env_id, max_episode_steps=self.MAX_STEPS)
        self.unwrapped = self

    def _info(self, observation: dict[str, str]) -> dict[str, Any]:
        info = {"message": observation["long_term_context"], "legal": list(self.game.actions)}
        objective = (self.game.infos.get("objective") or "").strip()
        return {**info, "objective": objective} if objective else info

    def reset(self, seed: int | None = None, **_: Any):
        observation = self.game.reset(seed=seed)
        return observation, self._info(observation)

    def step(self, command: str):
        observation, reward, terminated, truncated = self.game.step(command)
        return observation, reward, terminated, truncated, self._info(observation)

    def render(self) -> None:
        return None

    def close(self) -> None:
        self.game.close()


class Play:
    """One human seat on one env: the episode's counters, the frames and the logs."""

    def __init__(self, config: dict[str, Any], emitter: Emitter):
        import gymnasium as gym

        self.config, self.emitter = config, emitter
        self.p = config["params"]
        self.family = catalog.family_of(config["env"])
        self.text = self.family in catalog.TEXT_FAMILIES     # actions are typed commands
        self.recorder = None if self.text else env_recorder(config)
        env = make_env(config["env"], self.family, float(self.p["rate"]))
        if not self.text and not isinstance(env.action_space, gym.spaces.Discrete):
            env.close()
            raise ValueError(f"{config['env']} has {type(env.action_space).__name__} actions: a person plays "
                             f"discrete actions from the keyboard")
        self.keymap = keymaps.keymap_for(config["env"], self.family, env)
        self.env = self.recorder.wrap(env) if self.recorder is not None else env
        self.frames = None if self.text else env_frames(config)
        # an env made without a renderer (a text game, a Jumanji env without a viewer) draws nothing
        self.draws = not self.text and getattr(self.env, "render_mode", None) is not None
        self.legal: list[str] | None = None     # a text env's admissible commands now
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
        _, info = self.env.reset(seed=seed)
        self.length, self.episode_return = 0, 0.0
        self.publish()
        self.emitter.play(self.step, self.episode, SEAT, waiting=True, held_by=self.held_by,
                          **self.words(info), **self.objective(info), **{"return": 0.0})

    def objective(self, info: dict[str, Any]) -> dict[str, str]:
        """What the episode asks of the player, where the env says it: its ``objective``
        (TextWorld's, Crafter's), a MiniGrid or BabyAI mission, an NLE task's own description."""
        text = info.get("objective") or getattr(self.env.unwrapped, "mission", None) or nle_task(self.env)
        return {"objective": " ".join(str(text).split())} if text else {}

    def words(self, info: dict[str, Any]) -> dict[str, Any]:
        """What the env says to the player this step: its message line, a text env's legal commands."""
        fields = {}
        if "message" in info:
            fields["message"] = str(info["message"])
        if "legal" in info:
            self.legal = fields["legal"] = list(info["legal"])
        return fields

    def act(self, action: int) -> bool:
        """One env step; True when the episode ended."""
        _, reward, terminated, truncated, info = self.env.step(action)
        self.step += 1
        self.length += 1
        self.episode_return += float(reward)
        self.publish()
        ended = bool(terminated or truncated)
        if self.text:
            name = action
        else:
            name = self.keymap["actions"][action] if action < len(self.keymap["actions"]) else str(action)
        self.moves.write(json.dumps({"episode": self.episode, "step": self.step, "seat": SEAT, "action": action,
                                     "action_name": name, "reward": float(reward), "t": round(time.time(), 4)}) + "\n")
        self.emitter.play(self.step, self.episode, SEAT, action=action, action_name=name, reward=float(reward),
                          waiting=not ended, held_by=self.held_by, ended=ended, **self.words(info),
                          **{"return": self.episode_return})
        if ended:
            self.emitter.episode(self.step, self.episode_return, self.length)
            self.episode += 1
            if self.recorder is not None:   # on disk as it ends: a cancel or a detach loses no episode
                self.recorder.save_new_episodes(self.emitter)
        return ended

    def refuse(self, action: Any) -> None:
        if self.text:
            self.emitter.play(self.step, self.episode, SEAT, refused=True, waiting=True, held_by=self.held_by,
                              message=f"{action!r} is not a command: type one (at most {MAX_COMMAND} characters)",
                              **({"legal": self.legal} if self.legal is not None else {}))
            return
        if self.keymap.get("text"):   # typed cells: say which are open
            self.emitter.play(self.step, self.episode, SEAT, refused=True, waiting=True, held_by=self.held_by,
                              message=f"{action!r} is not an open cell: type one as \"row col\"",
                              **({"legal": self.legal} if self.legal is not None else {}))
            return
        self.emitter.play(self.step, self.episode, SEAT, refused=True, waiting=True, held_by=self.held_by,
                          message=f"{action!r} is not an action of {self.config['env']} (0 to "
                                  f"{len(self.keymap['actions']) - 1})")

    def typed(self, action: Any) -> Any:
        """A typed action of an env whose actions are named for typing (a board's cell, "3 4" or
        "3,4"): its index; anything else as it came."""
        if isinstance(action, str) and not self.text and self.keymap.get("text"):
            name = " ".join(action.replace(",", " ").split())
            if name in self.keymap["actions"]:
                return self.keymap["actions"].index(name)
        return action

    def valid(self, action: Any) -> bool:
        if self.text:   # any command, admissible or not: the game answers it (TextWorldEnv)
            return isinstance(action, str) and 0 < len(action.strip()) <= MAX_COMMAND
        if not (isinstance(action, int) and not isinstance(action, bool) and 0 <= action < self.env.action_space.n):
            return False
        # a board's cell must still be open (the env's legal ones, where it names them)
        return self.legal is None or self.keymap["actions"][action] in self.legal

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
        action = play.typed(message.get("action"))
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
    emitter.run_started("human", "play", config["env"], total_steps=config.get("steps"), mode=p["mode"],
                        upstream=upstream("gymnasium"))
    try:
        emitter.keymap(SEAT, game.keymap["actions"], game.keymap["keys"], p["mode"], rate=float(p["rate"]),
                       hold_ms=p["hold_ms"], noop=game.keymap.get("noop"), frames=game.draws,
                       **({"text": True} if game.keymap.get("text") else {}))
        game.reset()
        (_realtime if p["mode"] == catalog.REALTIME else _turns)(game)
        if game.recorder is not None:
            game.recorder.finish(emitter)
    finally:
        game.close()
    emitter.run_completed(step=game.step)
    return 0
