"""The tasks the corpora splice answers into (the demo set, tinyformer and robust-scale), and an unguarded run of one:
the spliced files in a temporary folder, the entry point run with plain `python`, judged by the pass rule alone."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from benchmarks.paper2code import AnnotatedFile, Snippet, parse, passes, splice
from evaluation.audit import Finding, answer_audit
from sandbox import Limits
from sandbox.harness import answer_span

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = {
    "dampnest": ROOT / "benchmarks" / "demo" / "dampnest",
    "trimmed-infonce": ROOT / "benchmarks" / "demo" / "trimmed-infonce",
    "topk-attention-pool": ROOT / "benchmarks" / "demo" / "topk-attention-pool",
    "tinyformer": ROOT / "tests" / "evaluation" / "packages" / "tinyformer",
    "robust-scale": ROOT / "tests" / "evaluation" / "packages" / "robustscale",
}
ENTRY_POINT = "paper2code_test.py"
# The limits an answer of the corpora runs under through the platform.
LIMITS = Limits(
    wall_seconds=60,
    memory_bytes=1024 * 1024 * 1024,
    processes=64,
    cpus=1.0,
    output_bytes=1024 * 1024,
    disk_bytes=64 * 1024 * 1024,
)


@dataclass(frozen=True)
class Task:
    name: str
    files: dict[str, bytes]
    hidden: tuple[str, ...]

    @property
    def annotated(self) -> dict[str, AnnotatedFile]:
        return _annotated(self.name)

    def snippet(self, name: str) -> tuple[AnnotatedFile, Snippet]:
        for annotated in self.annotated.values():
            for snippet in annotated.snippets:
                if snippet.name == name:
                    return annotated, snippet
        raise KeyError(f"task {self.name} has no snippet {name!r}")

    def reference(self, name: str) -> str:
        annotated, snippet = self.snippet(name)
        lines = self.files[annotated.path].decode().splitlines(keepends=True)
        return "".join(lines[snippet.start_line : snippet.end_line - 1])

    def indented(self, name: str, body: str) -> str:
        """`body`, written flush left, at the indentation of the snippet's start marker."""
        annotated, snippet = self.snippet(name)
        marker = self.files[annotated.path].decode().splitlines()[snippet.start_line - 1]
        indent = marker[: len(marker) - len(marker.lstrip())]
        return "".join(f"{indent}{line}" if line.strip() else line for line in body.splitlines(keepends=True))

    def spliced(self, name: str, code: str) -> dict[str, bytes]:
        annotated, snippet = self.snippet(name)
        return {**self.files, annotated.path: splice(annotated, snippet, code).encode()}

    def audit(self, name: str, code: str) -> list[Finding]:
        annotated, snippet = self.snippet(name)
        first, last = answer_span(snippet.start_line, code)
        files = self.spliced(name, code)
        context = {path: data.decode() for path, data in files.items() if path.endswith(".py")}
        return answer_audit(
            source=context[annotated.path],
            first_line=first,
            last_line=last,
            hidden_modules=[Path(path).stem for path in self.hidden],
            hidden_files=self.hidden,
            context_sources=context,
        )


@cache
def task(name: str) -> Task:
    folder = FOLDERS[name]
    files = {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }
    hidden = tuple(sorted(path for path in files if path == ENTRY_POINT or path.endswith("_ref.py")))
    return Task(name, files, hidden)


@cache
def _annotated(name: str) -> dict[str, AnnotatedFile]:
    files = task(name).files
    return {
        path: parse(data.decode(), path)
        for path, data in files.items()
        if path.endswith(".py") and b"<paper2code name=" in data and path not in task(name).hidden
    }


def unguarded_run(files: dict[str, bytes], *, timeout: float = 120) -> tuple[bool, str]:
    """Run the entry point with plain `python` (no harness, no sandbox) in a temporary folder: (passes, output)."""
    with tempfile.TemporaryDirectory(prefix="rcb-unguarded-") as folder:
        for path, data in files.items():
            target = Path(folder) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        try:
            done = subprocess.run(
                [sys.executable, ENTRY_POINT],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=timeout,
                env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
            )
        except subprocess.TimeoutExpired as exc:
            return False, f"timed out: {exc.stdout!r} {exc.stderr!r}"
    ok = passes(exit_code=done.returncode, stdout=done.stdout, stderr=done.stderr, timed_out=False)
    return ok, f"exit {done.returncode}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"


@dataclass(frozen=True)
class Entry:
    name: str
    cls: str
    task: str
    snippet: str
    answer: str  # flush left; placed at the snippet's indentation

    @property
    def code(self) -> str:
        return task(self.task).indented(self.snippet, self.answer)


def entries(path: Path) -> list[Entry]:
    rows = yaml.safe_load(path.read_text())
    found = [Entry(row["name"], row["class"], row["task"], row["snippet"], row["answer"]) for row in rows]
    names = [entry.name for entry in found]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{path.name}: entries named twice: {', '.join(duplicates)}")
    return found
