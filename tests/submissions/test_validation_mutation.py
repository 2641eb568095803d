"""A submission's validation measures each snippet's mutation score in the sandbox: the author sees it with the
surviving mutants (which test to add), a maintainer sees it in review, a low score warns without refusing, and
acceptance keeps it on the task's snippets for the paper page."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils.html import escape

from benchmarks.models import BenchmarkVersion
from benchmarks.paper2code import parse
from benchmarks.paper2code.mutation import mutants_generate
from submissions import services
from tests.submissions.conftest import demo_files
from tests.submissions.test_validation import checks, validate

pytestmark = pytest.mark.django_db

# The demo optimiser's test, weakened: it only checks the shape of a step, so a wrong body passes too.
SHAPE_ONLY = b"""import unittest

import numpy as np

from optimizer import DampNest


class ShapeTest(unittest.TestCase):
    def test_step_keeps_the_shape(self):
        opt = DampNest(lr=0.1)
        theta = opt.step(np.ones(3), np.array([0.5, -0.2, 0.1]))
        self.assertEqual(theta.shape, (3,))


if __name__ == "__main__":
    unittest.main()
"""


def test_the_author_sees_each_snippets_score_with_the_surviving_mutants_and_a_low_score_only_warns(
    draft, author, sandbox, settings, client
):
    settings.SUBMISSION_MUTANTS, settings.MUTATION_SCORE_MIN = 2, 0.9
    files = {**demo_files(), "paper2code_test.py": SHAPE_ONLY}
    report = validate(draft, author, files=services.draft_files_store(files))
    rows = {c.key: c for c in report.checks.all()}
    annotated = parse(files["optimizer.py"].decode(), "optimizer.py")
    mutation_rows = [rows[f"mutation:optimizer.py:{s.index}"] for s in annotated.snippets]
    assert all(r.status == "passed" for r in mutation_rows)  # a score never fails validation
    assert {r.snippet_name for r in mutation_rows} == {s.name for s in annotated.snippets}
    for snippet, row in zip(annotated.snippets, mutation_rows, strict=False):
        expected = mutants_generate(snippet.code, limit=2, seed=settings.MUTATION_SEED)
        assert row.result["generated"] == len(expected)
        assert row.result["killed"] + row.result["survived"] + row.result["equivalent"] == len(expected)
        assert set(row.result["survivors"]) | set(row.result["equivalents"]) <= {m.diff for m in expected}
    weak = [r for r in mutation_rows if r.result["survivors"]]
    assert weak, "a shape-only test lets some mutant through"
    assert all(r.warning.startswith("mutation score ") and "below the minimum 90%" in r.warning for r in weak)
    assert not [r for r in mutation_rows if r.warning and not r.result["survivors"]]

    client.force_login(author)
    page = client.get(reverse("submission-detail", args=[draft.pk])).content.decode()
    assert 'data-testid="mutation-score"' in page and "Surviving mutants" in page
    assert 'data-testid="check-warning"' in page
    assert escape(weak[0].result["survivors"][0]) in page


def test_the_reviewer_sees_the_scores_and_acceptance_keeps_them_for_the_paper_page(
    draft, author, maintainer, sandbox, settings, client
):
    settings.SUBMISSION_MUTANTS, settings.MUTATION_SCORE_MIN = 1, 0.5
    report = validate(draft, author)
    assert report.status == "passed", checks(report)
    rows = {c.key: c for c in report.checks.filter(key__startswith="mutation:")}
    assert len(rows) == 12
    generated = sum(r.result["generated"] for r in rows.values())
    killed = sum(r.result["killed"] for r in rows.values())
    assert generated == 12 and killed >= 10  # the demo's own tests compare every stage with the reference

    client.force_login(maintainer)
    review = client.get(reverse("review-detail", args=[draft.pk])).content.decode()
    assert review.count('data-testid="mutation-score"') == 12

    task = services.submission_accept(submission=draft, actor=maintainer, reason="well tested")
    stored = {(s.file_path, s.position): s.mutation for s in task.snippets.all()}
    assert stored == {("optimizer.py", int(key.rsplit(":", 1)[1])): r.result for key, r in rows.items()}
    version = BenchmarkVersion.objects.get(status=BenchmarkVersion.Status.DRAFT)
    paper = client.get(reverse("paper-detail", args=[version.name, task.paper.slug])).content.decode()
    assert paper.count("of its mutants</summary>") == 12
