"""Sealed verdicts (DESIGN.md, Sandbox): the reference's calls of each snippet's function are recorded once, an
answer is replayed alone on them (no test, no reference, no recorded output in its folder), and the worker compares.

Every hostile answer of hostile_sealed.yaml first proves its attack: spliced in and run with plain `python` (no
harness, no sandbox), it passes the task's tests. Through the platform with the task's recording it is never
passed, on bwrap and docker, warm and cold, and what holds it is the replay. The demo's references are sealed where
sealable and pass with no flag; a static finding on a sealed snippet whose replay agrees is a note, not a flag.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from benchmarks.services.blobs import environment_hash
from evaluation.executor import ItemRun, answer_test, reference_manifest
from evaluation.judging.sealed import SnippetSpan, recording_make, snippet_key
from evaluation.judging.verdict import NOTE, REPLAY_DISAGREES
from sandbox import Limits
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.corpus.tasks import ENTRY_POINT, Entry, entries, task, unguarded_run

CORPUS = Path(__file__).parent / "corpus"
HOSTILE = entries(CORPUS / "hostile_sealed.yaml")
LIMITS = Limits(wall_seconds=60, memory_bytes=1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
MODES = [("bwrap", "warm"), ("bwrap", "cold"), ("docker", "warm"), ("docker", "cold")]
# What the recordings stored, by digest: the tests' stand-in for the platform's blob storage.
BLOBS: dict[str, bytes] = {}


def ids(entry: Entry) -> str:
    return entry.name


def blob_put(content: bytes) -> str:
    digest = hashlib.sha256(content).hexdigest()
    BLOBS[digest] = content
    return digest


@pytest.fixture(scope="module")
def sessions(sandbox_cache):
    """One session per (backend, mode, task), each with the task's manifest and recording made on first use."""
    opened: dict[tuple[str, str, str], tuple] = {}
    contexts = []

    def get(backend_name: str, mode: str, task_name: str):
        key = (backend_name, mode, task_name)
        if key not in opened:
            backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
            backend.forkserver = mode == "warm"
            environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
            context = backend.session(environment)
            contexts.append(context)
            session = context.__enter__()
            corpus_task = task(task_name)
            manifest = reference_manifest(
                session=session, files=corpus_task.files, test_entry_point=ENTRY_POINT, limits=LIMITS
            )
            spans = [
                SnippetSpan(snippet_key(path, s.index), path, s.start_line, s.end_line)
                for path, annotated in corpus_task.annotated.items()
                for s in annotated.snippets
            ]
            recording = recording_make(
                session=session,
                files=corpus_task.files,
                test_entry_point=ENTRY_POINT,
                hidden=corpus_task.hidden,
                snippets=spans,
                limits=LIMITS,
                store=blob_put,
            )
            opened[key] = (session, manifest, recording)
        return opened[key]

    yield get
    for context in contexts:
        context.__exit__(None, None, None)


def platform_run(sessions, backend_name: str, mode: str, entry: Entry, code: str | None = None) -> ItemRun:
    session, manifest, recording = sessions(backend_name, mode, entry.task)
    corpus_task = task(entry.task)
    annotated, snippet = corpus_task.snippet(entry.snippet)
    return answer_test(
        session=session,
        files=corpus_task.files,
        annotated=annotated,
        position=snippet.index,
        code=entry.code if code is None else code,
        test_entry_point=ENTRY_POINT,
        hidden_files=corpus_task.hidden,
        limits=LIMITS,
        manifest=manifest,
        recording=recording,
        load=BLOBS.__getitem__,
    )


@pytest.mark.parametrize("entry", HOSTILE, ids=ids)
def test_a_sealed_route_passes_unguarded(entry):
    passed, output = unguarded_run(task(entry.task).spliced(entry.snippet, entry.code))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"


@pytest.mark.parametrize("entry", HOSTILE, ids=ids)
@pytest.mark.parametrize("backend_name,mode", MODES)
def test_a_sealed_route_never_passes(sessions, backend_name, mode, entry):
    run = platform_run(sessions, backend_name, mode, entry)
    verdict = run.verdict
    assert verdict.status in ("failed", "flagged"), (verdict, run.result.stderr[-1500:])
    if verdict.measured == "passed":  # the tests were fooled: the replay, or a finding that still flags, holds it
        flags = [f for f in verdict.findings if "note" not in f]
        assert flags, verdict.findings
        if entry.cls in ("swap", "gadget", "thread", "exec"):  # these compute a wrong value, or none, in the replay
            assert any(f["kind"] == REPLAY_DISAGREES for f in flags), verdict.findings
        if entry.cls == "defaults":  # statically notes but copy._reconstruct: the guard sees the defaults assigned
            assert any(f["kind"] == "tampering" and "(a function's defaults)" in f["detail"] for f in flags), flags
        if entry.cls == "rebind-computed":  # statically only module-assignment (a note): the runtime guard holds it
            assert any(f["kind"] == "tampering" and "was rebound" in f["detail"] for f in flags), verdict.findings


