"""A context file is shown whole in every prompt, so one holding a snippet's reference code is refused
(benchmarks/paper2code/hidden.py), however the copy is dressed: as a Jupyter notebook's code cell (JSON strings),
as a doctest or an IPython session (prompts before each line), with two statements joined by `;` on one line, in a
function of another name, or, for a one-line reference long enough to be distinctive, alone (issue 33, attack7), or
escaped inside a string literal of a Python or YAML file (`\\n` escapes, lines concatenated, a quoted scalar).
Each leak is shown first: the file holds every line of the reference, so the answer would be in the prompt."""

from __future__ import annotations

import ast
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from benchmarks.paper2code.hidden import YAML_FLOW_DEPTH_MAX, context_refusals
from benchmarks.paper2code.markers import parse
from tests.conftest import DEMO_PSET

ROOT = Path(DEMO_PSET) / "trimmed-infonce"
ANNOTATED_TEXT = (ROOT / "contrastive.py").read_text()
ANNOTATED = {"contrastive.py": parse(ANNOTATED_TEXT, "contrastive.py")}
OBJECTIVE = next(s for s in ANNOTATED["contrastive.py"].snippets if s.name == "trimmed infonce objective")
OBJECTIVE_LINES = [line for line in OBJECTIVE.code.splitlines() if "paper2code" not in line]
NORMALISE = ["norm = math.sqrt(sum(x * x for x in v))", "return [x / norm for x in v]"]
TRIM = "max_trim = int(math.floor(trim_frac * (n - 1)))"
ANCHOR_LOSS = "total += logsumexp([row[i]] + [row[j] for j in kept]) - row[i]"

NOTEBOOK = json.dumps(
    {
        "cells": [
            {"cell_type": "markdown", "source": ["# Usage\n"]},
            {
                "cell_type": "code",
                "source": ["def trimmed_infonce(anchors, positives, tau=0.1, delta=0.1, trim_frac=0.25):\n"]
                + [line + "\n" for line in OBJECTIVE_LINES],
            },
        ],
        "nbformat": 4,
    },
    indent=1,
)
LEAKS = {
    "demo.ipynb": (NOTEBOOK, OBJECTIVE_LINES),
    "USAGE.md": (
        "```python\n>>> def l2_normalize(v):\n...     " + NORMALISE[0] + "\n...     " + NORMALISE[1] + "\n```\n",
        NORMALISE,
    ),
    "session.txt": ("In [1]: import math\n\nIn [2]: " + NORMALISE[0] + "\n   ...: " + NORMALISE[1] + "\n", NORMALISE),
    "norms.py": ("import math\n\ndef unit(v):\n    " + NORMALISE[0] + "; " + NORMALISE[1] + "\n", NORMALISE),
    "budget.py": ("import math\n\n\ndef trim_budget(n, trim_frac):\n    " + TRIM + "\n    return max_trim\n", [TRIM]),
    "helpers.py": (
        "def anchor_loss(row, i, kept):\n    total = 0.0\n    " + ANCHOR_LOSS + "\n    return total\n",
        [ANCHOR_LOSS],
    ),
}


def refusals(context: dict[str, str], annotated=ANNOTATED) -> dict[str, str]:
    files = {path: parsed.text.encode() for path, parsed in annotated.items()}
    files.update({"paper2code_test.py": b"", **{path: text.encode() for path, text in context.items()}})
    return context_refusals(
        context_paths=list(context), files=files, annotated=annotated, test_entry_point="paper2code_test.py"
    )


@pytest.mark.parametrize("path", list(LEAKS))
def test_a_context_file_holding_a_respelled_reference_is_refused(path):
    text, lines = LEAKS[path]
    decoded = "".join(json.loads(text)["cells"][1]["source"]) if path.endswith(".ipynb") else text
    assert all(line.strip() in decoded for line in lines if line.strip()), "the file holds the answer"
    refused = refusals({path: text})
    assert refused.get(path, "").startswith('holds the reference code of contrastive.py: "'), refused


@pytest.mark.parametrize(
    "text",
    [
        # A notebook, a doctest and a `;` line that call the code, never holding its body.
        json.dumps(
            {
                "cells": [
                    {
                        "cell_type": "code",
                        "source": ["from contrastive import l2_normalize\n", "l2_normalize([3.0, 4.0])\n"],
                    }
                ]
            }
        ),
        ">>> from contrastive import trimmed_infonce\n>>> loss, frac = trimmed_infonce(a, p)\n... \n",
        "import math; from contrastive import logsumexp\n",
        # A short line of the reference alone is too common to mark a copy: `n = len(anchors)` is everywhere.
        "def count(anchors):\n    n = len(anchors)\n    return n\n",
        # A one-line reference's neighbour inside another function, with another line: not a copy.
        "def budget(n, trim_frac):\n    n = len(anchors)\n    return n\n",
    ],
)
def test_a_context_file_that_only_uses_the_code_is_taken(text):
    assert refusals({"usage": text}) == {}


SCALE = 'def scale(x):\n    # <paper2code name="scale">\n    return x * 2.5\n    # </paper2code name="scale">\n'


