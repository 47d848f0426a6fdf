"""Human seats: a client that takes a seat in a run (a human player) sends its actions,
which the daemon passes on to the run's worker; a client that leaves frees its seats.
"""
from __future__ import annotations

import time
from typing import Any

from daemon import protocol as P
from daemon.delivery import Client
from workers.sdk import control


class Seats:
    """The Daemon's (daemon/server.py) human seats."""

    def m_seat(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """Take (take: true) or leave a human seat of a run: one client holds a seat, the others
        watch; the run is told who holds it (nobody: the seat waits, paused)."""
        run = self._run(params)
        seat = str(P.param(params, "seat", (str, int), "0"))
        key = (run["id"], seat)
        holder = self.seats.get(key)
        if not P.param(params, "take", bool, True):
            if holder is client:
                self._leave_seat(key)
            return {"seat": seat, "held_by": None if key not in self.seats else self.seats[key].label}
        if run["state"] not in P.ACTIVE_STATES:
            raise P.RPCError(P.BAD_STATE, f"run {run['name']} is {run['state']}: its seats are closed")
        if holder is not None and holder is not client and not holder.closed:
            raise P.RPCError(P.BAD_STATE, f"seat {seat} of {run['name']} is held by {holder.label}: you can "
                                          f"watch; it is free once they leave it")
        self._tell_run(run["id"], {"type": control.SEAT, "seat": seat, "held_by": client.label})
        self.seats[key] = client
        return {"seat": seat, "held_by": client.label}

    def m_act(self, client: Client, params: dict[str, Any]) -> dict[str, Any]:
        """The human's action for a seat this client holds: a number (the env's action), a text
        (a typed move or command), or null (the held key released)."""
        run = self._run(params)
        seat = str(P.param(params, "seat", (str, int), "0"))
        holder = self.seats.get((run["id"], seat))
        if holder is not client:
            who = f"held by {holder.label}" if holder is not None and not holder.closed else "not held"
            raise P.RPCError(P.BAD_STATE, f"seat {seat} of {run['name']} is {who}: take it first (seat)")
        action = params.get("action")
        if isinstance(action, bool) or not isinstance(action, (int, str, type(None))):
            raise P.RPCError(P.INVALID_PARAMS, "parameter 'action' must be a number, a text or null")
        if isinstance(action, str) and len(action) > 500:
            raise P.RPCError(P.INVALID_PARAMS, "parameter 'action': a typed action of at most 500 characters")
        hold_ms = P.param(params, "hold_ms", int, None)
        self._tell_run(run["id"], {"type": control.ACT, "seat": seat, "action": action, "hold_ms": hold_ms,
                                   "t": round(time.time(), 4)})
        return {"sent": True}

    def _tell_run(self, run_id: str, message: dict[str, Any]) -> None:
        try:
            control.send(str(self.home.run_dir(run_id)), message)
        except control.ControlError as exc:
            raise P.RPCError(P.BAD_STATE, str(exc)) from None

    def _leave_seat(self, key: tuple[str, str]) -> None:
        self.seats.pop(key, None)
        try:   # the seat waits, paused, for the next holder
            control.send(str(self.home.run_dir(key[0])), {"type": control.SEAT, "seat": key[1], "held_by": None})
        except control.ControlError:
            pass   # the run has ended

    def _leave_seats(self, client: Client) -> None:
        """A client that left (detached, closed, lost) leaves its seats: they pause, the episode stays."""
        for key in [k for k, holder in self.seats.items() if holder is client]:
            self._leave_seat(key)

    # -- subscriptions -----------------------------------------------------
