"""Read and write a problem set on disk (FORMAT.md 1-3): papers.yaml plus one folder per paper.

Symlinks: a symlink inside a paper folder whose target resolves inside that folder is followed
and its content read as a regular file (or, for a directory, as a folder) under the link's own
path, so `write_pset` writes plain files; one that points outside the folder, dangles or loops
is an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from benchmarks.paper2code.hidden import PAPER_TEXT_NAMES, context_refusals
from benchmarks.paper2code.links import link_problem
from benchmarks.paper2code.markers import AnnotatedFile, parse
from benchmarks.paper2code.problems import PackageError, Problem
from benchmarks.paper2code.requirements import requirements_problems

PAPERS_YAML = "papers.yaml"
TEST_ENTRY_POINT = "paper2code_test.py"
REQUIREMENTS_NAMES = ("paper2code_requirements.txt", "requirements.txt")  # first wins
LEGACY_HINT = (
    "; a legacy set that ran in one shared environment is imported with --environment FILE, which "
    "keeps each paper's requirements file as a file, never installed"
)

_TEXT_FIELDS = ("title", "arxiv_abs", "github_url", "venue")
LINK_FIELDS = ("arxiv_abs", "github_url")  # rendered as links: http(s) only
_DATE_FIELDS = ("arxiv_date", "arxiv_v1_date", "first_commit_date", "last_commit_date")
# An optional key (kept among the extra keys): true when the paper's tests need a GPU (issue 24).
GPU_KEY = "gpu"
# An optional key (kept among the extra keys): a script of the paper's folder that calls its code, whose run with
# the reference validation records to propose replay tests (issue 35; submissions/proposed.py).
EXAMPLE_SCRIPT_KEY = "example_script"
_KNOWN_FIELDS = ("id", *_TEXT_FIELDS, *_DATE_FIELDS, "annotated_file_paths", "context_file_paths")
_SAFE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass(frozen=True)
class PaperPackage:
    """One paper of a problem set: its papers.yaml entry, every file of its folder, its parsed annotated files.

    Paths are relative to the paper folder (POSIX); `annotated` is keyed by them and each
    AnnotatedFile (and its snippets) carries the same relative path.
    """

    id: str
    title: str
    arxiv_abs: str
    arxiv_date: date | None
    arxiv_v1_date: date | None
    github_url: str
    first_commit_date: date | None
    last_commit_date: date | None
    venue: str
    paper_path: str
    annotated_paths: tuple[str, ...]
    context_paths: tuple[str, ...]
    requirements_path: str | None  # None too when the set runs in a shared environment: the file is then only a file
    files: Mapping[str, bytes]
    annotated: Mapping[str, AnnotatedFile]
    extra: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    test_entry_point = TEST_ENTRY_POINT  # FORMAT.md 2: always run, whatever paper2code.yaml says

    def __hash__(self) -> int:
        return hash(self.content_hash)

    @property
    def paper_text(self) -> str:
        return self.files[self.paper_path].decode("utf-8")

    @property
    def requirements(self) -> str:
        return self.files[self.requirements_path].decode("utf-8") if self.requirements_path else ""

    @cached_property
    def _file_digests(self) -> Mapping[str, str]:
        return MappingProxyType({path: hashlib.sha256(data).hexdigest() for path, data in sorted(self.files.items())})

    @property
    def file_hashes(self) -> dict[str, str]:
        """sha256 hex digest of every file, by path."""
        return dict(self._file_digests)

    @cached_property
    def content_hash(self) -> str:
        """sha256 of the metadata and every file's path and digest: equal content, equal hash."""
        canonical = {"metadata": self.metadata(), "files": sorted(self._file_digests.items())}
        encoded = json.dumps(canonical, sort_keys=True, ensure_ascii=False, default=_json_default)
        return hashlib.sha256(encoded.encode("utf-8")).hexdigest()

    def metadata(self) -> dict[str, object]:
        """The papers.yaml entry of this paper, extra keys included."""
        entry: dict[str, object] = {
            "id": self.id,
            "title": self.title,
            "arxiv_abs": self.arxiv_abs,
            "arxiv_date": self.arxiv_date,
            "arxiv_v1_date": self.arxiv_v1_date,
            "github_url": self.github_url,
            "first_commit_date": self.first_commit_date,
            "last_commit_date": self.last_commit_date,
            "venue": self.venue,
            "annotated_file_paths": list(self.annotated_paths),
            "context_file_paths": list(self.context_paths) or None,
        }
        for key, value in self.extra.items():
            entry.setdefault(key, value)
        return entry


