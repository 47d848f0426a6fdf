"""Bars at the top of a screen: the title line and the daemon-unreachable banner."""
from __future__ import annotations

from textual.widgets import Static

from mosaic_tui.widgets.text_line import TextLine


class TitleBar(TextLine):
    """One line: where we are and what the daemon says."""

    DEFAULT_CSS = """
    TitleBar {
        height: 1;
        width: 1fr;
        background: $panel;
        color: $foreground;
        padding: 0 1;
    }
    """


class ConnectionBanner(Static):
    """Shown while the daemon cannot be reached; the app keeps what it has.

    Displayed by the app's CSS while the App has the class ``-offline``.
    """

    DEFAULT_CSS = """
    ConnectionBanner {
        display: none;
        height: 1;
        width: 1fr;
        background: $error;
        color: $text;
        text-style: bold;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("daemon unreachable: reconnecting... (showing what was received)", **kwargs)

    def on_mount(self) -> None:
        self.refresh_text()

    def refresh_text(self) -> None:
        link = getattr(self.app, "link", None)
        error = getattr(link, "error", None)
        detail = f" ({error})" if error else ""
        self.update(f"daemon unreachable{detail}: reconnecting... runs keep training; showing what was received")
