"""Form fields generated from a JSON schema property, validated as the user types.

Validation is ``workers.sdk.config``'s own (``coerce_text`` then
``check_value``), the code the daemon runs at submit time, so the form refuses
exactly what the daemon would, with the same message, under the field.
"""
from __future__ import annotations

import json
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, Select, Static

from workers.sdk.config import ConfigError, check_value, coerce_text

NULL_LABEL = "(none)"


def types_of(spec: dict[str, Any]) -> list[str]:
    t = spec.get("type")
    if t is None:
        return []
    return [t] if isinstance(t, str) else list(t)


def value_text(value: Any) -> str:
    """How a value is shown in a text field."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def type_label(spec: dict[str, Any]) -> str:
    types = [t for t in types_of(spec) if t != "null"]
    label = "/".join(types) or "any"
    if "null" in types_of(spec):
        label += "?"
    bounds = []
    for key, sym in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<")):
        if key in spec:
            bounds.append(f"{sym}{spec[key]}")
    if bounds:
        label += " " + " ".join(bounds)
    return label


def field_kind(spec: dict[str, Any]) -> str:
    """The editor a property gets: "enum" (a Select), "bool" (a Select) or "text" (an Input)."""
    types = types_of(spec)
    if "enum" in spec:
        return "enum"
    if types and set(types) <= {"boolean", "null"} and "boolean" in types:
        return "bool"
    return "text"


def fits(spec: dict[str, Any], value: Any) -> bool:
    """A field for ``spec`` can show ``value`` (as its editor holds it: a choice, or text)."""
    kind = field_kind(spec)
    if kind == "enum":
        return value in spec["enum"]
    if kind == "bool":
        return isinstance(value, bool) or (value is None and "null" in types_of(spec))
    return isinstance(value, str)


class FieldInput(Input):
    """A form's text box: a key typed in it repaints it, and lays out nothing else.

    Textual's Input (8.2.8) sets its virtual size (how far its text scrolls) at every change of
    its value, and that reactive asks for a layout of the whole screen: the new-run form's ~260
    widgets reflowed at every key, 0.2 s of CPU a key here, seconds under load. The box is one
    row of a fixed width whatever its text, so only its own scrolling follows: what the layout
    would have done for it."""

    def _watch_value(self, value: str) -> None:
        size = Size(self.content_width, 1)
        if size != self.virtual_size and not self.styles.auto_dimensions:
            self.set_reactive(Input.virtual_size, size)
            self._scroll_update(size)
            self.refresh()
        super()._watch_value(value)     # finds the virtual size set: no layout


class SchemaField(Vertical):
    """One labelled field: the editor for its type, its help, and its error."""

    DEFAULT_CSS = """
    SchemaField {
        height: auto;
    }
    SchemaField > Horizontal {
        height: auto;
    }
    SchemaField .field-label {
        width: 28;
        padding: 0 1 0 0;
        text-style: bold;
    }
    SchemaField .field-editor {
        width: 1fr;
    }
    SchemaField .field-help {
        color: $text-muted;
        padding-left: 28;
    }
    SchemaField .field-note {
        display: none;
        color: $warning;
        padding-left: 28;
    }
    SchemaField.-carried .field-note, SchemaField.-hinted .field-note {
        display: block;
    }
    SchemaField.-carried .field-label {
        color: $warning;
    }
    SchemaField .field-error {
        display: none;
        color: $error;
        text-style: bold;
        padding-left: 28;
    }
    SchemaField.-invalid .field-error {
        display: block;
    }
    SchemaField.-invalid .field-editor {
        background: $error 30%;
    }
    SchemaField .field-editor:focus {
        background: $boost;
    }
    """

    class Changed(Message):
        def __init__(self, field: "SchemaField") -> None:
            super().__init__()
            self.field = field

    def __init__(self, name: str, spec: dict[str, Any], value: Any = None, *, required: bool = False,
                 label: str | None = None, suggestions: list[str] | None = None, field_id: str | None = None,
                 validator=None, note: str | None = None) -> None:
        super().__init__(id=field_id, classes="-carried" if note else None)
        self.field_name = name
        self.spec = spec
        self.initial = spec.get("default") if value is None and "default" in spec else value
        self.required = required
        self.label_text = label or name
        self.suggestions = suggestions
        self.validator = validator      # extra check: fn(value) -> None or raises ConfigError
        self.error: str | None = None
        self.refusal: tuple[str, Any] | None = None   # the daemon's message, for the value it refused
        self.note = note    # why the field does not show its default (a value kept from another schema)
        self.hint: str | None = None   # a word on the value (where a run of these steps ends)
        self.kind = self._kind()

    def _kind(self) -> str:
        return field_kind(self.spec)

    def choices(self) -> list[Any]:
        if self.kind == "bool":
            values: list[Any] = [True, False]
            if "null" in types_of(self.spec):
                values.append(None)
            return values
        return list(self.spec.get("enum") or [])

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label(self.label_text, classes="field-label")
            if self.kind in ("enum", "bool"):
                options = [(NULL_LABEL if v is None else value_text(v), json.dumps(v)) for v in self.choices()]
                current = json.dumps(self.initial)
                if current not in [o[1] for o in options] and options:
                    current = options[0][1]
                yield Select(options, value=current, allow_blank=False, classes="field-editor", compact=True,
                             id=f"in-{self.safe_id}")
            else:
                suggester = SuggestFromList(self.suggestions, case_sensitive=False) if self.suggestions else None
                yield FieldInput(value=value_text(self.initial), placeholder=self._placeholder(), suggester=suggester,
                                 classes="field-editor", compact=True, id=f"in-{self.safe_id}")
        help_parts = [type_label(self.spec)]
        if "default" in self.spec:
            help_parts.append(f"default {value_text(self.spec['default']) or NULL_LABEL}")
        if self.spec.get("description"):
            help_parts.append(self.spec["description"])
        yield Static(" · ".join(help_parts), classes="field-help", markup=False)
        yield Static(f"↳ {self.note}" if self.note else "", classes="field-note", markup=False)
        yield Static("", classes="field-error", markup=False)

    def on_mount(self) -> None:
        if not getattr(self.app, "cursor_blink", True):
            for box in self.query(Input):
                box.cursor_blink = False

    @property
    def safe_id(self) -> str:
        return "".join(c if c.isalnum() or c in "-_" else "_" for c in self.field_name)

    def _placeholder(self) -> str:
        if "null" in types_of(self.spec):
            return self.spec.get("x-empty", "empty for none")
        return ""

    @property
    def editor(self):
        return self.query_one(".field-editor")

    @property
    def ready(self) -> bool:
        """Composed (a field mounted a moment ago has no editor yet)."""
        return bool(self.query(".field-editor"))

    def raw(self) -> Any:
        if not self.ready:
            # not composed yet: what it will show
            if self.kind == "text":
                return value_text(self.initial)
            return self.initial
        editor = self.editor
        if isinstance(editor, Select):
            return None if editor.is_blank() else json.loads(editor.value)
        return editor.value

    def is_default(self) -> bool:
        """Shows its schema's default (an invalid value never is: it was typed)."""
        try:
            return "default" in self.spec and self.value() == self.spec["default"]
        except ConfigError:
            return False

    def value(self) -> Any:
        """The typed, checked value; raises ConfigError with the field's message."""
        raw = self.raw()
        if self.kind == "text":
            types = types_of(self.spec)
            if not raw.strip():
                if "null" in types:
                    value = None
                elif self.required or (types and "string" not in types):
                    raise ConfigError(self.field_name, "is required")
                else:
                    value = raw
            else:
                try:
                    value = coerce_text(self.spec, raw)
                except ConfigError as exc:
                    raise ConfigError(self.field_name, exc.message) from None
        else:
            value = raw
        value = check_value(self.field_name, self.spec, value)
        if self.validator is not None:
            self.validator(value)
        return value

    def set_value(self, value: Any) -> None:
        editor = self.editor
        if isinstance(editor, Select):
            editor.value = json.dumps(value)
        else:
            editor.value = value_text(value)

    def set_choices(self, values: list[Any], value: Any) -> None:
        """New choices for an enum field (another worker's algorithms), showing ``value``."""
        self.spec = {**self.spec, "enum": list(values)}
        if value not in values and values:
            value = values[0]
        self.initial = value
        if self.ready and values:
            editor = self.editor
            with editor.prevent(Select.Changed):
                editor.set_options([(value_text(v), json.dumps(v)) for v in values])
            editor.value = json.dumps(value)

    def validate(self) -> bool:
        try:
            self.value()
        except ConfigError as exc:
            self.show_error(exc.message)
            return False
        if self.refusal is not None:
            message, refused = self.refusal
            if self.raw() == refused:
                self.show_error(message)
                return False
            self.refusal = None
        self.show_error(None)
        return True

    def set_hint(self, text: str | None) -> None:
        """Say something about the value under the field (in the note's place), or stop saying it."""
        if text == self.hint:
            return
        self.hint = text
        self.set_class(text is not None, "-hinted")
        for label in self.query(".field-note"):
            label.update(f"↳ {text or self.note}" if text or self.note else "")

    def refuse(self, message: str) -> None:
        """The daemon refused this value: say so until it changes."""
        self.refusal = (message, self.raw())
        self.show_error(message)

    def show_error(self, message: str | None) -> None:
        if message == self.error and self.has_class("-invalid") == (message is not None):
            return
        self.error = message
        self.set_class(message is not None, "-invalid")
        for label in self.query(".field-error"):
            label.update(f"✗ {self.field_name}: {message}" if message else "")

    def _changed(self) -> None:
        self.validate()
        self.post_message(self.Changed(self))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._changed()

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._changed()
