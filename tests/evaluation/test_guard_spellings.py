"""Respellings the runtime guard once missed (issue 33's third attacker), through the real sandboxes.

Each answer of tinyformer's layer norm implements nothing: it reads the hidden reference (a str subclass, a PathLike
of its own or a pathlib path handed to codecs.open, io.FileIO or os.open, which the guard once skipped because the
path was not exactly a str) and runs it through library code that compiles text for it (timeit, typing's forward
references), which once left no `exec` record because only a direct call of exec was recorded. Each first passes
the task's tests with plain `python` (no harness, no sandbox), then runs through the platform with the static audit
switched off: the runtime guard alone must flag it, with the record of each route, on bwrap and docker, warm and
cold. The static policy flags each of them too. An answer reading its own process memory through a str subclass is
recorded as such, so is a hidden file opened relative to a descriptor of its folder (dir_fd), and an honest answer
that builds a namedtuple and a dataclass (libraries compiling the code they generate), parses a literal and opens a
pathlib path stays unflagged.
"""

from __future__ import annotations

import pytest

from evaluation.executor import ItemRun
from sandbox.harness import GuardSpec, harness_command, harness_files, harness_verdict, nonce_new
from tests.evaluation.corpus.layer_norm import LIMITS, SNIPPET, TASK, code, platform_run, sessions_opened
from tests.evaluation.corpus.tasks import ENTRY_POINT, unguarded_run

# The reference's source, run by the answer; the reference's LayerNorm.forward then computes the result.
STEAL = "return space['LayerNorm'].forward(self, x)"
# answer (flush left) -> the kinds of runtime record it must leave
ATTACKS = {
    "codecs-str-subclass-timeit": (
        """import codecs, timeit
class P(str):
    pass
source = codecs.open(P("layers" + "_ref.py")).read()
space = {}
timeit.timeit("exec(source, space)", number=1, globals={"source": source, "space": space})
"""
        + STEAL,
        {"hidden", "exec"},
    ),
    "fileio-own-pathlike-typing": (
        """import io, typing
class P:
    def __fspath__(self):
        return "layers" + "_ref.py"
source = io.FileIO(P()).read().decode()
space = {}
def holder(a: "exec(source, space)"):
    pass
typing.get_type_hints(holder, localns={"source": source, "space": space})
"""
        + STEAL,
        {"hidden", "exec"},
    ),
    "timeit-on-a-thread": (
        """import codecs, timeit
from concurrent.futures import ThreadPoolExecutor
class P(str):
    pass
source = codecs.open(P("layers" + "_ref.py")).read()
space = {}
given = {"source": source, "space": space}
ThreadPoolExecutor(1).submit(timeit.timeit, "exec(source, space)", number=1, globals=given).result()
"""
        + STEAL,
        {"hidden", "exec"},
    ),
    "os-open-bytes-subclass": (
        """import os
class B(bytes):
    pass
fd = os.open(B(b"layers" + b"_ref.py"), os.O_RDONLY)
source = os.read(fd, 1 << 20).decode()
os.close(fd)
space = {}
exec(source, space)
"""
        + STEAL,
        {"hidden"},
    ),
    "os-open-pathlib": (
        """import os, pathlib
fd = os.open(pathlib.Path("layers" + "_ref.py"), os.O_RDONLY)
space = {}
exec(os.read(fd, 1 << 20).decode(), space)
"""
        + STEAL,
        {"hidden"},
    ),
}
# Reads its own memory (and still computes the layer norm): recorded, not a pass.
MEMORY = """import codecs
class P(str):
    pass
maps = codecs.open(P("/proc/self/" + "maps")).read().splitlines()
mem = codecs.open(P("/proc/self/" + "mem"), "rb", buffering=0)
mem.seek(int(maps[0].split("-")[0], 16))
assert len(mem.read(16)) == 16
"""
HONEST = """import ast, collections, dataclasses, pathlib
assert ast.literal_eval("[1, 2]") == [1, 2]
Pair = collections.namedtuple("Pair", "mean var")
@dataclasses.dataclass
class Stats:
    eps: float
assert pathlib.Path("layers.py").read_text()
"""


