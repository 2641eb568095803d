"""Recorded calls kept in a package are hidden files (issue 35, item 4): an author who keeps the proposed tests beside
their package keeps `rcb_replay/inputs/` and `rcb_replay/outputs/`, what the reference was called with and returned.
Shown to the model as a context file, the reference's outputs would be in every prompt; left in a task's workspace,
an answer could read them. So, as the test entry point and every copy of a reference are, they are hidden from answers
and refused as context files with the reason, by the one rule of benchmarks/paper2code/hidden.py, in papers.yaml, the
form's files step and at submit; a file of recorded outputs under another name is recognised by its content."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchmarks.paper2code import RCB_V1, PackageError, build_prompt, mask, parse
from benchmarks.paper2code.pset import read_pset
from evaluation.taskfiles import hidden_files
from sandbox.programs.snapshot import dumps, snapshot_roots
from submissions import proposed, services
from submissions.packages import draft_problems
from submissions.validation import package_hidden
from tests.conftest import DEMO_PSET
from tests.submissions.conftest import demo_files

ROOT = Path(__file__).resolve().parents[2]
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
        code, visible={"optimizer.py"}, annotated=[], entry_point="paper2code_test.py"
    )
    assert Path(OUTPUTS).suffix == ".json"


# Recorded outputs re-encoded (issue 35/33, an attacker's finding): the byte pattern of the stored form no longer
# matches, the decoded values are the same. Each is refused as a context file and hidden at run time.
def reencodings() -> dict[str, bytes]:
    stored, _ = recorded_outputs()
    documents = json.loads(stored)
    return {
        "data/expected_default.json": json.dumps([json.dumps(json.loads(d)) for d in documents]).encode(),
        "data/expected_wrapped.json": json.dumps({"calls": documents}).encode(),
        "notes.md": b"# expected outputs\n" + stored,
    }


REENCODED = sorted(reencodings())


def package_with_reencodings() -> dict[str, bytes]:
    return {**package_with_recordings(), **reencodings()}


def test_without_the_value_rule_reencoded_outputs_pass_the_byte_pattern():
    """The attack: each re-encoding still holds the reference's last result, and the stored form's byte pattern
    (the rule before this one) does not see it."""
    stored, _ = recorded_outputs()
    last = json.loads(json.loads(stored)[-1])["roots"]["return"]["b64"]
    pattern = re.compile(rb'\A\s*\[\s*"\{\\"v\\":\d+,\\"roots\\":')
    for path, data in reencodings().items():
        assert last.encode() in data and not pattern.match(data), path


@pytest.mark.parametrize("path", REENCODED)
def test_read_pset_refuses_reencoded_recorded_outputs_as_a_context_file(tmp_path, path):
    root = tmp_path / "set"
    for name, data in package_with_reencodings().items():
        (root / "dampnest" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "dampnest" / name).write_bytes(data)
    (root / "papers.yaml").write_text(
        f"- id: dampnest\n  title: DampNest\n  annotated_file_paths: optimizer.py\n  context_file_paths: {path}\n"
    )
    with pytest.raises(PackageError) as refused:
        read_pset(root)
    assert f"context file dampnest/{path} holds recorded calls of the reference" in str(refused.value)


@pytest.mark.django_db
def test_the_files_step_and_submit_refuse_reencoded_recorded_outputs(client, author, media_root):
    """The attacker's three re-encodings, and the last result as plain numbers (found by value against the draft's
    own rcb_replay/outputs/ recording)."""
    from django.urls import reverse

    from tests.conftest import page_text
    from tests.submissions.conftest import fill_draft

    _, last = recorded_outputs()
    package = {**package_with_reencodings(), "values.txt": " ".join(repr(float(x)) for x in last).encode()}
    refused = [*REENCODED, "values.txt"]
    draft = fill_draft(services.submission_create(author=author), author)
    files = {**draft.draft["files"], **services.draft_files_store(package)}
    services.draft_update(submission=draft, actor=author, values={"files": files})
    client.force_login(author)
    response = client.post(
        reverse("submission-step", args=[draft.pk, "files"]),
        {"annotated_paths": ["optimizer.py"], "context_paths": refused, "requirements": "numpy\n"},
    )
    text = page_text(response.content.decode())
    for path in refused:
        assert f"{path} cannot be a context file: it holds recorded calls of the reference" in text, path
    services.draft_update(submission=draft, actor=author, values={"context_paths": refused})
    draft.refresh_from_db()
    problems = draft_problems(draft.draft)
    for path in refused:
        assert any(f"context file {path} holds recorded calls of the reference" in p for p in problems), problems
    with pytest.raises(services.TransitionError, match="holds recorded calls of the reference"):
        services.submission_submit(submission=draft, actor=author)


def test_reencoded_recorded_outputs_are_hidden_from_answers():
    files = package_with_reencodings()
    annotated = {"optimizer.py": parse(files["optimizer.py"].decode(), "optimizer.py")}
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point="paper2code_test.py")
    assert set(REENCODED) <= hidden
    # Alone too, in a package that keeps no rcb_replay/ folder: recognised by what they decode to.
    for path, data in reencodings().items():
        assert hidden_files({path: data}, visible=set(), annotated=[], entry_point="t.py") == {path, "t.py"}


def test_the_recorded_values_in_any_other_encoding_are_hidden_beside_the_recordings():
    """Beyond the snapshot documents: the arrays the reference returned, as decimal numbers in a text file or as raw
    bytes in a binary one, found by value against the package's own recorded outputs."""
    _, last = recorded_outputs()
    files = {
        **package_with_recordings(),
        "values.txt": ("last step:\n" + "\n".join(repr(float(x)) for x in last) + "\n").encode(),
        "values.npy": b"\x93NUMPY\x01\x00" + b"\x00" * 118 + last.astype("<f8").tobytes(),
        "values32.csv": ",".join(f"{x:.7g}" for x in last.astype("float32")).encode(),
    }
    annotated = {"optimizer.py": parse(files["optimizer.py"].decode(), "optimizer.py")}
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point="paper2code_test.py")
    assert {"values.txt", "values.npy", "values32.csv"} <= hidden


