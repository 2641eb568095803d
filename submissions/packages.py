"""A submission's draft: what it still lacks, its requirements, and what an upload fills it with."""

from __future__ import annotations

import tempfile
from datetime import date
from pathlib import Path

from benchmarks.paper2code import PackageError, Problem, parse
from benchmarks.paper2code.hidden import context_refusals, recorded_folder
from benchmarks.paper2code.links import link_problem
from benchmarks.paper2code.pset import (
    EXAMPLE_SCRIPT_KEY,
    LINK_FIELDS,
    REQUIREMENTS_NAMES,
    TEST_ENTRY_POINT,
    PaperPackage,
    example_script_problem,
    read_pset_with_warnings,
    requirements_file,
    tests_missing_problem,
)
from benchmarks.paper2code.requirements import requirements_problems, requirements_text
from benchmarks.selectors import blob_read

PAPER_FILES = ("paper2code_paper.tex", "paper2code_paper.md")
REQUIREMENTS_FILE = REQUIREMENTS_NAMES[0]  # the name the form writes the requirements under
DATE_FIELDS = ("arxiv_date", "arxiv_v1_date", "first_commit_date", "last_commit_date")


def draft_problems(draft: dict) -> list[str]:
    """What a draft still lacks before it can be submitted, in the author's words."""
    problems = []
    metadata = draft.get("metadata") or {}
    if not metadata.get("title"):
        problems.append("the paper's title is missing (step 1)")
    if not metadata.get("id"):
        problems.append("the paper id is missing (step 1)")
    files = draft.get("files") or {}
    if not draft.get("paper_path") or draft["paper_path"] not in files:
        problems.append("the paper text is missing (step 2)")
    if not any(path not in PAPER_FILES for path in files):
        problems.append("no code yet (step 3)")
    annotated = draft.get("annotated_paths") or []
    if not annotated:
        problems.append("pick at least one annotated file (step 4)")
    missing = [p for p in [*annotated, *(draft.get("context_paths") or [])] if p not in files]
    if missing:
        problems.append(f"files not in the code: {', '.join(missing)}")
    script = metadata.get(EXAMPLE_SCRIPT_KEY)
    if missing_tests := tests_missing_problem(files, example_script=str(script or ""), tests_proposed=True):
        problems.append(f"the code has no tests: {missing_tests} (steps 3 and 4)")
    if script and (problem := example_script_problem(str(script), files, annotated)):
        problems.append(f"the example script {script} {problem} (step 4)")
    refused = draft_context_refusals(
        files=files, annotated_paths=annotated, context_paths=list(draft.get("context_paths") or [])
    )
    problems += [f"context file {path} {reason} (step 4)" for path, reason in refused.items()]
    problems += [
        f"requirements line {p.line}: {p.message} (step 4)" for p in requirements_problems(draft_requirements(files))
    ]
    problems += [
        f"{key}: {problem} (step 1)" for key in LINK_FIELDS if (problem := link_problem(str(metadata.get(key) or "")))
    ]
    return problems


def draft_context_refusals(
    *, files: dict[str, str], annotated_paths: list[str], context_paths: list[str]
) -> dict[str, str]:
    """The chosen context files that would give the answer away, each with the reason (the one rule of
    paper2code.hidden, as import_pset and an archive's papers.yaml apply it, with the draft's recorded calls whose
    values it looks for). `files`: path -> sha256."""
    if not context_paths:
        return {}
    recordings = [p for p in files if recorded_folder(p)]
    wanted = [p for p in dict.fromkeys([*annotated_paths, *context_paths, *recordings]) if p in files]
    texts = {path: blob_read(sha256=files[path]) for path in wanted}
    annotated = {path: parse(texts[path].decode("utf-8", "replace"), path) for path in annotated_paths if path in texts}
    return context_refusals(
        context_paths=context_paths, files=texts, annotated=annotated, test_entry_point=TEST_ENTRY_POINT
    )


def draft_requirements(files: dict[str, str]) -> str:
    """The requirements of a draft: its requirements file (FORMAT.md 1), the one place they are kept."""
    name = requirements_file(files)
    return blob_read(sha256=files[name]).decode("utf-8", "replace") if name else ""


def _requirements_intake(files: dict[str, bytes], earlier: dict[str, str]) -> str:
    """Where step 4's requirements come from after a code upload: the new code's requirements file (naming what it
    replaced), else the ones held before, kept (draft_code_save), else none."""
    name, before = requirements_file(files), draft_requirements(earlier)
    if name is None:
        if before.strip():
            return f"kept from before: the new code has no requirements file ({requirements_file(earlier)} stays)"
        return "no requirements file found"
    new = files[name].decode("utf-8", "replace")
    if before.strip() and requirements_text(before) != requirements_text(new):
        replaced = "; ".join(line.strip() for line in before.splitlines() if line.strip())
        return f"from {name} in the new code, replacing the requirements held before: {replaced}"
    return f"from {name}"


def pset_archive_package(files: dict[str, bytes]) -> PaperPackage | None:
    """The package of an archive holding a whole one-paper problem set (papers.yaml), else None.

    Raises PackageError with every problem found, as import_pset would.
    """
    if "papers.yaml" not in files:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        for path, data in files.items():
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_bytes(data)
        packages, _ = read_pset_with_warnings(tmp, tests_proposed=True)
    if len(packages) != 1:
        raise PackageError([Problem("papers.yaml", 0, f"a submission holds one paper; this lists {len(packages)}")])
    return packages[0]


