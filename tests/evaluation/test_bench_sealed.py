"""scripts/bench_sealed.py: the files it hides are the platform's, the sealed share counts reasons by kind, and one
demo item measured on bwrap passes with and without the replay, its recording sealed; a mutant run through the
replay is killed by it."""

from __future__ import annotations

import pytest

from benchmarks.paper2code.pset import read_pset
from sandbox import Limits
from scripts.bench_sealed import DEMO, DEMO_REQUIREMENTS, cost_measure, mutants_measure, package_hidden, sealed_share
from tests.conftest import sandbox_backend_or_missing

LIMITS = Limits(wall_seconds=60, memory_bytes=1024**3, processes=64, cpus=1.0, output_bytes=1024**2)


@pytest.fixture(scope="module")
def demo():
    return {package.id: package for package in read_pset(DEMO)}


def test_the_hidden_files_are_the_entry_point_and_the_reference_copies(demo):
    assert {name: sorted(package_hidden(package)) for name, package in demo.items()} == {
        "dampnest": ["optimizer_ref.py", "paper2code_test.py"],
        "topk-attention-pool": ["paper2code_test.py", "src/pooling_ref.py"],
        "trimmed-infonce": ["contrastive_ref.py", "paper2code_test.py"],
    }


def test_the_sealed_share_counts_unsealed_snippets_by_kind():
    recordings = [
        {
            "snippets": {
                "a.py#0": {"sealed": True, "reason": ""},
                "a.py#1": {"sealed": False, "reason": "its function Net.forward.<locals>.f is defined inside another"},
            }
        },
        {"snippets": {"b.py#0": {"sealed": False, "reason": "its function g.<locals>.h is defined inside another"}}},
    ]
    sealed, total, reasons = sealed_share(recordings)
    assert (sealed, total, dict(reasons)) == (1, 3, {"its function is defined inside another": 2})


@pytest.mark.sandbox
@pytest.mark.slow
def test_one_demo_item_passes_with_and_without_the_replay_and_a_mutant_is_killed_by_it(demo, sandbox_cache):
    backend = sandbox_backend_or_missing("bwrap", sandbox_cache)
    packages = [demo["trimmed-infonce"]]
    tasks, items = cost_measure(
        backend=backend,
        mode="warm",
        packages=packages,
        requirements=DEMO_REQUIREMENTS,
        limits=LIMITS,
        repeat=1,
        items_max=1,
    )
    assert len(items) == 1
    name, alone, verdict_alone, replayed, verdict_replayed = items[0]
    assert (verdict_alone.status, verdict_replayed.status) == ("passed", "passed"), items
    assert sealed_share(t.recording for t in tasks)[:2] == (10, 10)

    rows = list(
        mutants_measure(
            backend=backend, packages=packages, requirements=DEMO_REQUIREMENTS, limits=LIMITS, limit=2, items_max=1
        )
    )
    mutants, by_tests, by_replay = (int(value) for value in rows[1].split()[-5:-2])
    assert mutants == 2 and by_replay >= 1, rows
