"""The Play screen: a person at the keyboard plays a human run (docs/play.md).

The run's frames (the Frames tab's view), its step, episode, reward and return, who holds its
seat, the key map beside them (the worker's ``keymap`` event with the user's ``play`` keys of
keymap.json over it) and a line naming the timing mode and how a held key ends. On mount the
screen takes the run's seat (``seat``); when another client holds it the screen says who and
watches. A mapped key sends its action (``act``); a real-time key is sent with ``hold_ms``
(Textual reports no key releases: mosaic_tui/playkeys.py). A key that plays nothing is
ignored and the key map lights up. Leaving the screen leaves the seat (the episode waits).

The run's events come from ``read_events`` (keymap, play, episode), followed from a cursor of
the screen's own: in order, nothing missed, the same through ``--ssh``.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, RichLog, Static

from daemon import protocol as P
from mosaic_tui import fmt
from mosaic_tui.messages import ConnectionChanged, RunsChanged
from mosaic_tui.playkeys import LOG_KEEP, PlayState, key_display, keys_by_action, overrides_for, resolve_keys
from mosaic_tui.widgets import leaving
from mosaic_tui.widgets.banner import ConnectionBanner, TitleBar
from mosaic_tui.widgets.frames_view import FramesView
from mosaic_tui.widgets.key_bar import KeyBar
from mosaic_tui.widgets.text_line import TextLine

SEAT = "0"                     # a one-player play's seat (workers/human_worker/runtime.py)
EVENT_TYPES = ["keymap", "play", "episode"]
POLL_ACTIVE = 0.04             # seconds between reads of the run's events while playing
POLL_IDLE = 0.25               # ... while nothing happened for IDLE_AFTER seconds
IDLE_AFTER = 3.0
SEAT_RETRY = 0.3               # the run is starting (its pipe is not there yet): ask again
OWN_SEAT_WAIT = 30.0           # after a reconnect, how long our old connection may still hold the seat
FLASH_S = 1.5                  # an unknown key lights the key map up so long
PANEL_WAIT_S = 0.25            # after a key the panel waits for the key's frame at most so long


def is_play(run: dict[str, Any] | None) -> bool:
    return bool(run) and run.get("worker") == "human"


class PlayFrames(FramesView, can_focus=False):
    """The run's frames; never focused: every key is the player's (space is FIRE, not pause)."""

    relay_fps = 30.0        # the daemon's most: a key's frame is not held back to keep a lower rate

    def frame_shown(self) -> None:
        screen = self.screen
        if isinstance(screen, PlayScreen):
            screen.frame_came()


class PlayLog(RichLog, can_focus=False):
    """What the env said, whole and in order (a text game's every text, the objective, the
    episodes' ends), with its scrollback; never focused: the keys stay the player's."""

LOG_STYLES = {"objective": "bold", "action": "bold cyan", "refused": "red", "episode": "dim"}
COMMANDS_SHOWN = 24            # a text env's legal commands listed beside the text (the rest counted)


class PlayScreen(Screen):
    DEFAULT_CSS = """
    PlayScreen #play-body {
        height: 1fr;
    }
    PlayScreen #play-side {
        width: 38;
        height: 1fr;
        padding: 0 1;
        background: $panel;
    }
    PlayScreen #play-timing, PlayScreen #play-foot {
        height: 1;
        padding: 0 1;
        background: $panel;
    }
    PlayScreen #play-text {
        display: none;
    }
    PlayScreen.-text #play-text {
        display: block;
    }
    PlayScreen #play-log {
        height: auto;
        max-height: 7;
        display: none;
        background: $surface;
        scrollbar-size-vertical: 1;
    }
    PlayScreen.-log #play-log {
        display: block;
    }
    PlayScreen.-noframes PlayFrames {
        display: none;
    }
    PlayScreen.-noframes #play-log {
        height: 1fr;
        max-height: 100%;
    }
    """

    AUTO_FOCUS = None       # nothing focused: every key comes to the screen (the text line only for text envs)

    BINDINGS = [
        Binding("escape", "back", "Back (leaves the seat)", id="play.back"),
        Binding("ctrl+t", "take_seat", "Take the seat", id="play.seat"),
        # a text env's line takes q and ? as letters: these reach the app's Keys and Detach while typing
        Binding("f1", "help_typing", "Keys", id="play.help_typing"),
        Binding("f10", "detach_typing", "Detach", id="play.detach_typing"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.state = PlayState()
        self.keys: dict[str, int] = {}
        self.key_problems: list[str] = []
        self.me: str | None = None           # our label, once we hold the seat
        self.holding = False
        self.seat_note = "asking for the seat..."
        self.message = ""                    # the last thing to say on the foot line
        self.pressed: tuple[str, int, float] = ("", -1, 0.0)   # key, action, when
        self.flash_until = 0.0
        self.cursor = 0
        self.last_data = time.monotonic()
        self.acts_sent = 0
        self._panel_due = False              # a key changed the panel; it is painted after the key's frame
        self._queue: asyncio.Queue = asyncio.Queue()
        self._seat_task = None
        self._left = False
        self._seat_client = None             # the link's client the seat was taken on
        self._logged = 0                     # the state's log lines written to the PlayLog
        self._legal_offered: list[str] | None = None

    @property
    def run(self) -> dict | None:
        return self.app.link.runs.get(self.run_id)

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title")
        yield ConnectionBanner()
        with Horizontal(id="play-body"):
            with Vertical():
                yield PlayFrames(self.run_id)
                yield PlayLog(id="play-log", wrap=True, markup=False, highlight=False, max_lines=LOG_KEEP,
                              min_width=16)    # wrapped at the log's own width (RichLog's default is 78)
            yield TextLine(id="play-side")
        yield TextLine(id="play-timing")
        yield TextLine(id="play-foot")
        yield Input(placeholder="type an action (enter sends it)", id="play-text", disabled=True)
        yield KeyBar()

    def on_mount(self) -> None:
        if leaving(self):
            return
        self.query_one("#play-text", Input).cursor_blink = self.app.cursor_blink
        self.run_worker(self._follow(), group="play-events")
        self.run_worker(self._send(), group="play-acts")
        self._seat_task = self.run_worker(self._take_seat(), group="play-seat", exclusive=True)
        self.watch(self.app, "app_focus", self._app_focus, init=False)
        self.set_interval(0.25, self.show, name="play")
        self.show()

    def on_unmount(self) -> None:
        self._leave_seat()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("help_typing", "detach_typing"):
            return self.state.text       # shown (and bound) only where a typed line takes q and ?
        return True

    def action_help_typing(self) -> None:
        self.app.action_help()

    async def action_detach_typing(self) -> None:
        await self.app.action_detach()

    # -- the seat --------------------------------------------------------------------
    async def _take_seat(self) -> None:
        link = self.app.link
        own_until = time.monotonic() + OWN_SEAT_WAIT
        while True:
            run = self.run
            if run is not None and run["state"] in P.FINAL_STATES:
                self.seat_note = f"the play is {run['state']}"
                return
            try:
                reply = await link.call(P.SEAT, run=self.run_id, seat=SEAT)
            except ConnectionError:
                self.seat_note = "connecting to the daemon..."
                await asyncio.sleep(SEAT_RETRY)
                continue
            except P.RPCError as exc:
                text = exc.message
                if "held by" in text and self.me and f"held by {self.me}:" in text \
                        and time.monotonic() < own_until:
                    await asyncio.sleep(SEAT_RETRY)   # ours, on the link that dropped: freed when it is seen gone
                    continue
                if "held by" in text:
                    self.holding = False
                    self.seat_note = text.split(": you can watch")[0].replace(f"seat {SEAT} of ", "")
                    self.show()
                    return
                if exc.code == P.NOT_FOUND:
                    self.seat_note = text
                    return
                # starting: queued, or its env not made yet (no pipe, not listening)
                self.seat_note = "the play is starting: its env is being made..."
                await asyncio.sleep(SEAT_RETRY)
                continue
            self.me = reply.get("held_by")
            self.holding = True
            self._seat_client = link.client
            self.seat_note = ""
            self.show()
            return

    def action_take_seat(self) -> None:
        if self.holding:
            self.say("you hold the seat")
            return
        self._seat_task = self.run_worker(self._take_seat(), group="play-seat", exclusive=True)

    def _leave_seat(self) -> None:
        """Leave the seat (the episode waits, paused): a real-time key is let go first."""
        if self._left or not self.holding:
            return
        self._left = True
        self.holding = False
        link = self.app.link
        realtime = self.state.realtime

        async def leave() -> None:
            try:
                if realtime:
                    await link.call(P.ACT, run=self.run_id, seat=SEAT, action=None)
                await link.call(P.SEAT, run=self.run_id, seat=SEAT, take=False)
            except (P.RPCError, ConnectionError):
                pass        # gone, or ended: the daemon leaves a lost client's seats anyway
        try:
            self.app.run_worker(leave(), group="play-leave")
        except Exception:
            pass            # the app is closing: its connection ends, and with it the seat

    def _app_focus(self, focused: bool) -> None:
        """The terminal lost focus: a held real-time key is let go (the one release we hear)."""
        if not focused and self.holding and self.state.realtime:
            self._queue.put_nowait({"action": None})
            self.pressed = ("", -1, 0.0)

    # -- the run's events ------------------------------------------------------------
    async def _follow(self) -> None:
        link = self.app.link
        while True:
            try:
                page = await link.call(P.EVENTS, run=self.run_id, types=EVENT_TYPES, **{"from": self.cursor})
            except ConnectionError:
                await asyncio.sleep(0.5)
                continue
            except P.RPCError as exc:
                self.say(exc.message)
                await asyncio.sleep(1.0)
                continue
            if page["events"]:
                self.absorb(page["events"])
            caught_up = page["next"] >= page["end"] or page["next"] == self.cursor
            self.cursor = page["next"]
            if not caught_up:
                continue
            run = self.run
            if run is not None and run["state"] in P.FINAL_STATES and self.cursor >= page["end"]:
                self.show()
                return          # everything the play wrote is in
            idle = time.monotonic() - self.last_data > IDLE_AFTER
            await asyncio.sleep(POLL_IDLE if idle else POLL_ACTIVE)

    def absorb(self, events_: list[dict[str, Any]]) -> None:
        """Take events of the run (read_events pages; tests feed them too)."""
        had_keymap = self.state.keymap
        if not self.state.absorb(events_):
            return
        self.last_data = time.monotonic()
        if self.state.keymap is not had_keymap:
            self._keymap_changed()
        held = self.state.held_by
        if self.holding and self.me and held and held != self.me and self.state.last.get("type") == "play":
            self.holding = False
            self.seat_note = f"{held} holds the seat"
        self.show()

    def _keymap_changed(self) -> None:
        from mosaic_tui import uistate
        sections, problems = uistate.load_play_keys(self.app.home.root)
        env = (self.run or {}).get("env") or ""
        self.keys, key_problems = resolve_keys(self.state.keymap or {}, overrides_for(sections, env))
        self.key_problems = problems + key_problems
        for problem in self.key_problems:
            self.notify(problem, title="play keys", severity="warning")
        self.set_class(self.state.text, "-text")
        self.set_class(not self.state.frames, "-noframes")
        self.refresh_bindings()
        box = self.query_one("#play-text", Input)
        box.disabled = not self.state.text
        if self.state.text:
            box.focus()

    # -- keys -------------------------------------------------------------------------
    async def on_key(self, event: events.Key) -> None:
        key = event.key
        if key == "escape":
            return                          # always Back
        index = self.keys.get(key)
        if index is not None:
            event.stop()
            event.prevent_default()
            self.press(key, index)
            return
        if key in self.active_bindings:
            return                          # the screen's and the app's own keys
        event.stop()
        event.prevent_default()
        self.unknown(key)

    def press(self, key: str, index: int) -> None:
        run = self.run
        if run is not None and run["state"] in P.FINAL_STATES:
            self.say(f"the play is {run['state']}: esc goes back")
            return
        if not self.holding:
            self.say(f"you watch ({self.seat_note or 'the seat is not yours'}): ctrl+t takes a free seat")
            return
        params: dict[str, Any] = {"action": index}
        if self.state.realtime:
            params["hold_ms"] = int((self.state.keymap or {}).get("hold_ms") or 150)
        self.pressed = (key, index, time.monotonic())
        self.last_data = time.monotonic()
        self._queue.put_nowait(params)
        self.query_one(PlayFrames).expect_frame()
        # the panel (the key lit) is painted after the key's frame: painted first, it held the
        # frame's paint back to Textual's next update, 1/60 s later (bench_play_terminal)
        self._panel_due = True
        self.set_timer(PANEL_WAIT_S, self._panel_now)

    def frame_came(self) -> None:
        """The frames view took a new frame: the panel a key changed follows it, in the next paint."""
        if self._panel_due:
            self._panel_due = False
            self.call_after_refresh(self.show)

    def _panel_now(self) -> None:
        if self._panel_due:          # no frame came (a refused key, an env that draws none)
            self._panel_due = False
            self.show()

    def unknown(self, key: str) -> None:
        """A key that plays nothing: no act; the key map lights up."""
        self.flash_until = time.monotonic() + FLASH_S
        if self.state.keymap is None:
            self.say(f"{key_display(key)}: the key map has not come yet (the play is starting)")
        else:
            self.say(f"{key_display(key)} plays nothing here: the keys are beside the frames")
        self.show()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text:
            return
        if not self.holding:
            self.say(f"you watch ({self.seat_note or 'the seat is not yours'})")
            return
        event.input.value = ""
        self.pressed = (text, -1, time.monotonic())
        self._queue.put_nowait({"action": text})

    def _seat_lost_with_link(self) -> bool:
        """The seat was taken on a connection that has since been replaced (the link dropped and
        was made again): the daemon left it with the old connection."""
        return self._seat_client is not None and self._seat_client is not self.app.link.client and not self._left

    async def _send(self) -> None:
        """The acts, one after another in the order of the keys; the seat taken again first when
        the link was made again since it was taken, so no key is lost to a reconnect."""
        link = self.app.link
        while True:
            params = await self._queue.get()
            for attempt in range(2):
                if self._seat_lost_with_link():
                    await self._take_seat()
                    if not self.holding:
                        self.say(f"not sent: {self.seat_note or 'the seat is not yours'}")
                        break
                try:
                    await link.call(P.ACT, run=self.run_id, seat=SEAT, **params)
                    self.acts_sent += 1
                except P.RPCError as exc:
                    if "take it first" in exc.message and attempt == 0 and not self._left:
                        self._seat_client = object()    # not held (the daemon says so): taken again, then sent
                        continue
                    self.say(exc.message)
                except ConnectionError as exc:
                    self.say(f"not sent: {exc}")
                break

    def say(self, text: str) -> None:
        self.message = text
        self.show()

    # -- drawing ------------------------------------------------------------------------
    def show(self) -> None:
        if leaving(self) or not self.is_mounted:
            return
        run = self.run
        title = Text()
        title.append("play  ", style="bold")
        title.append(str((run or {}).get("name", self.run_id)), style="bold")
        title.append(f"  {(run or {}).get('env', '')}")
        if run is not None:
            title.append(f"  {fmt.state_label(run)}", style=fmt.STATE_STYLES.get(run["state"], ""))
        self.query_one(TitleBar).update(title)
        self.query_one("#play-side", TextLine).update(self.side_text())
        timing = Text(self.state.timing_line() if self.state.keymap else "timing: the key map has not come yet",
                      style="dim", no_wrap=True, overflow="ellipsis")
        self.query_one("#play-timing", TextLine).update(timing)
        self.query_one("#play-foot", TextLine).update(self.foot_text())
        self.show_log()

    def show_log(self) -> None:
        """The env's words since the last drawing into the log (and the legal commands offered
        as the typed line's completions)."""
        st = self.state
        if st.log_end > self._logged:
            log = self.query_one(PlayLog)
            for kind, line in st.log[max(0, self._logged - st.log_dropped):]:
                log.write(Text(line, style=LOG_STYLES.get(kind, "")))
            self._logged = st.log_end
        self.set_class(bool(st.log) or not st.frames, "-log")
        if st.text and st.legal is not None and st.legal != self._legal_offered:
            from textual.suggester import SuggestFromList
            self._legal_offered = st.legal
            self.query_one("#play-text", Input).suggester = SuggestFromList(st.legal, case_sensitive=False)

    def failure(self) -> str | None:
        """Why a failed play failed: the first line of its reason."""
        run = self.run
        if run is None or run["state"] != P.FAILED:
            return None
        reason = str(run.get("reason") or "").strip()
        return reason.splitlines()[0] if reason else None

    def seat_text(self) -> Text:
        run = self.run
        if run is not None and run["state"] in P.FINAL_STATES:
            text = Text(f"the play ended: {run['state']}", style="bold")
            why = self.failure()
            if why:
                text.append(f"\n{why}", style="bold red")
            return text
        if self.state.keymap is None and not self.holding:
            return Text(self.seat_note or "the play is starting...", style="italic")
        held = self.state.held_by if self.state.last else (self.me if self.holding else None)
        if self.holding and not self.state.last:
            return Text(f"you hold the seat ({self.me}): the env is starting its episode...", style="bold green")
        if self.holding:
            waiting = self.state.last.get("waiting", True)
            turn = "your move" if not self.state.realtime and waiting else "you play"
            return Text(f"you hold the seat ({self.me}): {turn}", style="bold green")
        if held:
            return Text(f"{held} holds the seat: you watch", style="bold yellow")
        return Text("paused: nobody holds the seat (ctrl+t takes it)", style="bold yellow")

    def side_text(self) -> Text:
        st = self.state
        last = st.last
        text = Text()
        text.append_text(self.seat_text())
        text.append("\n")
        text.append(f"step {last.get('step', 0)}  episode {last.get('episode', 0)}\n")
        reward, return_ = st.reward_and_return()
        text.append(f"reward {fmt.num(reward) if reward is not None else '-'}  ")
        text.append(f"return {fmt.num(return_)}\n", style="bold")
        if st.last_action is not None:
            text.append(f"last: {st.last_action.get('action_name', st.last_action.get('action'))}")
            if st.last_action.get("ended"):
                text.append("  (episode ended)", style="bold")
            text.append("\n")
        if st.returns:
            shown = "  ".join(fmt.num(r) for r in st.returns[-5:])
            text.append(f"returns: {shown}\n")
        text.append("\n")
        km = st.keymap
        if km is not None and st.text and st.legal is not None and not self.keys:
            return self.commands_text(text)
        flash = time.monotonic() < self.flash_until
        text.append(" keys " if not flash else " keys: press one of these ",
                    style="reverse bold" if flash else "bold")
        text.append("\n")
        if km is None:
            run = self.run
            if run is not None and run["state"] in P.FINAL_STATES:
                text.append("(none: the play ended before its env was made)", style="italic")
            else:
                text.append("(the key map comes when the env is made)", style="italic")
            return text
        actions = list(km.get("actions") or [])
        held_action = self.held_action()
        for index, bound in enumerate(keys_by_action(self.keys, len(actions))):
            shown = " ".join(key_display(k) for k in bound) or "-"
            style = "reverse" if index == held_action else ("bold" if flash and bound else "")
            text.append(f"{shown:>8}  {actions[index]}\n", style=style)
        return text

    def commands_text(self, text: Text) -> Text:
        """A text env's legal commands now (TextWorld's admissible ones), in place of keys."""
        legal = self.state.legal or []
        text.append(" commands ", style="bold")
        text.append(" type one (→ completes)\n", style="dim")
        for command in legal[:COMMANDS_SHOWN]:
            text.append(f"  {command}\n")
        if len(legal) > COMMANDS_SHOWN:
            text.append(f"  ... and {len(legal) - COMMANDS_SHOWN} more\n", style="dim")
        return text

    def held_action(self) -> int:
        """The action the last key sent, while it is held (real time) or just pressed (turn)."""
        key, index, at = self.pressed
        hold = ((self.state.keymap or {}).get("hold_ms") or 150) / 1000 if self.state.realtime else 0.3
        return index if time.monotonic() - at <= hold else -1

    def foot_text(self) -> Text:
        """The last thing to say: a refusal with the legal moves, the screen's message, the env's."""
        text = Text(no_wrap=True, overflow="ellipsis")
        refusal = self.state.refusal
        if refusal is not None:
            text.append(f"refused: {refusal.get('message') or 'not an action'}", style="bold red")
            legal = refusal.get("legal")
            if legal:
                text.append(f"  legal: {' '.join(map(str, legal))}")
        elif self.message:
            text.append(self.message, style="italic")
        elif self.state.last.get("message") and not self.state.log:   # else the log above shows it whole
            text.append(str(self.state.last["message"]))
        return text

    # -- the app's messages -------------------------------------------------------------
    def on_runs_changed(self, message: RunsChanged) -> None:
        if self.run_id in message.changed or self.run_id in message.deleted:
            self.show()

    def on_connection_changed(self, message: ConnectionChanged) -> None:
        if leaving(self):
            return
        self.query_one(ConnectionBanner).refresh_text()
        if message.connected and self._seat_lost_with_link():
            # the daemon left our seat with the dropped connection: taken again before the next key
            self._seat_task = self.run_worker(self._take_seat(), group="play-seat", exclusive=True)

    def action_back(self) -> None:
        self._leave_seat()
        self.app.pop_screen()
        self.app.remember_place()

    def ui_place(self) -> dict:
        return {"screen": "runs", "run": self.run_id}


