"""scripts/calibrate_policy.py: the false-flag calibration splices each library body as its own function's answer,
counts a static finding as a flag before, and as a note after when the body's function is sealable."""

from __future__ import annotations

from pathlib import Path

from scripts.calibrate_policy import corpus_collect, corpus_judge, report

LIBRARY = '''\
import torch


def step(params, grads, lr):
    """One step of plain SGD."""
    for p, g in zip(params, grads):
        p.add_(g, alpha=-lr)
    params[0] += 1


def helper(x):
    def inner(y):
        return y._private + 1
    return inner(x)


def stub(x):
    """Left to subclasses."""
    raise NotImplementedError


def one(x): return x


def clean(x):
    y = x * 2
    return y


def ticks(n):
    for i in range(n):
        yield i._value
'''


def library(root: Path) -> dict:
    folder = root / "fakelib" / "optim"
    folder.mkdir(parents=True)
    (folder / "sgd.py").write_text(LIBRARY)
    (folder / "other.py").write_text("import numpy as np\n")
    return {"fake": (root, "fakelib", ""), "absent": (None, "absent", "")}


def test_a_finding_flags_before_and_is_a_note_after_only_where_the_function_is_sealable(tmp_path):
    corpus, texts = corpus_collect(library(tmp_path), per_library=100, seed=1)
    assert (corpus.trivial, corpus.one_line, corpus.missing) == (1, 1, {"absent": "not installed"})

    judged = {j.body.qualname: j for j in corpus_judge(corpus, texts)}

    rules = {name: [f["rule"] for f in j.findings] for name, j in judged.items()}
    assert rules == {
        "step": ["input-mutation"],
        "helper": ["private-attribute"],
        "helper.<locals>.inner": ["private-attribute"],
        "clean": [],
        "ticks": ["private-attribute"],
    }
    still = {name for name, j in judged.items() if j.flagged_after}
    assert still == {"helper.<locals>.inner", "ticks"}, "nested functions and generators are not sealed"
    assert "generator" in judged["ticks"].unsealed_reason


def test_the_report_gives_the_rates_before_and_after(tmp_path):
    corpus, texts = corpus_collect(library(tmp_path), per_library=100, seed=1)
    lines = list(report(corpus, corpus_judge(corpus, texts), examples=1))

    assert "flagged BEFORE (today's policy: any static finding is a flag): 4/5 (80.0%)" in lines
    assert "flagged AFTER (static findings on sealed bodies are notes): 2/5 (40.0%)" in lines
    assert "  NOT MEASURED: absent (not installed)" in lines
    assert any(line.startswith("  ESTIMATED:") for line in lines)
    examples = lines[lines.index("examples of private-attribute:") + 1 :]
    assert examples[0].startswith("  fakelib/optim/sgd.py:13 helper: reaches y._private")


def test_a_draw_is_capped_per_library_and_the_same_every_time(tmp_path):
    libraries = library(tmp_path)
    first, _ = corpus_collect(libraries, per_library=2, seed=7)
    again, _ = corpus_collect(libraries, per_library=2, seed=7)
    assert len(first.bodies) == 2 and first.bodies == again.bodies


def test_a_copied_torch_optim_file_imports_its_package_absolutely_on_the_same_lines():
    from scripts.calibrate_policy import _absolute_imports

    source = "from .optimizer import (\n    Optimizer,\n)\nfrom . import _functional as F\n    from .sgd import sgd\n"
    copied = _absolute_imports(source)
    assert copied == (
        "from torch.optim.optimizer import (\n    Optimizer,\n)\nfrom torch.optim import _functional as F\n"
        "    from torch.optim.sgd import sgd\n"
    )
