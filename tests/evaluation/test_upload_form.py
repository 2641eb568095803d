"""Uploading generations from a model's page: the API's service and refusals (every bad line named, nothing stored),
for the model's owner or a maintainer only; the empty leaderboard says how to get on it."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry
from tests.api.conftest import reference_answers
from tests.conftest import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(author):
    return services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)


def _post(client, content: bytes, release, name: str = "uploader", **extra):
    form = {"file": SimpleUploadedFile("answers.jsonl", content), "release": release.name, "with_paper": "on", **extra}
    return client.post(reverse("run-upload", args=[name]), form)


def _problems(response) -> list[str]:
    """The listed problems of a refused upload, as the page shows them."""
    box = re.search(
        r'<div class="errors" role="alert" id="upload-problems">(.*?)</div>', response.content.decode(), re.S
    )
    assert box, "no problem list on the page"
    return [unescape(item) for item in re.findall(r"<li>(.*?)</li>", box.group(1), re.S)]


def _bad_file(release) -> bytes:
    lines = reference_answers(release).decode().splitlines()
    first = json.loads(lines[0])
    lines[1] = "{not json"
    lines[2] = json.dumps({"id": "999999", "sample": 0, "code": "x = 1\n"})
    lines[3] = json.dumps({"id": first["id"], "sample": 0, "answer": "no code block here"})
    return ("\n".join(lines) + "\n").encode()


def test_the_owner_sees_the_form_and_strangers_do_not(client, release, model, other_author, author):
    page = reverse("model-detail", args=["uploader"])
    assert "Upload generations" not in client.get(page).content.decode()
    client.force_login(other_author)
    assert "Upload generations" not in client.get(page).content.decode()
    assert _post(client, reference_answers(release), release).status_code == 403
    client.logout()
    assert _post(client, reference_answers(release), release).status_code == 302  # to the login page
    client.force_login(author)
    body = client.get(page).content.decode()
    assert "Upload generations" in body and 'enctype="multipart/form-data"' in body
    assert reverse("version-download", args=[release.name, "items"]) in body
    assert not EvaluationRun.objects.exists()


def test_every_bad_line_is_named_as_the_api_names_it_and_nothing_is_stored(client, release, model, author):
    client.force_login(author)
    content = _bad_file(release)
    response = _post(client, content, release, with_paper="")
    assert response.status_code == 400
    shown = _problems(response)
    assert shown[0].startswith("line 2: not JSON")
    assert shown[1] == f"line 3: unknown item id '999999' in release {release.name}"
    assert shown[2].startswith("line 4: answer has no fenced python block")
    assert "nothing was stored" in response.content.decode()
    api = client_for(author).post(
        "/api/v1/runs/upload/",
        {"file": SimpleUploadedFile("a.jsonl", content), "model": "uploader", "release": release.name},
        format="multipart",
    )
    assert api.json()["error"]["details"] == shown  # one service, one set of messages
    assert not EvaluationRun.objects.exists() and not Generation.objects.exists()
    # What was chosen stays chosen: the release, and the unticked paper box.
    body = response.content.decode()
    assert re.search(rf'<option value="{release.name}" selected>', body)
    assert not re.search(r'name="with_paper"[^>]*checked', body)


def test_a_long_list_of_problems_is_cut_at_the_services_bound_and_the_rest_counted(client, release, model, author):
    client.force_login(author)
    content = "".join(json.dumps({"id": str(900000 + n), "code": "x"}) + "\n" for n in range(250)).encode()
    response = _post(client, content, release)
    problems = _problems(response)
    assert len(problems) == 101 and problems[99].startswith("line 100: unknown item id")
    assert "and 150 more line(s) not checked" in problems[100]


def test_a_perfect_file_becomes_a_self_reported_run(client, release, model, author):
    client.force_login(author)
    response = _post(client, reference_answers(release), release)
    run = EvaluationRun.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("run-detail", args=[run.pk])
    assert (run.model, run.created_by, run.provenance, run.with_paper) == (model, author, "self_reported", True)
    assert run.total_items == version_snippets(version=release).count() == run.generations.count()
    assert "being scored" in client.get(response["Location"]).content.decode()


def test_a_maintainer_may_upload_for_a_model_but_never_as_a_calibration_model(client, release, model, maintainer):
    client.force_login(maintainer)
    assert "Upload generations" not in client.get(reverse("model-detail", args=["reference"])).content.decode()
    response = _post(client, reference_answers(release), release, name="reference")
    assert response.status_code == 400
    assert "model reference is a calibration model" in response.content.decode()
    assert not EvaluationRun.objects.exists()
    assert _post(client, reference_answers(release), release).status_code == 302
    assert EvaluationRun.objects.get().created_by == maintainer


def test_a_file_too_big_is_refused_before_it_is_read(client, release, model, author, monkeypatch):
    monkeypatch.setattr(services.uploads, "UPLOAD_MAX_BYTES", 1000)
    client.force_login(author)
    response = _post(client, reference_answers(release), release)
    assert response.status_code == 400
    size = len(reference_answers(release))
    said = f"{size / 1000:.1f}".removesuffix(".0")  # decimal units, as every size on the site (common.sizes)
    assert _problems(response) == [f"the file is {said} kB; at most 1 kB"]
    api = client_for(author).post(
        "/api/v1/runs/upload/",
        {"file": SimpleUploadedFile("a.jsonl", b"x" * 2048), "model": "uploader", "release": release.name},
        format="multipart",
    )
    assert api.status_code == 400 and api.json()["error"]["details"][0].startswith("the file is ")
    assert not EvaluationRun.objects.exists()


def test_a_draft_or_unknown_protocol_is_refused_on_the_form(client, release, model, author):
    client.force_login(author)
    response = _post(client, reference_answers(release), release, protocol="no-such-protocol")
    assert response.status_code == 400 and "Select a valid choice" in response.content.decode()
    response = _post(client, b"", release)
    assert response.status_code == 400 and "The submitted file is empty" in response.content.decode()
    assert not EvaluationRun.objects.exists()


def test_the_empty_leaderboard_says_how_to_get_on_it(client, release):
    body = client.get(reverse("leaderboard", args=[release.name])).content.decode()
    assert "How to get a model on this leaderboard" in body
    for url in (
        reverse("model-new"),
        reverse("guide", args=["leaderboard"]),
        reverse("signup"),
        reverse("version-download", args=[release.name, "items"]),
    ):
        assert f'href="{url}' in body, url
    filtered = client.get(reverse("leaderboard", args=[release.name]), {"q": "nothing"}).content.decode()
    assert "matches the filters" in filtered and "How to get a model" not in filtered
    assert ModelEntry.objects.filter(name="reference").exists()


def test_an_upload_beyond_the_users_active_runs_is_refused_on_the_page(client, release, model, author, settings):
    settings.RUNS_ACTIVE_PER_USER = 1
    client.force_login(author)
    assert _post(client, reference_answers(release), release).status_code == 302
    response = _post(client, reference_answers(release), release)
    first = EvaluationRun.objects.get()
    assert response.status_code == 400 and EvaluationRun.objects.count() == 1
    assert f"you have 1 run queued or running (#{first.pk})" in unescape(response.content.decode())