def test_a_one_line_first_statement_is_found_in_a_function_of_another_name():
    """A short one-line reference is looked for with the line before it: its function's `def` line, whatever the
    function's name."""
    annotated = {"scale.py": parse(SCALE, "scale.py")}
    assert "other.py" in refusals({"other.py": "def double_and_a_half(x):\n    return x * 2.5\n"}, annotated)
    assert refusals({"other.py": "def f(y):\n    return x * 2.5\n"}, annotated) == {}  # another argument


UNIT = "def unit(v):\n    " + "\n    ".join(NORMALISE) + "\n"
LITERAL_LEAKS = {
    "escaped.py": "SRC = " + json.dumps(UNIT) + "\n",
    "concatenated.py": "SRC = (\n" + "".join(f"    {json.dumps(line)}\n" for line in UNIT.splitlines(True)) + ")\n",
    # Nested sums: a walk of the syntax tree by depth would read "b", "c", "a".
    "nested.py": "SRC = ("
    + json.dumps(UNIT[:20])
    + " + "
    + json.dumps(UNIT[20:40])
    + ") + "
    + json.dumps(UNIT[40:])
    + "\n",
    "as_bytes.py": "SRC = b" + json.dumps(UNIT) + "\n",
    "listed.py": "LINES = " + repr(NORMALISE) + "\n",
    "quoted.yaml": "steps:\n  normalise: " + json.dumps(UNIT) + "\n",
    "listed.yml": yaml.safe_dump({"steps": NORMALISE}),
}


def _decoded(path: str, text: str) -> str:
    if path.endswith(".py"):
        held = text.split("=", 1)[1].strip()
        value = eval(held, {}) if path == "nested.py" else ast.literal_eval(held)  # noqa: S307 (the test's own text)
        return value.decode() if isinstance(value, bytes) else "\n".join(value) if isinstance(value, list) else value
    held = yaml.safe_load(text)["steps"]
    return "\n".join(held) if isinstance(held, list) else held["normalise"]


@pytest.mark.parametrize("path", list(LITERAL_LEAKS))
def test_a_context_file_holding_the_reference_inside_a_string_literal_is_refused(path, monkeypatch):
    text = LITERAL_LEAKS[path]
    decoded = _decoded(path, text)
    assert all(line in decoded for line in NORMALISE), "the literal holds the answer"
    # Read as its raw text and JSON strings alone (the rule before), the file is taken.
    monkeypatch.setattr("benchmarks.paper2code.hidden._literal_strings", lambda path, text: "")
    assert refusals({path: text}) == {}
    monkeypatch.undo()
    refused = refusals({path: text})
    assert refused.get(path, "").startswith('holds the reference code of contrastive.py: "'), refused


@pytest.mark.parametrize(
    ("path", "text"),
    [
        # Literals that call the code or configure a run, never holding its body.
        ("usage.py", 'USAGE = "from contrastive import l2_normalize\\nl2_normalize([3.0, 4.0])\\n"\n'),
        ("config.yaml", "loss:\n  tau: 0.1\n  delta: 0.1\n  trim_frac: 0.25\nsteps: [normalise, trim, infonce]\n"),
        # Files that do not parse are read as far as they can be, and taken.
        ("broken.py", 'def f(:\n    return "norm = v"\n'),
        ("broken.yaml", "a: [1, 2\nb: {\n"),
    ],
)
def test_a_context_file_whose_literals_only_use_the_code_is_taken(path, text):
    assert refusals({path: text}) == {}


DEEP = "[" * (YAML_FLOW_DEPTH_MAX + 1) + "]" * (YAML_FLOW_DEPTH_MAX + 1) + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "steps:\n  normalise: " + json.dumps(UNIT) + "\ndeep: " + DEEP,
        # Lines of a flow list, one plain and one quoted (its `,` would end a plain scalar).
        "steps: [" + NORMALISE[0].replace(",", "") + ", " + json.dumps(NORMALISE[1]) + "]\ndeep: " + DEEP,
    ],
)
def test_a_yaml_file_nested_past_the_parsers_bound_is_read_in_one_pass_and_refused(text):
    refused = refusals({"deep.yaml": text})
    assert refused.get("deep.yaml", "").startswith('holds the reference code of contrastive.py: "'), refused


def test_a_deeply_nested_yaml_file_neither_crashes_nor_stalls_the_check(tmp_path):
    """libyaml's composer recurses in C: 200,000 nested lists crash the process (shown first, in a child process);
    the check reads the parser's events, and past YAML_FLOW_DEPTH_MAX levels (libyaml's scanner slows in the square
    of the depth) reads the text in one pass."""
    nested = "- " * 200_000 + "x\n"
    (tmp_path / "nested.yaml").write_text(nested)
    composed = subprocess.run(
        [sys.executable, "-c", f"import yaml; yaml.compose(open({str(tmp_path / 'nested.yaml')!r}), yaml.CSafeLoader)"],
        capture_output=True,
        timeout=120,
    )
    assert composed.returncode == -signal.SIGSEGV, composed
    started = time.monotonic()
    for text in (nested, "[" * 1_000_000 + "]" * 1_000_000):
        assert refusals({"nested.yaml": text}) == {}
    assert time.monotonic() - started < 20
