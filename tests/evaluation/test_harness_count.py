"""The harness counts the tests itself (FORMAT.md 7.5): answers that pass the 7.4 pass rule by a skip, an early exit,
a swallowed failure or a test made to disappear are failed, with the test named, on bwrap and docker, warm and cold.

Each attack is first shown to pass with plain `python paper2code_test.py` and no guard (7.4 applied to its output),
so an attack that does not work can never count as contained.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.paper2code import passes, splice
from benchmarks.services.blobs import environment_hash
from evaluation.executor import ItemRun, answer_test, reference_manifest
from evaluation.outcomes import manifest_made, outcome_classify
from sandbox import ExecResult
from sandbox.harness import CountedTest, HarnessVerdict
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.conftest import ISOLATING_BACKENDS
from tests.evaluation.test_answer_tampering import ANNOTATED, FILES, HIDDEN, LAYER_NORM, LIMITS, body, reference

CORRECT = reference(LAYER_NORM)
TOP_TOKENS = "__main__.TestTinyFormer.test_top_tokens"
ATTACKS = {
    # Every test reaching the answer counts as skipped: unittest says "OK (skipped=2)" and exits 0.
    "skip": (
        body("import unittest", "raise unittest.SkipTest('needs a GPU')"),
        "__main__.TestTinyFormer.test_block_matches_reference",
    ),
    # The process ends with status 0 in the middle of the first test that reaches the answer, before any verdict.
    "os-exit": (
        body("import os, sys", "sys.stdout.flush()", "sys.stderr.flush()", "os._exit(0)"),
        "__main__.TestTinyFormer.test_block_matches_reference",
    ),
    # sys.exit(0) where unittest does not catch it (the result's stopTest, outside every test part): the failure of
    # the wrong answer is printed as a bare "F" and the summary never comes.
    "sys-exit": (
        body(
            "import sys, unittest",
            "for cls in (unittest.TestResult, unittest.TextTestResult):",
            "    cls.stopTest = lambda self, test: sys.exit(0)",
            "return x",
        ),
        "__main__.TestTinyFormer.test_block_matches_reference",
    ),
    # A control-flow exception of the framework that ends the test part with its success intact, after making every
    # later failure end the same way: the wrong answer's assertions never count.
    "swallows-failures": (
        body(
            "import contextlib, unittest.case",
            "@contextlib.contextmanager",
            "def quiet(self, test_case, subTest=False):",
            "    try:",
            "        yield",
            "    except Exception:",
            "        pass",
            "unittest.case._Outcome.testPartExecutor = quiet",
            "raise unittest.case._ShouldStop()",
        ),
        "__main__.TestTinyFormer.test_block_matches_reference",
    ),
    # A correct answer that takes a test out of the suite before it runs: "Ran 3 tests ... OK".
    "test-disappears": (
        body(
            "import gc, unittest",
            "for suite in [o for o in gc.get_objects() if isinstance(o, unittest.TestSuite)]:",
            "    suite._tests[:] = [t for t in suite._tests",
            "                       if getattr(t, '_testMethodName', '') != 'test_top_tokens']",
        )
        + CORRECT,
        TOP_TOKENS,
    ),
}


def spliced_files(code: str) -> dict[str, bytes]:
    return {**FILES, ANNOTATED.path: splice(ANNOTATED, LAYER_NORM, code).encode()}


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_passes_with_plain_python_and_no_guard(attack, tmp_path):
    for name, data in spliced_files(ATTACKS[attack][0]).items():
        (tmp_path / name).write_bytes(data)
    plain = subprocess.run(
        [sys.executable, "paper2code_test.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert passes(exit_code=plain.returncode, stdout=plain.stdout, stderr=plain.stderr, timed_out=False), (
        plain.returncode,
        plain.stdout[-800:],
        plain.stderr[-800:],
    )


@pytest.fixture(scope="module", params=[f"{name}-{mode}" for name in ISOLATING_BACKENDS for mode in ("warm", "cold")])
def session(request, sandbox_cache):
    name, mode = request.param.split("-")
    backend = sandbox_backend_or_missing(name, sandbox_cache)
    backend.forkserver = mode == "warm"
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    with backend.session(environment) as session:
        manifest = reference_manifest(
            session=session, files=FILES, test_entry_point="paper2code_test.py", limits=LIMITS
        )
        yield session, manifest


def judge(session, manifest, code: str, *, static_audit: bool = False) -> ItemRun:
    return answer_test(
        session=session,
        files=FILES,
        annotated=ANNOTATED,
        position=LAYER_NORM.index,
        code=code,
        test_entry_point="paper2code_test.py",
        hidden_files=HIDDEN,
        limits=LIMITS,
        static_audit=static_audit,
        manifest=manifest,
    )


def test_the_reference_makes_a_manifest_of_its_four_tests_and_passes_against_it(session):
    session, manifest = session
    assert manifest["runner"] == "unittest" and manifest["runs"] == 1
    assert sorted(manifest["tests"]) == sorted(
        f"__main__.TestTinyFormer.{name}"
        for name in (
            "test_layer_norm",
            "test_attention_matches_reference",
            "test_block_matches_reference",
            "test_top_tokens",
        )
    )
    assert set(manifest["tests"].values()) == {"passed"}
    run = judge(session, manifest, CORRECT)
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), run.verdict
    assert [row["passed"] for row in run.verdict.tests] == [True] * 4


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_count_fails_each_attack_naming_the_test(session, attack):
    session, manifest = session
    code, test = ATTACKS[attack]
    run = judge(session, manifest, code)
    verdict = run.verdict
    # Flagged only with what the test said: failed. The count alone decides it, whatever the guard saw.
    assert verdict.status in ("failed", "flagged") and (verdict.measured or verdict.status) == "failed", verdict
    assert test in verdict.detail, verdict.detail
    row = next(row for row in verdict.tests if row["id"] == test)
    assert not row["passed"] and row["problem"], row


def test_a_failing_answer_s_tests_carry_their_traceback_tail(session):
    session, manifest = session
    run = judge(session, manifest, body("return x"))
    assert run.verdict.status == "failed"
    failing = {row["id"]: row for row in run.verdict.tests if not row["passed"]}
    assert set(failing) == {
        "__main__.TestTinyFormer.test_layer_norm",
        "__main__.TestTinyFormer.test_block_matches_reference",
    }
    assert all("AssertionError" in row["detail"] and row["outcome"] == "failed" for row in failing.values())


def harness(*records: CountedTest, runs: int = 1) -> HarnessVerdict:
    return HarnessVerdict(True, "", "", (), records, runs)


OK_RESULT = ExecResult(exit_code=0, stdout="", stderr="OK\n", timed_out=False, duration=0.1, backend="local")


def test_a_script_entry_point_keeps_the_7_4_rule_and_may_not_start_counting():
    # A plain script (or pytest) never calls unittest.main: no tests are counted, 7.4 and completion decide.
    script = manifest_made(harness(runs=0))
    assert script == {"runner": "script"}
    assert outcome_classify(result=OK_RESULT, harness=harness(runs=0), manifest=script).status == "passed"
    counted = harness(CountedTest("__main__.T.test_x", "passed", True))
    verdict = outcome_classify(result=OK_RESULT, harness=counted, manifest=script)
    assert verdict.status == "failed" and "unittest.main" in verdict.detail


def test_without_a_manifest_only_the_reference_s_own_run_may_skip():
    skipped = harness(
        CountedTest("__main__.T.test_gpu", "skipped", False, detail="skipped: no GPU"),
        CountedTest("__main__.T.test_x", "passed", True),
    )
    assert outcome_classify(result=OK_RESULT, harness=skipped, manifest=None).status == "passed"
    manifest = manifest_made(skipped)
    assert manifest["tests"] == {"__main__.T.test_gpu": "skipped", "__main__.T.test_x": "passed"}
    assert outcome_classify(result=OK_RESULT, harness=skipped, manifest=manifest).status == "passed"
    # A task whose reference could not make a manifest: every test must pass, none may be skipped.
    strict = outcome_classify(result=OK_RESULT, harness=skipped, manifest={"runner": "strict"})
    assert strict.status == "failed" and "test_gpu was skipped" in strict.detail


def test_a_test_that_ran_fewer_sub_tests_than_the_reference_is_no_pass():
    # A stop raised inside subTest (unittest's _ShouldStop) ends the test with its sub-tests uncounted (0 of 0).
    reference = harness(
        CountedTest("__main__.T.test_x", "passed", True, (3, 3)), CountedTest("__main__.T.test_y", "passed", True)
    )
    manifest = manifest_made(reference)
    assert manifest["subtests"] == {"__main__.T.test_x": 3}
    assert outcome_classify(result=OK_RESULT, harness=reference, manifest=manifest).status == "passed"
    vanished = harness(
        CountedTest("__main__.T.test_x", "passed", True, (0, 0)), CountedTest("__main__.T.test_y", "passed", True)
    )
    verdict = outcome_classify(result=OK_RESULT, harness=vanished, manifest=manifest)
    assert verdict.status == "failed" and "ran 0 of the reference's 3 sub-tests" in verdict.detail
    # A manifest stored before sub-tests were counted asks nothing of them.
    older = {key: value for key, value in manifest.items() if key != "subtests"}
    assert outcome_classify(result=OK_RESULT, harness=vanished, manifest=older).status == "passed"


def test_a_test_that_ran_twice_or_a_sub_test_that_failed_is_no_pass():
    manifest = {"runner": "unittest", "runs": 1, "tests": {"__main__.T.test_x": "passed"}}
    twice = outcome_classify(
        result=OK_RESULT, harness=harness(CountedTest("__main__.T.test_x", "passed", True), runs=2), manifest=manifest
    )
    assert twice.status == "failed" and "ran 2 times" in twice.detail
    partial = outcome_classify(
        result=OK_RESULT, harness=harness(CountedTest("__main__.T.test_x", "passed", True, (2, 3))), manifest=manifest
    )
    assert partial.status == "failed" and "2 of 3 sub-tests" in partial.detail


# Replace and restore (issue 18, 5): numpy's closeness check swapped through the module's namespace dict on the first
# call, put back by a module cleanup after the last test, before the finish, where the guard once compared alone.
REPLACE_AND_RESTORE = body(
    "import unittest, numpy.testing._private.utils as helpers",
    "namespace = vars(helpers)",
    "if 'kept' not in namespace:",
    "    namespace['kept'] = namespace['assert_array_compare']",
    "    namespace['assert_array_compare'] = lambda *a, **k: None",
    "    unittest.addModuleCleanup(namespace.__setitem__, 'assert_array_compare',",
    "                              namespace['kept'])",
    "return x",
)


def test_replace_and_restore_passes_with_plain_python(tmp_path):
    for name, data in spliced_files(REPLACE_AND_RESTORE).items():
        (tmp_path / name).write_bytes(data)
    plain = subprocess.run(
        [sys.executable, "paper2code_test.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert passes(exit_code=plain.returncode, stdout=plain.stdout, stderr=plain.stderr, timed_out=False), (
        plain.stdout[-800:],
        plain.stderr[-800:],
    )


def test_the_guard_sees_a_replacement_at_the_first_test_boundary_it_outlives(session):
    session, manifest = session
    run = judge(session, manifest, REPLACE_AND_RESTORE)
    assert run.verdict.status == "flagged", run.verdict
    assert any(
        f["kind"] == "tampering"
        and "assert_array_compare was replaced (seen at the end of "
        "__main__.TestTinyFormer.test_block_matches_reference)"
        in f["detail"]
        for f in run.verdict.findings
    ), run.verdict.findings
