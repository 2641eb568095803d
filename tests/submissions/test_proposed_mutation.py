"""The proposed replay tests' mutation score beside the author's (issue 35, item 2): each mutant validation runs is
first replayed on the recorded calls, as the proposed tests judge it, and only what the replay cannot tell apart
runs the author's tests; those only the author's tests kill are named. A shape-only test kills few value mutants;
the replay, comparing values, kills what it misses."""

from __future__ import annotations

import pytest

from benchmarks.paper2code import parse
from submissions import services
from tests.submissions.conftest import demo_files
from tests.submissions.test_validation import validate
from tests.submissions.test_validation_mutation import SHAPE_ONLY

pytestmark = pytest.mark.django_db


def test_the_proposed_tests_score_is_shown_beside_the_authors_with_what_only_one_kills(
    draft, author, sandbox, settings
):
    settings.SUBMISSION_MUTANTS = 2
    files = {**demo_files(), "paper2code_test.py": SHAPE_ONLY}
    report = validate(draft, author, files=services.draft_files_store(files))
    rows = {c.key: c for c in report.checks.all()}
    snippets = parse(files["optimizer.py"].decode(), "optimizer.py").snippets
    sealed = {s.index for s in snippets if rows[f"sealed:optimizer.py:{s.index}"].result["sealed"]}
    assert sealed, "the shape test calls DampNest.step: its snippets are sealed"
    mutation = {s.index: rows[f"mutation:optimizer.py:{s.index}"].result for s in snippets}
    for index in sealed:
        result, proposed = mutation[index], mutation[index]["proposed"]
        counted = [m for m in result["mutants"] if m["outcome"] != "equivalent"]
        # Counted within the proposed file's own per-dtype tolerances: float64's is tighter than the replay's, so
        # every mutant the replay kills, the proposed tests kill.
        assert proposed is not None and proposed["killed"] == sum(bool(m["proposed"]) for m in counted)
        assert result["killed_by"]["replay"] <= proposed["killed"] <= result["counted"]
        killed = [m for m in counted if m["outcome"] == "killed"]
        assert all(m["proposed"] for m in killed if m["by"] == "replay")
        assert len(proposed["only_tests"]) == sum(not m["proposed"] for m in killed)
    tests_killed = sum(mutation[i]["killed_by"]["tests"] for i in sealed)
    proposed_killed = sum(mutation[i]["proposed"]["killed"] for i in sealed)
    assert proposed_killed > tests_killed, (proposed_killed, tests_killed)
    detail = rows[f"mutation:optimizer.py:{min(sealed)}"].detail
    assert "the proposed replay tests kill" in detail
    print(
        f"author's shape-only tests kill {tests_killed}, the proposed replay tests {proposed_killed}, of "
        f"{sum(mutation[i]['generated'] for i in sealed)} mutants of the sealed snippets"
    )
