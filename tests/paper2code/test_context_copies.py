"""A context file is shown whole in every prompt, so one holding a snippet's reference code is refused
(benchmarks/paper2code/hidden.py), however the copy is dressed: as a Jupyter notebook's code cell (JSON strings),
as a doctest or an IPython session (prompts before each line), with two statements joined by `;` on one line, in a
function of another name, or, for a one-line reference long enough to be distinctive, alone (issue 33, attack7).
Each leak is shown first: the file holds every line of the reference, so the answer would be in the prompt."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.paper2code.hidden import context_refusals
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
