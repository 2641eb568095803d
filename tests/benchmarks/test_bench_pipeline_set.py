"""The heavy problem set of scripts/bench_pipeline.py is a valid set in the task format: import_pset takes it whole,
with the snippets nested as generated and every task in the one environment the script builds."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from benchmarks.models import BenchmarkVersion, Snippet
from benchmarks.paper2code.requirements import requirements_vetted
from benchmarks.services.blobs import environment_hash
from scripts.bench_pipeline import REQUIREMENTS, papers_plan, pset_heavy_generate

pytestmark = pytest.mark.django_db


def test_the_generated_set_imports_nested_in_one_environment(tmp_path, media_root):
    plans = papers_plan(4, 13)
    pset_heavy_generate(tmp_path, plans, per_second=1000, paper_bytes=3000)
    warnings = StringIO()

    call_command("import_pset", str(tmp_path), version="bench-1.0.0", publish=True, stdout=StringIO(), stderr=warnings)

    version = BenchmarkVersion.objects.get(name="bench-1.0.0")
    assert version.status == BenchmarkVersion.Status.PUBLISHED and warnings.getvalue() == ""
    assert sorted(version.tasks.values_list("paper__slug", flat=True)) == [p.paper_id for p in plans]
    assert set(version.tasks.values_list("environment_hash", flat=True)) == {
        environment_hash(requirements_vetted(REQUIREMENTS))
    }
    snippets = Snippet.objects.filter(task__in=version.tasks.all())
    assert snippets.count() == 13 == sum(p.snippets for p in plans)
    assert set(snippets.values_list("depth", flat=True)) == {0, 1, 2}
    for snippet in snippets.filter(depth__gt=0):
        assert snippet.parent is not None and snippet.parent.depth == snippet.depth - 1
    for task in version.tasks.all():
        names = list(task.snippets.values_list("name", flat=True))
        assert len(set(names)) == len(names), "names are unique within a file (FORMAT.md 3)"
    assert [p.seconds >= 2 for p in plans].count(True) == 1, "a few tests last several seconds"


def test_the_heterogeneous_set_imports_and_its_papers_import_different_modules(tmp_path, media_root):
    """--set heterogeneous: every paper's test imports two real modules of the environment's libraries, so twenty
    papers bring 19 import sets (papers 2 and 17 draw the same two modules): what made the fork server restart per
    paper."""
    from sandbox.forkserver import preload_modules

    plans = papers_plan(20, 40, heterogeneous=True)
    pset_heavy_generate(tmp_path, plans, per_second=1000, paper_bytes=3000)
    call_command("import_pset", str(tmp_path), version="bench-2.0.0", stdout=StringIO(), stderr=StringIO())
    sets = {
        frozenset(preload_modules({p.name: p.read_bytes() for p in (tmp_path / plan.paper_id).iterdir()}))
        for plan in plans
    }
    assert len(sets) == 19
    assert any("sympy" in s for s in sets) and any("scipy.signal" in s for s in sets)
