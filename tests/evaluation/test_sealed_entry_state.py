"""Extra state in an argument, end to end through the real recorder and replayer, on bwrap and docker warm
(compare.AtEntry).

An honest answer may keep state the reference does not (Adam-style code's `state["step"]`, an attribute its tests
never read); a wrong one may leave out a deletion (an eviction loop that evicts nothing), which leaves a key the
recording has not too. The recording keeps each call's names at entry, and the replay tells them apart: a name the
arguments did not hold at entry was added (flagged for review as added state, not as a disagreement), one they held
was removed by the reference and left by the answer (flagged as a disagreement). A recording without the names
(version 1) flags both as disagreements. Added state is never excused: every call is replayed from the reference's
state, so a marker an answer plants there and reads back takes its wrong branch only in its tests (attack14).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from benchmarks.paper2code import parse
from benchmarks.services.blobs import environment_hash
from evaluation.executor import answer_test, reference_manifest
from evaluation.judging.sealed import RECORDING_VERSION, SnippetSpan, recording_make, snippet_key
from evaluation.judging.verdict import EXTRA_STATE, REPLAY_DISAGREES
from sandbox import Limits
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.corpus.tasks import unguarded_run

pytestmark = pytest.mark.slow
LIMITS = Limits(wall_seconds=60, memory_bytes=1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
SOURCE = '''class Memory:
    """A store of at most `capacity` entries that evicts the oldest first."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = {}

    def put(self, key, value):
        # <paper2code name="store and evict">
        self.entries[key] = value
        while len(self.entries) > self.capacity:
            del self.entries[next(iter(self.entries))]
        # </paper2code name="store and evict">
        return value


class Momentum:
    """Gradient descent with momentum, one velocity per named parameter."""

    def __init__(self, lr, beta):
        self.lr, self.beta = lr, beta
        self.state = {}

    def step(self, params, grads):
        # <paper2code name="momentum step">
        for name, grad in grads.items():
            slot = self.state.setdefault(name, {"v": 0.0})
            slot["v"] = self.beta * slot["v"] + grad
            params[name] -= self.lr * slot["v"]
        # </paper2code name="momentum step">
        return params


class RunNorm:
    """A running mean that inputs are centred by."""

    def __init__(self, momentum):
        self.momentum, self.mean = momentum, 0.0

    def update(self, x):
        # <paper2code name="running mean">
        self.mean = (1.0 - self.momentum) * self.mean + self.momentum * x
        # </paper2code name="running mean">
        return x - self.mean
