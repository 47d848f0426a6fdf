"""A failed run's whole reason, in a red band above its plots (the Metrics tab).

The run header has room for the start of the reason only; the plots of a failed
run are what one looks at first, so the reason goes right above them, wrapped.
"""
from __future__ import annotations

from typing import Any

from textual.widgets import Static

from mosaic_tui import fmt


class FailureBanner(Static):
    DEFAULT_CSS = """
    FailureBanner {
        display: none;
        height: auto;
        max-height: 6;
        padding: 0 1;
        background: $error 30%;
        color: $text;
        text-style: bold;
    }
    FailureBanner.-failed {
        display: block;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("", markup=False, **kwargs)
        self._shown: str | None = None

    def show_run(self, run: dict[str, Any] | None) -> None:
        """Show the run's reason if it failed (or was lost); hide the band otherwise."""
        reason = fmt.failure_reason(run) if run else None
        text = f"{run.get('state')}: {reason}" if reason else None
        if text == self._shown:
            return
        self._shown = text
        self.set_class(text is not None, "-failed")
        self.update(text or "")
