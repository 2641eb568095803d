"""rcb-v1 prompts stay byte for byte what the first implementation built (frozen in data/rcb_v1_golden.json)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from benchmarks.paper2code import RCB_V1, build_prompt, protocol_mask
from benchmarks.paper2code.pset import read_pset

GOLDEN = json.loads((Path(__file__).parent / "data" / "rcb_v1_golden.json").read_text(encoding="utf-8"))
DEMO = Path(__file__).resolve().parents[2] / "benchmarks" / "demo"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def demo_items():
    for package in read_pset(DEMO):
        context = [(p, package.files[p].decode("utf-8")) for p in package.context_paths]
        for path in package.annotated_paths:
            annotated = package.annotated[path]
            for snippet in annotated.snippets:
                yield f"{package.id}/{path}/{snippet.index}", package, context, path, annotated, snippet


def test_every_demo_item_is_covered() -> None:
    assert sorted(key for key, *_ in demo_items()) == sorted(GOLDEN["demo"])


@pytest.mark.parametrize(
    "key, package, context, path, annotated, snippet", list(demo_items()), ids=lambda v: v if isinstance(v, str) else ""
)
def test_demo_prompts_are_unchanged(key, package, context, path, annotated, snippet) -> None:
    expected = GOLDEN["demo"][key]
    masked = protocol_mask(RCB_V1, annotated, snippet)
    assert sha(masked) == expected["masked"]
    for with_paper, column in ((True, "with_paper"), (False, "without_paper")):
        prompt = build_prompt(
            protocol=RCB_V1,
            paper_text=package.paper_text if with_paper else None,
            context_files=context,
            masked_path=path,
            masked_code=masked,
            name=snippet.name,
            loc=snippet.loc,
        )
        assert sha(prompt) == expected[column], column


@pytest.mark.parametrize("case", GOLDEN["synthetic"], ids=lambda c: repr(c["paper_text"])[:30])
def test_synthetic_prompts_are_unchanged(case: dict) -> None:
    prompt = build_prompt(
        protocol=RCB_V1,
        paper_text=case["paper_text"],
        context_files=[tuple(c) for c in case["context_files"]],
        masked_path=case["masked_path"],
        masked_code=case["masked_code"],
        name="any",
        loc=3,
    )
    assert prompt == case["prompt"]
