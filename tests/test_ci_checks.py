"""The checks .ci/run makes after the suite, run here on planted files: what the suite leaves in /tmp."""
from __future__ import annotations

import getpass
import os
import subprocess

from tests.helpers import ROOT


def _tmp_files(tmp, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / ".ci" / "tmp-files"), *args], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp)}, timeout=30)


def test_ci_names_what_the_suite_left_in_tmp_and_nothing_that_was_there_before(tmp_path):
    tmp = tmp_path / "tmp"
    (tmp / "someone-elses").mkdir(parents=True)
    before = tmp_path / "before"
    before.write_text(_tmp_files(tmp).stdout)
    assert _tmp_files(tmp, "--new", str(before)).returncode == 0
    ours = tmp / f"mosaic-{os.getuid()}"
    ours.mkdir()   # the daemons' socket folder may stay: made once, reused
    (tmp / f"pytest-of-{getpass.getuser()}").mkdir()   # pytest's own, its last three sessions kept
    assert _tmp_files(tmp, "--new", str(before)).returncode == 0
    (ours / "ssh-0123456789ab.sock").touch()
    (tmp / "pymp-abc123").mkdir()
    os.symlink(tmp_path / "gone", tmp / "mosaic-ray-retry-42")   # dangling
    checked = _tmp_files(tmp, "--new", str(before))
    assert checked.returncode == 1
    lines = checked.stderr.strip().splitlines()
    assert lines[0] == f"ci: the suite left entries in {tmp}:"
    assert sorted(lines[1:]) == sorted([str(ours / "ssh-0123456789ab.sock"), str(tmp / "pymp-abc123"),
                                        str(tmp / "mosaic-ray-retry-42")])


def test_the_sessions_numba_and_jax_caches_are_its_own_temp_dir():
    """The suite's compile caches (shared by every test home) live in the session's temp dir, which
    conftest removes at the end, not in a fixed /tmp folder left behind."""
    root = os.path.dirname(os.environ["JAX_COMPILATION_CACHE_DIR"])
    assert os.path.basename(root).startswith("mosaic-test-cache-")
    assert os.environ.get("NUMBA_CACHE_DIR") == os.path.join(root, "numba")