def draft_metadata(package: PaperPackage) -> dict:
    """A package's papers.yaml entry as a draft keeps it (step 1): dates as ISO text, the paths in their own keys."""
    return {
        k: (v.isoformat() if isinstance(v, date) else v)
        for k, v in package.metadata().items()
        if k not in ("annotated_file_paths", "context_file_paths")
    }


def metadata_archive_first(*, typed: dict, archive: dict) -> tuple[dict, dict[str, object]]:
    """A problem set's paper details over what the author typed in step 1: its papers.yaml is the package's own word
    (step 1 asks for a title before any code is there), so each detail it gives replaces the typed one, and a detail
    it leaves empty keeps what was typed. Also what it replaced (key -> the typed value), so the summary names it."""
    given = {k: v for k, v in archive.items() if v not in (None, "", [])}
    replaced = {k: typed[k] for k in sorted(given) if typed.get(k) not in (None, "", []) and typed[k] != given[k]}
    return {**typed, **given}, replaced


# How many annotated-file candidates an intake summary parses, so a huge archive stays a quick save.
INTAKE_MAX_SCANNED = 500


def markers_detected(files: dict[str, bytes]) -> list[dict]:
    """The Python files that hold snippet markers (or lines that look like them), each with its snippet count
    and every marker problem, the malformed line itself included (FORMAT.md 2)."""
    found = []
    for path in sorted(p for p, data in files.items() if p.endswith(".py") and b"paper2code" in data)[
        :INTAKE_MAX_SCANNED
    ]:
        parsed = parse(files[path].decode("utf-8", "replace"), path)
        found.append(
            {
                "path": path,
                "snippets": len(parsed.snippets),
                "problems": [f"line {p.line}: {p.severity}: {p.message}" for p in parsed.problems],
            }
        )
    return found


def pset_shortcut_reason(files: dict[str, bytes]) -> str:
    """Why an archive was taken as plain code rather than as a one-paper problem set."""
    nested = sorted(p for p in files if p.rsplit("/", 1)[-1] == "papers.yaml")
    if nested:
        return (
            f"its papers.yaml is at {nested[0]}, not at the archive's top (or inside its one top folder), so "
            "it was taken as plain code; a problem set keeps papers.yaml beside the paper's folder"
        )
    return (
        "it has no papers.yaml, so it was taken as the paper's code; a whole one-paper problem set (papers.yaml "
        "beside the paper's folder) would also fill the details, the paper text and the files"
    )


def intake_summary(*, files: dict[str, bytes], source: dict, draft: dict, whole: PaperPackage | None) -> dict:
    """What a code upload did to the draft, in the author's words: the files found, what each step was filled
    with, the annotated files detected (they hold markers), and why the problem-set shortcut did (not) apply."""
    stored = dict(whole.files) if whole else files
    # Every entry of the upload is counted: a problem set's papers.yaml fills step 1 and is not one of the paper's
    # files, so counting the paper's files alone said "5 files" of an archive of 6 (walk 4).
    summary: dict = {"source": source, "file_count": len(files), "problem_set": whole is not None, "steps": []}
    steps = summary["steps"]
    if whole:
        folder = f"{whole.id}/"
        summary["paper_files"] = {"folder": folder, "count": len(whole.files)}
        summary["left_out"] = sorted(
            p for p in files if p != "papers.yaml" and not (p.startswith(folder) and p[len(folder) :] in whole.files)
        )
        meta = draft_metadata(whole)
        typed = {k: v for k, v in (draft.get("metadata") or {}).items() if v not in (None, "", [])}
        _, replaced = metadata_archive_first(typed=typed, archive=meta)
        summary["reason"] = f"its papers.yaml lists one paper, {meta.get('id')}: every step was filled from it"
        given = [k for k, v in meta.items() if v not in (None, "", [])]
        details = [f"from papers.yaml: {', '.join(given)}"] if given else []
        if replaced:
            details.append(
                "replaced what step 1 held: "
                + ", ".join(f"{k} {v!r} by {meta[k]!r}" for k, v in replaced.items())
                + " (edit step 1 to change them back)"
            )
        if unfilled := sorted(k for k in typed if k not in given):
            details.append(f"kept from step 1 (papers.yaml leaves them empty): {', '.join(unfilled)}")
        steps.append(("Paper details", "; ".join(details)))
        steps.append(("Paper text", f"from {whole.paper_path}"))
        steps.append(("Annotated files", "from papers.yaml: " + (", ".join(whole.annotated_paths) or "none")))
        steps.append(("Context files", "from papers.yaml: " + (", ".join(whole.context_paths) or "none")))
    else:
        summary["reason"] = pset_shortcut_reason(files)
        kept = draft.get("paper_path") if draft.get("paper_path") in (draft.get("files") or {}) else None
        in_archive = next((p for p in PAPER_FILES if p in files), None)
        steps.append(
            (
                "Paper text",
                f"kept from step 2 ({kept})"
                if kept
                else f"from {in_archive} in the code"
                if in_archive
                else "none yet: add it in step 2",
            )
        )
    steps.append(("Requirements", _requirements_intake(stored, draft.get("files") or {})))
    script = (whole.extra.get(EXAMPLE_SCRIPT_KEY) if whole else None) or (draft.get("metadata") or {}).get(
        EXAMPLE_SCRIPT_KEY
    )
    steps.append(
        (
            "Test entry point",
            f"{TEST_ENTRY_POINT} found"
            if TEST_ENTRY_POINT in stored
            else f"{TEST_ENTRY_POINT} is missing: validation proposes tests from the example script {script} and "
            "they become your tests"
            if script
            else f"{TEST_ENTRY_POINT} is missing: every task runs it; write it, or name an example script in step 4 "
            "and validation proposes tests from it",
        )
    )
    summary["markers"] = markers_detected(stored)
    return summary
