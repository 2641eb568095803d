"""Mutants through the sealed replay (issue 36 item 1, issue 37 item 6): a mutant of a sealed snippet is first
replayed on its function's recorded calls, and one the replay tells apart is killed with no test run; a mutant that
agrees on every recorded call and passes the tests is equivalent on the recorded inputs, reported apart and never
counted; a mutant whose change neither the recorded calls nor the tests can see is still a survivor; a score of 0%
never reads as passed."""

from __future__ import annotations

import inspect
import io
import json
import textwrap

import pytest
from django.core.management import CommandError, call_command
from django.template.loader import render_to_string

from benchmarks.paper2code import parse
from benchmarks.paper2code.mutation import mutants_generate
from submissions import validation
from submissions.models import SetValidation, SetValidationPaper
from submissions.selectors import set_paper_summary

pytestmark = pytest.mark.django_db

CODE = """\
def squared_error(a, b):
    # <paper2code name="squared error">
    diff = a - b
    return diff * diff
    # </paper2code name="squared error">


def clipped(x, low):
    # <paper2code name="clip from below">
    return x if x > low else low
    # </paper2code name="clip from below">


def count_to(n, verbose=False):
    if verbose:
        # <paper2code name="announce the count">
        print("counting to", n, sep=" ")
        # </paper2code name="announce the count">
        pass
    return list(range(1, n + 1))
"""
TEST = """\
import unittest

from losses import clipped, count_to, squared_error


class LossTest(unittest.TestCase):
    def test_squared_error(self):
        self.assertEqual(squared_error(3.0, 1.0), 4.0)
        self.assertEqual(squared_error(1.0, 4.0), 9.0)

    def test_clipped(self):
        self.assertEqual(clipped(2.0, 1.0), 2.0)
        self.assertEqual(clipped(0.5, 1.0), 1.0)

    def test_count(self):
        self.assertEqual(count_to(3), [1, 2, 3])  # never verbose: no test sees the announcement


if __name__ == "__main__":
    unittest.main()
"""
MUTANTS = 20  # more than any of these bodies offers: every mutant of each is judged


def pset(root):
    paper = root / "losses"
    paper.mkdir(parents=True)
    (root / "papers.yaml").write_text(
        textwrap.dedent("""\
        - id: losses
          title: "A fictional paper of losses"
          annotated_file_paths: losses.py
          context_file_paths: null
        """)
    )
    (paper / "paper2code_paper.md").write_text("# Losses\n\nWe square errors. " + "word " * 120 + "\n")
    (paper / "losses.py").write_text(CODE)
    (paper / "paper2code_test.py").write_text(TEST)
    (paper / "requirements.txt").write_text("# the standard library\n")
    return root


@pytest.fixture
def test_runs(monkeypatch):
    """Every run of the paper's tests a mutant caused (its tests stop at the first failure), counted as the real
    runs go by: the sandbox runs each one."""
    runs: list[dict[str, bytes]] = []
    real = validation.package_test

    def counted(**kwargs):
        # The masked and no-op checks stop at their first failure too (variant_checks): they are not mutants' runs.
        variant = any(frame.function == "variant_checks" for frame in inspect.stack(context=0))
        if kwargs.get("guard") is not None and kwargs["guard"].failfast and not variant:
            runs.append(kwargs["files"])
        return real(**kwargs)

    monkeypatch.setattr(validation, "package_test", counted)
    return runs


def test_the_replay_kills_mutants_with_no_test_run_and_equivalent_ones_are_reported_apart(
    tmp_path, sandbox, settings, media_root, test_runs
):
    settings.MUTATION_MIN_SECONDS = 5
    root = pset(tmp_path / "pset")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"problem\(s\) in 1 of 1"):  # the announcement is not covered
        call_command(
            "validate_pset",
            str(root),
            mutants=MUTANTS,
            min_score=0.5,
            json_out=str(tmp_path / "r.json"),
            stdout=out,
            stderr=io.StringIO(),
        )
    report = json.loads((tmp_path / "r.json").read_text())["papers"]["losses"]
    checks = {c["key"]: c for c in SetValidationPaper.objects.get().checks}
    results = {name: checks[f"mutation:losses.py:{i}"]["result"] for i, name in enumerate(report["snippets"])}
    expected = {
        s.name: mutants_generate(s.code, limit=MUTANTS, seed=settings.MUTATION_SEED)
        for s in parse(CODE, "losses.py").snippets
    }
    assert all(checks[f"sealed:losses.py:{i}"]["result"]["sealed"] for i in range(3)), checks

    # The squared error: a sign flipped before squaring computes the same; every other mutant differs on a
    # recorded call, so the replay kills it and the tests never run for it.
    squared = results["squared error"]
    flipped = "line 1: diff = a - b  ->  diff = (-(a - b))"
    assert flipped in [m.diff for m in expected["squared error"]]
    assert squared["equivalents"] == [flipped] and squared["equivalent"] == 1
    assert squared["generated"] == len(expected["squared error"]) > 4
    assert squared["killed"] == squared["counted"] == squared["generated"] - 1 and squared["score"] == 1.0
    assert squared["killed_by"] == {"replay": squared["killed"], "tests": 0}
    assert squared["survivors"] == [] and squared["test_runs"] == 1  # the equivalent one only
    by_diff = {m["diff"]: m for m in squared["mutants"]}
    assert by_diff[flipped]["outcome"] == "equivalent"
    assert {m["by"] for d, m in by_diff.items() if d != flipped} == {"replay"}

    # The clip: `>` and `>=` meet where x equals low, and there both return low: equivalent, apart.
    clip = results["clip from below"]
    assert any("x > low" in d and "x >= low" in d for d in clip["equivalents"]), clip["mutants"]
    assert clip["survivors"] == [] and clip["score"] == 1.0

    # The announcement: its change is a printed line that no recorded output and no test sees (its body replaced
    # by a no-op agrees with the recording too), so every mutant is a survivor, never equivalent.
    announce = results["announce the count"]
    assert announce["generated"] == len(expected["announce the count"]) > 0
    assert announce["survivors"] == [m.diff for m in expected["announce the count"]]
    assert announce["equivalent"] == 0 and announce["score"] == 0.0
    assert announce["test_runs"] == announce["generated"]

    # Tests ran for exactly the mutants the replay could not tell apart, each stopping at its first failure.
    assert len(test_runs) == sum(r["test_runs"] for r in results.values())
    assert len(test_runs) < sum(r["generated"] for r in results.values()) // 2

    json_mutation = report["snippets"]["squared error"]["mutation"]
    assert json_mutation["equivalents"] == [flipped] and json_mutation["killed_by"]["tests"] == 0
    text = out.getvalue()
    assert f"equivalent on the recorded inputs: {flipped}" in text
    n = squared["killed"]
    assert (
        f'"squared error": mutation score 100% ({n} of {n} killed: {n} by the replay, 0 by the tests; '
        "1 equivalent on the recorded inputs, not counted)"
    ) in text
    assert "killed by the replay: line 2: return diff * diff" in checks["mutation:losses.py:0"]["detail"]
    assert 'mutation score 0% of "announce the count" is below the minimum 50%' in text


