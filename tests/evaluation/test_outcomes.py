"""The pass rule plus the completion guard, failure categories, and the hidden-module check, on the local backend."""

from __future__ import annotations

import pytest

from evaluation.outcomes import outcome_classify
from sandbox import ExecResult, Limits, backend_get
from sandbox.harness import harness_command, harness_files, harness_verdict, nonce_new

TEST = b"""import unittest
import model

class T(unittest.TestCase):
    def test_add(self):
        self.assertEqual(model.add(2, 3), 5)

if __name__ == "__main__":
    unittest.main()
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    backend = backend_get("local", cache_dir=tmp_path_factory.mktemp("cache"))
    environment = backend.environment_build(env_hash="empty", requirements="")
    with backend.session(environment) as session:
        yield session


def judge(session, model: str, *, wall: float = 10, test: bytes = TEST):
    nonce = nonce_new()
    files = {"paper2code_test.py": test, "model.py": model.encode(), **harness_files(nonce)}
    result = session.run(
        files=files,
        command=harness_command(session.environment.python, "paper2code_test.py"),
        limits=Limits(wall_seconds=wall, memory_bytes=512 * 2**20, output_bytes=2**16),
    )
    return outcome_classify(result=result, harness=harness_verdict(result.stdout, nonce)), result


@pytest.mark.parametrize(
    "model,status,category",
    [
        ("def add(a, b):\n    return a + b\n", "passed", ""),
        ("def add(a, b):\n    return a - b\n", "failed", "wrong_result"),
        ("def add(a, b):\n    return a +\n", "failed", "syntax"),
        ("def add(a, b):\n    return c\n", "failed", "name_import"),
        ("import no_such_module_rcb\ndef add(a, b):\n    return a + b\n", "failed", "name_import"),
        ("def add(a, b):\n    return [][1]\n", "failed", "runtime"),
        ("def add(a, b):\n    x = bytearray(2 * 1024**3)\n    return a + b\n", "failed", "memory"),
        ("import os\nos._exit(0)\n", "failed", "runtime"),
        ("import sys\nsys.exit(0)\n", "failed", "runtime"),
        ("def add(a, b):\n    import sys\n    sys.exit(0)\n", "failed", "runtime"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "failed", "runtime"),
        ("def add(a, b):\n    print('the step failed')\n    return a + b\n", "failed", "wrong_result"),
    ],
)
def test_categories(session, model, status, category):
    verdict, _ = judge(session, model)
    assert (verdict.status, verdict.category) == (status, category), verdict.detail


def test_endless_loop_is_a_timeout(session):
    verdict, result = judge(session, "while True:\n    pass\n", wall=2)
    assert result.timed_out and (verdict.status, verdict.category) == ("failed", "timeout")


def test_early_exit_cannot_forge_the_harness_line(session):
    forged = "import sys\nprint('\\nrcb-done-00000000000000000000000000000000 completed 0')\nsys.exit(0)\n"
    verdict, _ = judge(session, forged)
    assert verdict.status == "failed"


def test_local_backend_warns_on_every_use(session, caplog):
    judge(session, "def add(a, b):\n    return a + b\n")
    judge(session, "def add(a, b):\n    return a + b\n")
    assert sum("WITHOUT isolation" in r.message for r in caplog.records) == 2


def test_result_without_harness_line_never_passes():
    result = ExecResult(exit_code=0, stdout="all good\n", stderr="", timed_out=False, duration=0.1, backend="local")
    verdict = outcome_classify(result=result, harness=harness_verdict(result.stdout, nonce_new()))
    assert verdict.status == "failed"


MIXED_TEST = b"""import unittest
import model

class T(unittest.TestCase):
    def test_length(self):
        self.assertEqual(len(model.trim([1, 2, 3])), 2)

    def test_first(self):
        self.assertEqual(model.trim([1, 2, 3])[0], 1)

    def test_value(self):
        self.assertEqual(model.scale(2), 4)

if __name__ == "__main__":
    unittest.main()
"""


def test_mostly_raising_tests_are_a_runtime_error_not_a_wrong_result(session):
    """Two of three failing tests raise (a TypeError) and one asserts: the answer is broken, not merely wrong."""
    verdict, _ = judge(session, "def trim(xs):\n    return None\ndef scale(x):\n    return x\n", test=MIXED_TEST)
    assert (verdict.status, verdict.category) == ("failed", "runtime"), verdict.detail
    assert verdict.detail.startswith("2 tests raised an error (TypeError)"), verdict.detail
    verdict, _ = judge(session, "def trim(xs):\n    return xs[:2]\ndef scale(x):\n    return x\n", test=MIXED_TEST)
    assert (verdict.status, verdict.category) == ("failed", "wrong_result"), verdict.detail
