"""The attack of copying the hidden reference on the demo release: flagged with its evidence, on every backend, by
the static audit and by the runtime guard alone."""

from __future__ import annotations

import pytest

from benchmarks.models import Snippet
from benchmarks.services.psets import pset_import
from evaluation import executor
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("static_audit", [True, False], ids=["audited", "runtime-only"])
@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
@pytest.mark.parametrize(
    "answer",
    [
        "        from optimizer_ref import DampNest as _R\n        state = _R.__dict__\n",
        "        import importlib\n        ref = importlib.import_module('optimizer_ref')\n",
        "        exec(open('paper2code_test.py').read())\n",
    ],
)
def test_copying_the_hidden_reference_never_passes(
    backend_name, answer, static_audit, media_root, sandbox_cache, executor_backend
):
    backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
    version = pset_import(root=DEMO_PSET, version_name="hidden-1.0.0", publish=True).version
    snippet = Snippet.objects.get(
        task__versions=version, task__paper__slug="dampnest", name="remember gradient for next step"
    )
    executor_backend(backend)
    run = executor.item_execute(snippet=snippet, code=answer, static_audit=static_audit)
    honest = executor.item_execute(snippet=snippet, code=snippet.reference_code)
    assert run.verdict.status == "flagged", run.verdict
    sources = {f["source"] for f in run.verdict.findings if f["kind"] == "hidden"}
    assert sources == ({"static", "runtime"} if static_audit else {"runtime"}), run.verdict.findings
    assert (honest.verdict.status, honest.verdict.findings) == ("passed", ()), "the sandbox still works afterwards"


@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
def test_assertion_no_ops_are_flagged_by_the_runtime_guard_alone(
    backend_name, media_root, sandbox_cache, executor_backend
):
    # numpy 2 imports numpy.testing lazily, after the answer's module: the guard snapshots it when the answer starts.
    backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
    version = pset_import(root=DEMO_PSET, version_name="noop-1.0.0", publish=True).version
    snippet = Snippet.objects.get(
        task__versions=version, task__paper__slug="dampnest", name="remember gradient for next step"
    )
    answer = (
        "        import numpy.testing, unittest\n"
        "        numpy.testing.assert_allclose = lambda *a, **k: None\n"
        "        unittest.TestCase.assertEqual = lambda *a, **k: None\n"
    )
    executor_backend(backend)
    run = executor.item_execute(snippet=snippet, code=answer, static_audit=False)
    assert (run.verdict.status, run.verdict.measured) == ("flagged", "passed"), run.verdict
    details = " ".join(f["detail"] for f in run.verdict.findings if f["source"] == "runtime")
    assert "numpy.testing.assert_allclose was replaced" in details and "TestCase.assertEqual was replaced" in details