class PlayPrompt(ModalScreen["str | None"]):
    """`P` on a run that is not a play (or the palette's "Play an env"): which env to play."""

    DEFAULT_CSS = """
    PlayPrompt {
        align: center middle;
    }
    PlayPrompt > Vertical {
        width: 72;
        max-width: 100%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    PlayPrompt #play-prompt-title {
        margin-bottom: 1;
    }
    """

    BINDINGS = [Binding("escape", "keep", "Cancel", id="play_prompt.cancel")]

    def __init__(self, env: str = "") -> None:
        super().__init__()
        self.env = env

    def compose(self) -> ComposeResult:
        from textual.suggester import SuggestFromList

        from workers.human_worker.catalog import EXAMPLES
        with Vertical():
            yield Static("Play which env? (a human run: the env's family sets turn or real time; enter starts it)",
                         id="play-prompt-title", markup=False)
            yield Input(self.env, placeholder=", ".join(EXAMPLES[:3]), id="play-prompt-env",
                        suggester=SuggestFromList(EXAMPLES, case_sensitive=False))

    def on_mount(self) -> None:
        box = self.query_one(Input)
        box.cursor_blink = self.app.cursor_blink
        box.cursor_position = len(box.value)
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_keep(self) -> None:
        self.dismiss(None)
