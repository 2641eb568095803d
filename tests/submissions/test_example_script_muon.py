"""On the real package (tests/evaluation/packages/muon: Muon's published optimizer, bfloat16 Newton-Schulz iterations,
in-place momentum), the example script it names runs with the reference in the sandbox, its calls are recorded and
the replay tests proposed from them run with the package's own python, beside its files but neither its tests nor
its reference copy: they pass on the reference and fail a wrong bfloat16 body, naming the call. It builds one
environment (torch and numpy), most of its time."""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from benchmarks.paper2code import splice
from benchmarks.paper2code.pset import read_pset
from benchmarks.services import environment_hash
from evaluation.environments import build_failures
from evaluation.executor import limits_default, session_for
from submissions.models import Revision
from submissions.proposed import EXAMPLE_RECORDING, TEST_FILE, proposed_tests_archive
from submissions.validation import example_check, package_hidden

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
MUON = Path(__file__).parents[1] / "evaluation" / "packages" / "muon"
ITERATIONS = "quintic Newton-Schulz iterations"
# A wrong sign on the cubic term.
WRONG = """    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A
        X = a * X - B @ X
"""


def test_the_example_script_s_proposed_tests_pass_the_reference_and_fail_a_wrong_bfloat16_body(
    sandbox, draft, settings
):
    [package] = read_pset(MUON)
    files, annotated = dict(package.files), dict(package.annotated)
    session = session_for(environment_hash(package.requirements), package.requirements, failures=build_failures)
    limits = replace(limits_default(), wall_seconds=settings.SUBMISSION_TEST_SECONDS)
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point=package.test_entry_point)
    assert {"paper2code_test.py", "muon_ref.py"} <= hidden

    check = example_check(
        session=session, files=files, annotated=annotated, script="example.py", hidden=hidden, limits=limits
    )
    assert check.status == "passed", check.detail
    assert "muon.zeropower_via_newtonschulz5" not in check.result["recorded"]
    assert {"zeropower_via_newtonschulz5", "muon_update", "adam_update"} <= set(check.result["recorded"]), check.detail

    recording = {EXAMPLE_RECORDING: check.recording}
    revision = Revision(submission=draft, number=1, metadata={"id": "muon"}, recording=recording)
    archive = zipfile.ZipFile(io.BytesIO(proposed_tests_archive(revision=revision, source="example")))
    replay = {name: archive.read(name) for name in archive.namelist()}
    source = replay[TEST_FILE].decode()
    assert "while the example script example.py ran" in source
    assert '"bfloat16": (0.016, ' in source and '"float64": (1e-09, 1e-12)' in source  # stated, to be changed

    visible = {path: data for path, data in files.items() if path not in hidden}
    command = [session.environment.python, "-B", TEST_FILE]

    def run(body: str | None = None):
        spliced = dict(visible)
        if body is not None:
            parsed = annotated["muon.py"]
            snippet = next(s for s in parsed.snippets if s.name == ITERATIONS)
            spliced["muon.py"] = splice(parsed, snippet, body).encode()
        return session.run(files={**spliced, **replay}, command=command, limits=limits)

    done = run()
    assert done.exit_code == 0 and "OK" in done.stderr, done.stderr[-3000:]
    done = run(WRONG)
    assert done.exit_code != 0 and "zeropower_via_newtonschulz5, recorded call" in done.stderr, done.stderr[-3000:]
