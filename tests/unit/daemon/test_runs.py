"""daemon/runs.py's pure readers: a worker's stderr tail (the failure shown with a run), and where a run runs."""
from __future__ import annotations

from daemon.home import STDERR_FILE
from daemon.runs import disk_full_note, on_cluster, stderr_tail


def test_the_stderr_tail_is_the_last_lines_of_the_files_end(tmp_path):
    (tmp_path / STDERR_FILE).write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    assert stderr_tail(str(tmp_path), 3) == "line 97\nline 98\nline 99"
    assert stderr_tail(str(tmp_path)).splitlines()[0] == "line 80"      # 20 lines by default


def test_the_stderr_tail_reads_only_the_last_16_kib_and_survives_bad_bytes(tmp_path):
    head = b"FIRST\n" + b"x" * 40_000 + b"\n"
    (tmp_path / STDERR_FILE).write_bytes(head + b"\xff\xfe broken\nlast\n")
    tail = stderr_tail(str(tmp_path), 1000)
    assert "FIRST" not in tail and tail.endswith("\ufffd\ufffd broken\nlast")


def test_no_stderr_file_is_an_empty_tail(tmp_path):
    assert stderr_tail(str(tmp_path)) == ""


def test_a_writable_home_has_no_disk_note_and_a_missing_path_none(tmp_path):
    assert disk_full_note(str(tmp_path)) is None
    assert disk_full_note(str(tmp_path / "missing")) is None


def test_a_run_is_on_a_cluster_when_its_placement_is_not_local():
    assert not on_cluster({"config": {}})
    assert not on_cluster({"config": {"placement": {"backend": "local"}}})
    assert not on_cluster({"config": {"placement": None}})
    assert on_cluster({"config": {"placement": {"backend": "slurm", "partition": "gpu"}}})