def requirements_file(paths: Iterable[str]) -> str | None:
    """The package's requirements file: paper2code_requirements.txt, else requirements.txt, else none."""
    present = set(paths)
    return next((name for name in REQUIREMENTS_NAMES if name in present), None)


def read_pset(
    root: str | Path, *, shared_environment: bool = False, tests_proposed: bool = False
) -> list[PaperPackage]:
    """Every paper of the problem set at `root`, in papers.yaml order; PackageError lists every error.

    `shared_environment`: the set runs in one environment given beside it (a legacy set), so a paper's own
    requirements file is one of its files like any other: kept verbatim, never read as requirements.
    `tests_proposed`: a paper without a test entry point is taken when it names an example script, whose proposed
    tests become its tests at validation (a submission; `tests_missing_problem`)."""
    papers, _warnings = read_pset_with_warnings(
        root, shared_environment=shared_environment, tests_proposed=tests_proposed
    )
    return papers


def read_pset_with_warnings(
    root: str | Path,
    *,
    shared_environment: bool = False,
    tests_proposed: bool = False,
) -> tuple[list[PaperPackage], list[Problem]]:
    """Like read_pset, also returning the warnings (near-miss markers) that do not stop a set from loading."""
    root = Path(root)
    entries, problems = _papers_yaml_read(root)
    papers: list[PaperPackage] = []
    warnings: list[Problem] = []
    seen: dict[str, int] = {}
    for entry in entries:
        paper_id = entry.id
        if paper_id in seen:
            message = f"paper {paper_id}: duplicate id (first at line {seen[paper_id]})"
            problems.append(Problem(PAPERS_YAML, entry.line, message))
            continue
        seen[paper_id] = entry.line
        paper, paper_problems = _paper_read(
            root, entry, shared_environment=shared_environment, tests_proposed=tests_proposed
        )
        problems += [p for p in paper_problems if p.severity == "error"]
        warnings += [p for p in paper_problems if p.severity == "warning"]
        if paper is not None:
            papers.append(paper)
    if problems:
        raise PackageError(problems)
    return papers, warnings


