"""The suite itself: a test process that dies (a native crash) fails the whole run within a minute.

A SIGSEGV in a test process once left pytest-xdist replacing the crashed worker and then
waiting for ever, no test running (with --dist loadgroup), so pytest-timeout never fired
and CI ran into its own limit with no word of why. pyproject.toml's addopts hold
``--max-worker-restart=0``: the first crashed worker ends the session, the test it was
running reported as failed. The planted tests below run only inside this check
(MOSAIC_PLANTED_CRASH=1), never in the suite itself.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import ROOT

planted = pytest.mark.planted   # deselected unless MOSAIC_PLANTED_CRASH=1 (tests/conftest.py)


@planted
@pytest.mark.xdist_group("planted")
@pytest.mark.parametrize("i", range(4))
def test_planted_group(i):
    time.sleep(0.3)
    if i == 1:
        os.kill(os.getpid(), signal.SIGSEGV)


@planted
@pytest.mark.parametrize("i", range(8))
def test_planted_neighbour(i):
    time.sleep(0.3)


def test_a_crashed_test_process_fails_the_suite_fast():
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                             "-q", "tests/test_suite_guard.py", "-k", "planted"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, MOSAIC_PLANTED_CRASH="1"), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"a suite whose test process crashed was still running after 60 s:\n{out[-2000:]}")
    took = time.monotonic() - started
    assert proc.returncode not in (0, 5), out[-3000:]
    assert "crashed while running 'tests/test_suite_guard.py::test_planted_group[1]" in out, out[-3000:]
    assert took < 60
