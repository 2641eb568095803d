"""The proposed replay tests' mutation score beside the author's (issue 35, item 2): each mutant validation runs is
also replayed on the recorded calls, as the proposed tests judge it; the survivors only one of the two kills are
named. A shape-only test kills few value mutants; the replay, comparing values, kills what it misses."""

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
        assert proposed is not None and proposed["killed"] <= result["generated"]
        # What only one side kills is consistent with the two counts.
        only_tests, only_proposed = len(proposed["only_tests"]), len(proposed["only_proposed"])
        assert result["killed"] - only_tests == proposed["killed"] - only_proposed
    tests_killed = sum(mutation[i]["killed"] for i in sealed)
    proposed_killed = sum(mutation[i]["proposed"]["killed"] for i in sealed)
    assert proposed_killed > tests_killed, (proposed_killed, tests_killed)
    assert any(mutation[i]["proposed"]["only_proposed"] for i in sealed)
    detail = next(rows[f"mutation:optimizer.py:{i}"].detail for i in sealed if mutation[i]["proposed"]["only_proposed"])
    assert "the proposed replay tests kill" in detail and "only the proposed tests kill: " in detail
    print(
        f"author's shape-only tests kill {tests_killed}, the proposed replay tests {proposed_killed}, of "
        f"{sum(mutation[i]['generated'] for i in sealed)} mutants of the sealed snippets"
    )
