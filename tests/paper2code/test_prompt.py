"""Prompt protocols: rcb-v1 holds the paper (or says it is omitted), the code part of FORMAT.md 5 and the
instructions; any protocol is a string.Template with $paper, $code, $name and $loc and a layout of its code part."""

from __future__ import annotations

import re

import pytest

from benchmarks.paper2code.extract import extract_code
from benchmarks.paper2code.prompt import (
    NO_PAPER_TEXT,
    PROTOCOL,
    RCB_V1,
    Protocol,
    build_prompt,
    code_part,
    prompt_fill,
    prompt_hash,
    prompt_template,
    template_problems,
)

MASKED = 'def f(x):\n    # TODO: Implement block "double"\n    # Approximately 1 line(s) of code.\n'
CONTEXT = [("utils.py", "A = 1\n"), ("cfg.py", "B = 2")]


def prompt(paper_text: str | None = "We double {x}.", protocol: Protocol = RCB_V1) -> str:
    return build_prompt(
        protocol=protocol,
        paper_text=paper_text,
        context_files=CONTEXT,
        masked_path="model.py",
        masked_code=MASKED,
        name="double",
        loc=1,
    )


def test_code_part_lists_context_files_then_masked_file() -> None:
    assert "## utils.py\n\nA = 1\n\n\n## cfg.py\n\nB = 2\n\n## model.py\n\n" + MASKED + "\n\n" in prompt()


def test_paper_text_is_included_verbatim() -> None:
    text = prompt("We double {x} for $5 and $paper.")
    assert "# Paper\n\nWe double {x} for $5 and $paper.\n" in text and "# Paper (omitted)" not in text


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


def test_default_protocol_is_rcb_v1_and_usable() -> None:
    assert PROTOCOL == RCB_V1.name == "rcb-v1" and RCB_V1.problems() == []


def test_template_placeholders_dollar_and_snippet_facts() -> None:
    mine = Protocol(name="t", template="P[$paper] C[$code] N[$name] L[${loc}] $$5")
    assert prompt("text", mine) == f"P[text] C[{code_part(mine, CONTEXT, 'model.py', MASKED)}] N[double] L[1] $5"


def test_ablation_without_a_template_of_its_own_says_the_paper_is_not_given() -> None:
    mine = Protocol(name="t", template="P[$paper] C[$code]")
    assert prompt(None, mine).startswith(f"P[{NO_PAPER_TEXT}] C[## utils.py")
    ablation = Protocol(name="t", template="P[$paper] C[$code]", template_without_paper="only C[$code] $name")
    assert prompt(None, ablation).startswith("only C[## utils.py") and prompt(None, ablation).endswith(" double")


def test_code_part_without_masked_header_and_with_original_context_join() -> None:
    original = Protocol(name="o", template="$paper$code", masked_header=False, context_join="original")
    assert code_part(original, [("u.py", "A = 1\r\nB = 2\n"), ("c.py", "C\n\nD")], "m.py", "x\n") == (
        "## u.py\n\nA = 1B = 2\n\n## c.py\n\nCD\n\nx\n"
    )


def test_template_problems_say_where() -> None:
    assert template_problems("$paper\n$code\ncosts $5") == [
        'line 3: a lone "$" (write $$ for a dollar sign, or one of $paper, $code, $name, $loc)'
    ]
    assert template_problems("$paper $code\n\n$snippet") == [
        "line 3: unknown placeholder $snippet; known: $paper, $code, $name, $loc"
    ]
    assert template_problems("$paper only") == ["$code is missing: the model would never see the masked file"]
    assert template_problems("$code only", paper=False) == []
    assert template_problems("$$paper $code")[0].startswith("$paper is missing")


def test_protocol_problems_name_unknown_styles() -> None:
    problems = Protocol(
        name="x", template="$paper $code", masking="wild", context_join="glue", template_without_paper="$oops"
    ).problems()
    assert problems[0].startswith("masking 'wild' is unknown; known: standard, original")
    assert problems[1].startswith("context join 'glue' is unknown")
    assert "template without paper: line 1: unknown placeholder $oops" in problems[2]


def test_prompt_hash_is_sha256_hex() -> None:
    assert prompt_hash("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert prompt_hash(prompt()) != prompt_hash(prompt(None))


@pytest.mark.parametrize(
    "protocol",
    [
        RCB_V1,
        Protocol(
            name="bare", template="$$5 ${paper}|$code|$name ($loc) $paper", masked_header=False, context_join="original"
        ),
        Protocol(name="code-first", template="$code$paper"),
    ],
    ids=lambda p: p.name,
)
def test_a_papers_prompt_template_filled_with_an_items_fields_is_its_prompt(protocol: Protocol) -> None:
    """What the items file keeps once per paper, filled with one item's fields, is build_prompt's answer."""
    template = prompt_template(protocol=protocol, context_files=CONTEXT)
    fields = {
        "paper_text": "We double {x} for $5 and $paper.",
        "file": "model.py",
        "masked_code": MASKED,
        "snippet": "double",
        "loc": 1,
    }
    assert prompt_fill(template, fields) == prompt("We double {x} for $5 and $paper.", protocol)
    assert MASKED not in "".join(p for p in template if isinstance(p, str)), "the masked file is the item's"


def test_the_items_reader_reads_both_layouts_of_the_file() -> None:
    """Files of releases published before the prompt template moved into the paper line keep `prompt_parts`."""
    import json

    from benchmarks.paper2code import items_read

    paper = "We double {x}."
    item = {
        "type": "item",
        "id": "7",
        "paper": "p",
        "file": "model.py",
        "snippet": "double",
        "loc": 1,
        "protocol": "rcb-v1",
        "masked_code": MASKED,
    }
    now = [
        {
            "type": "paper",
            "paper": "p",
            "paper_text": paper,
            "prompt_template": prompt_template(protocol=RCB_V1, context_files=CONTEXT),
        },
        item,
    ]
    before = [
        {"type": "paper", "paper": "p", "paper_text": paper},
        {**item, "prompt_parts": prompt("\x00").split("\x00")},
    ]
    for lines in (now, before):
        (read,) = items_read(json.dumps(line) for line in lines)
        assert read["prompt"] == prompt(paper) and read["masked_code"] == MASKED
