"""Which files of a package give an answer away: the test entry point, every copy of a snippet's reference code, and
recorded calls of the reference (the proposed tests' inputs and outputs: what the reference returned is the answer).

One rule for two uses: such files are hidden from answers at run time (the workspace, the guard) and can never be
context files, which every prompt shows whole (FORMAT.md 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from benchmarks.paper2code.markers import AnnotatedFile
from benchmarks.paper2code.masking import strip_markers

# A reference of one line of code is too common to be a copy (`return x`); two lines or more are taken as one.
REFERENCE_COPY_MIN_LOC = 2
# The proposed tests' folder (submissions/proposed.py) and its subfolders holding the reference's recorded calls.
RECORDED_FOLDER = "rcb_replay"
RECORDED_PARTS = ("inputs", "outputs")
# Recorded outputs as the proposed tests store them, whatever the file is named: a JSON list of snapshot documents
# (sandbox/programs/snapshot.py writes each compact, its version first, then its roots).
_RECORDED_OUTPUTS_RE = re.compile(rb'\A\s*\[\s*"\{\\"v\\":\d+,\\"roots\\":')


def _normalised(text: str) -> str:
    return re.sub(r"\s+", "", text)


def reference_copies(files: Mapping[str, bytes], references: Mapping[str, str]) -> dict[str, list[str]]:
    """The text files holding a copy of a reference, compared without whitespace (a copy with other line ends or
    indentation is a copy): path -> the names of the references found in it. `references`: name -> code."""
    wanted = {name: _normalised(strip_markers(code)) for name, code in references.items()}
    found: dict[str, list[str]] = {}
    for path, data in files.items():
        if b"\x00" in data[:8192]:  # binary: not a text copy
            continue
        text = _normalised(data.decode("utf-8", "replace"))
        names = [name for name, code in wanted.items() if code and code in text]
        if names:
            found[path] = names
    return found


def recorded_calls(files: Mapping[str, bytes]) -> set[str]:
    """The files holding recorded calls of the reference: any file in the inputs/ or outputs/ folder of a proposed
    tests' rcb_replay/ folder (wherever it lies), and any file of recorded outputs, whatever its name."""
    found = set()
    for path, data in files.items():
        folders = path.split("/")[:-1]
        in_folder = any(
            folder == RECORDED_FOLDER and folders[i + 1] in RECORDED_PARTS for i, folder in enumerate(folders[:-1])
        )
        if in_folder or _RECORDED_OUTPUTS_RE.match(data[:4096]):
            found.add(path)
    return found


def package_references(annotated: Iterable[AnnotatedFile]) -> dict[str, str]:
    """The reference code of every snippet long enough to be recognised as a copy, by `file: "name"`."""
    return {
        f'{snippet.file}: "{snippet.name}"': snippet.code
        for parsed in annotated
        for snippet in parsed.snippets
        if snippet.loc >= REFERENCE_COPY_MIN_LOC
    }


def context_refusals(
    *,
    context_paths: Iterable[str],
    files: Mapping[str, bytes],
    annotated: Mapping[str, AnnotatedFile],
    test_entry_point: str,
) -> dict[str, str]:
    """Why each context file that would give the answer away cannot be one: path -> the reason, in an author's words.
    A context file is shown whole in every prompt, so the test entry point, an annotated file, a file holding a
    snippet's reference code or the reference's recorded calls would put the answer (or the tests that know it) in
    front of the model."""
    refusals: dict[str, str] = {}
    copies = reference_copies(
        {path: files[path] for path in context_paths if path in files and path not in annotated},
        package_references(annotated.values()),
    )
    recorded = recorded_calls({path: files[path] for path in context_paths if path in files})
    for path in context_paths:
        if path == test_entry_point:
            refusals[path] = (
                "is the test entry point: a context file is shown to the model whole, and the tests (and the "
                "reference they compare with) must stay hidden"
            )
        elif path in annotated:
            refusals[path] = "is an annotated file: shown whole as context, it would give every snippet's code away"
        elif path in copies:
            names = copies[path]
            refusals[path] = (
                f"holds the reference code of {names[0]}"
                + (f" and {len(names) - 1} more snippet(s)" if len(names) > 1 else "")
                + ": a context file is shown to the model whole, so the answer would be in every prompt; leave it "
                "out of the context files (the tests can still import it)"
            )
        elif path in recorded:
            refusals[path] = (
                "holds recorded calls of the reference (the proposed tests' inputs and outputs): a context file is "
                "shown to the model whole, so what the reference returned would be in every prompt; it stays "
                "beside the tests, hidden, as the test entry point does"
            )
    return refusals
