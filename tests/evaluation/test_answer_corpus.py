"""The hostile and honest corpora (tests/evaluation/corpus/*.yaml), spliced into the demo's tasks and tinyformer.

Every hostile answer first proves its attack: spliced in and run with plain `python` in a temporary folder (no
harness, no sandbox), it passes the task's tests; an entry whose attack does not pass unguarded fails here, so a
broken attack never counts as contained. Then the static policy finds it, and through the platform (the executor,
the real sandbox) it is failed or flagged, never passed: every entry on bwrap warm (through the fork server where
the platform forks the task's items: not for the pure-Python trimmed-infonce, which starts cold there too), and
the first entry of each class and of each task on bwrap cold and on docker warm and cold (the full cross product
would run each answer four times for the same static finding, which is what holds most of them today).
The honest respellings run unguarded and through the policy each, and one of each task through the platform.
What the policy misses (hostile_runtime.yaml: inputs changed through spellings it does not follow) first proves its
attack unguarded too, then is held by the runtime guard on both backends, warm and cold.

Every honest answer (the references of the demo set and of bench_pipeline's heavy set, and the respellings) passes
with no finding; the false-flag rate of the policy on them is printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.paper2code import parse
from benchmarks.services.blobs import environment_hash
from evaluation.audit import RULES, answer_audit
from evaluation.executor import ItemRun, answer_test
from sandbox.harness import answer_span
from tests.conftest import DEMO_PSET, sandbox_backend_or_missing
from tests.evaluation.corpus.tasks import ENTRY_POINT, LIMITS, Entry, entries, task, unguarded_run

CORPUS = Path(__file__).parent / "corpus"
HOSTILE = sorted(entries(CORPUS / "hostile.yaml"), key=lambda entry: entry.task)  # one task after another: warm
HONEST = entries(CORPUS / "honest.yaml")
# What the static policy misses and the runtime guard holds by construction (an input changed before the hidden
# reference gets it): every entry on both backends, warm and cold.
HOSTILE_RUNTIME = entries(CORPUS / "hostile_runtime.yaml")
CLASSES = {"skip", "exit", "equal", "helpers", "sabotage", "restore", "hidden", "inputs", "forgery"}
# The first entry of each class, and of each task no such entry is of: what runs on the other backends and modes.
_FIRSTS = [next(e for e in entries(CORPUS / "hostile.yaml") if e.cls == cls) for cls in sorted(CLASSES)]
REPRESENTATIVE = _FIRSTS + [
    next(e for e in entries(CORPUS / "hostile.yaml") if e.task == name)
    for name in sorted({e.task for e in HOSTILE} - {e.task for e in _FIRSTS})
]
# The first respelling of each task: what also runs through the platform (the static check runs for every one).
HONEST_REPRESENTATIVE = [next(e for e in HONEST if e.task == name) for name in sorted({e.task for e in HONEST})]


def ids(entry: Entry) -> str:
    return entry.name


def test_the_corpora_cover_every_class_in_several_spellings():
    assert len(HOSTILE) >= 40 and len(HONEST) >= 20
    assert {entry.cls for entry in HOSTILE} == CLASSES
    for cls in CLASSES:
        assert sum(entry.cls == cls for entry in HOSTILE) >= 3, cls
    assert {entry.task for entry in HOSTILE} == {entry.task for entry in HONEST}
    assert all(entry.cls == "honest" for entry in HONEST)


def platform_run(session, entry: Entry) -> ItemRun:
    corpus_task = task(entry.task)
    annotated, snippet = corpus_task.snippet(entry.snippet)
    return answer_test(
        session=session,
        files=corpus_task.files,
        annotated=annotated,
        position=snippet.index,
        code=entry.code,
        test_entry_point=ENTRY_POINT,
        hidden_files=corpus_task.hidden,
        limits=LIMITS,
    )


@pytest.mark.parametrize("entry", HOSTILE, ids=ids)
def test_a_hostile_answer_passes_unguarded_and_the_policy_finds_it(entry):
    corpus_task = task(entry.task)
    passed, output = unguarded_run(corpus_task.spliced(entry.snippet, entry.code))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"
    findings = corpus_task.audit(entry.snippet, entry.code)
    assert findings, "the policy found nothing"
    _, snippet = corpus_task.snippet(entry.snippet)
    first, last = answer_span(snippet.start_line, entry.code)
    for finding in findings:
        assert first <= finding.line <= last and finding.rule in RULES, finding
        assert f"[{finding.rule}]" in finding.detail


def forks(task_name: str) -> bool:
    """Whether the platform starts this task's items warm: only tests that import numpy (which loads ctypes) fork;
    the others run cold although the fork server is on (see ForkingSession._zygote), and turn it off for the
    session's later items, so each task gets a session of its own."""
    return b"import numpy" in task(task_name).files[ENTRY_POINT]


