"""The parallel run groups as tests/parallel.py says: a test run by an xdist worker under `--dist loadgroup` carries
its group in its id, which is what the scheduler groups by (pytest 9.2 silently dropped xdist's own suffix, and every
test was scheduled alone). Without xdist there is nothing to check."""

from __future__ import annotations

import pytest

from tests.parallel import WORKER


def test_a_worker_s_test_carries_its_module_group_in_its_id(request):
    if not WORKER or not request.config.getvalue("loadgroup"):
        pytest.skip("not run by an xdist worker under --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_parallel.py"), request.node.nodeid
