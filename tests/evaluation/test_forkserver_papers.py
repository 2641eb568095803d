"""The fork server across a set's papers, on bwrap and docker: items of papers with different imports interleaved on
one session start the zygote again at most once per import set it has not seen (and not at all when the release's
imports were announced), never turning the environment cold for good; a helper the test calls has its lazy imports
warmed, found from the test's own code."""

from __future__ import annotations

import json

import pytest

from benchmarks.services import environment_hash
from evaluation.sandbox.forkserver import ZYGOTE_RESTARTS, helper_calls, preload_modules
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.test_sandbox_attacks import LIMITS

# One paper per stdlib module beside numpy (real tests import numpy, whose ctypes a fork needs): ten import sets,
# more than ZYGOTE_RESTARTS restarts would allow under the old rule (one restart per new set, cold after 8).
PAPER_IMPORTS = [
    "fractions",
    "decimal",
    "statistics",
    "difflib",
    "csv",
    "fnmatch",
    "colorsys",
    "bisect",
    "shlex",
    "calendar",
]


def paper_files(module: str, body: str = "") -> dict[str, bytes]:
    entry = (
        f"import json, sys\nimport numpy\nimport {module}\nimport model\n"
        "found = {'pydoc_loaded': 'pydoc' in sys.modules}\n" + body + "print('REPORT ' + json.dumps(found))\n"
    )
    return {"paper2code_test.py": entry.encode(), "model.py": b"VALUE = 1\n"}


def report(session, files) -> tuple[dict, bool]:
    result = session.run(files=files, command=[session.environment.python, "-B", "paper2code_test.py"], limits=LIMITS)
    assert result.exit_code == 0, result.stderr[-2000:]
    line = next(line for line in result.stdout.splitlines() if line.startswith("REPORT "))
    return json.loads(line.removeprefix("REPORT ")), result.forked


@pytest.fixture(params=["bwrap", "docker"])
def backend(request, sandbox_cache):
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    backend.forkserver = True
    return backend


def session_of(backend):
    return backend.session(backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy"))


def test_papers_interleaved_restart_once_per_new_import_set_and_stay_warm(backend):
    with session_of(backend) as session:
        rounds = []
        for _ in range(2):
            for module in PAPER_IMPORTS:
                assert report(session, paper_files(module))[1], session.starts
            rounds.append(list(session.starts))
        assert session.forking and not session.cold_reason
        assert len(session.starts) == len(PAPER_IMPORTS) > ZYGOTE_RESTARTS + 1  # the old rule: cold after the 9th
        assert rounds[0] == rounds[1]  # every set seen: the second round starts nothing
        assert [s.reason for s in session.starts] == ["first"] + ["new imports"] * (len(PAPER_IMPORTS) - 1)
        assert "calendar" in session.starts[-1].detail
        assert (session.items_warm, session.items_cold) == (2 * len(PAPER_IMPORTS), 0)


def test_imports_announced_at_the_start_need_no_restart(backend):
    with session_of(backend) as session:
        sets = [paper_files(module) for module in PAPER_IMPORTS]
        session.preload_expect(modules=[m for files in sets for m in preload_modules(files)])
        for files in sets:
            assert report(session, files)[1]
        assert [s.reason for s in session.starts] == ["first"]


def test_a_helper_the_test_calls_has_its_lazy_imports_warmed(backend):
    """numpy.info imports pydoc on its first call: a test calling it finds pydoc loaded in its fork; one that does
    not call it, in a session of its own, does not."""
    calling = paper_files("fractions", "import io\nnumpy.info(numpy.zeros, output=io.StringIO())\n")
    assert "numpy.info" in helper_calls(calling, "paper2code_test.py")
    with session_of(backend) as session:
        found, forked = report(session, calling)
        assert forked and found["pydoc_loaded"]
        assert "pydoc" in session._forkserver.warmed
    with session_of(backend) as session:
        found, forked = report(session, paper_files("fractions"))
        assert forked and not found["pydoc_loaded"]


def test_release_imports_leave_out_every_snippet_body_and_helpers_come_from_the_test():
    files = {
        "paper2code_test.py": b"import numpy as np\nfrom torch.testing import assert_close\nimport model\n"
        b"assert_close(model.f(), 1)\nnp.testing.assert_allclose(1, 1)\nmodel.f()\n",
        "model.py": b'import scipy.linalg\n\ndef f():\n    # <paper2code name="x">\n    import jax\n'
        b'    return 1\n    # </paper2code name="x">\n',
    }
    assert preload_modules(files) == ["numpy", "torch.testing", "torch.testing.assert_close", "scipy.linalg", "jax"]
    assert preload_modules(files, skipped=[("model.py", 4, 7)]) == [
        "numpy",
        "torch.testing",
        "torch.testing.assert_close",
        "scipy.linalg",
    ]
    assert helper_calls(files, "paper2code_test.py") == ["torch.testing.assert_close", "numpy.testing.assert_allclose"]
