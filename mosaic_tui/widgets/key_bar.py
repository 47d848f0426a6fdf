"""The key bar at the bottom of every screen: the shown bindings, one line.

Textual's Footer mounts a widget per key and re-composes them all whenever the
bindings change, which is at every focus change: ~100 ms of style work per
tab switch here, and far more while a flooding run keeps the app busy. This
bar is one widget that re-renders one line of text. A click on a key presses
it (``app.simulate_key``).
"""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.color import Color
from textual.widget import Widget


class KeyBar(Widget):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        width: 1fr;
        background: $footer-background;
        color: $footer-description-foreground;
    }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    _shown: list | None = None     # the entries last drawn

    def _bindings_changed(self, screen) -> None:
        # Textual signals after every key, mostly with the same keys: a repaint only when
        # they differ (on the Play screen one a key sat between the key and its frame)
        if screen is self.screen and self.entries() != self._shown:
            self.refresh()

    def entries(self) -> list[tuple[str, str, str, bool]]:
        """(key shown, description, key to press, enabled) per shown action, in binding order;
        the command palette last."""
        shown: list[tuple[str, str, str, bool]] = []
        palette = None
        seen: set[str] = set()
        for _node, binding, enabled, tooltip in self.screen.active_bindings.values():
            key = binding.key.split(",")[0].strip()
            if binding.key == self.app.COMMAND_PALETTE_BINDING and self.app.ENABLE_COMMAND_PALETTE:
                palette = (self.app.get_key_display(binding), binding.description or "palette", key, enabled)
                continue
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            shown.append((self.app.get_key_display(binding), binding.description, key, enabled))
        if palette is not None:
            shown.append(palette)
        return shown

    def render(self) -> Text:
        variables = self.app.theme_variables
        # Textual colour syntax ("ansi_magenta", "#e0af68 80%"): parsed by Textual, handed to Rich
        try:
            key_color = Color.parse(variables.get("footer-key-foreground") or variables.get("accent")
                                    or "yellow").rich_color
        except Exception:
            key_color = None

        def entry(display: str, description: str, key: str, enabled: bool) -> Text:
            click = {"@click": f"app.simulate_key({key!r})"}
            text = Text(f" {display} ", Style(color=key_color, bold=True, dim=not enabled, meta=click))
            if description:
                text.append(f"{description} ", Style(dim=not enabled, meta=click))
            return text

        entries = self.entries()
        self._shown = list(entries)
        palette = None
        if entries and entries[-1][2] == self.app.COMMAND_PALETTE_BINDING:
            palette = entry(*entries.pop())
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        for item in entries:
            text.append_text(entry(*item))
        if palette is not None:
            # the palette key sits at the right edge, as in Textual's footer
            room = max(0, self.size.width - palette.cell_len)
            text.truncate(room, overflow="ellipsis", pad=True)
            text.append_text(palette)
        return text
