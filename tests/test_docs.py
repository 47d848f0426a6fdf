"""The docs stay true to the code: every method and event is documented with an example."""
from __future__ import annotations

import re

from daemon import protocol as P
from tests.helpers import ROOT
from workers.sdk import telemetry as tm


def test_every_method_is_documented_with_an_example():
    text = (ROOT / "docs" / "protocol.md").read_text()
    headings = {name.strip() for h in re.findall(r"^### (.+)$", text, re.M) for name in h.split("/")}
    assert headings == set(P.METHODS)
    for method in P.METHODS:
        assert f'"method":"{method}"' in text, f"no example line for {method}"
    for note in (P.NOTIFY_RUN, P.NOTIFY_EVENTS, P.NOTIFY_SYNCED, P.NOTIFY_FRAME):
        assert f'"method":"{note}"' in text


def test_every_event_type_is_documented_with_its_fields():
    text = (ROOT / "docs" / "telemetry.md").read_text()
    for event_type, fields in tm.EVENT_FIELDS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{event_type}`")), None)
        assert row is not None, f"{event_type} missing from docs/telemetry.md"
        for field in fields:
            assert field in row, f"{event_type}.{field} undocumented"


def test_the_workers_guide_names_every_bundled_worker_and_every_sdk_module():
    """docs/workers/README.md, which tells an outside package how to add a worker, stays whole."""
    import re
    import tomllib
    guide = (ROOT / "docs" / "workers" / "README.md").read_text()
    workers = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["mosaic.workers"]
    bundled = sorted(name for name in workers if name != "synthetic")   # synthetic: the tests' own
    assert len(bundled) == 8
    missing = [name for name in bundled if f"[{name}]({name}.md)" not in guide]
    assert missing == [], f"docs/workers/README.md does not link these workers: {missing}"
    sdk = ROOT / "workers" / "sdk"
    modules = sorted("workers.sdk." + ".".join(p.relative_to(sdk).with_suffix("").parts)
                     for p in sdk.rglob("*.py") if p.name != "__init__.py")
    named = set(re.findall(r"`(workers\.sdk\.[a-z_.]+)`", guide))
    assert [m for m in modules if m not in named] == [], "modules of workers/sdk the guide does not name"


def test_the_readme_command_table_has_every_command():
    from mosaic_tui.cli import build_parser
    readme = (ROOT / "README.md").read_text()
    table = "\n".join(line for line in readme.splitlines() if line.startswith("| `mosaic"))
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    commands = sorted(set(sub.choices))
    missing = [c for c in commands if not re.search(rf"`mosaic [^|]*\b{re.escape(c)}\b", table)]
    assert missing == [], f"README's command table lacks: {missing}"



# -- key names in the docs, against the real bindings (issue 41, item 11) -------------------------
# How the docs write a key -> Textual's key name
_KEY_NAMES = {"↓": "down", "↑": "up", "←": "left", "→": "right", "+": "plus", "-": "minus", "/": "slash",
              "#": "number_sign", "?": "question_mark", ":": "colon", "[": "left_square_bracket",
              "]": "right_square_bracket", "esc": "escape"}
_NAMED_KEYS = {"space", "esc", "enter", "tab", "escape", "pgup", "pgdn", "home", "end"}
_STOPWORDS = {"the", "and", "with", "its", "per", "for", "from", "run", "runs", "out", "all", "this", "that"}


def _key_name(text: str) -> str | None:
    """A backticked token of the docs as Textual's key name; None when it is not a key (`mosaic`)."""
    if len(text) == 1 or text in _NAMED_KEYS or re.fullmatch(r"(ctrl|shift|alt)\+\S+", text):
        return _KEY_NAMES.get(text, text)
    return None


