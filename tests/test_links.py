"""Links the site renders (a paper's abstract and code, a model's endpoint) are http(s) at every entry point.

A `javascript:` link is refused by the form, by papers.yaml in an archive and in import_pset, by the API and by
model registration, and a row that holds one anyway is never rendered as an href.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks.models import Paper, Task
from benchmarks.paper2code import PackageError
from benchmarks.paper2code.links import link_problem
from benchmarks.paper2code.pset import read_pset
from benchmarks.services.task_storage import task_store
from evaluation.models import ModelEntry
from evaluation.services import model_register
from submissions import services
from tests.conftest import DEMO_PSET
from tests.submissions.conftest import demo_files, fill_draft
from tests.submissions.test_pages import zip_of

pytestmark = pytest.mark.django_db

HOSTILE = [
    "javascript:alert(1)",
    "JavaScript:alert(document.cookie)",
    " javascript:alert(1)",
    "java\tscript:alert(1)",
    "data:text/html,<script>alert(1)</script>",
    "vbscript:msgbox(1)",
    "ftp://example.org/paper",
    "https:alert(1)",
    "//example.org/no-scheme",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_only_absolute_http_links_pass_the_rule(value):
    assert link_problem(value)


@pytest.mark.parametrize("value", ["", "https://arxiv.org/abs/2506.02314", "http://example.org/a?b=c#d"])
def test_http_links_and_blank_pass(value):
    assert link_problem(value) == ""


@pytest.fixture
def draft(author, media_root):
    return fill_draft(services.submission_create(author=author), author)


@pytest.mark.parametrize("field", ["arxiv_abs", "github_url"])
@pytest.mark.parametrize("value", ["javascript:alert(1)", "ftp://example.org/x"])
def test_the_form_refuses_a_non_http_link(client, draft, author, field, value):
    client.force_login(author)
    response = client.post(reverse("submission-step", args=[draft.pk, "details"]), {"title": "T", field: value})
    body = response.content.decode()
    assert response.status_code == 200 and f'id="id_{field}_error"' in body
    draft.refresh_from_db()
    assert draft.draft["metadata"][field] == "", "the refused link is not kept"


def papers_yaml(link: str) -> str:
    papers = (DEMO_PSET / "papers.yaml").read_text()
    entry = "- id: dampnest" + papers.split("- id: dampnest")[1].split("\n- id:")[0]
    return entry.replace("https://example.org/fictional-code/dampnest", link)


def test_papers_yaml_in_an_archive_refuses_it_with_its_line(client, draft, author):
    client.force_login(author)
    entry = papers_yaml("javascript:alert(1)")
    line = entry.splitlines().index("  github_url: javascript:alert(1)") + 1
    files = {"papers.yaml": entry.encode(), **{f"dampnest/{p}": d for p, d in demo_files().items()}}
    response = client.post(
        reverse("submission-step", args=[draft.pk, "code"]), {"source": "archive", "archive": zip_of(files, top="set")}
    )
    body = response.content.decode()
    assert response.status_code == 200 and f"papers.yaml:{line}: error: paper dampnest: github_url must" in body
    draft.refresh_from_db()
    assert draft.draft["metadata"]["github_url"] == ""


def test_import_pset_refuses_it_with_its_line_and_imports_nothing(tmp_path: Path):
    root = tmp_path / "set"
    shutil.copytree(DEMO_PSET, root, ignore=shutil.ignore_patterns("__pycache__"))
    text = (
        (root / "papers.yaml")
        .read_text()
        .replace("https://example.org/fictional-papers/trimmed-infonce", "javascript:alert(1)")
    )
    (root / "papers.yaml").write_text(text)
    line = text.splitlines().index("  arxiv_abs: javascript:alert(1)") + 1
    with pytest.raises(CommandError, match=rf"papers.yaml:{line}: error: paper trimmed-infonce: arxiv_abs must"):
        call_command("import_pset", str(root), version="v1")
    assert not Paper.objects.exists() and not Task.objects.exists()


def test_a_paper_is_full_cleaned_when_created(media_root):
    """A package that never went through the reader (built in code) cannot create a Paper with such a link."""
    package = next(p for p in read_pset(DEMO_PSET) if p.id == "dampnest")
    with pytest.raises(
        PackageError, match=r"paper dampnest: arxiv_abs: .*'javascript:alert\(1\)' must start with http"
    ):
        task_store(package=replace(package, arxiv_abs="javascript:alert(1)"))
    assert not Paper.objects.exists()


def test_a_draft_holding_one_cannot_be_submitted(draft, author):
    metadata = {**draft.draft["metadata"], "arxiv_abs": "javascript:alert(1)"}
    services.draft_update(submission=draft, actor=author, values={"metadata": metadata})
    with pytest.raises(services.TransitionError, match="arxiv_abs: must start with http"):
        services.submission_submit(submission=draft, actor=author)


@pytest.mark.parametrize("value", ["javascript:alert(1)", "ftp://example.org/v1"])
def test_model_registration_refuses_it(author, value):
    with pytest.raises(ValidationError, match="api_base"):
        model_register(
            name="m", display_name="M", litellm_model="openai/m", api_base=value, api_key="sk-own", owner=author
        )
    assert not ModelEntry.objects.filter(name="m").exists()


def test_the_api_refuses_it_on_create_and_on_change(author):
    api = APIClient()
    api.force_authenticate(author)
    created = api.post(
        "/api/v1/models/",
        {
            "name": "m",
            "display_name": "M",
            "litellm_model": "openai/m",
            "api_key": "sk-own",
            "api_base": "javascript:alert(1)",
        },
        format="json",
    )
    assert created.status_code == 400 and "must start with http" in str(created.json()["error"]["details"]["api_base"])
    model_register(name="mine", display_name="Mine", litellm_model="openai/mine", api_key="sk-own", owner=author)
    changed = api.patch("/api/v1/models/mine/", {"api_base": "javascript:alert(1)"}, format="json")
    assert changed.status_code == 400 and "must start with http" in str(changed.json()["error"]["details"]["api_base"])
    assert ModelEntry.objects.get(name="mine").api_base == ""


def test_a_stored_one_is_never_rendered_as_an_href(client, release):
    """Rows written before the rule (or by raw SQL) are shown as text at most, never as a link."""
    Paper.objects.filter(slug="dampnest").update(arxiv_abs="javascript:alert(1)", github_url="JAVASCRIPT:alert(2)")
    body = client.get(reverse("paper-detail", args=[release.name, "dampnest"])).content.decode()
    assert "javascript:" not in body.lower()
    good = client.get(reverse("paper-detail", args=[release.name, "topk-attention-pool"])).content.decode()
    assert 'href="https://example.org/fictional-code/topk-attention-pool"' in good


def test_the_model_registration_page_refuses_it(client, author):
    client.force_login(author)
    response = client.post(
        reverse("model-new"),
        {
            "name": "m",
            "display_name": "M",
            "kind": "litellm",
            "litellm_model": "openai/m",
            "api_key": "sk-own",
            "api_base": "javascript:alert(1)",
        },
    )
    body = response.content.decode()
    assert response.status_code == 400 and "must start with http" in body
    assert 'href="javascript' not in body.lower()
    assert not ModelEntry.objects.filter(name="m").exists()
