"""validate_pset: the section 9 checks of every paper of a set, by the submissions' validation code, in a real
sandbox; it names exactly the snippets the tests do not cover, writes the JSON report and exits non-zero."""

from __future__ import annotations

import io
import json
import textwrap

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from tests.conftest import DEMO_PSET

pytestmark = pytest.mark.django_db

CODE = '''\
def total(values, debug=False):
    """Sum of the values; with debug, also print them."""
    if debug:
        shown = list(values)  # the branch keeps a statement when the snippet is masked
        # <paper2code name="print the values when debugging">
        print("values:", shown)
        # </paper2code name="print the values when debugging">
    # <paper2code name="add the values">
    result = 0
    for v in values:
        result += v
    return result
    # </paper2code name="add the values">
'''
TEST = """\
import unittest

from calc import total


class TotalTest(unittest.TestCase):
    def test_total(self):
        self.assertEqual(total([1, 2, 3]), 6)  # never with debug=True: the first snippet is not covered


if __name__ == "__main__":
    unittest.main()
"""


def legacy_pset(root):
    """One paper whose own requirements cannot be installed (a version that does not exist) but whose tests pass
    in a shared environment, with a snippet in a branch its tests never take."""
    paper = root / "legacy-sum"
    paper.mkdir(parents=True)
    (root / "papers.yaml").write_text(
        textwrap.dedent("""\
        - id: legacy-sum
          title: "A fictional legacy paper"
          annotated_file_paths: calc.py
          context_file_paths: null
        """)
    )
    (paper / "paper2code_paper.md").write_text("# Totals\n\nWe add the values. " + "word " * 120 + "\n")
    (paper / "calc.py").write_text(CODE)
    (paper / "paper2code_test.py").write_text(TEST)
    (paper / "requirements.txt").write_text("numpy==0.0.1\n")
    environment = root / "shared-environment.txt"
    environment.write_text("# the original harness's shared environment: the standard library is enough here\n")
    return environment


def test_shared_environment_passes_the_reference_and_flags_exactly_the_uncovered_snippet(tmp_path, sandbox, media_root):  # noqa: F811
    environment = legacy_pset(tmp_path / "pset")
    out, err = io.StringIO(), io.StringIO()
    with pytest.raises(CommandError, match=r"2 problem\(s\) in 1 of 1 paper\(s\)"):
        call_command(
            "validate_pset",
            str(tmp_path / "pset"),
            environment=str(environment),
            json_out=str(tmp_path / "report.json"),
            stdout=out,
            stderr=err,
        )
    report = json.loads((tmp_path / "report.json").read_text())
    reference = report["papers"]["legacy-sum"].pop("reference")
    assert reference["runs"] == reference["passed"] == 2 and reference["flaky"] is False
    assert len(reference["durations"]) == 2 and reference["spread"] >= 0
    assert report == {
        "papers": {
            "legacy-sum": {
                "reference_passed": True,
                "warnings": [],
                "snippets": {
                    "print the values when debugging": {"masked_fails": False, "noop_fails": False},
                    "add the values": {"masked_fails": True, "noop_fails": True},
                },
            }
        }
    }
    summary = out.getvalue()
    assert "legacy-sum: reference passed, 1/2 snippets covered" in summary
    assert '"print the values when debugging" (calc.py) masked: the tests still pass' in summary
    assert '"add the values"' not in summary
    assert "check" in err.getvalue()  # the progress bar


def test_own_requirements_that_cannot_install_fail_the_paper(tmp_path, sandbox, media_root):  # noqa: F811
    legacy_pset(tmp_path / "pset")
    out = io.StringIO()
    with pytest.raises(CommandError, match="problem"):
        call_command(
            "validate_pset", str(tmp_path / "pset"), json_out=str(tmp_path / "r.json"), stdout=out, stderr=io.StringIO()
        )
    report = json.loads((tmp_path / "r.json").read_text())["papers"]["legacy-sum"]
    assert report["reference_passed"] is False
    assert "requirements:" in out.getvalue() and "not run: the requirements must install first" in out.getvalue()