def _bindings() -> list[tuple[str, str, object]]:
    """(module, key, Binding) of every class of the app, its screens and widgets."""
    import importlib
    import inspect
    import pkgutil

    from textual.binding import Binding

    import mosaic_tui.screens
    import mosaic_tui.widgets
    names = ["mosaic_tui.app", "mosaic_tui.watch"] + [
        f"{pkg.__name__}.{m.name}" for pkg in (mosaic_tui.screens, mosaic_tui.widgets)
        for m in pkgutil.iter_modules(pkg.__path__)]
    out = []
    for name in names:
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ != name:
                continue
            for binding in cls.__dict__.get("BINDINGS", []):
                binding = binding if isinstance(binding, Binding) else Binding(*binding)
                for key in binding.key.split(","):
                    out.append((name.removeprefix("mosaic_tui."), key.strip(), binding))
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 3 and w not in _STOPWORDS}


def _same_word(a: str, b: str) -> bool:
    return a.startswith(b) or b.startswith(a)     # fold / folded / folds, pin / pinned


def test_the_key_tables_of_docs_app_md_name_the_bound_keys():
    """Each row of a key table in docs/app.md: its binding ids exist, and every key it names is bound to
    one of them (or, for arrows and the like, by the same widget)."""
    bindings = _bindings()
    by_id = {b.id: (module, b) for module, _, b in bindings if b.id}
    rows, in_table = [], False
    for line in (ROOT / "docs" / "app.md").read_text().splitlines():
        if line.replace(" ", "") == "|key|action|bindingid|":
            in_table = True
        elif not line.startswith("|"):
            in_table = False
        elif in_table and line.startswith("| `"):
            rows.append(line)
    assert len(rows) > 25
    wrong = []
    for row in rows:
        keys_cell, _, ids_cell = [cell.strip() for cell in row.strip("|").split("|")]
        ids = re.findall(r"`([^`]+)`", ids_cell)
        unknown = [i for i in ids if i not in by_id]
        if unknown or not ids:
            wrong.append(f"{row}: no binding with the id {unknown or ids_cell!r}")
            continue
        owners = {by_id[i][0] for i in ids}
        for shown in re.findall(r"`([^`]+)`", keys_cell):
            key = _key_name(shown)
            if key is None:
                continue
            if not any(k == key and (b.id in ids or (module in owners and not b.id)) for module, k, b in bindings):
                wrong.append(f"{row}: `{shown}` is not bound to {', '.join(ids)}")
    assert wrong == [], "\n".join(wrong)


# README's app section: what each bullet is about -> the modules whose keys it names (others: any)
_README_SCOPES = {"Runs": ("screens.runs", "widgets.runs_table"), "Run detail": ("screens.run", "widgets.")}


def test_the_readme_names_each_key_for_what_it_does():
    """The README said `z` folds the timings on the Metrics tab: `z` stops the run (`f` folds), so a reader
    who followed it stopped their run. Each key the README's app section names, with the words beside it
    (`timings folded `f``), must be bound on that screen to a binding those words describe."""
    bindings = _bindings()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## The app\n", 1)[1].split("\n## ", 1)[0]
    checked, wrong = 0, []
    for part in re.split(r"\n(?=- )", section):
        title = re.match(r"- \*\*([^*]+)\*\*", part)
        scope = _README_SCOPES.get(title.group(1) if title else "", ("screens.", "widgets.", "watch"))
        for segment in re.split(r"[,;()]", " ".join(part.split())):
            keys = [k for k in (_key_name(t) for t in re.findall(r"`([^`]+)`", segment)) if k]
            if not keys:
                continue
            said = _words(re.sub(r"`[^`]*`", " ", segment))
            for key in keys:
                checked += 1
                bound = [b for module, k, b in bindings if k == key and (module == "app" or any(
                    module == m or (m.endswith(".") and module.startswith(m)) for m in scope))]
                meant = [b for b in bound if any(_same_word(w, v) for w in said for v in
                                                 _words(f"{b.description} {b.action} {b.id or ''}"))]
                if not meant:
                    does = "; ".join(f"{b.id or b.action}: {b.description}" for b in bound) or "nothing"
                    wrong.append(f"README: {segment.strip()!r}: `{key}` does {does}")
    assert checked >= 25
    assert wrong == [], "\n".join(wrong)
