"""The attack of importing the hidden reference module to copy it: refused before it runs, on every backend."""

from __future__ import annotations

import pytest

from benchmarks.models import Snippet
from benchmarks.services import pset_import
from evaluation import executor
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
@pytest.mark.parametrize("answer", [
    "        from optimizer_ref import DampNest as _R\n        state = _R.__dict__\n",
    "        import importlib\n        ref = importlib.import_module('optimizer_ref')\n",
    "        exec(open('paper2code_test.py').read())\n",
])
def test_copying_the_hidden_reference_never_passes(backend_name, answer, media_root, sandbox_cache):
    backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
    version = pset_import(root=DEMO_PSET, version_name="hidden-1.0.0", publish=True).version
    snippet = Snippet.objects.get(task__versions=version, task__paper__slug="dampnest",
                                  name="remember gradient for next step")
    executor.sessions_close()
    executor._backend = backend
    try:
        run = executor.item_execute(snippet=snippet, code=answer)
        honest = executor.item_execute(snippet=snippet, code=snippet.reference_code)
    finally:
        executor.sessions_close()
        executor._backend = None
    assert (run.verdict.status, run.verdict.category) == ("failed", "forbidden")
    assert run.result is None, "refused before anything ran"
    assert honest.verdict.status == "passed", "the sandbox still works afterwards"
