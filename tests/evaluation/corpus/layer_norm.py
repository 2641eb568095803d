"""The answer the guard tests splice into tinyformer's layer norm, and how they run it through the platform's real
sandboxes (test_guard_spellings.py, test_code_generators.py): one sandbox session per backend and mode, opened once
per module, and the answer judged by the runtime guard alone (the static policy off)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from benchmarks.services.blobs import environment_hash
from evaluation.executor import ItemRun, answer_test
from tests.conftest import sandbox_backend_or_missing
from tests.evaluation.corpus.tasks import ENTRY_POINT, LIMITS, task

TASK = task("tinyformer")
SNIPPET = "layer norm over the last axis"


def code(answer: str, *, keep_reference: bool = False) -> str:
    """`answer` at the snippet's indentation, followed by the reference's own lines when it must still pass."""
    body = TASK.indented(SNIPPET, answer if answer.endswith("\n") else answer + "\n")
    return body + (TASK.reference(SNIPPET) if keep_reference else "")


def sessions_opened(sandbox_cache: Path, requirements: str = "numpy") -> Iterator[Callable[[str, str], object]]:
    """A getter of the session of the environment of `requirements` (numpy's unless told) per (backend, "warm" or
    "cold"), each opened on first use and all closed when the generator ends (a module fixture yields from it)."""
    opened: dict[tuple[str, str], object] = {}
    contexts = []

    def get(backend_name: str, mode: str):
        if (backend_name, mode) not in opened:
            backend = sandbox_backend_or_missing(backend_name, sandbox_cache)
            backend.forkserver = mode == "warm"
            environment = backend.environment_build(env_hash=environment_hash(requirements), requirements=requirements)
            context = backend.session(environment)
            contexts.append(context)
            opened[(backend_name, mode)] = context.__enter__()
        return opened[(backend_name, mode)]

    try:
        yield get
    finally:
        for context in contexts:
            context.__exit__(None, None, None)


def platform_run(session, answer: str, extra_files: dict[str, bytes] | None = None) -> ItemRun:
    """`answer` (the snippet's code) judged through the platform by the runtime guard alone (the task's files and
    `extra_files` beside them)."""
    annotated, snippet = TASK.snippet(SNIPPET)
    return answer_test(
        session=session,
        files={**TASK.files, **(extra_files or {})},
        annotated=annotated,
        position=snippet.index,
        code=answer,
        test_entry_point=ENTRY_POINT,
        hidden_files=TASK.hidden,
        limits=LIMITS,
        static_audit=False,
    )
