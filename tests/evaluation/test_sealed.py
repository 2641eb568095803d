"""Sealed verdicts (DESIGN.md, Sandbox): the reference's calls of each snippet's function are recorded once, an
answer is replayed alone on them (no test, no reference, no recorded output in its folder), and the worker compares.

Every hostile answer of hostile_sealed.yaml first proves its attack: spliced in and run with plain `python` (no
harness, no sandbox), it passes the task's tests. Through the platform with the task's recording it is never
passed, on bwrap and docker, warm and cold, and what holds it is the replay. The demo's references are sealed where
sealable and pass with no flag; a static finding on a sealed snippet whose replay agrees is a note, not a flag.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tracemalloc
from pathlib import Path

import pytest

from benchmarks.services.blobs import environment_hash
from evaluation.executor import ItemRun, answer_test, reference_manifest
from evaluation.judging.sealed import (
    REPORT_BYTES_MAX,
    SnippetSpan,
    _recording_report_bounds,
    _replay_report_bounds,
    _report,
    recording_make,
    snippet_key,
)
from evaluation.judging.verdict import NOTE, REPLAY_DISAGREES
from sandbox import Limits
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.corpus.tasks import ENTRY_POINT, Entry, entries, task, unguarded_run

CORPUS = Path(__file__).parent / "corpus"
HOSTILE = entries(CORPUS / "hostile_sealed.yaml")
LIMITS = Limits(wall_seconds=60, memory_bytes=1024**3, processes=64, cpus=1.0, output_bytes=1024**2)
# The corpus's tasks: the demo set, tinyformer, and robust-scale (a lazily imported module, a test making numpy's
# floating-point errors fatal).
TASKS = ["dampnest", "topk-attention-pool", "trimmed-infonce", "tinyformer", "robust-scale"]
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
    run = answer_test(
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
    # A warm item that silently ran cold (guard35: a fork-server request over the socket's buffer) tests neither mode.
    assert session.forking == (mode == "warm" and b"import numpy" in corpus_task.files[ENTRY_POINT]), (
        "the session fell back to cold starts"
    )
    return run


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
        if entry.cls == "test-rebind":  # no static finding: the guard compares the test's own globals (attack13)
            assert any(f["kind"] == "tampering" and f["detail"].startswith("__main__.") for f in flags), flags
        if entry.cls == "defaults-in-place":  # no assignment to audit: the guard compares the kept defaults dicts
            assert any(f["kind"] == "tampering" and "(a function's keyword defaults)" in f["detail"] for f in flags)
        if entry.cls == "errstate":  # numpy's error handling is no module's name: the guard compares it too
            assert any(f["kind"] == "tampering" and "error handling" in f["detail"] for f in flags), verdict.findings


@pytest.mark.parametrize("task_name", TASKS)
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


# Honest answers around what the guard compares beside module names: numpy's error handling changed inside a `with
# np.errstate` block (restored when it ends), and the module the reference imports lazily imported by the answer
# too and left as it was.
ROBUST_HONEST = [
    Entry(
        "logsumexp-under-errstate",
        "honest",
        "robust-scale",
        "shifted log-sum-exp",
        "with np.errstate(under='ignore'):\n"
        "    shifted = x - np.max(x, axis=-1, keepdims=True)\n"
        "    out = np.max(x, axis=-1) + np.log(np.exp(shifted).sum(axis=-1))\n",
    ),
    Entry(
        "own-statistics-import",
        "honest",
        "robust-scale",
        "median absolute deviation",
        "import statistics\n"
        "centre = statistics.median(values)\n"
        "mad = statistics.median(abs(v - centre) for v in values)\n",
    ),
]


@pytest.mark.parametrize("entry", ROBUST_HONEST, ids=ids)
@pytest.mark.parametrize("backend_name,mode", MODES)
def test_an_honest_errstate_block_or_lazy_import_passes_unflagged(sessions, backend_name, mode, entry):
    passed, output = unguarded_run(task(entry.task).spliced(entry.snippet, entry.code))
    assert passed, output
    run = platform_run(sessions, backend_name, mode, entry)
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), (run.verdict, run.result.stderr[-1500:])


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


MARK = "rcb-replay-" + "0" * 24
# attack11: the answer, in its replay, prints its own report line (its mark is in sys.argv[1]) and exits: megabytes of
# `{},` a json.loads makes millions of dicts of.
REPORT_BOMB = b'{"v": 1, "targets": {}, "x": [' + b"{}," * 1_000_000 + b"{}]}"


def printed(body: bytes, mark: str = MARK) -> str:
    return f"what the answer printed\n{mark} {base64.b64encode(body).decode()}\n"


def peak_while(read, *args, **kwargs) -> tuple[object, int]:
    """What `read` returned and the most memory Python held for it meanwhile."""
    tracemalloc.start()
    try:
        found = read(*args, **kwargs)
        return found, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_replay_report_past_what_its_recording_needs_is_refused_before_it_is_decoded():
    outputs = ["x" * 1000] * 3
    max_bytes, max_values = _replay_report_bounds(outputs, "optimizer.py:DampNest.step")
    honest = {"v": 1, "targets": {"optimizer.py:DampNest.step": [{"outputs": text} for text in outputs]}}
    assert _report(printed(json.dumps(honest).encode()), MARK, max_bytes=max_bytes, max_values=max_values) == honest
    body = json.dumps(honest).encode()
    assert _report(printed(body), MARK, max_bytes=len(body), max_values=max_values) == honest
    assert _report(printed(body), MARK, max_bytes=len(body) - 3, max_values=max_values) is None
    bomb = printed(REPORT_BOMB)
    # Unbounded (the cap alone, as before), the worker held 20 times the line's size as Python objects.
    found, unbounded = peak_while(_report, bomb, MARK, max_bytes=REPORT_BYTES_MAX, max_values=10**9)
    assert found is not None and unbounded > 10 * len(bomb), unbounded
    found, bounded = peak_while(_report, bomb, MARK, max_bytes=max_bytes, max_values=max_values)
    assert found is None and bounded < 2 * len(bomb), bounded


def test_a_report_of_more_values_than_its_calls_make_is_refused_before_json_makes_them():
    max_bytes, max_values = _replay_report_bounds(["x" * 4_000_000], "f.py:f")
    assert max_bytes > len(REPORT_BOMB)  # within the bytes a recording of 4 MB needs
    found, peak = peak_while(_report, printed(REPORT_BOMB), MARK, max_bytes=max_bytes, max_values=max_values)
    assert found is None and peak < 6 * len(printed(REPORT_BOMB)), peak  # a few copies, never objects per byte
    # Brackets and braces inside strings (a snapshot's own JSON) and escaped quotes are not structure.
    outputs = ['{"v": 1, "roots": {"return": [[1, 2], {"t": "str", "s": "\\"{[,:"}]}}'] * 20
    honest = {"v": 1, "targets": {"f.py:f": [{"outputs": text} for text in outputs]}}
    max_bytes, max_values = _replay_report_bounds(outputs, "f.py:f")
    assert _report(printed(json.dumps(honest).encode()), MARK, max_bytes=max_bytes, max_values=max_values) == honest
    # UTF-16 JSON (which json.loads would take from bytes) hides its structure from a count by bytes: refused.
    hidden = ('{"v": 1, "targets": {}, "s": "\\"", "x": [' + "{}," * 1000 + '{}], "t": "\\""}').encode("utf-16")
    assert json.loads(hidden)["v"] == 1
    assert _report(printed(hidden), MARK, max_bytes=max_bytes, max_values=max_values) is None


def test_a_recording_runs_report_is_bounded_by_the_snapshots_caps():
    max_bytes, max_values = _recording_report_bounds(1)
    assert max_bytes <= REPORT_BYTES_MAX and max_values < 1000
    line = "rcb-record-" + "0" * 24
    found = _report(
        printed(REPORT_BOMB, line).replace(line + " ", line + " 0 "), line, max_bytes=max_bytes, max_values=max_values
    )
    assert found is None


REPORT_BOMB_ANSWER = """\
if self.state is None:
    self.state = {
        "m": np.zeros_like(theta),
        "v": np.zeros_like(theta),
        "s": np.zeros_like(theta),
        "g_prev": g.copy(),
    }