@pytest.fixture(scope="module")
def sandbox_sessions(sandbox_cache):
    """One session per (backend, mode, task), opened on first use and closed at the end of the module."""
    opened: dict[tuple[str, str, str], object] = {}
    contexts = []

    def get(backend_name: str, mode: str, task_name: str):
        key = (backend_name, mode, task_name)
        if key not in opened:
            backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
            backend.forkserver = mode == "warm"
            environment = backend.environment_build(env_hash=environment_hash("numpy"), requirements="numpy")
            context = backend.session(environment)
            contexts.append(context)
            opened[key] = context.__enter__()
        return opened[key]

    yield get
    for context in contexts:
        context.__exit__(None, None, None)


def contained(run: ItemRun) -> None:
    verdict = run.verdict
    assert verdict.status in ("failed", "flagged"), (verdict, run.result.stdout[-1500:], run.result.stderr[-1500:])
    if verdict.status == "flagged":
        assert verdict.findings and all("kind" in f and "detail" in f for f in verdict.findings)


MEASURED: dict[str, str] = {}  # entry: what the test itself said on bwrap warm (a flag keeps the test's word)


@pytest.mark.parametrize("entry", HOSTILE, ids=ids)
def test_a_hostile_answer_never_passes_on_bwrap_warm(sandbox_sessions, entry):
    session = sandbox_sessions("bwrap", "warm", entry.task)
    run = platform_run(session, entry)
    MEASURED[entry.name] = run.verdict.measured or run.verdict.status
    contained(run)
    assert session.forking == forks(entry.task), "the session fell back to cold starts"
    static = [f for f in run.verdict.findings if f["source"] == "static"]
    assert static and all(f["rule"] in RULES for f in static), run.verdict


def test_what_holds_the_hostile_answers(capsys):
    # Reported, not asserted: how many hostile answers the test itself passed, held by the flag alone (the static
    # policy, or the runtime guard) — on today's harness every skip is one of them.
    if not MEASURED:
        pytest.skip("the bwrap warm corpus did not run in this session")
    passed = sorted(name for name, measured in MEASURED.items() if measured == "passed")
    by_class = {cls: sum(1 for e in HOSTILE if e.cls == cls and e.name in passed) for cls in sorted(CLASSES)}
    with capsys.disabled():
        print(
            f"\nhostile corpus on bwrap warm: {len(MEASURED)} run, none passed; the test itself said passed for "
            f"{len(passed)} (held by their flag alone), by class: {by_class}"
        )


@pytest.mark.parametrize("entry", REPRESENTATIVE, ids=ids)
@pytest.mark.parametrize("backend_name,mode", [("bwrap", "cold"), ("docker", "warm"), ("docker", "cold")])
def test_a_hostile_answer_never_passes_on_the_other_backends_and_modes(sandbox_sessions, backend_name, mode, entry):
    session = sandbox_sessions(backend_name, mode, entry.task)
    contained(platform_run(session, entry))
    assert session.forking == (mode == "warm" and forks(entry.task))


@pytest.mark.parametrize("entry", HOSTILE_RUNTIME, ids=ids)
def test_a_runtime_held_answer_passes_unguarded(entry):
    passed, output = unguarded_run(task(entry.task).spliced(entry.snippet, entry.code))
    assert passed, f"the attack does not work unguarded, so it proves nothing:\n{output}"


