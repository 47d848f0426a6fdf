"""A human play's keys and state, on the app's side (docs/play.md): no Textual here.

- ``resolve_keys``: the worker's ``keymap`` event with the user's overrides laid over it
  (the ``play`` section of keymap.json: per env id, env name or family, ``{key: action name}``;
  ``null`` unbinds a key), as ``{Textual key name: action index}``;
- ``PlayState``: what the Play screen shows, from the run's ``keymap``, ``play`` and
  ``episode`` events (docs/telemetry.md);
- key releases: this app hears none, so it uses the hold timeout. Textual 8.2.8 asks the
  terminal for the kitty keyboard protocol without its "report event types" flag
  (textual/drivers/linux_driver.py:285-292 writes ``CSI > 25 u``: disambiguate, all keys as
  escape codes, associated text; ``KITTY_REPORT_EVENT_TYPES`` = 0b10 is defined at line 31 and
  never sent), its parser cannot read a release (textual/_xterm_parser.py:372-374 takes the
  modifier field with ``int()``: ``CSI 97;1:3u``, a release of ``a``, raises ValueError), and it
  has no key-release event (textual/events.py:261, ``Key``, is the only key event). So a
  real-time key stays held ``hold_ms`` after its last press and the terminal's auto-repeat
  renews it; the app sends ``null`` (a release) only when the terminal loses focus and when
  the screen is left.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# the key-release method the screen names: Textual delivers no releases (above)
RELEASE_METHOD = "hold timeout"
RELEASE_WHY = "Textual has no key-up"    # short: the whole timing line fits 120 columns

# how keys are written on the screen
KEY_DISPLAY = {"up": "↑", "down": "↓", "left": "←", "right": "→", "space": "space", "enter": "enter",
               "escape": "esc", "tab": "tab", "backspace": "bksp"}


def key_display(key: str) -> str:
    return KEY_DISPLAY.get(key, key)


def env_base(env_id: str) -> str:
    """``CartPole`` of ``CartPole-v1``, ``Breakout`` of ``ALE/Breakout-v5``, ``MiniGrid`` of
    ``MiniGrid-Empty-5x5-v0`` (how the human worker's key maps name envs, keymaps.py)."""
    return env_id.split("/")[-1].split("-")[0]


def family_of(env_id: str) -> str | None:
    try:
        from workers.human_worker.catalog import family_of as family
        return family(env_id)
    except Exception:       # an env id the catalog cannot place: no family section applies
        return None


def overrides_for(sections: dict[str, dict[str, Any]], env_id: str) -> dict[str, Any]:
    """The user's keys for ``env_id``: ``"*"``, then its family (``minigrid``, ``atari``,
    ``classic_control``...), then its name (``MiniGrid``, ``Breakout``, ``CartPole``), then the
    env id itself, each later one winning."""
    merged: dict[str, Any] = {}
    for name in ("*", family_of(env_id), env_base(env_id), env_id):
        if name and name in sections:
            merged.update(sections[name])
    return merged


def resolve_keys(keymap: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict[str, int], list[str]]:
    """({key: action index}, problems): the worker's keys, then the user's (an action by name or
    index; None unbinds the key). An override naming no action of the env is a problem, skipped."""
    actions = list(keymap.get("actions") or [])
    keys: dict[str, int] = {}
    for key, index in (keymap.get("keys") or {}).items():
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(actions):
            keys[str(key)] = index
    problems = []
    for key, action in overrides.items():
        if action is None:
            keys.pop(key, None)
        elif isinstance(action, int) and not isinstance(action, bool) and 0 <= action < len(actions):
            keys[key] = action
        elif isinstance(action, str) and action in actions:
            keys[key] = actions.index(action)
        else:
            problems.append(f"play key {key!r}: {action!r} is not an action here "
                            f"({', '.join(actions) or 'none'})")
    return keys, problems


def keys_by_action(keys: dict[str, int], n: int) -> list[list[str]]:
    """Each action's keys, the arrows and single letters first."""
    out: list[list[str]] = [[] for _ in range(n)]
    for key, index in keys.items():
        if 0 <= index < n:
            out[index].append(key)
    for bound in out:
        bound.sort(key=lambda k: (k not in KEY_DISPLAY, len(k) > 1, k))
    return out


LOG_KEEP = 2000        # lines of a play's text kept for its scrollback


@dataclass
class PlayState:
    """The play as its events tell it."""
    keymap: dict[str, Any] | None = None
    last: dict[str, Any] = field(default_factory=dict)      # the latest play event
    last_action: dict[str, Any] | None = None               # the latest play event with an action
    refusal: dict[str, Any] | None = None                   # the latest refused play event
    returns: list[float] = field(default_factory=list)      # the episodes' returns, in order
    steps_seen: int = 0
    legal: list[str] | None = None                          # the env's legal typed actions now
    objective: str | None = None                            # what the episode asks, where the env says
    # what the env said, in order: (kind, text), kind one of objective, text, action, refused, episode;
    # the first ``log_dropped`` lines are gone (LOG_KEEP)
    log: list[tuple[str, str]] = field(default_factory=list)
    log_dropped: int = 0
    _log_episode: int | None = None

    @property
    def log_end(self) -> int:
        """Lines logged since the play began (the dropped ones too)."""
        return self.log_dropped + len(self.log)

    def _say(self, kind: str, text: str) -> None:
        self.log.append((kind, text))
        if len(self.log) > LOG_KEEP:
            cut = len(self.log) - LOG_KEEP // 2
            del self.log[:cut]
            self.log_dropped += cut

    def _log_play(self, event: dict[str, Any]) -> None:
        """A play event's words into the log: every text and objective whole, a typed command,
        a refusal, an episode's start and end."""
        message = str(event.get("message") or "").strip()
        if event.get("refused"):
            self._say("refused", f"refused: {message or 'not an action'}")
            return
        episode = event.get("episode")
        if "action" not in event and episode != self._log_episode and isinstance(episode, int):
            self._log_episode = episode
            self._say("episode", f"-- episode {episode + 1} --")
        objective = str(event.get("objective") or "").strip()
        if objective and objective != self.objective and objective not in message:   # a game's own intro says it
            self._say("objective", f"objective: {objective}")
        if objective:
            self.objective = objective
        if "action" in event and self.text:
            self._say("action", f"> {event.get('action_name', event.get('action'))}")
        if message:
            step = event.get("step")
            self._say("text", message if self.text or "action" not in event else f"{step}: {message}")
        if event.get("ended"):
            value = event.get("return")
            shown = f"{value:g}" if isinstance(value, (int, float)) else "-"
            self._say("episode", f"-- episode {(episode or 0) + 1} ended at step {event.get('step')}: "
                                 f"return {shown} --")

    def absorb(self, events: list[dict[str, Any]]) -> bool:
        changed = False
        for event in events:
            kind = event.get("type")
            if kind == "keymap":
                self.keymap = event
                changed = True
            elif kind == "play":
                self.last = event
                if event.get("refused"):
                    self.refusal = event
                elif "action" in event:
                    self.last_action = event
                    self.refusal = None
                    self.steps_seen += 1
                if isinstance(event.get("legal"), list):
                    self.legal = [str(item) for item in event["legal"]]
                self._log_play(event)
                changed = True
            elif kind == "episode":
                value = event.get("return")
                if isinstance(value, (int, float)):
                    self.returns.append(float(value))
                    changed = True
        return changed

    @property
    def mode(self) -> str:
        return (self.keymap or {}).get("mode") or "turn"

    @property
    def realtime(self) -> bool:
        return self.mode == "realtime"

    @property
    def text(self) -> bool:
        return bool((self.keymap or {}).get("text"))

    @property
    def frames(self) -> bool:
        """The env draws frames (a text game does not: the screen gives its place to the text)."""
        return (self.keymap or {}).get("frames", True) is not False

    @property
    def held_by(self) -> str | None:
        return self.last.get("held_by")

    def reward_and_return(self) -> tuple[float | None, float]:
        """The last action's reward and the return with it: the episode's so far; when that action
        ended an episode and the next has had none yet, the ended episode's (the next one's is 0)."""
        act = self.last_action
        if act is not None and (act.get("ended") or "return" not in self.last):
            return act.get("reward"), float(act.get("return") or 0.0)
        return (act or {}).get("reward"), float(self.last.get("return") or 0.0)

    def timing_line(self) -> str:
        """The timing mode, and how a held key ends."""
        km = self.keymap or {}
        if not self.realtime:
            if self.text:
                return "turn: one step a typed command (enter sends it); the env waits for your next"
            return "turn: one step a key; the env waits for your next"
        rate = km.get("rate") or 15
        hold = km.get("hold_ms") or 150
        noop = km.get("noop")
        actions = km.get("actions") or []
        idle = (f"no key: {actions[noop]}" if isinstance(noop, int) and 0 <= noop < len(actions)
                else "no key: the env waits")
        return (f"realtime {rate:g} steps/s; {idle}; key release: {RELEASE_METHOD}, a key holds {hold} ms "
                f"({RELEASE_WHY})")
