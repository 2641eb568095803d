"""The demo benchmark is a good benchmark: references pass, every masked or no-op snippet fails (FORMAT.md 9).

Runs our own trusted demo code directly with the test interpreter; untrusted code never runs this way.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.paper2code import mask, noop, passes, splice
from benchmarks.paper2code.pset import PaperPackage, read_pset
from tests.conftest import DEMO_PSET

PACKAGES = read_pset(DEMO_PSET)
ITEMS = [(p, path, s) for p in PACKAGES for path in p.annotated_paths for s in p.annotated[path].snippets]


def run_tests(package: PaperPackage, folder: Path, replaced: dict[str, str] | None = None) -> bool:
    shutil.copytree(DEMO_PSET / package.id, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for path, text in (replaced or {}).items():
        (folder / path).write_text(text)
    proc = subprocess.run(
        [sys.executable, package.test_entry_point], cwd=folder, capture_output=True, text=True, timeout=60
    )
    return passes(exit_code=proc.returncode, stdout=proc.stdout, stderr=proc.stderr, timed_out=False)


def test_demo_has_three_papers_with_six_nested_snippets_each():
    assert len(PACKAGES) >= 3
    for package in PACKAGES:
        snippets = [s for f in package.annotated.values() for s in f.snippets]
        assert len(snippets) >= 6 and max(s.depth for s in snippets) >= 1
        assert len({s.loc for s in snippets}) >= 3, "snippets of different sizes"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.id)
def test_reference_passes_three_times_in_a_row(package: PaperPackage, tmp_path: Path):
    for attempt in range(3):
        assert run_tests(package, tmp_path / str(attempt))


@pytest.mark.parametrize("package,path,snippet", ITEMS, ids=lambda v: getattr(v, "name", None) or getattr(v, "id", v))
def test_masking_any_snippet_fails_its_tests(package, path, snippet, tmp_path: Path):
    annotated = package.annotated[path]
    assert not run_tests(package, tmp_path / "masked", {path: mask(annotated, snippet)})
    assert not run_tests(package, tmp_path / "noop", {path: splice(annotated, snippet, noop(snippet))})