@pytest.mark.parametrize("entry", HOSTILE_RUNTIME, ids=ids)
@pytest.mark.parametrize(
    "backend_name,mode", [("bwrap", "warm"), ("bwrap", "cold"), ("docker", "warm"), ("docker", "cold")]
)
def test_the_runtime_guard_holds_what_the_policy_misses(sandbox_sessions, backend_name, mode, entry):
    session = sandbox_sessions(backend_name, mode, entry.task)
    run = platform_run(session, entry)
    contained(run)
    assert any(
        f["source"] == "runtime" and "the hidden reference received" in f["detail"] for f in run.verdict.findings
    ), run.verdict
    assert session.forking == (mode == "warm" and forks(entry.task))


@pytest.mark.parametrize("entry", HONEST, ids=ids)
def test_an_honest_respelling_passes_unguarded_with_no_finding(entry):
    corpus_task = task(entry.task)
    passed, output = unguarded_run(corpus_task.spliced(entry.snippet, entry.code))
    assert passed, f"the respelling is not the same computation:\n{output}"
    assert corpus_task.audit(entry.snippet, entry.code) == []


@pytest.mark.parametrize("entry", HONEST_REPRESENTATIVE, ids=ids)
def test_an_honest_respelling_passes_on_the_platform_unflagged(sandbox_sessions, entry):
    session = sandbox_sessions("bwrap", "warm", entry.task)
    run = platform_run(session, entry)
    assert session.forking == forks(entry.task)
    assert (run.verdict.status, run.verdict.findings) == ("passed", ()), (run.verdict, run.result.stderr[-1500:])


# -- the false-flag rate


def demo_references() -> list[tuple[str, list]]:
    """(name, findings) for the reference body of every snippet of the demo set."""
    found = []
    for paper in sorted(p for p in DEMO_PSET.iterdir() if p.is_dir()):
        files = {str(p.relative_to(paper)): p.read_text() for p in paper.rglob("*.py") if "__pycache__" not in p.parts}
        hidden = sorted(path for path in files if path == ENTRY_POINT or path.endswith("_ref.py"))
        found += _references(paper.name, files, hidden)
    return found


def heavy_references(root: Path) -> list[tuple[str, list]]:
    """The same for scripts/bench_pipeline.py's heavy set (its default size), generated into `root`."""
    from scripts.bench_pipeline import papers_plan, pset_heavy_generate

    pset_heavy_generate(root, papers_plan(20, 212), per_second=1000.0, paper_bytes=1000)
    found = []
    for paper in sorted(p for p in root.iterdir() if p.is_dir()):
        files = {p.name: p.read_text() for p in paper.glob("*.py")}
        found += _references(paper.name, files, [ENTRY_POINT, "model_ref.py"])
    return found


def _references(paper: str, files: dict[str, str], hidden: list[str]) -> list[tuple[str, list]]:
    found = []
    for path, text in sorted(files.items()):
        if path in hidden or "<paper2code name=" not in text:
            continue
        annotated = parse(text, path)
        lines = text.splitlines(keepends=True)
        for snippet in annotated.snippets:
            code = "".join(lines[snippet.start_line : snippet.end_line - 1])
            first, last = answer_span(snippet.start_line, code)
            findings = answer_audit(
                source=text,
                first_line=first,
                last_line=last,
                hidden_modules=[Path(h).stem for h in hidden],
                hidden_files=hidden,
                context_sources=files,
            )
            found.append((f"{paper}/{path}: {snippet.name}", findings))
    return found


def test_the_policy_flags_no_reference_and_no_respelling(tmp_path, capsys):
    demo, heavy = demo_references(), heavy_references(tmp_path)
    respelled = [(entry.name, task(entry.task).audit(entry.snippet, entry.code)) for entry in HONEST]
    references = demo + heavy
    flagged_references = [(name, findings) for name, findings in references if findings]
    flagged_respelled = [(name, findings) for name, findings in respelled if findings]
    with capsys.disabled():
        print(
            f"\npolicy false-flag rate: references {len(flagged_references)}/{len(references)} "
            f"({100 * len(flagged_references) / len(references):.1f}%; demo {len(demo)}, heavy set {len(heavy)}), "
            f"respelled {len(flagged_respelled)}/{len(respelled)} "
            f"({100 * len(flagged_respelled) / len(respelled):.1f}%)"
        )
    assert len(demo) >= 30 and len(heavy) >= 200
    assert flagged_references == []
    assert len(flagged_respelled) / len(respelled) < 0.01, flagged_respelled