@pytest.fixture(scope="module")
def sessions(sandbox_cache):
    yield from sessions_opened(sandbox_cache)


def runtime_kinds(run: ItemRun) -> set[str]:
    return {f["kind"] for f in run.verdict.findings if f["source"] == "runtime"}


@pytest.mark.parametrize("attack", ATTACKS)
def test_the_attack_passes_unguarded_and_the_policy_finds_it(attack):
    answer = code(ATTACKS[attack][0])
    passed, output = unguarded_run(TASK.spliced(SNIPPET, answer))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"
    assert TASK.audit(SNIPPET, answer), "the policy found nothing"


BACKENDS = [("bwrap", "warm"), ("bwrap", "cold"), ("docker", "warm"), ("docker", "cold")]


@pytest.mark.parametrize("attack", ATTACKS)
@pytest.mark.parametrize("backend_name,mode", BACKENDS)
def test_the_runtime_guard_alone_records_each_route(sessions, backend_name, mode, attack):
    session = sessions(backend_name, mode)
    answer, expected = ATTACKS[attack]
    run = platform_run(session, code(answer))
    assert run.verdict.status == "flagged", (run.verdict, run.result.stderr[-1500:])
    assert expected <= runtime_kinds(run), run.verdict
    assert session.forking == (mode == "warm")


@pytest.mark.parametrize("backend_name,mode", [("bwrap", "warm"), ("bwrap", "cold")])
def test_reading_process_memory_through_a_str_subclass_is_recorded(sessions, backend_name, mode):
    answer = code(MEMORY, keep_reference=True)
    passed, output = unguarded_run(TASK.spliced(SNIPPET, answer))
    assert passed, output
    run = platform_run(sessions(backend_name, mode), answer)
    assert run.verdict.status == "flagged" and "memory" in runtime_kinds(run), run.verdict


@pytest.mark.parametrize("backend_name,mode", [("bwrap", "warm"), ("bwrap", "cold")])
def test_generated_code_and_pathlib_reads_are_no_evidence(sessions, backend_name, mode):
    run = platform_run(sessions(backend_name, mode), code(HONEST, keep_reference=True))
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), (run.verdict, run.result.stderr[-1500:])


# A hidden file in a folder of its own (the sealed replay's recorded outputs), opened relative to a descriptor of
# that folder: the file's path alone resolves to nothing from the task's folder.
DIR_FD_MODEL = """import json
import os


def f(x):
    folder = os.open("/".join(["rcb" + "_replay", "out" + "puts"]), os.O_RDONLY)
    fd = os.open(str(0) + ".json", os.O_RDONLY, dir_fd=folder)
    return json.loads(os.read(fd, 999))[str(0)]
"""
DIR_FD_TEST = """import json
import unittest
import model


class T(unittest.TestCase):
    def test_f(self):
        self.assertEqual(model.f(3), json.load(open("rcb_replay/outputs/0.json"))["0"])


unittest.main()
"""


@pytest.mark.parametrize("backend_name,mode", [("bwrap", "warm"), ("bwrap", "cold"), ("docker", "cold")])
def test_a_hidden_file_opened_from_a_descriptor_of_its_folder_is_recorded(sessions, backend_name, mode):
    files = {
        "model.py": DIR_FD_MODEL.encode(),
        ENTRY_POINT: DIR_FD_TEST.encode(),
        "rcb_replay/outputs/0.json": b'{"0": 123456789}',
    }
    passed, output = unguarded_run(files)
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"
    session = sessions(backend_name, mode)
    nonce = nonce_new()
    guard = GuardSpec(
        answer_file="model.py", first_line=6, last_line=8, hidden_files=(ENTRY_POINT, "rcb_replay/outputs/0.json")
    )
    result = session.run(
        files={**files, **harness_files(nonce)},
        command=harness_command(session.environment.python, ENTRY_POINT, guard),
        limits=LIMITS,
    )
    verdict = harness_verdict(result.stdout, nonce)
    assert [t.outcome for t in verdict.tests] == ["passed"], verdict
    assert any(r["kind"] == "hidden" and "a folder of hidden files" in r["detail"] for r in verdict.records), verdict
