"""`make lint`: ruff with the rules of pyproject.toml passes on the tree, and fails on a planted slip."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

RUFF = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
pytestmark = pytest.mark.skipif(RUFF is None, reason="ruff is not installed (the dev extra has it)")


def test_the_tree_passes_the_linter():
    proc = subprocess.run([RUFF, "check", "."], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_planted_slip_fails_it(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef f():\n    return undefined_name\n")
    proc = subprocess.run([RUFF, "check", "--config", str(ROOT / "pyproject.toml"), str(planted)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "F401" in proc.stdout and "F821" in proc.stdout


def test_a_public_sdk_method_needs_a_docstring_and_one_elsewhere_does_not():
    code = "class A:\n    def f(self):\n        return 1\n\n\ndef g():\n    return 2\n"

    def check(as_path: str) -> subprocess.CompletedProcess:
        return subprocess.run([RUFF, "check", "--stdin-filename", as_path, "-"], cwd=ROOT, input=code,
                              capture_output=True, text=True, timeout=120)
    sdk = check("workers/sdk/planted.py")
    assert sdk.returncode == 1 and all(rule in sdk.stdout for rule in ("D100", "D101", "D102", "D103")), sdk.stdout
    assert check("daemon/planted.py").returncode == 0
