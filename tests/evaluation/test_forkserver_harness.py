"""The harness under the fork server (a warm start), on bwrap and docker: the same verdicts as a cold start for
honest, wrong and hostile answers, and the guarantees of the cold start kept (the nonce never in the test's process,
the supervisor out of its reach, an answer's imports audited although the fork server preloaded the task's)."""

from __future__ import annotations

import json
import re

import pytest

from benchmarks.services.blobs import environment_hash
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.test_answer_tampering import (
    ANNOTATED,
    ATTACKS,
    FILES,
    HIDDEN,
    LAYER_NORM,
    LIMITS,
    body,
    reference,
)
from tests.evaluation.test_sandbox_attacks import ENTRY_POINT, HONEST, run

# Real tests import numpy (which loads ctypes): only such environments fork, the others run cold
# (see ForkingSession._zygote).
NUMPY_ENTRY_POINT = "import numpy\n" + ENTRY_POINT


def session_of(sandbox_cache, backend_name: str, *, warm: bool, requirements: str = "numpy"):
    backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
    backend.forkserver = warm
    environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
    return backend.session(environment)


@pytest.fixture(scope="module")
def warm(sandbox_cache, backend_name):
    with session_of(sandbox_cache, backend_name, warm=True) as session:
        yield session


@pytest.fixture(scope="module")
def cold(sandbox_cache, backend_name):
    with session_of(sandbox_cache, backend_name, warm=False) as session:
        yield session


def judged(session, code: str):
    from evaluation.executor import answer_test

    item = answer_test(
        session=session,
        files=FILES,
        annotated=ANNOTATED,
        position=LAYER_NORM.index,
        code=code,
        test_entry_point="paper2code_test.py",
        hidden_files=HIDDEN,
        limits=LIMITS,
        static_audit=False,
    )
    verdict = item.verdict
    # Numbers in a detail (pids, addresses) differ from run to run; what was done, where, and its kind may not.
    findings = sorted({(f["kind"], f["line"], re.sub(r"\d+", "N", f["detail"])) for f in verdict.findings})
    return (verdict.status, verdict.category, verdict.measured, findings), item


# Imports of the answer's own that a cold start audits: the fork server must not have them loaded for it.
NATIVE_IMPORTS = {
    "imports-ctypes": body("import ctypes", "return x"),
    "imports-mmap": body("import mmap", "return x"),
    "imports-hidden-module": body("import layers_ref", "return x"),
}
ANSWERS = {"reference": reference(LAYER_NORM), "wrong": body("return x"), **NATIVE_IMPORTS, **ATTACKS}


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_warm_start_gives_the_verdict_of_a_cold_start(warm, cold, answer):
    warm_verdict, warm_item = judged(warm, ANSWERS[answer])
    cold_verdict, cold_item = judged(cold, ANSWERS[answer])
    assert warm.forking, "the fork server fell back to cold starts"
    assert warm_verdict == cold_verdict, (warm_item.result.stderr[-1500:], cold_item.result.stderr[-1500:])
    if answer == "reference":
        assert warm_verdict[0] == "passed"
    elif answer == "imports-hidden-module":
        assert warm_verdict[0] == "flagged", warm_verdict
    else:
        assert warm_verdict[0] in ("failed", "flagged")


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_an_answer_importing_ctypes_is_recorded_although_the_fork_server_uses_it(sandbox_cache, backend_name, mode):
    # numpy (preloaded warm, imported by the test cold) has loaded ctypes before the answer runs: the guard drops it
    # from sys.modules when the answer starts, so the answer's own import is seen, warm and cold alike.
    from evaluation.executor import harness_run
    from sandbox.harness import GuardSpec

    model = "def answer():\n    import ctypes\n    return 41\n"
    with session_of(sandbox_cache, backend_name, warm=mode == "warm") as session:
        for _ in range(2):
            item = harness_run(
                session=session,
                files={"paper2code_test.py": NUMPY_ENTRY_POINT.encode(), "model.py": model.encode()},
                test_entry_point="paper2code_test.py",
                limits=LIMITS,
                guard=GuardSpec(answer_file="model.py", first_line=2, last_line=3),
            )
            findings = {(f["kind"], f["line"], f["detail"]) for f in item.verdict.findings}
            assert item.verdict.status == "flagged" and ("native", 2, "imports 'ctypes'") in findings, item.verdict
            assert {(kind, line) for kind, line, _ in findings} == {("native", 2)}
        assert session.forking == (mode == "warm")
        if mode == "warm":
            assert "ctypes" not in session._forkserver.loaded


