"""tests/conftest.py: the order pytest-xdist hands out the tests that are not in a group."""
from __future__ import annotations

import pytest

from tests.conftest import _expected_length


class Item:
    """What `_expected_length` reads of a collected test: its marks and its fixtures."""

    def __init__(self, name: str, marks: tuple[str, ...] = (), fixtures: tuple[str, ...] = ()):
        self.name = name
        self.marks = {mark: getattr(pytest.mark, mark) for mark in marks}
        self.fixturenames = list(fixtures)

    def get_closest_marker(self, name: str):
        return self.marks.get(name)


def test_training_and_grouped_tests_first_then_daemon_tests_then_in_process_ones():
    items = [Item("pure"), Item("with a daemon", fixtures=("daemon", "mosaic")), Item("trains", marks=("slow",)),
             Item("pure too", fixtures=("tmp_path",)), Item("in a group", marks=("xdist_group",)),
             Item("trains through a daemon", marks=("slow",), fixtures=("daemon",))]
    items.sort(key=_expected_length)
    assert [item.name for item in items] == ["trains", "in a group", "trains through a daemon", "with a daemon",
                                             "pure", "pure too"]
