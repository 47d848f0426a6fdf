"""The command palette's run actions (ctrl+p): cancel, pause, resume, stop, continue, clone, delete, open, play,
TensorBoard.

The runs offered first are the ones the current screen is about: the run of a
detail screen, or the selected (else highlighted) runs of the runs table; then
every other run, so "cancel ppo-cartpole-3" works from anywhere.
"""
from __future__ import annotations

from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from daemon import protocol as P
from mosaic_tui.fmt import still_running

ACTIONS = (
    # a lost run whose processes run on is cancelled (they end), not deleted (fmt.still_running)
    ("cancel", "Cancel", lambda r: r["state"] not in P.FINAL_STATES or still_running(r)),
    ("pause", "Pause", lambda r: r["state"] in (P.RUNNING, P.STARTING)),
    ("resume", "Resume", lambda r: r["state"] == P.PAUSED),
    ("stop", "Stop with a checkpoint", lambda r: r["state"] in P.ACTIVE_STATES),
    ("continue", "Continue from its checkpoint", lambda r: r["state"] == P.STOPPED),
    ("clone", "Clone and edit", lambda r: True),
    ("delete", "Delete", lambda r: (r["state"] in P.FINAL_STATES or r["state"] == P.QUEUED) and not still_running(r)),
    ("open", "Open", lambda r: True),
    ("play", "Play (take the seat of)", lambda r: r.get("worker") == "human" and r["state"] not in P.FINAL_STATES),
)


class RunCommands(Provider):
    def _focus_runs(self) -> list[dict]:
        app = self.app
        runs = app.link.runs
        ids: list[str] = []
        screen = self.screen
        run_id = getattr(screen, "run_id", None)
        if run_id:
            ids = [run_id]
        else:
            try:
                from mosaic_tui.widgets.runs_table import RunsTable
                table = screen.query_one(RunsTable)
                ids = sorted(table.selected) or ([table.current_run_id] if table.current_run_id else [])
            except Exception:
                ids = []
        return [runs[i] for i in ids if i in runs]

    def _commands(self):
        app = self.app
        focus = self._focus_runs()
        focus_ids = {r["id"] for r in focus}
        others = sorted((r for r in app.link.runs.values() if r["id"] not in focus_ids),
                        key=lambda r: r.get("created_at") or 0, reverse=True)
        for run in focus + others:
            for action, label, applies in ACTIONS:
                if not applies(run):
                    continue
                text = f"{label} run {run['name']}"
                help_text = f"{run['worker']}/{run['algo']} {run['env']} · {run['state']}"
                if action == "open":
                    callback = partial(app.open_run, run["id"])
                elif action == "play":
                    callback = partial(app.open_play, run["id"])
                else:
                    callback = partial(app.act_on_runs, action, [run["id"]])
                yield text, callback, help_text, run["id"] in focus_ids
        if focus:
            names = ", ".join(r["name"] for r in focus[:3]) + (f" and {len(focus) - 3} more" if len(focus) > 3 else "")
            yield (f"TensorBoard for {names}", partial(app.open_tensorboard, [r["id"] for r in focus]),
                   "event files from the store; TensorBoard on a free localhost port", True)
        yield "New run", app.open_new_run, "worker → algorithm → environment → form", True
        yield "Play an env", app.new_play, "a human play: you at the keyboard (docs/play.md)", True
        yield "Workers", app.open_workers, "installed workers and their capabilities", True
        yield "Cycle theme", app.action_cycle_theme, "mosaic-dark, mosaic-light, mosaic-high-contrast", True
        for alert, what in (("off", "a notification only"), ("bell", "a notification and the terminal bell"),
                            ("osc9", "a notification and a desktop notification (OSC 9)")):
            yield f"When a run ends: {alert}", partial(app.set_alert, alert), what, False

    async def discover(self) -> Hits:
        for text, callback, help_text, focused in self._commands():
            if focused:
                yield DiscoveryHit(text, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text, _focused in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), callback, text=text, help=help_text)
