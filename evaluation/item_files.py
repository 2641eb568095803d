"""An item as the files an agent starts with and its answer read back from the final file: one rule for the
platform's agent workspace (agents/workspace.py) and for Harbor's tasks and jobs (evaluation/harbor/).

What the workspace holds: every file of the task except its hidden ones (`task_hidden_files`: the test entry point
and reference copies), the snippet's file masked exactly as the single-shot prompt shows it, every other annotated
file without its marker lines, and the paper unless the run is the without-paper ablation (then no
`paper2code_paper.*` file in any folder).

The answer (`answer_read`): the masked file is prefix + placeholder + suffix, the placeholder being the two TODO
lines with their line ends. The agent's final version of that file must still start with the prefix and end with
the suffix (unchanged, not overlapping); the text between them is the snippet body. Anything else is no answer, with
the reason. The body is spliced into the original file by the single-shot path: nothing else of the workspace
reaches the test.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from benchmarks.paper2code import strip_markers
from benchmarks.paper2code.prompt import Protocol
from benchmarks.paper2code.pset import PAPER_TEXT_NAMES
from benchmarks.selectors import snippet_masked

PAPER_STEM = PurePosixPath(PAPER_TEXT_NAMES[0]).stem + "."  # paper2code_paper.*


@dataclass(frozen=True)
class MaskedFile:
    path: str
    prefix: str
    placeholder: str
    suffix: str

    @property
    def text(self) -> str:
        return self.prefix + self.placeholder + self.suffix


def masked_split(masked: str, *, name: str, loc: int, path: str) -> MaskedFile:
    """The masked file cut around its placeholder (the TODO line and the "Approximately" line, line ends kept)."""
    start = masked.find(f'# TODO: Implement block "{name}"')
    end_marker = f"# Approximately {loc} line(s) of code."
    end = masked.find(end_marker, start)
    if start < 0 or end < 0:
        raise ValueError(f"{path}: the placeholder of {name!r} is not in the masked file")
    start = masked.rfind("\n", 0, start) + 1  # the placeholder's indentation belongs to it
    end += len(end_marker)
    end += 2 if masked.startswith("\r\n", end) else 1 if masked.startswith("\n", end) else 0
    return MaskedFile(path=path, prefix=masked[:start], placeholder=masked[start:end], suffix=masked[end:])


def workspace_files(
    *, snippet, files: dict[str, bytes], hidden: frozenset[str], protocol: Protocol, with_paper: bool
) -> tuple[dict[str, bytes], MaskedFile]:
    """The files an agent starts with, and the masked file cut around its placeholder."""
    task = snippet.task
    masked = masked_split(
        snippet_masked(snippet=snippet, files=files, protocol=protocol),
        name=snippet.name,
        loc=snippet.loc,
        path=snippet.file_path,
    )
    start: dict[str, bytes] = {}
    for path, data in files.items():
        if path in hidden or (not with_paper and _is_paper(path, task.paper_path)):
            continue
        if path == snippet.file_path:
            data = masked.text.encode("utf-8")
        elif path in task.annotated_paths:
            data = strip_markers(data.decode("utf-8")).encode("utf-8")
        start[path] = data
    return start, masked


def _is_paper(path: str, paper_path: str) -> bool:
    """The paper in any of its forms (a package may carry the .tex and the .md, or a PDF)."""
    return path == paper_path or PurePosixPath(path).name.startswith(PAPER_STEM)


def answer_read(*, final: str | None, masked: MaskedFile) -> tuple[str | None, str]:
    """(the snippet body, "") from the agent's final file, or (None, why there is none)."""
    if final is None:
        return None, f"{masked.path} is missing from the workspace at the end"
    if not final.startswith(masked.prefix):
        return None, (
            f"{masked.path} was changed above the TODO block (the lines before it must stay as given), "
            f"so the answer's region cannot be found"
        )
    if not final.endswith(masked.suffix) or len(final) < len(masked.prefix) + len(masked.suffix):
        return None, (
            f"{masked.path} was changed below the TODO block (the lines after it must stay as given), "
            f"so the answer's region cannot be found"
        )
    return final[len(masked.prefix) : len(final) - len(masked.suffix)], ""