def test_what_the_fork_server_preloads_does_not_depend_on_the_answer(warm):
    judged(warm, NATIVE_IMPORTS["imports-ctypes"])
    assert "ctypes" not in warm._forkserver.loaded and "numpy" in warm._forkserver.loaded


# The test itself (not the answer: the guard records nothing of it) looks for the nonce everywhere it can reach.
NONCE_HUNT = """
import os, re
import numpy
found = []
pattern = re.compile(rb"rcb-done-[0-9a-f]{32}")
canary = ("rcb-done-" + "0123456789abcdef" * 2).encode()  # made at run time: proof the search finds one
# The parent as /proc names it (a fork's /proc is its fork server's pid namespace, where getppid() means another).
parent = next(line.split()[1] for line in open("/proc/self/status") if line.startswith("PPid:"))
for label, pid in (("self", "self"), ("parent", parent)):
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                span, perms = line.split()[:2]
                if not perms.startswith("r"):
                    continue
                start, end = (int(x, 16) for x in span.split("-"))
                try:
                    mem.seek(start)
                    found += [f"{label} memory" if hit != canary else "canary"
                              for hit in pattern.findall(mem.read(end - start))]
                except (OSError, OverflowError, ValueError):
                    pass
    except OSError as exc:
        found.append(f"{label}: {type(exc).__name__}")
    for what in ("environ", "cmdline"):
        try:
            if pattern.search(open(f"/proc/{pid}/{what}", "rb").read()):
                found.append(f"{label} {what}")
        except OSError:
            pass
found += [name for name in os.listdir(".") if name.startswith(".rcb-")]
print("FOUND " + "|".join(sorted(set(found))))
"""


@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_the_nonce_never_reaches_the_test_process(sandbox_cache, backend_name, mode):
    with session_of(sandbox_cache, backend_name, warm=mode == "warm") as session:
        for _ in range(2):  # the second from a running fork server
            attack = run(session, HONEST, entry_point=NONCE_HUNT)
            assert attack.verdict.completed, attack.output[-3000:]
        assert session.forking == (mode == "warm")
    found = (
        next(line for line in attack.verdict.stdout.splitlines() if line.startswith("FOUND "))
        .removeprefix("FOUND ")
        .split("|")
    )
    # Its own memory holds no nonce; the supervisor's memory cannot be read at all (it is not dumpable).
    assert found == ["canary", "parent: PermissionError"], found


# numpy makes the item forkable on its own (a test importing only the standard library starts cold: no preload
# loads ctypes), not only after an earlier test of the module warmed the session.
VENV_WRITE = """
import json, os, sys
import numpy
found = {"python": os.path.exists(sys.executable), "writes": []}
for folder in (sys.prefix, os.path.dirname(os.__file__)):
    try:
        open(os.path.join(folder, "rcb-planted"), "w").write("x")
        found["writes"].append(folder)
    except OSError:
        pass
print("REPORT " + json.dumps(found))
"""


def test_a_fork_sees_the_environment_read_only_even_when_it_lies_below_tmp(sandbox_cache, warm):
    # The test cache lies below /tmp, which every fork gets fresh: the environment is bound again on top of it.
    attack = run(warm, HONEST, entry_point=VENV_WRITE)
    line = next(line for line in attack.verdict.stdout.splitlines() if line.startswith("REPORT "))
    assert json.loads(line.removeprefix("REPORT ")) == {"python": True, "writes": []}
    assert warm.forking


# Crashes only in a fork of the fork server (whose command line is in sys.orig_argv), never on a cold start.
CRASHES_WHEN_WARM = """
import os, signal, sys, unittest
import numpy
if any("recv_fds" in arg for arg in sys.orig_argv):
    os.kill(os.getpid(), signal.SIGSEGV)


class TestAnswer(unittest.TestCase):
    def test_answer(self):
        self.assertEqual(42, 42)


unittest.main()
"""


def test_a_crash_in_a_fork_that_a_cold_start_does_not_have_turns_the_environment_cold(
    sandbox_cache, backend_name, caplog
):
    with session_of(sandbox_cache, backend_name, warm=True) as session:
        assert run(session, HONEST, entry_point=NUMPY_ENTRY_POINT).passed and session.forking
        with caplog.at_level("WARNING", logger="sandbox.forkserver"):
            crashed = run(session, HONEST, entry_point=CRASHES_WHEN_WARM)
        assert crashed.passed, crashed.output[-2000:]  # the item's result is the cold start's
        assert not session.forking
        assert "every item starts cold: an item crashed in a fork (139) but not when started cold" in caplog.text
        assert run(session, HONEST, entry_point=CRASHES_WHEN_WARM).passed
