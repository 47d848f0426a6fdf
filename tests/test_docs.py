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
