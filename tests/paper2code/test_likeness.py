"""One paper once (issue 37), the similarity alone: the demo's own paper matches itself and a near copy of its code
(variables renamed, comments and layout changed, another title and text), and never a different real paper."""

from __future__ import annotations

import functools
import itertools
import random
import re
from dataclasses import replace

import pytest

from benchmarks.paper2code import parse
from benchmarks.paper2code.likeness import SKETCH_SIZE, code_tokens, jaccard_estimate, likeness, package_fingerprint
from benchmarks.paper2code.pset import read_pset
from tests.conftest import DEMO_PSET, REPO

RENAMES = {"st": "buf", "g": "gradient", "rho": "ratio", "b2": "decay", "u": "direction", "diff": "delta"}


@functools.cache
def _papers():
    return {p.id: p for p in [*read_pset(DEMO_PSET), *read_pset(REPO / "tests/evaluation/packages/muon")]}


def near_copy_code(source: str) -> str:
    """The code an author would hand in as "their own": variables renamed, comments reworded, layout changed."""
    for old, new in RENAMES.items():
        source = re.sub(rf"\b{old}\b", new, source)
    source = re.sub(r"#(?! ?</?paper2code).*", "# our own implementation", source)
    source = source.replace(" = ", "  =  ").replace("\n\n", "\n\n\n")
    return source.replace('"""DampNest: curvature-damped momentum optimiser (NumPy implementation)."""', "")


def near_copy(package):
    code = near_copy_code(package.files["optimizer.py"].decode())
    files = {
        **package.files,
        "optimizer.py": code.encode(),
        "paper2code_paper.md": b"# Calm steps\n\n" + b"We propose a new optimiser for noisy gradients. " * 60,
    }
    return replace(
        package,
        id="calm-steps",
        title="Calm Steps",
        files=files,
        annotated={"optimizer.py": parse(code, "optimizer.py")},
    )


def _alike(a, b):
    return likeness(candidate=package_fingerprint(a), title=a.title, other=package_fingerprint(b), other_title=b.title)


def test_the_demo_paper_matches_itself_on_every_count():
    dampnest = _papers()["dampnest"]
    alike = _alike(dampnest, dampnest)
    assert alike.is_match
    assert alike.words() == (
        "title identical; paper text 100% similar; code files 100% similar (3 of 3 files identical); "
        "11 of 11 snippet bodies identical"
    )


def test_a_near_copy_matches_by_its_code_and_snippet_bodies():
    dampnest = _papers()["dampnest"]
    copy = near_copy(dampnest)
    assert "gradient" in copy.files["optimizer.py"].decode() and "buf" in copy.files["optimizer.py"].decode()
    alike = _alike(copy, dampnest)
    assert alike.is_match and not alike.title_same and alike.text < 0.1
    assert alike.code >= 0.8, alike.words()
    assert alike.snippets_same == alike.snippets == 11, alike.words()


def test_renaming_a_variable_and_its_layout_leave_the_tokens_as_they_were():
    assert code_tokens("x = f(a,  b)  # a comment\n") == code_tokens("total = f(first, second)\n")
    assert code_tokens("y = np.minimum(a, b)") != code_tokens("y = np.maximum(a, b)")  # library calls keep names


@pytest.mark.parametrize(
    "pair", list(itertools.permutations(["dampnest", "topk-attention-pool", "trimmed-infonce", "muon"], 2))
)
def test_different_real_papers_do_not_match(pair):
    papers = _papers()
    alike = _alike(papers[pair[0]], papers[pair[1]])
    assert not alike.is_match, alike.words()
    assert alike.text < 0.1 and alike.code < 0.2 and alike.snippets_same == 0, alike.words()


def test_the_sketch_estimate_is_exact_for_small_sets_and_close_for_large_ones():
    rng = random.Random(37)
    for size in (10, 100, 5000):
        shared = rng.sample(range(2**62), size)
        a, b = set(shared + rng.sample(range(2**62), size // 4)), set(shared + rng.sample(range(2**62), size // 4))
        exact = len(a & b) / len(a | b)
        estimate = jaccard_estimate(sorted(a)[:SKETCH_SIZE], sorted(b)[:SKETCH_SIZE])
        assert estimate == exact if len(a | b) <= SKETCH_SIZE else abs(estimate - exact) < 0.1, (size, estimate, exact)
