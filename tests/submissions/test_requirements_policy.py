"""The requirements policy at every entry point: form, archive intake, submit, import_pset, API, environment build.

Each hostile line is refused with its line number and why, and never reaches pip.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from benchmarks.models import Task
from evaluation import executor
from sandbox import EnvironmentBuildError
from submissions import services
from submissions.models import Revision, ValidationReport
from submissions.packages import draft_requirements
from submissions.tasks import revision_validate
from tests.conftest import DEMO_PSET
from tests.submissions.conftest import demo_files
from tests.submissions.test_pages import zip_of

pytestmark = pytest.mark.django_db

# (hostile line, a word of the reason); each is written as line 2, after a good one.
ATTACKS = [
    ("-r /etc/passwd", "-r"),
    ("--index-url http://x", "--index-url"),
    ("-e .", "-e"),
    ("git+https://github.com/example/pkg.git@v1#egg=pkg", "VCS"),
    ("pkg @ https://example.org/pkg-1.0.tar.gz", "direct reference"),
    ("./pkg", "local path"),
]
IDS = [line.split()[0] for line, _ in ATTACKS]


def hostile(line: str) -> str:
    return f"numpy\n{line}\n"


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_the_form_refuses_the_line_with_its_number(client, draft, author, line, why):
    client.force_login(author)
    before = draft_requirements(draft.draft["files"])
    response = client.post(
        reverse("submission-step", args=[draft.pk, "files"]),
        {"annotated_paths": ["optimizer.py"], "requirements": hostile(line)},
    )
    body = response.content.decode()
    assert response.status_code == 200 and 'id="id_requirements_error"' in body
    assert "Line 2:" in body and why in body
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == before, "nothing refused is kept"


def pset_archive(requirements: str) -> dict[str, bytes]:
    papers = (DEMO_PSET / "papers.yaml").read_text()
    entry = "- id: dampnest" + papers.split("- id: dampnest")[1].split("\n- id:")[0]
    files = {**demo_files(), "paper2code_requirements.txt": requirements.encode()}
    return {"papers.yaml": entry.encode(), **{f"dampnest/{p}": d for p, d in files.items()}}


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_a_problem_set_archive_is_refused_with_the_file_and_line(client, draft, author, line, why):
    client.force_login(author)
    response = client.post(
        reverse("submission-step", args=[draft.pk, "code"]),
        {"source": "archive", "archive": zip_of(pset_archive(hostile(line)), top="set")},
    )
    body = response.content.decode()
    assert response.status_code == 200 and 'id="id_archive_error"' in body
    assert "dampnest/paper2code_requirements.txt:2" in body and why in body
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == "numpy\n"


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_a_requirements_file_in_plain_code_cannot_be_submitted(draft, author, line, why):
    """Code from an archive or git brings its own requirements.txt, which never went through the form."""
    files = {p: d for p, d in demo_files().items() if p != "paper2code_requirements.txt"}
    files["requirements.txt"] = hostile(line).encode()
    services.draft_update(submission=draft, actor=author, values={"files": services.draft_files_store(files)})
    with pytest.raises(services.TransitionError, match="requirements line 2: .*refused") as caught:
        services.submission_submit(submission=draft, actor=author)
    assert why in str(caught.value) and not draft.revisions.exists()


@pytest.fixture
def demo_copy(tmp_path: Path) -> Path:
    target = tmp_path / "set"
    shutil.copytree(DEMO_PSET, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_import_pset_refuses_a_task_requirement_and_imports_nothing(demo_copy, line, why):
    (demo_copy / "dampnest" / "paper2code_requirements.txt").write_text(hostile(line))
    with pytest.raises(CommandError) as caught:
        call_command("import_pset", str(demo_copy), version="v1")
    assert "dampnest/paper2code_requirements.txt:2: error:" in str(caught.value) and why in str(caught.value)
    assert not Task.objects.exists()


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_import_pset_refuses_shared_requirements(tmp_path, line, why):
    shared = tmp_path / "shared.txt"
    shared.write_text(hostile(line))
    with pytest.raises(CommandError) as caught:
        call_command("import_pset", str(DEMO_PSET), version="v1", requirements=str(shared))
    assert "shared requirements:2: error:" in str(caught.value) and why in str(caught.value)
    assert not Task.objects.exists()


def test_the_demo_set_still_imports():
    call_command("import_pset", str(DEMO_PSET), version="v1")
    assert Task.objects.count() == 3


def test_the_api_takes_no_requirements(client):
    """No API operation accepts requirements; one that starts to must call the policy (and this test changes)."""
    schema = client.get(reverse("api-schema"), {"format": "json"}).json()
    bodies = [
        op.get("requestBody", {}) for path in schema["paths"].values() for op in path.values() if isinstance(op, dict)
    ]
    assert bodies and "requirements" not in str(bodies).lower()


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_the_environment_build_refuses_before_pip(sandbox, sandbox_cache, line, why):
    before = sorted(p.name for p in Path(sandbox_cache).rglob("*"))
    with pytest.raises(EnvironmentBuildError, match="requirements refused: requirements:2: ") as caught:
        executor.session_for(hashlib.sha256(line.encode()).hexdigest(), hostile(line))
    assert why in caught.value.log
    assert sorted(p.name for p in Path(sandbox_cache).rglob("*")) == before, "nothing was built"


def test_a_revision_stored_before_the_policy_fails_validation_without_running_pip(draft, author, sandbox):
    """The last line of defence: a revision that never passed the policy (older data) is refused at the build."""
    files = {**demo_files(), "paper2code_requirements.txt": b"numpy\n-r /etc/passwd\n"}
    stored = services.draft_files_store(files)
    revision = Revision.objects.create(
        submission=draft,
        number=1,
        metadata=draft.draft["metadata"],
        files=stored,
        paper_path="paper2code_paper.md",
        annotated_paths=["optimizer.py"],
        requirements="numpy\n-r /etc/passwd\n",
    )
    report = ValidationReport.objects.create(revision=revision)
    draft.state = draft.State.VALIDATING
    draft.save()
    revision_validate.apply(args=(report.pk,), throw=True)
    check = report.checks.get(key="requirements")
    assert check.status == "failed" and "requirements:2" in check.detail and "-r" in check.detail
    assert "root:" not in check.detail, "the host's /etc/passwd never reaches the report"


@pytest.mark.parametrize("line,why", ATTACKS, ids=IDS)
def test_import_pset_refuses_a_shared_environment(tmp_path, line, why):
    environment = tmp_path / "environment.txt"
    environment.write_text(hostile(line))
    with pytest.raises(CommandError) as caught:
        call_command("import_pset", str(DEMO_PSET), version="v1", environment=str(environment))
    assert "shared environment:2: error:" in str(caught.value) and why in str(caught.value)
    assert not Task.objects.exists()


@pytest.mark.parametrize("sent", ["numpy", "numpy\r\n", "numpy\n"], ids=["stripped", "crlf", "same"])
def test_an_untouched_requirements_file_keeps_its_bytes(client, draft, author, sent):
    """The form sends back the file's text as a browser does (CRLF, the last newline stripped): saving the step
    without touching it leaves the file as it was, so no changelog says it changed."""
    client.force_login(author)
    before = dict(draft.draft["files"])
    response = client.post(
        reverse("submission-step", args=[draft.pk, "files"]),
        {"annotated_paths": ["optimizer.py"], "requirements": sent},
    )
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft.draft["files"] == before


def test_an_edited_requirements_file_is_kept_with_lf_and_a_last_newline(client, draft, author):
    client.force_login(author)
    response = client.post(
        reverse("submission-step", args=[draft.pk, "files"]),
        {"annotated_paths": ["optimizer.py"], "requirements": "numpy\r\nscipy"},
    )
    assert response.status_code == 302
    draft.refresh_from_db()
    assert draft_requirements(draft.draft["files"]) == "numpy\nscipy\n"