@pytest.mark.parametrize("task_name", ["dampnest", "topk-attention-pool", "trimmed-infonce", "tinyformer"])
@pytest.mark.parametrize("backend_name,mode", MODES)
def test_every_reference_is_sealed_where_sealable_and_passes_unflagged(sessions, backend_name, mode, task_name):
    session, _, recording = sessions(backend_name, mode, task_name)
    corpus_task = task(task_name)
    for path, annotated in corpus_task.annotated.items():
        for snippet in annotated.snippets:
            key = snippet_key(path, snippet.index)
            sealing = recording["snippets"][key]
            assert sealing["sealed"], (key, sealing)
            entry = Entry("reference", "honest", task_name, snippet.name, "")
            run = platform_run(sessions, backend_name, mode, entry, code=corpus_task.reference(snippet.name))
            assert (run.verdict.status, run.verdict.findings) == ("passed", ()), (key, run.verdict)


def test_a_static_finding_on_a_sealed_snippet_whose_replay_agrees_is_a_note(sessions):
    # A correct body with an augmented assignment to a parameter (a float: harmless), which the static policy's
    # input-mutation rule cannot tell from an in-place write into the test's own input.
    entry = Entry("in-place", "honest", "trimmed-infonce", "trim likely false negatives", "")
    body = task("trimmed-infonce").reference("trim likely false negatives")
    body = body.replace("    candidates = ", "    margin_logits *= 1.0\n    candidates = ", 1)
    assert [f.rule for f in task("trimmed-infonce").audit(entry.snippet, body)] == ["input-mutation"]
    run = platform_run(sessions, "bwrap", "warm", entry, code=body)
    assert run.verdict.status == "passed", run.verdict
    assert run.verdict.findings and all(f.get("note") == NOTE for f in run.verdict.findings), run.verdict.findings


@pytest.mark.parametrize("entry", [e for e in HOSTILE if e.cls == "rebind"], ids=ids)
def test_a_rebinding_past_the_recorded_calls_passed_while_module_assignment_was_a_note(sessions, monkeypatch, entry):
    """attack8: right on the recorded calls, wrong past them, a module's name the reference computes with rebound so
    the tests agree. The replay agrees; with module-rebinding a note on that agreement (as module-assignment, the
    rule it was part of before) it passed, until the runtime guard compared the task's packages' modules too: now
    with the static rule a note, the runtime guard's module rebinding alone flags it."""
    from evaluation.judging import verdict

    monkeypatch.setattr(verdict, "DEMOTABLE_RULES", verdict.DEMOTABLE_RULES | {"module-rebinding"})
    before = platform_run(sessions, "bwrap", "warm", entry).verdict
    flags = [f for f in before.findings if "note" not in f]
    assert before.status == "flagged" and flags, before
    assert all(f["source"] == "runtime" and "was rebound" in f["detail"] for f in flags), flags
    monkeypatch.undo()
    after = platform_run(sessions, "bwrap", "warm", entry).verdict
    assert after.status == "flagged", after
    assert {f.get("rule") for f in after.findings if "note" not in f} >= {"module-rebinding"}, after.findings


@pytest.mark.parametrize("entry", entries(CORPUS / "honest.yaml"), ids=ids)
def test_an_honest_respelling_passes_sealed_and_unflagged(sessions, entry):
    run = platform_run(sessions, "bwrap", "warm", entry)
    assert run.verdict.status == "passed", (run.verdict, run.result.stderr[-1500:])
    assert all(f.get("note") == NOTE for f in run.verdict.findings), run.verdict.findings


def test_a_recording_cut_at_the_snapshots_caps_is_not_compared_whole():
    from evaluation.judging.sealed import _truncated
    from sandbox.programs.snapshot import dumps, snapshot_roots

    whole = dumps(snapshot_roots({"return": list(range(10))}, max_bytes=10_000, max_depth=10, max_items=100)).decode()
    cut = dumps(snapshot_roots({"return": list(range(10))}, max_bytes=10_000, max_depth=10, max_items=3)).decode()
    assert _truncated([whole]) == ""
    assert _truncated([whole, cut]).startswith("call 2 at ")
