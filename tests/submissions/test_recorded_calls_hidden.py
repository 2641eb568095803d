"""Recorded calls kept in a package are hidden files (issue 35, item 4): an author who keeps the proposed tests beside
their package keeps `rcb_replay/inputs/` and `rcb_replay/outputs/`, what the reference was called with and returned.
Shown to the model as a context file, the reference's outputs would be in every prompt; left in a task's workspace,
an answer could read them. So, as the test entry point and every copy of a reference are, they are hidden from answers
and refused as context files with the reason, by the one rule of benchmarks/paper2code/hidden.py, in papers.yaml, the
form's files step and at submit; a file of recorded outputs under another name is recognised by its content."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.paper2code import RCB_V1, PackageError, build_prompt, mask, parse
from benchmarks.paper2code.pset import read_pset
from evaluation.taskfiles import hidden_files
from sandbox.programs.snapshot import dumps, snapshot_roots
from submissions import services
from submissions.packages import draft_problems
from submissions.validation import package_hidden
from tests.conftest import DEMO_PSET
from tests.submissions.conftest import demo_files

OUTPUTS = "rcb_replay/outputs/optimizer.py--DampNest.step.json"
INPUTS = "rcb_replay/inputs/optimizer.py--DampNest.step.json"


def recorded_outputs() -> tuple[bytes, np.ndarray]:
    """The dampnest reference's recorded outputs of three calls of DampNest.step, as the proposed tests store them
    (a JSON list of snapshot documents, submissions/proposed.py), and what its last call returned."""
    spec = importlib.util.spec_from_file_location("dampnest_ref", DEMO_PSET / "dampnest" / "optimizer_ref.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    optimizer, theta, outputs = module.DampNest(lr=0.05), np.linspace(-1.0, 1.0, 6), []
    for step in range(3):
        grad = 2.0 * theta - 0.3 * step
        returned = optimizer.step(theta, grad)
        roots = {"return": returned, "args": [theta, grad], "kwargs": {}}
        outputs.append(dumps(snapshot_roots(roots, max_bytes=1 << 20, max_depth=40, max_items=10_000)).decode())
        theta = returned
    return json.dumps(outputs).encode(), theta


def package_with_recordings() -> dict[str, bytes]:
    outputs, _ = recorded_outputs()
    return {
        **demo_files(),
        OUTPUTS: outputs,
        INPUTS: b'["gASV"]',
        "expected.json": outputs,  # the same outputs, renamed
    }


def test_without_the_rule_recorded_outputs_as_context_put_the_references_results_in_the_prompt():
    """The attack: the outputs file shown as context holds, digit for digit, what the reference returns."""
    outputs, last = recorded_outputs()
    files = demo_files()
    annotated = parse(files["optimizer.py"].decode(), "optimizer.py")
    snippet = annotated.snippets[0]
    prompt = build_prompt(
        protocol=RCB_V1,
        paper_text="text",
        context_files=[(OUTPUTS, outputs.decode())],
        masked_path="optimizer.py",
        masked_code=mask(annotated, snippet),
        name=snippet.name,
        loc=snippet.loc,
    )
    stored = json.loads(json.loads(outputs)[-1])["roots"]["return"]
    assert stored["dtype"] == "float64" and stored["b64"] in prompt  # the reference's last result, in the prompt
    assert last.shape == (6,)


@pytest.mark.parametrize("path", [OUTPUTS, INPUTS, "expected.json"])
def test_read_pset_refuses_recorded_calls_as_a_context_file_with_the_reason(tmp_path, path):
    root = tmp_path / "set"
    for name, data in package_with_recordings().items():
        (root / "dampnest" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "dampnest" / name).write_bytes(data)
    (root / "papers.yaml").write_text(
        f"- id: dampnest\n  title: DampNest\n  annotated_file_paths: optimizer.py\n  context_file_paths: {path}\n"
    )
    with pytest.raises(PackageError) as refused:
        read_pset(root)
    assert (
        f"papers.yaml:4: error: paper dampnest: context file dampnest/{path} holds recorded calls of the reference "
        "(the proposed tests' inputs and outputs)"
    ) in str(refused.value)


@pytest.mark.django_db
def test_a_draft_holding_recorded_calls_as_context_is_not_submitted(author, media_root):
    from tests.submissions.conftest import fill_draft

    draft = fill_draft(services.submission_create(author=author), author)
    files = {**draft.draft["files"], **services.draft_files_store(package_with_recordings())}
    services.draft_update(submission=draft, actor=author, values={"files": files, "context_paths": [OUTPUTS]})
    draft.refresh_from_db()
    problems = draft_problems(draft.draft)
    assert any(f"context file {OUTPUTS} holds recorded calls of the reference" in p for p in problems), problems
    with pytest.raises(services.TransitionError, match="holds recorded calls of the reference"):
        services.submission_submit(submission=draft, actor=author)


def test_recorded_calls_are_hidden_from_answers_as_the_tests_are():
    files = package_with_recordings()
    annotated = {"optimizer.py": parse(files["optimizer.py"].decode(), "optimizer.py")}
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point="paper2code_test.py")
    assert {OUTPUTS, INPUTS, "expected.json", "paper2code_test.py"} <= hidden
    # The proposed tests' own code (the comparison, the snapshot writer) holds no answer and stays visible.
    code = {**files, "rcb_replay/compare.py": b"def compare(): ...\n", "rcb_replay/__init__.py": b""}
    assert not {"rcb_replay/compare.py", "rcb_replay/__init__.py"} & hidden_files(
        code, visible={"optimizer.py"}, references=[], entry_point="paper2code_test.py"
    )
    assert Path(OUTPUTS).suffix == ".json"
