"""MosaicApp: the terminal app, a client of the daemon.

Quitting (``q``) detaches: the runs belong to the daemon and keep training.
Starting again reattaches: the link fetches the runs and every change since,
and the app reopens the screen the user left (``ui-state.json`` in the home).

Start-up is kept light: screens other than the runs table, numpy, pydantic and
textual-plotext are imported when first needed, and nothing here ever imports
torch, ray, xuance or gym.
"""
from __future__ import annotations

import gc
import time
from typing import Any, Callable, Iterable

from textual import events
from textual.app import App
from textual.binding import Binding

from daemon import protocol as P
from daemon.home import Home
from mosaic_tui import fmt, notify, uistate
from mosaic_tui import themes as theme_files
from mosaic_tui.link import Link, Update


def _run_commands():
    from mosaic_tui.commands import RunCommands
    return RunCommands


class MosaicApp(App):
    CSS_PATH = "app.tcss"
    TITLE = "mosaic"

    BINDINGS = [
        Binding("q", "detach", "Detach", id="app.quit"),
        Binding("question_mark", "help", "Keys", id="app.help"),
        Binding("T", "cycle_theme", "Theme", show=False, id="app.theme"),
        # Textual adds its own ctrl+p only when no binding names the palette
        Binding("ctrl+p", "command_palette", "palette", show=False, priority=True, key_display="^p",
                id="app.palette"),
        Binding("colon", "command_palette", "Commands", show=False, id="app.commands"),   # as in k9s
    ]
    COMMANDS = App.COMMANDS | {_run_commands}

    def __init__(self, home: Home, *, connect: bool = True, clock: Callable[[], float] = time.time,
                 restore: bool = True, interval: float = 0.25, cursor_blink: bool = True,
                 remember: bool = True, default_theme: str | None = None, graphics=None,
                 all_workers: bool = False, play: str | None = None) -> None:
        super().__init__()
        self.home = home
        self.play_run = play        # `mosaic play`: the app opens on this run's Play screen
        self.all_workers = all_workers  # the new-run form offers hidden (test) workers too
        self.graphics = graphics    # graphics.detect.Capabilities, or None: half-blocks
        self.clock = clock
        self.connect = connect
        self.restore = restore
        self.remember = remember
        self.cursor_blink = cursor_blink
        self.tensorboard_url: str | None = None   # the last TensorBoard started from the palette
        self.link = Link(home, self._on_link_update, interval=interval)
        self.workers_cache: list[dict[str, Any]] | None = None   # the daemon's workers, for forms
        self._held_keys: list[events.Key] = []   # keys waiting for the one before them
        self._key_serial = 0
        self._key_in_flight = 0     # the serial of the key not done yet, 0: none
        self._key_since = 0.0
        self.ui_state: dict[str, Any] = uistate.load_state(home) if restore else {}
        self._restored = not restore or play is not None   # a play opens on its own screen
        # the place the user left, as it was read: the runs table writes the row it highlights
        # into ui_state["run"] as soon as it has rows, which may be before the place is reopened
        self._place_left = dict(self.ui_state)
        # client settings, kept in ui-state.json: the return window and the alert when a run ends
        window = self.ui_state.get("return_window")
        self.return_window = (window if type(window) is int and 1 <= window <= fmt.MAX_RETURN_WINDOW
                              else fmt.DEFAULT_RETURN_WINDOW)
        alert = self.ui_state.get("alert")
        self.alert = alert if alert in notify.ALERTS else notify.DEFAULT_ALERT
        self.end_watcher = notify.EndWatcher()
        self._greeted = False        # the first run list seen: the away summary, if anything changed
        mosaic_themes, css = theme_files.load()
        for theme in mosaic_themes:
            self.register_theme(theme)
        self.CSS = css
        self.theme_names = [t.name for t in mosaic_themes]
        wanted = self.ui_state.get("theme")
        if wanted in self.available_themes:
            self.theme = wanted
        elif default_theme in self.available_themes:
            self.theme = default_theme
        elif theme_files.DEFAULT_THEME in self.available_themes:
            self.theme = theme_files.DEFAULT_THEME
        keymap, self.keymap_problems = uistate.load_keymap(home.root)
        if keymap:
            self.set_keymap(keymap)

    # -- screens ---------------------------------------------------------------
    @property
    def _background_screens(self) -> list:
        """Screens that show through the top one: none when it is opaque.

        Textual (8.2.8) always counts the screen right under the top one, and
        a repaint of a counted screen repaints the top screen in full and asks
        for another repaint of itself. With the runs table under a run's
        Frames tab that re-sent the whole image several times a second.
        Modal screens (help, confirm) have a translucent background and keep
        what is under them.
        """
        stack = self._screen_stack
        if stack and stack[-1].styles.background.a == 1:
            return []
        return App._background_screens.fget(self)

    def get_default_screen(self):
        from mosaic_tui.screens.runs import RunsScreen
        return RunsScreen()

    # -- keys, one at a time ----------------------------------------------------
    KEY_WAIT_AT_MOST = 5.0   # seconds a key waits for the one before it (or a screen) at most

    async def on_event(self, event: events.Event) -> None:
        """Keys are handled one at a time, each after the one before it is done.

        Textual hands a key to the focused widget's queue and reads the next
        key at once; a binding runs only when the key has bubbled up. So in a
        fast burst the keys after `e` (which puts up the clone form) went to the
        runs table, and after Tab to the field Tab was leaving: digits meant
        for steps landed in the name and a 500k-step run started. Here a key
        waits until the one before it has gone all the way up (or stopped) and
        the screen it put up is mounted and focused.
        """
        if isinstance(event, events.Key) and not event.is_forwarded:
            self._held_keys.append(event)
            if len(self._held_keys) == 1:
                await self._release_keys()
            return
        await super().on_event(event)

    def _screen_takes_keys(self) -> bool:
        """Mounted: its on_mount has run, and a focus it asked for there (Textual
        defers it through the app's queue) is ahead of the release of held keys."""
        return self.screen.is_mounted

    async def _release_keys(self) -> None:
        while self._held_keys:
            waited = time.monotonic() - self._key_since
            if (self._key_in_flight or not self._screen_takes_keys()) and waited < self.KEY_WAIT_AT_MOST:
                self.set_timer(0.02, self._release_keys)
                return
            held = self._held_keys.pop(0)
            # a fresh event: a held one may have been through a dispatch already
            await self._dispatch_key(events.Key(held.key, held.character))

    async def _dispatch_key(self, event: events.Key) -> None:
        target = self.focused or self.screen
        self._key_serial += 1
        serial = self._key_in_flight = self._key_serial
        self._key_since = time.monotonic()
        await super().on_event(event)
        # A callback through each queue the key may bubble through, in order,
        # after the key: when the app runs the last one, the key is done.
        pumps = list(target.ancestors_with_self)

        def passed(i: int) -> None:
            if i + 1 < len(pumps) and pumps[i + 1].call_later(passed, i + 1):
                return
            if self._key_in_flight == serial:   # not a key that was given up on
                self._key_in_flight = 0
                if self._held_keys:
                    self.call_later(self._release_keys)
        if not target.call_later(passed, 0):   # its screen is gone: nothing to wait for
            passed(len(pumps))

    FIRST_LIST_WAIT = 5.0   # seconds: then the runs screen says what the first run list waits for

    def on_mount(self) -> None:
        for problem in self.keymap_problems:
            self.notify(problem, title="keymap", severity="warning")
        if self.connect:
            self.link.start()
            self.set_timer(self.FIRST_LIST_WAIT, self._first_list_late, name="first run list")
        if self.play_run is not None:
            self._after_first_screen(lambda: self.open_play(self.play_run))

    def _first_list_late(self) -> None:
        """No run list yet: say what the app waits for (the screen would otherwise just stay empty)."""
        link = self.link
        if link.loaded:
            return
        where = self.home.where
        if link.client is None or not link.info:
            what = f"no answer from the daemon for {where}" + (f": {link.error}" if link.error else "")
        else:
            what = f"connected to the daemon for {where}; its run list has not come yet"
        self.notify(f"{what}. q detaches.", title="waiting", severity="warning", timeout=10)

    async def on_unmount(self) -> None:
        self.save_ui_state()
        await self.link.stop()
        if self._greeted:
            gc.unfreeze()               # what was frozen at the first run list can be collected again

    def watch_theme(self, theme: str) -> None:
        if hasattr(self, "ui_state"):
            self.ui_state["theme"] = theme

    def open_run(self, run_id: str, tab: str | None = None) -> None:
        from mosaic_tui.screens.run import RunScreen
        self.push_screen(RunScreen(run_id, tab=tab))
        self.remember_place()

    def open_new_run(self, clone: dict[str, Any] | None = None) -> None:
        from mosaic_tui.screens.new_run import NewRunScreen
        self.push_screen(NewRunScreen(clone=clone))

    def open_play(self, run_id: str) -> None:
        """The Play screen of a human run (docs/play.md): it takes the seat."""
        from mosaic_tui.screens.play import PlayScreen
        self.push_screen(PlayScreen(run_id))
        self.remember_place()

    def new_play(self, env: str = "") -> None:
        """Ask which env, start a human play of it (its family's timing) and open its Play screen."""
        from mosaic_tui.screens.play import PlayPrompt

        def chosen(env_id: str | None) -> None:
            if not env_id:
                return

            async def submit() -> None:
                try:
                    run = await self.link.call(P.SUBMIT, config={"worker": "human", "algo": "play", "env": env_id})
                except (P.RPCError, ConnectionError) as exc:
                    self.notify(getattr(exc, "message", None) or str(exc), title="play not started",
                                severity="error")
                    return
                if run["id"] not in self.link.runs:
                    self.link.feed(P.NOTIFY_RUN, {"rev": run.get("rev", 0), "run": run})
                self.open_play(run["id"])
            self.run_worker(submit(), group="play-submit")
        self.push_screen(PlayPrompt(env), chosen)

    def open_compare(self, run_ids: list[str]) -> None:
        from mosaic_tui.screens.compare import CompareScreen
        self.push_screen(CompareScreen(run_ids))
        self.remember_place()

    def open_workers(self) -> None:
        from mosaic_tui.screens.workers import WorkersScreen
        self.push_screen(WorkersScreen())
        self.remember_place()

    def pop_to_runs(self) -> None:
        while len(self.screen_stack) > 1:
            self.pop_screen()

    # -- link -> screens -------------------------------------------------------
    def _on_link_update(self, update: Update) -> None:
        from mosaic_tui.messages import ConnectionChanged, RunsChanged, SeriesChanged
        messages = []
        if update.connection:
            self.workers_cache = None   # another daemon may have other workers
            self.set_class(not self.link.connected and (self.link.loaded or self.link.attempts > 0), "-offline")
            messages.append(lambda: ConnectionChanged(self.link.connected, self.link.error))
        if update.runs or update.deleted or update.loaded:
            messages.append(lambda: RunsChanged(set(update.runs), set(update.deleted)))
        if update.series:
            messages.append(lambda: SeriesChanged({k: set(v) for k, v in update.series.items()}))
        for screen in self.screen_stack:
            for make in messages:
                screen.post_message(make())
        if not self._restored and self.link.loaded:
            self._restored = True
            self._after_first_screen(self._restore_place)
        if self.link.loaded:
            if not self._greeted:
                self._greeted = True
                self.end_watcher.prime(self.link.runs)
                # The run list is the app's big long-lived heap (ten thousand records: some 10^5
                # objects). Out of the cyclic collector's full passes, which would otherwise walk it
                # every few hundred keys for ~100 ms (a stall in the runs table); records replaced
                # later are freed by their reference counts as ever.
                gc.freeze()
                if self.restore and self.play_run is None:
                    self._after_first_screen(self._show_away)
            elif update.runs or update.deleted:
                for run in self.end_watcher.ended(self.link.runs, update.runs | update.deleted):
                    self.announce_end(run)

    def _after_first_screen(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` (reopen the place left, the away summary) once the runs screen is
        mounted and drawn. The run list can come before it is (under load, or a fast daemon):
        what the callbacks push then covered a screen that had never been drawn, and until
        they were mounted (a run's screen takes a while under load) nothing at all was."""
        first = self.screen_stack[0] if self.screen_stack else None
        if first is None or not first.call_after_refresh(callback):
            self.call_later(callback)

    # -- runs ending -------------------------------------------------------------
    def announce_end(self, run: dict[str, Any]) -> None:
        """A run ended while the app is open: a toast, and the bell or OSC 9 as ``alert`` says."""
        text, severity = notify.ended_message(run)
        self.notify(text, title="run ended", severity=severity, timeout=10, markup=False)
        if self.alert == "bell":
            self.bell()
        elif self.alert == "osc9":
            driver = getattr(self, "_driver", None)
            if driver is not None:
                from mosaic_tui.graphics.tmux import in_tmux
                driver.write(notify.osc9(f"mosaic: {text}", in_tmux()))

    def _show_away(self) -> None:
        """The runs that ended or started since the app last closed; nothing when nothing changed."""
        seen = self.ui_state.get("last_seen")
        changes = notify.changes_since(seen, self.link.runs)
        if changes:
            from mosaic_tui.screens.away import AwayScreen
            self.push_screen(AwayScreen(changes, seen.get("t"), self.clock(), self.return_window))

    def set_alert(self, alert: str) -> None:
        self.alert = alert
        self.ui_state["alert"] = alert
        self.notify(f"when a run ends: {alert if alert != 'off' else 'a notification only'}", timeout=3)
        self.remember_place()

    def set_return_window(self, window: int) -> None:
        self.return_window = window
        self.ui_state["return_window"] = window
        self.remember_place()

    def _restore_place(self) -> None:
        state = self._place_left
        rid = state.get("run")
        if rid in self.link.runs:
            try:
                self.screen_stack[0].query_one("RunsTable").select_run(rid)
            except Exception:
                pass
        where = state.get("screen")
        if where == "run" and rid in self.link.runs:
            self.open_run(rid, tab=state.get("tab"))
        elif where == "compare":
            ids = [r for r in state.get("compare", []) if r in self.link.runs]
            if ids:
                self.open_compare(ids)
        elif where == "workers":
            self.open_workers()

    # -- ui state ----------------------------------------------------------------
    def remember_place(self) -> None:
        self.call_later(self.save_ui_state)

    def save_ui_state(self) -> None:
        if not self.remember:
            return
        try:
            place = self.screen.ui_place() if hasattr(self.screen, "ui_place") else None
        except Exception:
            place = None
        if place is None:
            # a modal or form: remember the screen beneath it
            for screen in reversed(self.screen_stack):
                if hasattr(screen, "ui_place"):
                    place = screen.ui_place()
                    break
        if place:
            self.ui_state.update({k: v for k, v in place.items() if v is not None or k == "screen"})
        self.ui_state["theme"] = self.theme
        if self.link.loaded:
            # what the away summary compares with next time (not when the daemon was never reached)
            self.ui_state["last_seen"] = notify.last_seen(self.link.runs, self.clock())
        uistate.save_state(self.home, self.ui_state)

    # -- run actions -------------------------------------------------------------
    def act_on_runs(self, action: str, run_ids: Iterable[str]) -> None:
        """cancel, pause, resume, toggle_pause, stop, continue, toggle_stop, delete, clone: destructive
        ones confirm first (a stop keeps a checkpoint to continue from: it does not ask)."""
        ids = [r for r in run_ids if r in self.link.runs]
        if not ids:
            self.notify("no run here", severity="warning")
            return
        runs = [self.link.runs[r] for r in ids]
        names = ", ".join(r["name"] for r in runs[:4]) + (f" and {len(runs) - 4} more" if len(runs) > 4 else "")
        if action == "clone":
            self.open_new_run(clone=runs[0])
            return
        if action == "toggle_pause":
            for run in runs:
                method = P.RESUME if run["state"] == P.PAUSED else P.PAUSE
                self._call_runs(method, [run])
            return
        if action in ("pause", "resume"):
            self._call_runs(P.PAUSE if action == "pause" else P.RESUME, runs)
            return
        if action in ("stop", "continue", "toggle_stop"):
            for run in runs:
                go_on = action == "continue" or (action == "toggle_stop" and run["state"] in P.FINAL_STATES)
                self._call_runs(P.CONTINUE if go_on else P.STOP, [run])
            return
        if action in ("cancel", "delete"):
            from mosaic_tui.screens.confirm import ConfirmScreen
            if action == "cancel":
                # a lost run whose processes run on (fmt.still_running) is cancelled: they end
                active = [r for r in runs if r["state"] not in P.FINAL_STATES or fmt.still_running(r)]
                if not active:
                    self.notify(f"{names}: nothing to cancel, already finished", severity="warning")
                    return
                question = f"Cancel {names}?\nTheir processes are stopped; what they logged stays."
                method, todo = P.CANCEL, active
            else:
                final = [r for r in runs if (r["state"] in P.FINAL_STATES or r["state"] == P.QUEUED)
                         and not fmt.still_running(r)]
                if not final:
                    self.notify(f"{names}: cancel before deleting", severity="warning")
                    return
                question = f"Delete {names}?\nTheir directories (logs, metrics, checkpoints) are removed."
                method, todo = P.DELETE, final

            def done(ok: bool | None) -> None:
                if ok:
                    self._call_runs(method, todo)
            self.push_screen(ConfirmScreen(question, action), done)
            return
        self.notify(f"unknown action {action}", severity="error")

    def edit_annotation(self, run_id: str | None, what: str) -> None:
        """`#` (what="tags") and `o` (what="note"): a prompt with the run's current value, saved on enter."""
        from mosaic_tui.screens.annotate import AnnotateScreen, tag_changes
        run = self.link.runs.get(run_id) if run_id else None
        if run is None:
            self.notify("no run here", severity="warning")
            return
        if what == "tags":
            old = list(run.get("tags") or [])
            screen = AnnotateScreen(f"Tags of {run['name']} (words; filter the runs with /tag:NAME)",
                                    " ".join(old), "baseline ablation ...")
        else:
            screen = AnnotateScreen(f"Note on {run['name']}", run.get("note") or "", "what this run is about")

        def done(text: str | None) -> None:
            if text is None:
                return
            if what == "tags":
                add, remove = tag_changes(old, text)
                if add or remove:
                    self._call_run(P.TAG, run, add=add, remove=remove)
            elif text.strip() != (run.get("note") or ""):
                self._call_run(P.NOTE, run, text=text)
        self.push_screen(screen, done)

    def open_tensorboard(self, run_ids: list[str]) -> None:
        """`mosaic tensorboard RUN... --detach` in a process of its own (TensorBoard is never imported
        here); the URL and the ssh -L line come back as a notification and in ``tensorboard_url``."""
        names = [self.link.runs[r]["name"] for r in run_ids if r in self.link.runs]
        if not names:
            return

        async def work() -> None:
            import asyncio
            import re

            from mosaic_tui.client import cli_command
            proc = await asyncio.create_subprocess_exec(
                *cli_command(self.home, "tensorboard", *names, "--detach"), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            out, err = await proc.communicate()
            text = out.decode(errors="replace")
            url = re.search(r"http://127\.0\.0\.1:\d+/", text)
            if proc.returncode != 0 or url is None:
                lines = err.decode(errors="replace").strip().splitlines()
                self.notify(lines[-1] if lines else "TensorBoard did not start", title="TensorBoard", severity="error")
                return
            self.tensorboard_url = url.group(0)
            ssh = next((line for line in text.splitlines() if "ssh -N -L" in line), "")
            self.notify(f"{url.group(0)}\n{ssh}", title=f"TensorBoard: {', '.join(names)}", timeout=30)
        self.run_worker(work(), group="tensorboard")

    def _call_run(self, method: str, run: dict[str, Any], **params: Any) -> None:
        async def work() -> None:
            try:
                await self.link.call(method, run=run["id"], **params)
            except (P.RPCError, ConnectionError) as exc:
                self.notify(getattr(exc, "message", str(exc)), title=f"{method} {run['name']}", severity="error")
        self.run_worker(work(), group="run-actions")

    def _call_runs(self, method: str, runs: list[dict[str, Any]]) -> None:
        async def work() -> None:
            for run in runs:
                try:
                    await self.link.call(method, run=run["id"])
                except P.RPCError as exc:
                    self.notify(exc.message, title=f"{method} {run['name']}", severity="error")
                except ConnectionError as exc:
                    self.notify(str(exc), title=f"{method} {run['name']}", severity="error")
                else:
                    self.notify(f"{method}: {run['name']}", timeout=3)
        self.run_worker(work(), group="run-actions")

    # -- app actions ---------------------------------------------------------------
    async def action_detach(self) -> None:
        """Leave the app; every run keeps training in the daemon."""
        self.save_ui_state()
        self.exit(0)

    async def action_help_quit(self) -> None:
        """ctrl+c (where nothing takes it to copy a selection) detaches, as q does. Textual's own
        ctrl+c only names the key of a ``quit`` action, and q's is ``detach``: it said nothing."""
        await self.action_detach()

    def action_help(self) -> None:
        from mosaic_tui.screens.help import HelpScreen
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
            return
        self.push_screen(HelpScreen(self.screen))

    def action_cycle_theme(self) -> None:
        names = [n for n in self.theme_names if n in self.available_themes] or ["textual-dark"]
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)
        self.remember_place()


def terminal_default_theme() -> str | None:
    """ansi-dark on a 16-colour terminal (the terminal's own palette reads best), else None."""
    import os
    import sys
    if os.environ.get("NO_COLOR") is not None:
        return None
    from rich.console import Console
    console = Console(file=sys.__stderr__, force_terminal=True)
    return "ansi-dark" if console.color_system == "standard" else None


def detect_graphics(args: Any = None):
    """Ask the terminal what it can draw, before Textual starts (it would take the replies).

    Only ``auto``, ``kitty`` and ``sixel`` ask, with a short timeout that the
    terminal's DA1 reply ends early; ``halfblock`` and ``none`` start at once.
    Without a terminal (tests, pipes) nothing is asked.
    """
    import sys

    from mosaic_tui.graphics.detect import detect, requested_mode
    mode = requested_mode(args)
    if mode in ("auto", "kitty", "sixel") and not (sys.stdin.isatty() and sys.stdout.isatty()):
        if mode != "auto":
            return detect(mode, fd=-1)
        caps = detect("halfblock")
        caps.reason = "no terminal to ask (stdin or stdout is not a tty)"
        return caps
    return detect(mode, timeout=0.3)


def run_app(home: Home, args: Any = None, play: str | None = None) -> int:
    """`mosaic` and `mosaic attach`: start the daemon if none runs, then the app (`mosaic play`: on
    the Play screen of the run ``play``)."""
    from mosaic_tui.client import connect
    connect(home, name="mosaic-app-probe", timeout=5).close()  # starts the home's daemon (never a --socket one)
    app = MosaicApp(home, default_theme=terminal_default_theme(), graphics=detect_graphics(args),
                    all_workers=getattr(args, "all_workers", False), play=play)
    app.run()
    return app.return_code or 0


def run_watch(home: Home, args: Any = None) -> int:
    """`mosaic watch [RUN]`: the compact pane."""
    from mosaic_tui.client import connect
    from mosaic_tui.watch import WatchApp
    connect(home, name="mosaic-watch-probe", timeout=5).close()  # starts the home's daemon (never a --socket one)
    app = WatchApp(home, getattr(args, "run", None), graphics=detect_graphics(args))
    app.run()
    return app.return_code or 0
