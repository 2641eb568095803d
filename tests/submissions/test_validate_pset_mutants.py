"""validate_pset --mutants: each snippet's mutants run in the sandbox as answers would; the score counts the killed
(a mutant that loops past its time limit is killed and named), lists the survivors as one-line diffs, and warns
below the minimum without failing; a reference that passes some runs and fails others is reported flaky."""

from __future__ import annotations

import io
import json
import textwrap

import pytest
from django.core.management import CommandError, call_command

from benchmarks.paper2code import parse
from benchmarks.paper2code.mutation import mutants_generate

pytestmark = pytest.mark.django_db

CODE = """\
def count_to(n, verbose=False):
    if verbose:
        # <paper2code name="announce the count">
        print("counting to", n, sep=" ")
        # </paper2code name="announce the count">
        pass
    # <paper2code name="count up">
    i = 0
    steps = []
    while i < n:
        i += 1
        steps.append(i)
    return steps
    # </paper2code name="count up">
"""
TEST = """\
import unittest

from counter import count_to


class CountTest(unittest.TestCase):
    def test_count(self):
        self.assertEqual(count_to(3), [1, 2, 3])  # never verbose: the tests cannot tell a wrong announcement


if __name__ == "__main__":
    unittest.main()
"""
FLAKY_TEST = """\
import random
import unittest


class CoinTest(unittest.TestCase):
    def test_coin(self):
        self.assertLess(random.SystemRandom().random(), 0.5)


if __name__ == "__main__":
    unittest.main()
"""


def pset(root, test: str = TEST):
    paper = root / "counter"
    paper.mkdir(parents=True)
    (root / "papers.yaml").write_text(
        textwrap.dedent("""\
        - id: counter
          title: "A fictional counting paper"
          annotated_file_paths: counter.py
          context_file_paths: null
        """)
    )
    (paper / "paper2code_paper.md").write_text("# Counting\n\nWe count. " + "word " * 120 + "\n")
    (paper / "counter.py").write_text(CODE)
    (paper / "paper2code_test.py").write_text(test)
    (paper / "requirements.txt").write_text("# the standard library\n")
    return root


def test_mutants_are_scored_with_survivors_and_timeouts_and_a_low_score_only_warns(
    tmp_path,
    sandbox,
    settings,  # noqa: F811
    media_root,
):
    settings.MUTATION_MIN_SECONDS = 3  # the mutants that count down forever end soon
    root = pset(tmp_path / "pset")
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"problem\(s\) in 1 of 1"):  # the masked announcement is uncovered
        call_command(
            "validate_pset",
            str(root),
            mutants=6,
            min_score=0.9,
            json_out=str(tmp_path / "r.json"),
            stdout=out,
            stderr=io.StringIO(),
        )
    report = json.loads((tmp_path / "r.json").read_text())["papers"]["counter"]
    annotated = parse(CODE, "counter.py")
    announce, count = report["snippets"]["announce the count"], report["snippets"]["count up"]
    expected = {s.name: mutants_generate(s.code, limit=6, seed=settings.MUTATION_SEED) for s in annotated.snippets}

    # Never run by the tests: every mutant of the announcement survives, each named by its diff.
    assert announce["mutation"]["generated"] == len(expected["announce the count"]) > 0
    assert announce["mutation"]["killed"] == 0 and announce["mutation"]["score"] == 0
    assert announce["mutation"]["survivors"] == [m.diff for m in expected["announce the count"]]
    assert 'print("counting to", n, sep=" ")' in announce["mutation"]["survivors"][0]

    # The count is checked exactly: every mutant dies, those that never end by the time limit.
    mutation = count["mutation"]
    assert mutation["generated"] == 6 and mutation["killed"] == 6 and mutation["score"] == 1.0
    assert mutation["survivors"] == []
    loops = [m.diff for m in expected["count up"] if "i += 1  ->  i -= 1" in m.diff or "i += 1  ->  i += 0" in m.diff]
    assert loops and set(mutation["timeouts"]) >= set(loops)

    assert report["warnings"] == [
        'mutation score 0% of "announce the count" is below the minimum 90%: add a test '
        "that fails for the surviving mutants"
    ]
    text = out.getvalue()
    assert "counter: reference passed, 1/2 snippets covered" in text and "mutants killed" in text
    assert (
        '"announce the count": mutation score 0%' in text
        and f"survived: {announce['mutation']['survivors'][0]}" in text
    )
    assert "timed out (killed): " in text


def test_without_mutants_no_mutation_is_reported(tmp_path, sandbox, media_root):  # noqa: F811
    root = pset(tmp_path / "pset")
    with pytest.raises(CommandError):
        call_command(
            "validate_pset", str(root), json_out=str(tmp_path / "r.json"), stdout=io.StringIO(), stderr=io.StringIO()
        )
    report = json.loads((tmp_path / "r.json").read_text())["papers"]["counter"]
    assert all("mutation" not in s for s in report["snippets"].values())


def test_bad_mutant_options_are_refused_saying_which(tmp_path):
    with pytest.raises(CommandError, match="--mutants -1"):
        call_command("validate_pset", str(tmp_path), mutants=-1)
    with pytest.raises(CommandError, match="--min-score 2: give a share"):
        call_command("validate_pset", str(tmp_path), mutants=3, min_score=2)


def test_a_reference_passing_some_runs_and_failing_others_is_reported_flaky(
    tmp_path,
    sandbox,
    settings,  # noqa: F811
    media_root,
):
    # A fair coin per run: 16 runs all alike has a chance of 2 in 65536.
    settings.SUBMISSION_REFERENCE_RUNS = 16
    root = pset(tmp_path / "pset", test=FLAKY_TEST)
    out = io.StringIO()
    with pytest.raises(CommandError):
        call_command("validate_pset", str(root), json_out=str(tmp_path / "r.json"), stdout=out, stderr=io.StringIO())
    reference = json.loads((tmp_path / "r.json").read_text())["papers"]["counter"]["reference"]
    assert reference["flaky"] is True and reference["runs"] == 16 and 0 < reference["passed"] < 16
    assert len(reference["durations"]) == 16
    assert reference["spread"] == pytest.approx(max(reference["durations"]) - min(reference["durations"]), abs=1e-3)
    assert f"(FLAKY: passed {reference['passed']} of 16 runs)" in out.getvalue()
    assert f"reference: flaky: passed {reference['passed']} of 16 runs" in out.getvalue()