'''
# The tests read what they know: the newest entries, and the parameters.
TEST = """import model

memory = model.Memory(2)
for i, key in enumerate("abcd"):
    assert memory.put(key, i) == i
assert memory.entries["c"] == 2 and memory.entries["d"] == 3
momentum = model.Momentum(0.1, 0.5)
params = {"w": 1.0, "b": 0.0}
for _ in range(3):
    momentum.step(params, {"w": 1.0, "b": -1.0})
assert abs(params["w"] - 0.575) < 1e-12 and abs(params["b"] - 0.425) < 1e-12
norm = model.RunNorm(0.5)
assert norm.update(2.0) == 1.0
assert all(abs(norm.update(x)) < 100 for x in (1.0, 3.0, 5.0))  # weak past the first call: the replay backs it up
"""
FILES = {"model.py": SOURCE.encode(), "paper2code_test.py": TEST.encode()}
HIDDEN = ("paper2code_test.py",)
ENTRY_POINT = "paper2code_test.py"
# Honest: a step count in each parameter's slot (as Adam keeps), and the last key stored as an attribute. Each reads
# only what it finds (the replay starts every call from the reference's state, which has neither).
HONEST = {
    "momentum step": (
        "        for name, grad in grads.items():\n"
        '            slot = self.state.setdefault(name, {"v": 0.0})\n'
        '            slot["step"] = slot.get("step", 0) + 1\n'
        '            slot["v"] = self.beta * slot["v"] + grad\n'
        '            params[name] -= self.lr * slot["v"]\n'
    ),
    "store and evict": (
        "        self.entries[key] = value\n"
        "        self.last_key = key\n"
        "        while len(self.entries) > self.capacity:\n"
        "            del self.entries[next(iter(self.entries))]\n"
    ),
}
# attack12: an eviction loop that evicts nothing (its bound is never reached): the tests read only what it keeps.
EVICTS_NOTHING = (
    "        self.entries[key] = value\n"
    "        while len(self.entries) > self.capacity + len(self.entries):\n"
    "            del self.entries[next(iter(self.entries))]\n"
)
# attack14: wrong from the second call on, keyed on a marker it plants on self: each replayed call starts from the
# reference's self, which never holds the marker, so the replay sees only the right first branch.
MARKER = (
    '        if not getattr(self, "warm", False):\n'
    "            self.mean = (1.0 - self.momentum) * self.mean + self.momentum * x\n"
    "            self.warm = True\n"
    "        else:\n"
    "            self.mean = 0.0\n"
)
BLOBS: dict[str, bytes] = {}


def blob_put(content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    BLOBS[digest] = content
    return digest


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def recorded(request, sandbox_cache):
    backend = sandbox_backend_or_missing(request.param, sandbox_cache)
    backend.forkserver = True
    environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
    annotated = parse(SOURCE, "model.py")
    spans = [
        SnippetSpan(snippet_key("model.py", s.index), "model.py", s.start_line, s.end_line) for s in annotated.snippets
    ]
    with backend.session(environment) as session:
        manifest = reference_manifest(session=session, files=FILES, test_entry_point=ENTRY_POINT, limits=LIMITS)
        recording = recording_make(
            session=session,
            files=FILES,
            test_entry_point=ENTRY_POINT,
            hidden=HIDDEN,
            snippets=spans,
            limits=LIMITS,
            store=blob_put,
        )
        yield session, annotated, manifest, recording


def verdict(recorded, name: str, body: str, recording: dict | None = None):
    session, annotated, manifest, made = recorded
    snippet = next(s for s in annotated.snippets if s.name == name)
    return answer_test(
        session=session,
        files=FILES,
        annotated=annotated,
        position=snippet.index,
        code=body,
        test_entry_point=ENTRY_POINT,
        hidden_files=HIDDEN,
        limits=LIMITS,
        manifest=manifest,
        recording=made if recording is None else recording,
        load=BLOBS.__getitem__,
    ).verdict


def with_entries(recording: dict, names: dict | None) -> dict:
    """The recording as version 1 kept it (`names` None: no names at entry), or with every call's names replaced by
    `names` (what a blanket tolerance of extra state amounts to when they are empty)."""
    changed = json.loads(json.dumps(recording))
    changed["v"] = 1 if names is None else changed["v"]
    for target in changed["targets"].values():
        if names is None:
            target.pop("entries", None)
        else:
            calls = len(json.loads(BLOBS[target["entries"]]))
            target["entries"] = blob_put(json.dumps([json.dumps(names)] * calls).encode())
    return changed


def spliced(name: str, body: str) -> dict[str, bytes]:
    annotated = parse(SOURCE, "model.py")
    snippet = next(s for s in annotated.snippets if s.name == name)
    lines = SOURCE.splitlines(keepends=True)
    text = "".join(lines[: snippet.start_line]) + body + "".join(lines[snippet.end_line - 1 :])
    return {**FILES, "model.py": text.encode()}


def flags(found) -> list[dict]:
    return [f for f in found.findings if "note" not in f]


def test_both_functions_are_sealed_with_their_names_at_entry(recorded):
    _, _, _, recording = recorded
    assert recording["v"] == RECORDING_VERSION == 2
    for target in recording["targets"].values():
        assert target["sealed"], target
        names = [json.loads(text) for text in json.loads(BLOBS[target["entries"]])]
        assert len(names) == target["calls"] and all(names), names
    momentum = next(t for t in recording["targets"].values() if t["name"] == "step")
    second = json.loads(json.loads(BLOBS[momentum["entries"]])[1])
    assert second == {"keys": ['"b"', '"v"', '"w"'], "attrs": ["beta", "lr", "state"]}, second


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_extra_state_was_a_disagreement_without_names_and_is_flagged_as_added_state_with_them(recorded, name):
    passed, output = unguarded_run(spliced(name, HONEST[name]))
    assert passed, output
    _, _, _, recording = recorded
    # Before: a version-1 recording (no names at entry) flags the honest extra entry for review.
    before = verdict(recorded, name, HONEST[name], with_entries(recording, None))
    assert before.status == "flagged" and before.measured == "passed", before
    replay = [f for f in flags(before) if f["kind"] == REPLAY_DISAGREES]
    assert replay and ("step" in replay[0]["detail"] or "last_key" in replay[0]["detail"]), before.findings
    # Now: flagged for review as state the answer added, not as a disagreement (a review may clear it).
    after = verdict(recorded, name, HONEST[name])
    assert after.status == "flagged" and after.measured == "passed", after
    assert not [f for f in flags(after) if f["kind"] == REPLAY_DISAGREES], after.findings
    added = [f for f in flags(after) if f["kind"] == EXTRA_STATE]
    said = '"step"' if name == "momentum step" else "last_key"
    assert added and said in added[0]["detail"] and "the answer added" in added[0]["detail"], added


def test_a_marker_planted_in_self_passed_the_comparison_and_is_flagged(recorded):
    passed, output = unguarded_run(spliced("running mean", MARKER))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"
    found = verdict(recorded, "running mean", MARKER)
    # No guard: its only flag is the added state. The replay agreed on every call and no other rule fired, so with
    # added state a note beside a pass (as it was), it passed.
    assert found.status == "flagged" and found.measured == "passed", found
    assert [f["kind"] for f in flags(found)] == [EXTRA_STATE] * len(flags(found)), found.findings
    added = flags(found)
    assert added and "warm" in added[0]["detail"], found.findings


def test_an_eviction_that_evicts_nothing_passed_a_blanket_tolerance_and_is_flagged_with_the_names(recorded):
    passed, output = unguarded_run(spliced("store and evict", EVICTS_NOTHING))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"
    _, _, _, recording = recorded
    # No guard: a blanket tolerance of extra state (no name held at entry) leaves it only the added-state flag, a
    # review's to clear (a pass while added state was a note).
    blanket = verdict(recorded, "store and evict", EVICTS_NOTHING, with_entries(recording, {"keys": [], "attrs": []}))
    assert blanket.measured == "passed" and {f["kind"] for f in flags(blanket)} == {EXTRA_STATE}, blanket
    # The names at entry hold it: "a" was in the memory at entry of the third call, and the reference evicted it.
    found = verdict(recorded, "store and evict", EVICTS_NOTHING)
    assert found.status == "flagged" and found.measured == "passed", found
    replay = [f for f in flags(found) if f["kind"] == REPLAY_DISAGREES]
    assert replay, found.findings
    assert 'call 3: at args[0].entries: the reference removed the key(s) "a"' in replay[0]["detail"], replay
    assert "the answer left them" in replay[0]["detail"], replay
    assert not [f for f in found.findings if f["kind"] == EXTRA_STATE], found.findings


def test_the_references_pass_unflagged_with_no_extra_state(recorded):
    for name in (*HONEST, "running mean"):
        lines = SOURCE.splitlines(keepends=True)
        annotated = parse(SOURCE, "model.py")
        snippet = next(s for s in annotated.snippets if s.name == name)
        body = "".join(lines[snippet.start_line : snippet.end_line - 1])
        found = verdict(recorded, name, body)
        assert found.status == "passed" and not flags(found), found
        assert not [f for f in found.findings if f["kind"] == EXTRA_STATE], found.findings
