"""Turn an annotated file into what the model sees (FORMAT.md 5) and put an answer back (7.2)."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.paper2code.markers import AnnotatedFile, Snippet, is_marker, split_lines


def _ending(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else "\n" if line.endswith("\n") else ""


def _lines_of(file: AnnotatedFile, snippet: Snippet) -> list[str]:
    if snippet not in file.snippets:
        raise ValueError(f'snippet "{snippet.name}" does not belong to {file.path}')
    return split_lines(file.text)


def mask(file: AnnotatedFile, snippet: Snippet) -> str:
    """The file with `snippet` replaced by the two TODO placeholder lines and every other marker line removed."""
    lines = _lines_of(file, snippet)
    start, end = lines[snippet.start_line - 1], lines[snippet.end_line - 1]
    placeholder = [
        f'{snippet.code_indent}# TODO: Implement block "{snippet.name}"{_ending(start)}',
        f"{snippet.code_indent}# Approximately {snippet.loc} line(s) of code.{_ending(end)}",
    ]
    before = [line for line in lines[: snippet.start_line - 1] if not is_marker(line)]
    after = [line for line in lines[snippet.end_line :] if not is_marker(line)]
    return "".join(before + placeholder + after)


def mask_original(file: AnnotatedFile, snippet: Snippet) -> str:
    """The masked file exactly as the original harness built it (FORMAT.md 10; issue 11 item 4 (a)).

    The file's lines as str.splitlines gives them (no line ends), the snippet's marker and code lines replaced by the
    two placeholder lines, each ending with its own "\\n", every other marker line removed, all joined by "\\n":
    each placeholder line is followed by an empty line and the file's last newline is lost unless a placeholder
    line comes last.
    """
    lines = _lines_of(file, snippet)
    # str.splitlines also breaks at \r, \f, \u2028, ...: split each of our lines so that line numbers still match.
    before = [piece for line in lines[: snippet.start_line - 1] for piece in line.splitlines() if not is_marker(piece)]
    after = [piece for line in lines[snippet.end_line :] for piece in line.splitlines() if not is_marker(piece)]
    placeholder = [
        f'{snippet.code_indent}# TODO: Implement block "{snippet.name}"\n',
        f"{snippet.code_indent}# Approximately {snippet.loc} line(s) of code.\n",
    ]
    return "\n".join(before + placeholder + after)


# Masking styles a prompt protocol can name.
MASKINGS: dict[str, Callable[[AnnotatedFile, Snippet], str]] = {"standard": mask, "original": mask_original}


def splice(file: AnnotatedFile, snippet: Snippet, code: str) -> str:
    """The original file, markers kept, with the lines strictly between `snippet`'s markers replaced by `code`.

    A missing final newline is added, in the file's own style ("\\r\\n" or "\\n") taken from the start marker.
    """
    lines = _lines_of(file, snippet)
    if code and not code.endswith("\n"):
        code += _ending(lines[snippet.start_line - 1])
    return "".join(lines[: snippet.start_line]) + code + "".join(lines[snippet.end_line - 1 :])


def noop(snippet: Snippet) -> str:
    """A do-nothing replacement for `snippet`'s code at its indentation, used to check the tests cover it."""
    return f"{snippet.code_indent}pass\n"


def strip_markers(text: str) -> str:
    """The annotated text as plain code: every marker line removed."""
    return "".join(line for line in split_lines(text) if not is_marker(line))
