"""One line of text that repaints only itself when it changes.

A Static's ``update()`` asks for a new layout of the whole screen, because a
Static's size may follow its text. A bar of fixed height does not need one,
and on a run's Frames tab a layout means a full repaint that sends the image
again: the run title updates every second and on every change of the run, so
that was ~10% of the app's CPU while it showed a live run (bench_fastlane).
"""
from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class TextLine(Widget):
    DEFAULT_CSS = """
    TextLine {
        height: 1;
        width: 1fr;
    }
    """

    def __init__(self, content: str | Text = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = Text(content) if isinstance(content, str) else content

    def update(self, content: str | Text) -> None:
        """Show ``content`` (a str is plain text, never markup: titles hold paths)."""
        text = Text(content) if isinstance(content, str) else content
        if text.plain != self.text.plain or text.spans != self.text.spans:
            self.text = text
            self.refresh()

    def render(self) -> Text:
        return self.text
