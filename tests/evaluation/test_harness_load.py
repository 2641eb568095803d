"""No false failures from the harness (issue 18 item 5): correct reference answers scored in parallel beside CPU
hogs all pass, warm and cold, on bwrap. `scripts/bench_harness_load.py` is the same run at 2,000 items."""

from __future__ import annotations

import pytest

from scripts.bench_harness_load import references_under_load
from tests.conftest import sandbox_backend_or_missing


@pytest.mark.exclusive  # its CPU hogs are the load it means; another test's would add to them
@pytest.mark.parametrize("mode,items", [("warm", 100), ("cold", 30)])
def test_reference_items_in_parallel_on_a_loaded_machine_all_pass(sandbox_cache, mode, items):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    backend.forkserver = mode == "warm"
    result = references_under_load(backend=backend, items=items, workers=3, hogs=1)
    assert result.wrong == [], result.wrong[:3]