def test_a_covered_set_passes(tmp_path, sandbox, media_root):  # noqa: F811
    """The demo's pure-Python paper: every snippet covered, exit status zero."""
    import shutil

    root = tmp_path / "pset"
    shutil.copytree(DEMO_PSET / "trimmed-infonce", root / "trimmed-infonce")
    entries = (DEMO_PSET / "papers.yaml").read_text().split("\n- id: ")
    (root / "papers.yaml").write_text("- id: " + next(e for e in entries if e.startswith("trimmed-infonce")))
    out = io.StringIO()
    call_command("validate_pset", str(root), json_out=str(tmp_path / "r.json"), stdout=out, stderr=io.StringIO())
    report = json.loads((tmp_path / "r.json").read_text())["papers"]["trimmed-infonce"]
    assert report["reference_passed"] and len(report["snippets"]) == 10
    assert all(s == {"masked_fails": True, "noop_fails": True} for s in report["snippets"].values())
    assert "all checks passed: 1 paper(s), 42 check(s)" in out.getvalue()  # 2 + 10 x (sealed, judged, masked, no-op)


def test_a_set_that_does_not_load_is_refused_with_its_problems(tmp_path):
    (tmp_path / "papers.yaml").write_text("- id: missing-folder\n  title: x\n  annotated_file_paths: a.py\n")
    with pytest.raises(CommandError, match="problem"):
        call_command("validate_pset", str(tmp_path))
    with pytest.raises(CommandError, match="cannot read the environment"):
        call_command("validate_pset", str(tmp_path), environment=str(tmp_path / "nope.txt"))


def test_import_with_a_shared_environment_builds_every_task_from_it(tmp_path, sandbox, client, media_root):  # noqa: F811
    """The legacy case end to end: imported with --environment, the task is built from the shared environment
    (recorded on it and shown on its page), keeps its own unreachable requirements as a file, and its reference
    passes its tests in that environment in the sandbox."""
    from benchmarks.models import Task
    from benchmarks.selectors import blob_read
    from benchmarks.services.blobs import environment_hash
    from evaluation.executor import limits_default, package_test

    environment = legacy_pset(tmp_path / "pset")
    with pytest.raises(CommandError, match="not both"):
        call_command(
            "import_pset",
            str(tmp_path / "pset"),
            version="1.0.0",
            environment=str(environment),
            requirements=str(environment),
        )
    call_command(
        "import_pset",
        str(tmp_path / "pset"),
        version="1.0.0",
        environment=str(environment),
        publish=True,
        stdout=io.StringIO(),
        stderr=io.StringIO(),
    )
    task = Task.objects.get(paper__slug="legacy-sum")
    shared = environment.read_text().strip()
    assert task.requirements == shared and task.environment_hash == environment_hash(shared)
    assert blob_read(sha256=task.files["requirements.txt"]) == b"numpy==0.0.1\n"  # kept, informational
    page = client.get(reverse("paper-detail", args=["1.0.0", "legacy-sum"])).content.decode()
    assert task.environment_hash[:12] in page and "the standard library is enough here" in page
    files = {path: blob_read(sha256=digest) for path, digest in task.files.items()}
    run = package_test(
        files=files,
        test_entry_point=task.test_entry_point,
        environment_hash=task.environment_hash,
        requirements=task.requirements,
        limits=limits_default(),
    )
    assert run.verdict.status == "passed", run.verdict.detail
    # Without --environment, today's behaviour: the task's own requirements, which cannot be installed.
    call_command("import_pset", str(tmp_path / "pset"), version="1.1.0", stdout=io.StringIO(), stderr=io.StringIO())
    own = Task.objects.filter(paper__slug="legacy-sum").order_by("-revision").first()
    assert own.revision == 2 and own.requirements == "numpy==0.0.1"