def write_pset(root: str | Path, papers: Iterable[PaperPackage]) -> None:
    """Write papers.yaml and every paper's files byte for byte into `root`, which must not exist or be empty."""
    root = Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise ValueError(f"{root} exists and is not an empty folder")
    papers = list(papers)
    ids = [paper.id for paper in papers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate paper ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    for paper in papers:
        if not _id_is_safe(paper.id):
            raise ValueError(f"paper id {paper.id!r} is not a safe folder name")
        unsafe = [path for path in paper.files if _path_normalize(path) != path]
        if unsafe:
            raise ValueError(f"paper {paper.id}: file paths not inside the folder: {unsafe}")
    root.mkdir(parents=True, exist_ok=True)
    for paper in papers:
        folder = root / paper.id
        for path, data in paper.files.items():
            target = folder / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    (root / PAPERS_YAML).write_text(papers_yaml_dump(papers), encoding="utf-8")


def papers_yaml_dump(papers: Iterable[PaperPackage]) -> str:
    """The papers.yaml text listing these papers (their files are not needed)."""
    listing = [paper.metadata() for paper in papers]
    # Dates stay date objects, which the dumper writes unquoted and the loader reads back as dates.
    return yaml.dump(listing, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)


@dataclass(frozen=True)
class _Entry:
    """One papers.yaml entry with the line of the entry and of each value, to locate problems."""

    index: int
    line: int
    data: dict
    lines: dict[str, int | list[int]]

    @property
    def id(self) -> str:
        return self.data["id"]

    def line_of(self, key: str, item: int | None = None) -> int:
        where = self.lines.get(key, self.line)
        if isinstance(where, list):
            return where[item] if item is not None and item < len(where) else self.line
        return where


# Values papers.yaml may hold once its aliases are expanded (a published set of 20 papers holds about 500).
YAML_VALUES_MAX = 100_000


def _nodes_expanded(root: yaml.Node) -> int:
    """How many nodes the document holds with every alias expanded, counted without expanding (an alias is the same
    node object twice, so a node's count is computed once)."""
    counts: dict[int, int] = {}

    def count(node: yaml.Node) -> int:
        if id(node) not in counts:
            counts[id(node)] = 0  # a recursive alias counts once, never forever
            children = (
                []
                if isinstance(node, yaml.ScalarNode)
                else [v for pair in node.value for v in pair]
                if isinstance(node, yaml.MappingNode)
                else node.value
            )
            counts[id(node)] = min(1 + sum(count(child) for child in children), YAML_VALUES_MAX + 1)
        return counts[id(node)]

    return count(root)


# Collections nested in papers.yaml (an entry's metadata nests two or three): libyaml's composer recurses in C, and a
# file nesting 200,000 lists crashed the process reading it (an author's archive holds its papers.yaml).
YAML_DEPTH_MAX = 64


def _yaml_too_deep(text: str) -> bool:
    """Whether the YAML text nests collections past YAML_DEPTH_MAX, read from the parser's events (nothing composed;
    the reading stops there, so libyaml's scanner, slower the deeper a flow collection, goes no deeper)."""
    loader = _Loader(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > YAML_DEPTH_MAX:
                    return True
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    finally:
        loader.dispose()
    return False


def _papers_yaml_read(root: Path) -> tuple[list[_Entry], list[Problem]]:
    """The entries of papers.yaml that have a usable id, and the problems of the file itself."""
    path = root / PAPERS_YAML
    if not path.is_file():
        return [], [Problem(PAPERS_YAML, 0, f"{PAPERS_YAML} is missing in {root}")]
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return [], [_utf8_problem(PAPERS_YAML, data, error)]
    loader = _Loader(text)
    try:
        if _yaml_too_deep(text):
            return [], [Problem(PAPERS_YAML, 0, f"nests lists or mappings more than {YAML_DEPTH_MAX} levels deep")]
        node = loader.get_single_node()
        expanded = _nodes_expanded(node) if node is not None else 0
        if expanded > YAML_VALUES_MAX:  # nested aliases: a few hundred bytes that expand to megabytes of metadata
            return [], [
                Problem(
                    PAPERS_YAML,
                    0,
                    f"expands to more than {YAML_VALUES_MAX} values through its aliases (*name): write the values out",
                )
            ]
        listing = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        return [], [Problem(PAPERS_YAML, line, f"invalid YAML: {_one_line(error)}")]
    finally:
        loader.dispose()
    if node is None or not isinstance(listing, list):
        line = node.start_mark.line + 1 if node is not None else 0
        kind = type(listing).__name__ if listing is not None else "an empty document"
        return [], [Problem(PAPERS_YAML, line, f"must be a list of papers, got {kind}")]

    entries: list[_Entry] = []
    problems: list[Problem] = []
    for index, (item, item_node) in enumerate(zip(listing, node.value, strict=False), start=1):
        line = item_node.start_mark.line + 1
        if not isinstance(item, dict):
            problems.append(Problem(PAPERS_YAML, line, f"entry {index} is not a mapping (got {type(item).__name__})"))
            continue
        paper_id = item.get("id")
        if paper_id is None:
            problems.append(Problem(PAPERS_YAML, line, f"entry {index} has no id"))
            continue
        if not isinstance(paper_id, str) or not _id_is_safe(paper_id):
            problems.append(
                Problem(
                    PAPERS_YAML,
                    line,
                    f"paper {paper_id!r}: id is not a safe folder name "
                    "(letters, digits, '.', '_', '-'; not starting with '.')",
                )
            )
            continue
        lines, duplicates = _value_lines(item_node)
        problems += [Problem(PAPERS_YAML, n, f"paper {paper_id}: key {key!r} is repeated") for key, n in duplicates]
        entries.append(_Entry(index=index, line=line, data={str(k): v for k, v in item.items()}, lines=lines))
    return entries, problems


def _value_lines(mapping: yaml.MappingNode) -> tuple[dict[str, int | list[int]], list[tuple[str, int]]]:
    """Line of each key's value (of each item, for a sequence), and the keys written twice."""
    lines: dict[str, int | list[int]] = {}
    duplicates: list[tuple[str, int]] = []
    for key_node, value_node in mapping.value:
        key = str(key_node.value)
        if key in lines:
            duplicates.append((key, key_node.start_mark.line + 1))
        if isinstance(value_node, yaml.SequenceNode):
            lines[key] = [item.start_mark.line + 1 for item in value_node.value]
        else:
            lines[key] = value_node.start_mark.line + 1
    return lines, duplicates


def _paper_read(
    root: Path, entry: _Entry, *, shared_environment: bool, tests_proposed: bool = False
) -> tuple[PaperPackage | None, list[Problem]]:
    """One paper's package, or None with the problems (errors and warnings) that keep it from loading."""
    paper_id = entry.id
    problems: list[Problem] = []

    def error(file: str, line: int, message: str) -> None:
        problems.append(Problem(file, line, f"paper {paper_id}: {message}"))

    fields = _fields_read(entry, error)
    annotated_paths = _paths_read(entry, "annotated_file_paths", error, required=True)
    context_paths = _paths_read(entry, "context_file_paths", error, required=False)

    folder = root / paper_id
    if folder.is_symlink():  # as a file's symlink may not leave the paper's folder, a folder may not leave the set's
        error(
            PAPERS_YAML,
            entry.line,
            f"folder {paper_id}/ is a symlink (to {os.readlink(folder)}); put the paper's files in the set itself",
        )
        return None, problems
    if not folder.is_dir():
        error(PAPERS_YAML, entry.line, f"folder {paper_id}/ does not exist")
        return None, problems
    files = _folder_files(folder, paper_id, problems)

    def in_folder(path: str) -> str:
        return f"{paper_id}/{path}"

    for kind, paths in (("annotated", annotated_paths), ("context", context_paths)):
        for path, line in paths.items():
            if path not in files:
                error(PAPERS_YAML, line, f"{kind} file {in_folder(path)} does not exist")

    script = entry.data.get(EXAMPLE_SCRIPT_KEY)
    missing_tests = tests_missing_problem(
        files, example_script=script if isinstance(script, str) else None, tests_proposed=tests_proposed
    )
    if missing_tests:
        error(in_folder(TEST_ENTRY_POINT), 0, missing_tests)
    paper_path = next((name for name in PAPER_TEXT_NAMES if name in files), None)
    if paper_path is None:
        error(in_folder(PAPER_TEXT_NAMES[0]), 0, f"missing paper text: neither {' nor '.join(PAPER_TEXT_NAMES)}")
    requirements_path = None if shared_environment else requirements_file(files)

    must_be_text = [*annotated_paths, *context_paths, TEST_ENTRY_POINT, paper_path, requirements_path]
    texts = _texts_read(files, must_be_text, paper_path, requirements_path, in_folder, error)
    annotated = _annotated_read(annotated_paths, texts, paper_id, problems, in_folder, error)

    context_refused = context_refusals(
        context_paths=context_paths, files=files, annotated=annotated, test_entry_point=TEST_ENTRY_POINT
    )
    for path, reason in context_refused.items():
        error(PAPERS_YAML, context_paths[path], f"context file {in_folder(path)} {reason}")

    if GPU_KEY in entry.data and not isinstance(entry.data[GPU_KEY], bool):
        error(
            PAPERS_YAML,
            entry.line_of(GPU_KEY),
            f"{GPU_KEY} is {entry.data[GPU_KEY]!r}; write true (its tests need a GPU) or false",
        )
    if EXAMPLE_SCRIPT_KEY in entry.data:
        script = entry.data[EXAMPLE_SCRIPT_KEY]
        refusal = (
            example_script_problem(_path_normalize(script), files, annotated_paths)
            if isinstance(script, str)
            else "must be a path"
        )
        if refusal:
            error(PAPERS_YAML, entry.line_of(EXAMPLE_SCRIPT_KEY), f"{EXAMPLE_SCRIPT_KEY} {script!r} {refusal}")
    if paper_path is None or any(p.severity == "error" for p in problems):  # a missing paper text is an error
        return None, problems
    extra = {key: value for key, value in entry.data.items() if key not in _KNOWN_FIELDS}
    paper = PaperPackage(
        id=paper_id,
        **fields,
        paper_path=paper_path,
        annotated_paths=tuple(annotated_paths),
        context_paths=tuple(context_paths),
        requirements_path=requirements_path,
        files=MappingProxyType(files),
        annotated=MappingProxyType(annotated),
        extra=MappingProxyType(extra),
    )
    return paper, problems


def _texts_read(
    files: dict[str, bytes],
    must_be_text: list[str | None],
    paper_path: str | None,
    requirements_path: str | None,
    in_folder: Callable[[str], str],
    error: Callable[[str, int, str], None],
) -> dict[str, str]:
    """The package's text files decoded (those present of `must_be_text`), the paper text and the requirements
    checked."""
    texts: dict[str, str] = {}
    for path in dict.fromkeys(p for p in must_be_text if p in files):
        try:
            texts[path] = files[path].decode("utf-8")
        except UnicodeDecodeError as decode_error:
            bad = _utf8_problem(in_folder(path), files[path], decode_error)
            error(bad.file, bad.line, bad.message)
    if paper_path in texts and not texts[paper_path].strip():
        error(in_folder(paper_path), 0, "the paper text is empty")
    if requirements_path in texts:
        refused = requirements_problems(texts[requirements_path], file=in_folder(requirements_path))
        for number, problem in enumerate(refused):
            error(problem.file, problem.line, problem.message + (LEGACY_HINT if number == 0 else ""))
    return texts


def _annotated_read(
    annotated_paths: dict[str, int],
    texts: dict[str, str],
    paper_id: str,
    problems: list[Problem],
    in_folder: Callable[[str], str],
    error: Callable[[str, int, str], None],
) -> dict[str, AnnotatedFile]:
    """The annotated files parsed (those that are text), their parse problems added to `problems`."""
    annotated: dict[str, AnnotatedFile] = {}
    for path in annotated_paths:
        if path not in texts:
            continue
        parsed = parse(texts[path], path)
        annotated[path] = parsed
        problems += [
            replace(p, file=in_folder(path), message=f"paper {paper_id}: {p.message}") for p in parsed.problems
        ]
        if not parsed.snippets and parsed.is_valid:
            error(in_folder(path), 0, "annotated file has no snippets")
    return annotated


def tests_missing_problem(files: Iterable[str], *, example_script: str | None, tests_proposed: bool) -> str:
    """Why a package has no tests to run ('' when it has): it needs its test entry point, or, where the proposed
    tests can become its tests (`tests_proposed`: a submission, validated on the site), an example script. An
    example script gives a package tests only through validation, so a release's import always needs the file."""
    if TEST_ENTRY_POINT in files:
        return ""
    if not example_script:
        return (
            f"missing test entry point {TEST_ENTRY_POINT}: write your tests there, or name an example script "
            f"({EXAMPLE_SCRIPT_KEY}: a script that calls your code), from which validation proposes tests"
        )
    if not tests_proposed:
        return (
            f"missing test entry point {TEST_ENTRY_POINT}: the tests proposed from {EXAMPLE_SCRIPT_KEY} "
            f"{example_script} become a package's tests only when it is submitted and validated on the site"
        )
    return ""


def example_script_problem(path: str | None, files: Iterable[str], annotated_paths: Iterable[str]) -> str:
    """Why `path` (folder-relative, None when it leaves the folder) cannot be a paper's example script ('' when it
    can): it must be a Python file of the folder that is neither the test entry point nor an annotated file."""
    if path is None:
        return "is outside the paper folder"
    if path == TEST_ENTRY_POINT:
        return "is the test entry point: name a script that calls your code, not your tests"
    if path in annotated_paths:
        return "is an annotated file: name a script that calls it"
    if not path.endswith(".py"):
        return "is not a Python file (.py): it is run with python in the paper's folder"
    if path not in files:
        return "is not a file of the paper's folder"
    return ""


def _fields_read(entry: _Entry, error: Callable[[str, int, str], None]) -> dict[str, Any]:
    """The text fields ("" when missing) and date fields (None when missing) of an entry (str or date | None by
    key, as PaperPackage's fields of those names)."""
    fields: dict[str, Any] = {}
    for key in _TEXT_FIELDS:
        value = entry.data.get(key)
        if isinstance(value, (list, dict)):
            error(PAPERS_YAML, entry.line_of(key), f"{key} must be a string, got {type(value).__name__}")
        text = fields[key] = "" if value is None else str(value)
        problem = link_problem(text) if key in LINK_FIELDS else ""
        if problem:
            error(PAPERS_YAML, entry.line_of(key), f"{key} {problem}")
    for key in _DATE_FIELDS:
        value, message = _date_parse(entry.data.get(key))
        if message:
            error(PAPERS_YAML, entry.line_of(key), f"{key} {message}")
        fields[key] = value
    return fields


def _paths_read(entry: _Entry, key: str, error: Callable[[str, int, str], None], *, required: bool) -> dict[str, int]:
    """A path-or-list field as normalized folder-relative paths, each with its papers.yaml line."""
    value = entry.data.get(key)
    if value is None:
        if required:
            error(PAPERS_YAML, entry.line, f"{key} is missing")
        return {}
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        error(PAPERS_YAML, entry.line_of(key), f"{key} must be a path or a list of paths")
        return {}
    if required and not items:
        error(PAPERS_YAML, entry.line_of(key), f"{key} is empty")
    paths: dict[str, int] = {}
    for i, item in enumerate(items):
        path, line = _path_normalize(item), entry.line_of(key, i if isinstance(value, list) else None)
        if path is None:
            error(PAPERS_YAML, line, f"{key}: {item!r} is outside the paper folder")
        elif path in paths:
            error(PAPERS_YAML, line, f"{key}: {item!r} is listed twice")
        else:
            paths[path] = line
    return paths


def _folder_files(folder: Path, paper_id: str, problems: list[Problem]) -> dict[str, bytes]:
    """Every regular file under `folder` by relative POSIX path, sorted; bytecode caches are skipped."""
    base = os.path.realpath(folder)
    files: dict[str, bytes] = {}

    def error(rel: str, message: str) -> None:
        problems.append(Problem(f"{paper_id}/{rel}", 0, f"paper {paper_id}: {message}"))

    def visit(directory: str, prefix: str, ancestors: frozenset[str]) -> None:
        with os.scandir(directory) as scan:
            children = sorted(scan, key=lambda child: child.name)
        for child in children:
            rel = prefix + child.name
            if child.is_symlink():
                target = os.path.realpath(child.path)
                if target != base and not target.startswith(base + os.sep):
                    error(rel, f"symlink points outside the paper folder (to {os.readlink(child.path)})")
                    continue
                if not os.path.exists(target):
                    error(rel, f"symlink is broken (to {os.readlink(child.path)})")
                    continue
            if child.is_dir():
                if child.name == "__pycache__":
                    continue
                real = os.path.realpath(child.path)
                if real in ancestors:
                    error(rel, "symlink loops back to a folder that contains it")
                    continue
                visit(child.path, rel + "/", ancestors | {real})
            elif child.is_file() and not child.name.endswith(".pyc"):
                try:
                    with open(child.path, "rb") as handle:
                        files[rel] = handle.read()
                except OSError as read_error:
                    error(rel, f"cannot be read: {read_error.strerror}")

    visit(str(folder), "", frozenset({base}))
    return dict(sorted(files.items()))


def _path_normalize(path: str) -> str | None:
    """`path` as a clean relative POSIX path inside the folder, or None if it leaves the folder."""
    if not path or posixpath.isabs(path) or re.match(r"[A-Za-z]:|\\", path):
        return None
    normal = posixpath.normpath(path)
    if normal == "." or normal == ".." or normal.startswith("../"):
        return None
    return normal


def _id_is_safe(paper_id: str) -> bool:
    return bool(_SAFE_ID_RE.fullmatch(paper_id))


def _date_parse(value: object) -> tuple[date | None, str]:
    """A papers.yaml date (date object, "YYYY-MM-DD" string, blank or null) and an error message if it is bad."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, ""
    if isinstance(value, datetime):
        return value.date(), ""
    if isinstance(value, date):
        return value, ""
    if isinstance(value, str) and _DATE_RE.fullmatch(value.strip()):
        try:
            return date.fromisoformat(value.strip()), ""
        except ValueError:
            pass
    return None, f"{value!r} is not a date (YYYY-MM-DD)"


def _utf8_problem(file: str, data: bytes, error: UnicodeDecodeError) -> Problem:
    line = data.count(b"\n", 0, error.start) + 1
    column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
    return Problem(file, line, f"not valid UTF-8 (byte 0x{data[error.start]:02x} at column {column})")


def _one_line(error: yaml.YAMLError) -> str:
    return " ".join(str(error).split())


def _json_default(value: object) -> object:
    """JSON form of the YAML values json does not know (dates, sets, binary) for the content hash."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)