def test_ordinary_files_beside_the_recordings_stay_visible():
    """No false positive: the demo package's own files, a config of numbers, a JSON list of short numbers (linspace's
    rounding noise included), and files a hostile author made to be slow or to break the decoder."""
    files = {
        "deep.json": b'["roots", ' + b"[" * 100_000,
        "exponents.txt": b"1.234567e9999 1.234567e-9999 " * 1000,
        **package_with_recordings(),
        "config.json": json.dumps({"lr": 0.05, "betas": [0.9, 0.999], "eps": 1e-8, "steps": 3}).encode(),
        "data/grid.json": json.dumps(np.linspace(-1.0, 1.0, 6).tolist()).encode(),
        "notes.md": b"# DampNest\n\nA damped Nesterov step; see optimizer.py.\n",
        # The proposed tests' own code: the snapshot writer describes the recordings' format ({"v": 1, "roots": ...}).
        "rcb_replay/snapshot.py": (ROOT / "sandbox" / "programs" / "snapshot.py").read_bytes(),
        "rcb_replay/compare.py": (ROOT / "evaluation" / "judging" / "compare.py").read_bytes(),
        "rcb_replay/attributes.py": (ROOT / "sandbox" / "programs" / "attributes.py").read_bytes(),
        "paper2code_replay_test.py": proposed.TEST_SOURCE.encode(),
    }
    annotated = {"optimizer.py": parse(files["optimizer.py"].decode(), "optimizer.py")}
    hidden = package_hidden(files=files, annotated=annotated, test_entry_point="paper2code_test.py")
    assert hidden == {OUTPUTS, INPUTS, "expected.json", "paper2code_test.py"} | (hidden & {"optimizer_ref.py"})
