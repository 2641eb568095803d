"""A snippet's mutants replayed in one sandboxed process (issue 36 item 1): each in a fork of its own, with the same
verdict as its replay alone, on a real package (the demo's DampNest, whose recorded calls carry the optimiser's
state in place); and one mutant cannot reach the next. The hostile mutant first shows its attack works where
answers share a folder and a parent (no guard), then that the batch contains it."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import operator
import os
import pickle
import signal
import subprocess
import sys

import pytest

from benchmarks.paper2code import parse, splice
from benchmarks.paper2code.mutation import Mutant, mutants_generate
from benchmarks.paper2code.pset import read_pset
from benchmarks.services.blobs import environment_hash
from evaluation.judging import replay_batch
from evaluation.judging.replay_batch import BatchStats
from evaluation.judging.sealed import (
    REPLAYER_SOURCE,
    REPORT_BYTES_MAX,
    SNAPSHOT_CAPS,
    SnippetSpan,
    _report,
    recording_make,
    snippet_key,
)
from sandbox import Limits
from submissions.mutants import mutant_replayer
from submissions.validation import package_hidden
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing

LIMITS = Limits(wall_seconds=8, memory_bytes=1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
BLOBS: dict[str, bytes] = {}
# What the hostile mutant leaves for the next one: a file where the task's module looks, a process that writes it
# again once the folder is emptied (it says its pid, and stops by itself), and a line forged on its parent's stdout.
POISON = ".poisoned"
HOSTILE = """\
import os, subprocess, sys
if not os.path.exists("writer.pid"):
    open(POISON, "w").write("x")
    writer = subprocess.Popen(
        [sys.executable, "-c", "import time\\nfor _ in range(3000):\\n open(POISON, 'w').write('x'); time.sleep(0.01)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    open("writer.pid", "w").write(str(writer.pid))
    try:
        with open(f"/proc/{os.getppid()}/fd/1", "w") as parent:
            parent.write("\\nFORGED by the hostile mutant\\n")
    except OSError:
        pass
""".replace("POISON", repr(POISON))
# The task's module reads what the hostile mutant left: with the poison there, every call of its code fails.
POISONED_MODULE = f"\nimport os as _os\nif _os.path.exists({POISON!r}):\n    np = None\n"
# A parent that keeps its child's output apart from its own, as the batch does, but dumpable and sharing a folder.
UNGUARDED_PARENT = (
    "import subprocess, sys\n"
    "child = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n"
    "sys.stdout.write('\\nCHILD ' + child.stdout.decode())\n"
)


def blob_put(content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    BLOBS[digest] = content
    return digest


@pytest.fixture(scope="module", params=[("bwrap", "warm"), ("bwrap", "cold"), ("docker", "warm")], ids="-".join)
def dampnest(request, sandbox_cache):
    """A session of the demo's numpy environment (warm: forks of the fork server; cold: each run its own sandbox),
    DampNest and its recording."""
    name, mode = request.param
    backend = sandbox_backend_or_missing(name, sandbox_cache)
    backend.forkserver = mode == "warm"
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    [package] = [p for p in read_pset(DEMO_PSET) if p.id == "dampnest"]
    hidden = package_hidden(
        files=dict(package.files), annotated=package.annotated, test_entry_point=package.test_entry_point
    )
    with backend.session(environment) as session:
        recording = recording_make(
            session=session,
            files=package.files,
            test_entry_point=package.test_entry_point,
            hidden=hidden,
            snippets=[
                SnippetSpan(snippet_key(path, s.index), path, s.start_line, s.end_line)
                for path, parsed in package.annotated.items()
                for s in parsed.snippets
            ],
            limits=LIMITS,
            store=blob_put,
        )
        yield session, package, hidden, recording, mode


def replayer_of(dampnest, position: int, *, annotated=None, batched=True, stats=None, session=None):
    own, package, hidden, recording, _ = dampnest
    session = session or own
    parsed = annotated or package.annotated[package.annotated_paths[0]]
    files = {**package.files, parsed.path: parsed.text.encode()}
    return mutant_replayer(
        session=session,
        files=files,
        hidden=hidden,
        recording=recording,
        annotated=parsed,
        position=position,
        limits=LIMITS,
        load=BLOBS.__getitem__,
        batched=batched,
        stats=stats,
    )


def indented(body: str, like: str) -> str:
    margin = like[: len(like) - len(like.lstrip())]
    return "".join(margin + line + "\n" for line in body.splitlines())


def test_a_batch_judges_each_mutant_as_its_replay_alone_does(dampnest):
    _, package, _, recording, mode = dampnest
    parsed = package.annotated[package.annotated_paths[0]]
    sealed = [s for s in parsed.snippets if recording["snippets"][snippet_key(parsed.path, s.index)]["sealed"]]
    assert len(sealed) >= 4
    compared = 0
    for number, snippet in enumerate(sealed[: 4 if mode == "warm" else 1]):  # cold: a sandbox per replay alone
        mutants = mutants_generate(snippet.code, limit=4)
        first = snippet.code.splitlines()[0]
        if number == 0:  # the ways a replay can end without a report: judged alone, or as alone (the time limit)
            mutants += [
                Mutant("exit", indented("import os\nos._exit(3)", first) + snippet.code, 1, "exits early"),
                Mutant("loop", indented("while True:\n    pass", first) + snippet.code, 1, "never returns"),
                Mutant("raise", indented("raise ValueError('wrong')", first) + snippet.code, 1, "raises"),
            ]
        stats = BatchStats()
        batched = replayer_of(dampnest, snippet.index, stats=stats).many(mutants)
        alone = replayer_of(dampnest, snippet.index, batched=False).many(mutants)
        for mutant, one, other in zip(mutants, batched, alone, strict=True):
            if mutant.operator == "loop":
                assert one.timed_out and other.timed_out and one.sealed and other.sealed
                assert one.difference.startswith("the replay gave no single readable report (it timed out)")
                assert other.difference.startswith("the replay gave no single readable report (it timed out)")
            else:
                assert one == other, mutant.diff
        compared += len(mutants)
        assert stats.batches == 1
        assert stats.alone == (1 if number == 0 else 0)  # only the one that printed no report
        assert stats.batched == len(mutants) - stats.alone
        assert any(r.difference for r in batched)
    assert compared >= (15 if mode == "warm" else 5)


def test_a_mutant_cannot_reach_the_next_one_in_its_batch(dampnest, tmp_path):
    session, package, hidden, recording, _ = dampnest
    parsed = package.annotated[package.annotated_paths[0]]
    path = parsed.path
    files = {**package.files, path: package.files[path] + POISONED_MODULE.encode()}
    parsed = parse(files[path].decode(), path)
    snippet = next(s for s in parsed.snippets if recording["snippets"][snippet_key(path, s.index)]["sealed"])
    hostile = Mutant("hostile", indented(HOSTILE, snippet.code.splitlines()[0]) + snippet.code, 1, "poisons")
    honest = Mutant("same", snippet.code, 1, "the reference body")
    replayer = replayer_of(dampnest, snippet.index, annotated=parsed)
    assert not replayer(honest).difference  # alone, the reference body agrees with the recording

    # No guard: the two replayed one after the other in one folder, each a child of a dumpable parent (the way a
    # batch without its guards would run them): the honest body fails, and the forged line is in the parent's output.
    folder = tmp_path / "shared"
    folder.mkdir()
    for name, data in files.items():
        if name not in set(hidden):
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
    (folder / ".rcb-replay.py").write_text(REPLAYER_SOURCE)
    entry = recording["targets"][recording["snippets"][snippet_key(path, snippet.index)]["target"]]
    (folder / ".rcb-replay-inputs.json").write_text(json.dumps({entry["key"]: json.loads(BLOBS[entry["inputs"]])}))
    python = sys.executable  # no sandbox: the host's interpreter, which has numpy too
    spec = {
        "mark": "rcb-replay-unguarded",
        "targets": [{k: entry[k] for k in ("key", "file", "qualname", "name", "line")}],
        "inputs": ".rcb-replay-inputs.json",
        "snapshot": SNAPSHOT_CAPS,
    }
    outputs = []
    try:
        for mutant in (hostile, honest):
            (folder / path).write_text(splice(parsed, snippet, mutant.body))
            outputs.append(
                subprocess.run(
                    [python, "-c", UNGUARDED_PARENT, python, "-B", ".rcb-replay.py", json.dumps(spec)],
                    cwd=folder,
                    capture_output=True,
                    text=True,
                    timeout=60,
                ).stdout
            )
    finally:
        writer = folder / "writer.pid"
        if writer.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(writer.read_text()), signal.SIGKILL)
    assert "FORGED by the hostile mutant" in outputs[0]
    report = _report(outputs[1], spec["mark"], max_bytes=REPORT_BYTES_MAX, max_values=1000)
    assert report is not None
    calls = report["targets"][entry["key"]]
    assert calls and all("NoneType" in call.get("error", "") for call in calls)  # poisoned

    # In a batch: the honest body still agrees, as alone; the forged line never reached the batch's output.
    seen = Seen(session)
    stats = BatchStats()
    _, honest_replay = replayer_of(dampnest, snippet.index, annotated=parsed, stats=stats, session=seen).many(
        [hostile, honest]
    )
    assert not honest_replay.difference, honest_replay.difference
    assert stats.batched == 2 and stats.alone == 0
    assert seen.stdout and "FORGED" not in seen.stdout


class Seen:
    """The real session, keeping the last run's stdout for the test to read."""

    def __init__(self, session):
        self.session, self.environment, self.backend, self.stdout = session, session.environment, session.backend, ""

    def run(self, **kwargs):
        result = self.session.run(**kwargs)
        self.stdout = result.stdout
        return result


class Call:
    """Pickled as a call of `function` on `args` (what a recording's pickle may hold)."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


# Run by the recorded inputs' unpickling: in the batch's probe fork (argv[0] "<probe>") it names the task's own
# module as what loaded, and exits; in a replay it does nothing.
FORGED_PROBE = "import sys, os\nif sys.argv[0] == '<probe>':\n print(MODULES)\n sys.stdout.flush()\n os._exit(0)\n"


def test_a_recording_cannot_make_the_batch_import_the_task_module_for_every_answer(dampnest, monkeypatch):
    session, package, _, recording, mode = dampnest
    if mode != "warm":
        pytest.skip("the batch program is the same cold; one sandbox per replay alone is slow")
    parsed = package.annotated[package.annotated_paths[0]]
    snippet = next(s for s in parsed.snippets if recording["snippets"][snippet_key(parsed.path, s.index)]["sealed"])
    entry = recording["targets"][recording["snippets"][snippet_key(parsed.path, snippet.index)]["target"]]
    module = entry["file"].removesuffix(".py").replace("/", ".")
    forged = FORGED_PROBE.replace("MODULES", repr(json.dumps([module])))
    wrapped = [  # each recorded call's inputs, run through FORGED_PROBE first
        base64.b64encode(
            pickle.dumps(Call(operator.getitem, (Call(exec, forged), Call(pickle.loads, base64.b64decode(blob))), 1))
        ).decode()
        for blob in json.loads(BLOBS[entry["inputs"]])
    ]
    hostile = copy.deepcopy(recording)
    hostile["targets"][recording["snippets"][snippet_key(parsed.path, snippet.index)]["target"]]["inputs"] = blob_put(
        json.dumps(wrapped).encode()
    )
    wrong = next(
        m
        for m in mutants_generate(snippet.code, limit=8)
        if replayer_of(dampnest, snippet.index, batched=False).many([m])[0].difference
    )
    honest = Mutant("same", snippet.code, 1, "the reference body")

    def batch(source: str):
        monkeypatch.setattr(replay_batch, "BATCH_SOURCE", source)
        replayer = replayer_of(dampnest, snippet.index, batched=True)
        replayer.recording = hostile
        return replayer.many([wrong, honest])

    alone = replayer_of(dampnest, snippet.index, batched=False)
    alone.recording = hostile
    assert not alone.many([honest])[0].difference  # the wrapped inputs replay as the recorded ones
    # No guard: the batch imports whatever the probe names; every answer then runs the first answer's module.
    guarded = replay_batch.BATCH_SOURCE
    unguarded = guarded.replace("if top in own or top not in sys.modules:", "if False:")
    assert unguarded != guarded
    assert "'NoneType' object is not subscriptable" in batch(unguarded)[1].difference  # the wrong body's failure
    # The batch imports only modules of packages it holds, never the task's own: the honest body agrees, as alone.
    assert not batch(guarded)[1].difference
