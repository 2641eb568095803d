"""An attempt's prompt as the page shows it: the parts a model's prompt is built from (the paper unless the ablation,
the context files, the masked file), and the prompt text itself, built by the same function as a model's."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.selectors import protocol_get, snippet_masked
from evaluation.selectors.items import item_prompt
from evaluation.services import run_protocol
from evaluation.taskfiles import task_annotated, task_files
from humans.models import Attempt


@dataclass(frozen=True)
class AttemptPrompt:
    paper: str | None
    context: list[tuple[str, str]]
    masked_path: str
    masked: str
    text: str  # the whole prompt a model gets for this item and setting


def attempt_prompt(*, attempt: Attempt) -> AttemptPrompt:
    snippet, task = attempt.snippet, attempt.snippet.task
    protocol = attempt.run.protocol if attempt.run else run_protocol(version=attempt.version, protocol=None)
    files = task_files(task)
    return AttemptPrompt(
        paper=files[task.paper_path].decode("utf-8") if attempt.with_paper else None,
        context=[(path, files[path].decode("utf-8")) for path in task.context_paths],
        masked_path=snippet.file_path,
        masked=snippet_masked(
            snippet=snippet,
            files=files,
            protocol=protocol_get(name=protocol),
            annotated=task_annotated(task, snippet.file_path),
        ),
        text=item_prompt(snippet, with_paper=attempt.with_paper, protocol=protocol),
    )
