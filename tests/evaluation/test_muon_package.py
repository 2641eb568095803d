"""The real outside package (tests/evaluation/packages/muon): a valid one-paper set whose annotated file is the
published code with markers added and nothing else, nested as its README says, with its licence beside it."""

from __future__ import annotations

from pathlib import Path

from benchmarks.paper2code import strip_markers
from benchmarks.paper2code.pset import read_pset

MUON = Path(__file__).parent / "packages" / "muon"


def test_it_reads_as_a_problem_set_with_nested_snippets():
    [paper] = read_pset(MUON)
    snippets = paper.annotated["muon.py"].snippets
    assert len(snippets) == 14 and paper.context_paths == ()
    depths = {s.name: s.depth for s in snippets}
    assert depths["Newton-Schulz orthogonalization"] == 0 and depths["quintic Newton-Schulz iterations"] == 1
    assert depths["Muon update"] == 0 and depths["momentum and Nesterov interpolation"] == 1
    assert sum(s.loc for s in snippets if s.depth == 0) > 30


def test_the_annotated_file_is_the_published_code_with_markers_only():
    folder = MUON / "muon"
    annotated = strip_markers((folder / "muon.py").read_text()).splitlines()
    reference = (folder / "muon_ref.py").read_text().splitlines()
    # Both open with a header saying where the code comes from (the annotated one also names the markers).
    assert annotated[0].startswith("# Copied from muon-optimizer 0.1.0") and reference[0] == annotated[0]
    assert annotated[3:] == reference[2:]
    assert "Copyright (c) 2024 Keller Jordan" in (folder / "LICENSE").read_text()
