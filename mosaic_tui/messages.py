"""Typed messages the app posts to its screens when the link reports changes.

The link (``mosaic_tui.link``) coalesces what the daemon sends; the app turns
each of its updates into at most one message of each kind, posted to every
screen in the stack, so a screen redraws once per burst and only for what it
shows.
"""
from __future__ import annotations

from textual.message import Message


class RunsChanged(Message):
    """Run records changed, appeared or were deleted."""

    def __init__(self, changed: set[str], deleted: set[str]) -> None:
        super().__init__()
        self.changed = changed
        self.deleted = deleted


class SeriesChanged(Message):
    """New points arrived: run id -> tags."""

    def __init__(self, series: dict[str, set[str]]) -> None:
        super().__init__()
        self.series = series


class ConnectionChanged(Message):
    """The link to the daemon went down or came back."""

    def __init__(self, connected: bool, error: str | None) -> None:
        super().__init__()
        self.connected = connected
        self.error = error
