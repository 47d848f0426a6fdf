"""The unit layer: pure pieces, each test in milliseconds. No process is started and no socket
opened here (the integration tests beside tests/unit do that); trying is a test error that says so."""
from __future__ import annotations

import socket
import subprocess

import numpy.testing  # noqa: F401  (its first import asks lscpu: imported here, before the guard below)
import pytest


class _NotInUnitTests:
    def __init__(self, what: str):
        self.what = what

    def __call__(self, *args, **kwargs):
        raise AssertionError(f"a unit test started {self.what}: it belongs beside tests/unit, not in it")


@pytest.fixture(autouse=True)
def _no_processes_no_sockets(monkeypatch):
    monkeypatch.setattr(subprocess, "Popen", _NotInUnitTests("a process"))
    # connecting and binding, not making sockets: an asyncio loop's own wake-up pair stays possible
    for method in ("connect", "connect_ex", "bind"):
        monkeypatch.setattr(socket.socket, method, _NotInUnitTests(f"a socket ({method})"))
