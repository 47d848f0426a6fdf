"""Runs ending: what the app tells while it is open, and what changed while it was closed.

No Textual here: the app (mosaic_tui/app.py) shows the toasts and the away
screen (mosaic_tui/screens/away.py); this module decides what to say.

While the app is open, each run that reaches a final state gives a toast, and,
as the ``alert`` setting says (kept in ``<home>/ui-state.json``):

- ``off``: the toast only;
- ``bell``: the terminal bell too (the default: every terminal has one, and
  tmux turns it into its bell flag on the window);
- ``osc9``: a desktop notification through OSC 9 (iTerm2, WezTerm, kitty,
  foot, Windows Terminal, ConEmu; inside tmux wrapped for passthrough, which
  needs ``allow-passthrough on``). A terminal that does not know OSC 9
  ignores it.

When the app closes it remembers each run's state (``last_seen``); when it
opens again, ``changes_since`` lists the runs that finished, failed or started
meanwhile.
"""
from __future__ import annotations

import time
from typing import Any

from daemon import protocol as P
from mosaic_tui import fmt

ALERTS = ("off", "bell", "osc9")
DEFAULT_ALERT = "bell"
ENDED_STATES = frozenset(P.FINAL_STATES)


def ended_message(run: dict[str, Any]) -> tuple[str, str]:
    """(toast text, severity) for a run that just ended."""
    state = run.get("state", "?")
    name = run.get("name", "?")
    reason = fmt.failure_reason(run)
    if state == P.SUCCEEDED:
        s = run.get("summary") or {}
        best, step = fmt.best_return(run)
        text = f"{name} succeeded at step {fmt.num(s.get('steps'))}"
        if best is not None:
            text += f", best return {fmt.num(best)} at step {fmt.num(step)}"
        return text, "information"
    if reason:
        return f"{name} {state}: {reason}", "error"
    return f"{name} {state}", "warning"


def osc9(message: str, in_tmux: bool) -> str:
    """The OSC 9 desktop-notification sequence (wrapped for tmux's passthrough)."""
    clean = "".join(c for c in message if c >= " " and c != "\x7f")[:200]
    sequence = f"\x1b]9;{clean}\x07"
    if in_tmux:
        from mosaic_tui.graphics.tmux import wrap
        return wrap(sequence.encode()).decode()
    return sequence


class EndWatcher:
    """Remembers the state of every run; says which ones just ended."""

    def __init__(self) -> None:
        self.states: dict[str, str] | None = None   # None: no run list seen yet

    def prime(self, runs: dict[str, dict[str, Any]]) -> None:
        self.states = {rid: run.get("state", "") for rid, run in runs.items()}

    def ended(self, runs: dict[str, dict[str, Any]], changed: set[str]) -> list[dict[str, Any]]:
        """The runs among ``changed`` that went from an active state (or nothing) to a final one."""
        if self.states is None:
            self.prime(runs)
            return []
        out = []
        for rid in sorted(changed):
            run = runs.get(rid)
            if run is None:
                self.states.pop(rid, None)
                continue
            old, new = self.states.get(rid), run.get("state", "")
            self.states[rid] = new
            if new in ENDED_STATES and old not in ENDED_STATES:
                out.append(run)
        return out


def last_seen(runs: dict[str, dict[str, Any]], now: float | None = None) -> dict[str, Any]:
    """What ui-state.json keeps of the runs when the app closes."""
    return {"t": time.time() if now is None else now,
            "runs": {rid: run.get("state", "") for rid, run in runs.items()}}


def changes_since(seen: Any, runs: dict[str, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(what happened, run) for the runs that ended or started since ``seen``, oldest first.

    Nothing when the app never closed with runs known (first start, or an old
    ui-state.json without ``last_seen``).
    """
    if not isinstance(seen, dict) or not isinstance(seen.get("runs"), dict):
        return []
    before: dict[str, str] = seen["runs"]
    out = []
    for run in sorted(runs.values(), key=lambda r: (r.get("created_at") or 0, r.get("id", ""))):
        old, new = before.get(run.get("id")), run.get("state", "")
        if old == new:
            continue
        if new in ENDED_STATES:
            if old not in ENDED_STATES:
                out.append((new if old is not None else f"new, {new}", run))
        elif old is None:
            out.append(("new" if new == P.QUEUED else "started", run))
        elif old == P.QUEUED and new != P.QUEUED:
            out.append(("started", run))
    return out
