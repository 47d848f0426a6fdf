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

