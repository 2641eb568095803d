"""A context file is shown to the model whole in every prompt (FORMAT.md 5), so the test entry point, an annotated
file, and any file holding a snippet's reference code can never be one: refused with the reason in the form's files
step, in an archive's papers.yaml, at submit, and by import_pset, all by one rule (benchmarks/paper2code/hidden.py).
The attack each guards against is shown first: without the rule, the answer is in the prompt."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.paper2code import RCB_V1, PackageError, build_prompt, mask, parse
from benchmarks.paper2code.pset import read_pset
from submissions import services
from submissions.packages import draft_problems
from tests.conftest import DEMO_PSET, page_text
from tests.submissions.conftest import demo_files

pytestmark = pytest.mark.django_db
# A test module beside the entry point (it imports it): it holds the values the reference must return.
HELPER_TESTS = b"import numpy as np\n\nEXPECTED_STEP = np.array([0.0123, -0.0456])\n"
ENTRY = """- id: dampnest
  title: DampNest
  annotated_file_paths: optimizer.py
  context_file_paths: {context}
"""


def pset_with_context(root: Path, context: str) -> Path:
    (root / "dampnest").mkdir(parents=True)
    for path, data in {**demo_files(), "test_expected.py": HELPER_TESTS}.items():
        (root / "dampnest" / path).write_bytes(data)
    (root / "papers.yaml").write_text(ENTRY.format(context=context))
    return root


def test_without_the_rule_a_reference_copy_as_context_puts_the_answer_in_the_prompt():
    """The attack: the demo's optimizer_ref.py shown as context holds every snippet's code the model must write."""
    files = demo_files()
    annotated = parse(files["optimizer.py"].decode(), "optimizer.py")
    snippet = max(annotated.snippets, key=lambda s: s.loc)
    prompt = build_prompt(
        protocol=RCB_V1,
        paper_text="text",
        context_files=[("optimizer_ref.py", files["optimizer_ref.py"].decode())],
        masked_path="optimizer.py",
        masked_code=mask(annotated, snippet),
        name=snippet.name,
        loc=snippet.loc,
    )
    assert snippet.code.strip() not in mask(annotated, snippet)
    body = [line.strip() for line in snippet.code.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert all(line in prompt for line in body)


@pytest.mark.parametrize(
    "context,reason",
    [
        ("paper2code_test.py", "is the test entry point"),
        ("optimizer_ref.py", 'holds the reference code of optimizer.py: "'),
        ("optimizer.py", "is an annotated file"),
        ("test_expected.py", "is a test file"),
        ("paper2code_paper.md", "is the paper's text"),
    ],
)
def test_read_pset_and_import_pset_refuse_a_context_file_that_gives_the_answer_away(tmp_path, context, reason):
    root = pset_with_context(tmp_path / "set", context)
    with pytest.raises(PackageError) as refused:
        read_pset(root)
    message = str(refused.value)
    assert f"papers.yaml:4: error: paper dampnest: context file dampnest/{context} {reason}" in message, message
    with pytest.raises(CommandError, match=f"context file dampnest/{context}"):
        call_command("import_pset", str(root), "--version", "ctx-1.0.0")


def test_a_harmless_context_file_is_still_taken(tmp_path):
    root = pset_with_context(tmp_path / "set", "paper2code_requirements.txt")
    assert read_pset(root)[0].context_paths == ("paper2code_requirements.txt",)
    assert read_pset(DEMO_PSET)  # the demo's src/utils.py context file holds no reference


def test_the_files_step_neither_offers_nor_takes_a_context_file_that_gives_the_answer_away(client, draft, author):
    files = {**draft.draft["files"], **services.draft_files_store({"tests/expected_values.py": HELPER_TESTS})}
    services.draft_update(submission=draft, actor=author, values={"files": files})
    client.force_login(author)
    url = reverse("submission-step", args=[draft.pk, "files"])
    # Not offered on the page, as they would be refused: the annotated file (the answer would be in every prompt),
    # the test entry point and another test file, the reference's copy. A harmless file still is.
    offered = re.findall(r'name="context_paths" value="([^"]+)"', client.get(url).content.decode())
    assert "paper2code_requirements.txt" in offered, offered
    for path in (
        "optimizer.py",
        "paper2code_test.py",
        "tests/expected_values.py",
        "optimizer_ref.py",
        "paper2code_paper.md",
    ):
        assert path not in offered, (path, offered)
    # Posted anyway, each is refused with its reason and nothing is saved.
    response = client.post(
        url,
        {
            "annotated_paths": ["optimizer.py"],
            "context_paths": ["paper2code_test.py", "optimizer_ref.py", "optimizer.py", "tests/expected_values.py"],
            "requirements": "numpy\n",
        },
    )
    text = page_text(response.content.decode())
    assert response.status_code == 200
    assert "paper2code_test.py cannot be a context file: it is the test entry point" in text
    assert "optimizer_ref.py cannot be a context file: it holds the reference code of optimizer.py" in text
    assert "optimizer.py cannot be a context file: it is an annotated file" in text
    assert "tests/expected_values.py cannot be a context file: it is a test file" in text
    draft.refresh_from_db()
    assert draft.draft["context_paths"] == []


def test_submitting_a_draft_that_holds_one_is_refused_with_the_reason(draft, author):
    services.draft_update(submission=draft, actor=author, values={"context_paths": ["optimizer_ref.py"]})
    draft.refresh_from_db()
    assert any("context file optimizer_ref.py holds the reference code" in p for p in draft_problems(draft.draft))
    with pytest.raises(services.TransitionError, match="context file optimizer_ref.py holds the reference code"):
        services.submission_submit(submission=draft, actor=author)


def test_an_archive_whose_papers_yaml_names_one_is_refused_with_the_reason(client, author, media_root):
    client.force_login(author)
    submission = services.submission_create(author=author, values={"metadata": {"title": "Damp", "id": "dampnest"}})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("papers.yaml", ENTRY.format(context="optimizer_ref.py"))
        for path, data in demo_files().items():
            archive.writestr(f"dampnest/{path}", data)
    buffer.seek(0)
    buffer.name = "set.zip"
    response = client.post(
        reverse("submission-step", args=[submission.pk, "code"]), {"source": "archive", "archive": buffer}
    )
    text = page_text(response.content.decode())
    assert "context file dampnest/optimizer_ref.py holds the reference code of optimizer.py" in text, text[-1500:]
    submission.refresh_from_db()
    assert not submission.draft.get("files")
