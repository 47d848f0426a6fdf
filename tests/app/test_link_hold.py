"""The link's hold on the socket always ends (issue 29, item 1: a hung app's daemon socket had
113,145 bytes unread). Past ABSORB_BACKLOG queued events the client stops reading, and only the
absorber task reads it again; an exception that escaped the absorber ended it with the queue
still full, and nothing ever read the socket again."""
from __future__ import annotations

import asyncio

import pytest

pytestmark = pytest.mark.anyio


class HeldClient:
    def __init__(self) -> None:
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


async def test_an_error_absorbing_a_chunk_does_not_leave_the_socket_unread(monkeypatch):
    from mosaic_tui import link as L
    monkeypatch.setattr(L, "ABSORB_BACKLOG", 10)
    link = L.Link(None)
    link.client = HeldClient()
    link.watched.add("r")
    calls = []

    def absorb(rid, events):
        calls.append(len(events))
        if len(calls) == 1:
            raise TypeError("a chunk the series cannot take")

    monkeypatch.setattr(link, "_absorb", absorb)
    link.feed("events", {"run": "r", "from": 0, "to": 100, "events": [{"type": "scalar"}] * 30})
    link.feed("events", {"run": "r", "from": 100, "to": 200, "events": [{"type": "scalar"}] * 30})
    assert link._holding and not link.client.reading
    for _ in range(100):
        await asyncio.sleep(0.01)
        if link.client.reading:
            break
    assert link.client.reading and not link._holding and link.queued == 0
    assert calls == [30, 30]           # the chunk after the bad one was taken in
