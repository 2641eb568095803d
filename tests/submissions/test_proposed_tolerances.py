"""Validation counts what the proposed replay tests kill with the tolerances their file states (issue 35): the file
compares each dtype within its own (rtol, atol) of its TOLERANCES table (float64 held to at most 1e-9 relative),
and the "proposed" mutation numbers come from the same table (`submissions.proposed.proposed_tolerance`, one rule),
not from the sealed replay's single tolerance. On the demo's DampNest (float64 numpy): a mutant that scales the
epsilon of the damping ratio by 100 changes the update by about 1e-6 relative, within the replay's 1e-5, so the
replay lets it through; the proposed tests' file fails it, and validation's number now says so."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

import pytest

from benchmarks.paper2code import noop, parse, splice
from benchmarks.paper2code.mutation import Mutant
from benchmarks.selectors import package_load
from benchmarks.services.blobs import environment_hash
from evaluation.environments import build_failures
from evaluation.executor import limits_default, package_test, session_for
from submissions.mutants import mutant_replayer, mutants_judge, mutation_result, proposed_kills
from submissions.proposed import TEST_FILE, proposed_tests_archive
from submissions.validation import package_hidden
from tests.submissions.test_validation import validate

pytestmark = pytest.mark.django_db

NAME = "damping ratio and damped momentum coefficient"


def test_the_proposed_numbers_count_what_the_proposed_file_kills_within_its_per_dtype_table(
    draft, author, sandbox, tmp_path
):
    report = validate(draft, author)
    assert report.status == "passed"
    revision = report.revision
    revision.refresh_from_db()
    package = package_load(revision)
    files, parsed = dict(package.files), package.annotated["optimizer.py"]
    [snippet] = [s for s in parsed.snippets if s.name == NAME]
    assert "+ eps)" in snippet.code
    mutant = Mutant("constant", snippet.code.replace("+ eps)", "+ 100 * eps)"), 1, "eps -> 100 * eps")

    env_hash = environment_hash(package.requirements)
    session = session_for(env_hash, package.requirements, failures=build_failures)
    limits = limits_default()
    replay = mutant_replayer(
        session=session,
        files=files,
        hidden=package_hidden(files=files, annotated=package.annotated, test_entry_point=package.test_entry_point),
        recording=revision.recording,
        annotated=parsed,
        position=snippet.index,
        limits=limits,
    )
    assert replay is not None, "the snippet is sealed"

    def test(m: Mutant):
        return package_test(
            files={**files, "optimizer.py": splice(parsed, snippet, m.body).encode()},
            test_entry_point=package.test_entry_point,
            environment_hash=env_hash,
            requirements=package.requirements,
            limits=limits,
        )

    result = mutation_result(mutants_judge([mutant], replay=replay, test=test, noop_body=noop(snippet)))
    [outcome] = result["mutants"]
    assert not (outcome["outcome"] == "killed" and outcome["by"] == "replay"), "within the replay's single 1e-5"

    # The proposed tests' file, beside the package with the mutant in place, run with plain python: it fails.
    folder = tmp_path / "package"
    for path, data in {**files, "optimizer.py": splice(parsed, snippet, mutant.body).encode()}.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    zipfile.ZipFile(io.BytesIO(proposed_tests_archive(revision=revision))).extractall(folder)
    done = subprocess.run(
        [sys.executable, TEST_FILE], cwd=folder, capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin"}
    )
    assert done.returncode != 0 and "for float64" in done.stderr, done.stderr[-2000:]

    # And validation's number agrees with the file: the proposed tests kill it.
    proposed = proposed_kills(result, sealed=True)
    assert proposed is not None and proposed["killed"] == 1, proposed
    if outcome["outcome"] != "killed":  # the author's tests let it through too: only the proposed tests kill it
        assert proposed["only_proposed"] == [mutant.diff]
    assert proposed["only_tests"] == []
    assert parse(files["optimizer.py"].decode(), "optimizer.py").snippets  # the package itself unchanged
