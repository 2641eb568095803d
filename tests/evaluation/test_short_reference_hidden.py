"""A reference file whose snippets are all one line is hidden from answers (issue 33, an attacker's leftover): a
reference of one line alone is too common to mark a copy (`return x` is in many files), so it is looked for with
the nearest line of code beside it in its file (benchmarks/paper2code/hidden.py). Before, such a file stayed
visible, and an answer importing the reference module passed its tests and its replay."""

from __future__ import annotations

import pytest

from benchmarks.models import Task
from benchmarks.paper2code import parse, splice
from benchmarks.paper2code.hidden import package_references, reference_copies
from evaluation.audit import answer_audit
from evaluation.taskfiles import task_hidden_files
from sandbox.harness import answer_span
from submissions.validation import package_hidden
from tests.evaluation.corpus.tasks import unguarded_run

ANNOTATED = """def scale(x):
    # <paper2code name="scale">
    return x * 2.5
    # </paper2code name="scale">


def shift(x):
    # <paper2code name="shift">
    return x + 0.75
    # </paper2code name="shift">
"""
# The author's original code, which the tests compare with.
REFERENCE = """def scale(x):
    return x * 2.5


def shift(x):
    return x + 0.75
"""
TESTS = """import unittest

import scale
import scale_ref


class ScaleTest(unittest.TestCase):
    def test_scale(self):
        for x in (0.0, 1.0, -3.5):
            self.assertEqual(scale.scale(x), scale_ref.scale(x))

    def test_shift(self):
        for x in (0.0, 1.0, -3.5):
            self.assertEqual(scale.shift(x), scale_ref.shift(x))


if __name__ == "__main__":
    unittest.main()
"""
FILES = {"scale.py": ANNOTATED.encode(), "scale_ref.py": REFERENCE.encode(), "paper2code_test.py": TESTS.encode()}
# Wrong on its own (it knows nothing of 2.5): it hands the call to the reference module.
ATTACK = "    from scale_ref import scale as reference\n    return reference(x)\n"


def test_without_hiding_it_an_answer_importing_the_one_line_reference_passes_its_tests():
    annotated = parse(ANNOTATED, "scale.py")
    assert {s.loc for s in annotated.snippets} == {1}
    wrong = {**FILES, "scale.py": splice(annotated, annotated.snippets[0], "    return x\n").encode()}
    assert not unguarded_run(wrong)[0]
    passed, output = unguarded_run({**FILES, "scale.py": splice(annotated, annotated.snippets[0], ATTACK).encode()})
    assert passed, output


def test_a_file_holding_one_line_references_is_hidden_and_an_answer_importing_it_is_flagged():
    annotated = parse(ANNOTATED, "scale.py")
    hidden = package_hidden(files=FILES, annotated={"scale.py": annotated}, test_entry_point="paper2code_test.py")
    assert hidden == {"scale_ref.py", "paper2code_test.py"}
    spliced = splice(annotated, annotated.snippets[0], ATTACK)
    first, last = answer_span(annotated.snippets[0].start_line, ATTACK)
    findings = answer_audit(
        source=spliced,
        first_line=first,
        last_line=last,
        hidden_modules=["scale_ref", "paper2code_test"],
        hidden_files=sorted(hidden),
        context_sources={"scale.py": spliced},
    )
    assert findings, "the import of the hidden reference module is a finding"


@pytest.mark.parametrize(
    "text",
    [
        "def helper(y):\n    return x * 2.5\n",  # the line alone, elsewhere: too common to be a copy
        "def scale(x):\n    return x * 3\n",  # the neighbouring line alone
    ],
)
def test_a_one_line_reference_alone_does_not_make_a_file_a_copy(text):
    references = package_references([parse(ANNOTATED, "scale.py")])
    assert reference_copies({"other.py": text.encode()}, references) == {}


@pytest.mark.parametrize(
    "text",
    [
        "def scale(x):\n\treturn x*2.5\n",  # the line with the one before it, other whitespace
        "def scale_copy(y):\n    return x * 2.5\n\n\ndef shift(x):\n",  # the line with the one after it
    ],
)
def test_a_one_line_reference_with_its_neighbouring_line_makes_a_file_a_copy(text):
    references = package_references([parse(ANNOTATED, "scale.py")])
    assert reference_copies({"other.py": text.encode()}, references) == {"other.py": ['scale.py: "scale"']}


@pytest.mark.django_db
def test_a_stored_task_hides_what_its_package_hides(release):
    """The run-time path reads the task's annotated files as validation reads the package's."""
    hidden = {t.paper.slug: sorted(task_hidden_files(t)) for t in Task.objects.filter(versions=release)}
    assert hidden == {
        "dampnest": ["optimizer_ref.py", "paper2code_test.py"],
        "topk-attention-pool": ["paper2code_test.py", "src/pooling_ref.py"],
        "trimmed-infonce": ["contrastive_ref.py", "paper2code_test.py"],
    }


# An attacker's respelling: comments the annotated file has beside its snippets and the copy lacks (a note above a
# marker, a trailing equation number), around a one-line snippet that is its file's last line of code.
COMMENTED = """import numpy as np


def logsumexp(x, axis):
    # eq. 3: the log of a sum of exponentials
    # <paper2code name="logsumexp">
    return np.log(np.exp(x - x.max(axis, keepdims=True)).sum(axis)) + x.max(axis)  # eq. 3
    # </paper2code name="logsumexp">


def smooth_max(x, t):
    # a softened maximum
    # <paper2code name="smooth max">
    return t * logsumexp(x / t, -1)
    # </paper2code name="smooth max">
"""
# The author's original code in another order, with no comment: what the tests compare with.
COMMENTED_COPY = """import numpy as np


def smooth_max(x, t):
    return t * logsumexp(x / t, -1)


def logsumexp(x, axis):
    return np.log(np.exp(x - x.max(axis, keepdims=True)).sum(axis)) + x.max(axis)
"""


def test_a_copy_without_the_comments_beside_its_references_is_still_a_copy():
    annotated = parse(COMMENTED, "ops.py")
    assert {s.loc for s in annotated.snippets} == {1}
    files = {"ops.py": COMMENTED.encode(), "ops_ref.py": COMMENTED_COPY.encode(), "paper2code_test.py": b"import ops\n"}
    hidden = package_hidden(files=files, annotated={"ops.py": annotated}, test_entry_point="paper2code_test.py")
    assert hidden == {"ops_ref.py", "paper2code_test.py"}
    # A `#` inside a string is code, not a comment: a copy must keep it.
    quoted = {"marks.py": b"def f(x):\n    return x + '#'\n"}
    assert reference_copies(quoted, {"f": ["def f(x):\n    return x + '#'\n"]}) == {"marks.py": ["f"]}
    assert reference_copies(quoted, {"f": ["def f(x):\n    return x + '%'\n"]}) == {}
