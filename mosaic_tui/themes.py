"""Themes from the .tcss files in mosaic_tui/theme_files/ (package data, installed with the code).

Each file starts with palette lines (``$name: value;``) that become a Textual
``Theme``; the rest of the file is CSS the app loads, written as
``App.-theme-<name> ...`` rules so it applies only under that theme. Textual's
own themes stay available too (ctrl+p, "Change theme").
"""
from __future__ import annotations

import re
from pathlib import Path

THEMES_DIR = Path(__file__).resolve().parent / "theme_files"  # package data: installed with the code
DEFAULT_THEME = "mosaic-dark"
ORDER = ("mosaic-dark", "mosaic-light", "mosaic-high-contrast")

_VAR = re.compile(r"^\s*\$([a-z][a-z0-9-]*)\s*:\s*([^;]+);\s*$", re.M)
_FIELDS = ("primary", "secondary", "accent", "warning", "error", "success", "foreground",
           "background", "surface", "panel", "boost")


def parse(text: str) -> tuple[dict[str, str], str]:
    """(palette, remaining CSS) of one theme file."""
    palette = {m.group(1): m.group(2).strip() for m in _VAR.finditer(text)}
    css = _VAR.sub("", text)
    return palette, css


def theme_files(directory: Path = THEMES_DIR) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(directory.glob("*.tcss"))


def load(directory: Path = THEMES_DIR):
    """([Theme], css) for every theme file."""
    from textual.theme import Theme
    themes = []
    css_parts = []
    for path in theme_files(directory):
        try:
            palette, css = parse(path.read_text())
        except OSError:
            continue
        name = palette.get("name") or f"mosaic-{path.stem}"
        if "primary" not in palette:
            continue
        kwargs = {k: palette[k] for k in _FIELDS if k in palette}
        dark = palette.get("dark", "true").lower() not in ("false", "no", "0")
        themes.append(Theme(name=name, dark=dark, **kwargs))
        css_parts.append(f"/* {path.name} */\n{css.strip()}\n")
    order = {name: i for i, name in enumerate(ORDER)}
    themes.sort(key=lambda t: (order.get(t.name, len(order)), t.name))
    return themes, "\n".join(css_parts)
