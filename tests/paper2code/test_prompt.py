"""The rcb-v1 prompt holds the paper (or says it is omitted), the code part of FORMAT.md 5 and the instructions."""

from __future__ import annotations

import re

import pytest

from benchmarks.paper2code.extract import extract_code
from benchmarks.paper2code.prompt import PROTOCOL, TEMPLATES, build_prompt, prompt_hash

MASKED = 'def f(x):\n    # TODO: Implement block "double"\n    # Approximately 1 line(s) of code.\n'


def prompt(paper_text: str | None = "We double {x}.") -> str:
    return build_prompt(paper_text=paper_text, context_files=[("utils.py", "A = 1\n"), ("cfg.py", "B = 2")],
                        masked_path="model.py", masked_code=MASKED)


def test_code_part_lists_context_files_then_masked_file() -> None:
    assert "## utils.py\n\nA = 1\n\n\n## cfg.py\n\nB = 2\n\n## model.py\n\n" + MASKED + "\n\n" in prompt()


def test_paper_text_is_included_verbatim() -> None:
    text = prompt()
    assert "# Paper\n\nWe double {x}.\n" in text and "# Paper (omitted)" not in text


def test_without_paper_says_it_is_omitted() -> None:
    text = prompt(None)
    assert "# Paper (omitted)" in text and "We double" not in text


def test_instructions_are_numbered_and_ask_for_a_python_fence() -> None:
    instructions = prompt().split("# Instructions")[1].split("# Example")[0]
    assert [int(n) for n in re.findall(r"^(\d+)\. ", instructions, re.MULTILINE)] == [1, 2, 3, 4, 5, 6]
    assert "```python" in instructions and "indentation" in instructions


def test_worked_example_answers_at_the_todo_indentation() -> None:
    example = prompt().split("# Example")[1]
    todo = re.search(r"^( *)# TODO: Implement block", example, re.MULTILINE)
    answer = extract_code(example)
    assert todo and answer
    assert {len(line) - len(line.lstrip()) for line in answer.splitlines()} == {len(todo.group(1))}
    assert len(todo.group(1)) > 4  # the example TODO sits inside a loop inside a method


def test_unknown_protocol_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=PROTOCOL):
        build_prompt(paper_text=None, context_files=[], masked_path="m.py", masked_code="", protocol="rcb-v0")


def test_default_protocol_is_stored_by_version() -> None:
    assert PROTOCOL == "rcb-v1" and PROTOCOL in TEMPLATES
    explicit = build_prompt(paper_text="We double {x}.", context_files=[("utils.py", "A = 1\n"), ("cfg.py", "B = 2")],
                            masked_path="model.py", masked_code=MASKED, protocol="rcb-v1")
    assert prompt() == explicit


def test_prompt_hash_is_sha256_hex() -> None:
    assert prompt_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert prompt_hash(prompt()) != prompt_hash(prompt(None))