def test_a_survivor_the_tests_let_through_on_an_unsealed_snippet_stays_a_survivor(tmp_path, sandbox, settings):
    """With no recording to replay (the snippet's function is defined inside another), only the tests judge: a
    mutant they let through is a survivor, never called equivalent."""
    code = (
        "def make_scale():\n"
        "    def scale(x, factor=2.0):\n"
        '        # <paper2code name="scale">\n'
        "        return x * factor\n"
        '        # </paper2code name="scale">\n'
        "    return scale\n"
    )
    test = (
        "import unittest\n\nfrom scaled import make_scale\n\n\n"
        "class ScaleTest(unittest.TestCase):\n"
        "    def test_zero_stays_zero(self):\n"
        "        self.assertEqual(make_scale()(0.0), 0.0)  # weak: x / factor is 0 too\n\n\n"
        'if __name__ == "__main__":\n    unittest.main()\n'
    )
    annotated = {"scaled.py": parse(code, "scaled.py")}
    files = {"scaled.py": code.encode(), "paper2code_test.py": test.encode()}
    checks = {
        c.key: c
        for c in validation.sandbox_checks(
            files=files,
            annotated=annotated,
            requirements="",
            test_entry_point="paper2code_test.py",
            mutants=MUTANTS,
            score_min=0.5,
        )
    }
    assert checks["sealed:scaled.py:0"].result["sealed"] is False
    result = checks["mutation:scaled.py:0"].result
    divided = "line 1: return x * factor  ->  return (x / factor)"
    assert divided in result["survivors"] and result["equivalent"] == 0
    assert result["killed_by"]["replay"] == 0 and result["test_runs"] == result["generated"]
    assert checks["mutation:scaled.py:0"].warning.startswith("mutation score ")


def _zero_score_paper() -> SetValidationPaper:
    warning = validation.mutation_warning(name="announce", score=0.0, score_min=0.0)
    result = {"generated": 2, "counted": 2, "killed": 0, "survived": 2, "score": 0.0, "survivors": ["a", "b"]}
    result |= {"equivalent": 0, "equivalents": [], "timeouts": [], "killed_by": {"replay": 0, "tests": 0}}
    checks = [
        {"key": "reference", "status": "passed", "detail": "", "result": None},
        {"key": "masked:a.py:0", "status": "passed", "detail": ""},
        {"key": "noop:a.py:0", "status": "passed", "detail": ""},
        {"key": "mutation:a.py:0", "status": "passed", "detail": "", "result": result, "warning": warning},
    ]
    validation_run = SetValidation.objects.create(source="a set", status="passed")
    return SetValidationPaper.objects.create(
        validation=validation_run,
        position=0,
        paper="announcer",
        status="passed",
        snippets=[{"file": "a.py", "index": 0, "name": "announce"}],
        checks=checks,
        files={},
        annotated_paths=["a.py"],
    )


def test_a_zero_score_reads_warning_not_a_green_passed_on_the_set_validation_page():
    summary = set_paper_summary(paper=_zero_score_paper())
    assert summary.status == "passed" and summary.badge == ("warning", "warning")
    html = render_to_string(
        "submissions/_set_validation.html",
        {"validation": SetValidation.objects.get(), "summaries": [summary], "version": _Version()},
    )
    assert 'class="badge warning" data-testid="paper-status"' in html
    assert 'class="badge passed"' not in html
    assert 'data-testid="mutation-warning"' in html and "Mutation score <strong" in html


class _Version:
    name = "0.9.0"