import sys, os, json, base64
if sys.argv[0].endswith(".rcb-replay.py"):
    mark = json.loads(sys.argv[1])["mark"]
    body = b'{"v": 1, "targets": {}, "x": [' + b"{}," * 15_000_000 + b"{}]}"
    sys.stdout.write(mark + " " + base64.b64encode(body).decode() + "\\n")
    sys.stdout.flush()
    os._exit(0)
"""


@pytest.mark.parametrize("backend_name", ["bwrap", "docker"])
def test_a_replay_that_prints_a_report_bomb_is_flagged_within_bounded_memory(sessions, backend_name):
    """attack11: the answer's tests pass, and its replay prints a 60 MB report of 15 million empty dicts (the
    worker's judging process peaked at 1.3 GB before reading it). Now its stdout is capped at what the answer may
    print plus the longest report the recording needs, the line is refused unread, and the item is flagged."""
    entry = Entry("report-bomb", "exit", "dampnest", "initialise optimiser state on first step", "")
    code = task("dampnest").indented(entry.snippet, REPORT_BOMB_ANSWER)
    passed, output = unguarded_run(task("dampnest").spliced(entry.snippet, code))
    assert passed, output
    run, peak = peak_while(platform_run, sessions, backend_name, "warm", entry, code)
    assert run.verdict.status == "flagged" and run.verdict.measured == "passed", run.verdict
    replay = [f for f in run.verdict.findings if f["kind"] == REPLAY_DISAGREES]
    assert replay and "no single readable report" in replay[0]["detail"], run.verdict.findings
    assert peak < 64 * 1024 * 1024, peak
