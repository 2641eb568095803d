"""The order xdist hands the tests out in (tests/parallel.py: LongestFirst): the long kinds first, each kind in its
collected order, an `exclusive` test where it was."""

from __future__ import annotations

import pytest

from tests.parallel import LongestFirst


class Collected:
    """What the sort reads of a collected test: its name and its markers."""

    def __init__(self, name: str, *markers: str):
        self.name, self.markers = name, set(markers)

    def get_closest_marker(self, name: str):
        return getattr(pytest.mark, name) if name in self.markers else None


def test_the_long_kinds_go_first_in_their_collected_order_and_an_exclusive_test_stays():
    items = [
        Collected("quick-1"),
        Collected("worker-1", "worker", "sandbox"),
        Collected("exclusive-worker", "worker", "exclusive"),
        Collected("slow-1", "slow"),
        Collected("outage", "own_broker", "worker"),
        Collected("quick-2", "docker"),
        Collected("slow-2", "slow", "worker"),
        Collected("worker-2", "worker"),
    ]
    LongestFirst().pytest_collection_modifyitems(items)
    assert [item.name for item in items] == [
        "slow-1",
        "slow-2",
        "outage",
        "worker-1",
        "worker-2",
        "quick-1",
        "exclusive-worker",
        "quick-2",
    ]
