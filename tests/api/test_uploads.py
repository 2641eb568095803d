"""Uploading generations: every bad line named precisely, nothing stored on refusal, a perfect upload scored whole."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, Generation
from evaluation.services import MAX_ANSWER_CHARS
from tests.api.conftest import reference_answers

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(author):
    return services.model_register(name="uploader", display_name="Uploader", litellm_model="local/x", owner=author)


def _upload(client, release, content: bytes, model_name: str = "uploader", **extra):
    form = {"file": SimpleUploadedFile("answers.jsonl", content), "model": model_name, "release": release.name,
            **extra}
    return client.post("/api/v1/runs/upload/", form, format="multipart")


def _lines(release) -> list[dict]:
    return [json.loads(line) for line in reference_answers(release).decode().splitlines()]


def _encode(rows: list) -> bytes:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows).encode()


def _refused(response, *expected: str) -> list[str]:
    assert response.status_code == 400, response.content[:500]
    error = response.json()["error"]
    assert error["code"] == "invalid_upload"
    assert "nothing was stored" in error["message"]
    for problem in expected:
        assert problem in error["details"], error["details"]
    assert not EvaluationRun.objects.exists() and not Generation.objects.exists()
    return error["details"]


def test_unknown_item_id(clients, release, model):
    rows = _lines(release)
    rows.append({"id": "999999", "sample": 0, "answer": "x"})
    _refused(_upload(clients["owner"], release, _encode(rows)),
             f"line {len(rows)}: unknown item id '999999' in version {release.name}")


def test_duplicate_sample(clients, release, model):
    rows = _lines(release)
    rows.append(dict(rows[0]))
    _refused(_upload(clients["owner"], release, _encode(rows)),
             f"line {len(rows)}: item {rows[0]['id']} sample 0 appears twice")


def test_over_long_answer(clients, release, model):
    rows = _lines(release)
    rows[1]["answer"] = "x" * (MAX_ANSWER_CHARS + 1)
    _refused(_upload(clients["owner"], release, _encode(rows)),
             f"line 2: answer is {MAX_ANSWER_CHARS + 1} characters; at most {MAX_ANSWER_CHARS}")


def test_wrong_encoding(clients, release, model):
    content = reference_answers(release).decode().replace("python", "pythön").encode("latin-1")
    details = _refused(_upload(clients["owner"], release, content))
    assert len(details) == 1 and details[0].startswith("the file is not UTF-8 text (byte ")


def test_not_json(clients, release, model):
    rows = _lines(release)
    rows.insert(2, "{not json")
    details = _refused(_upload(clients["owner"], release, _encode(rows)))
    assert details == ["line 3: not JSON (Expecting property name enclosed in double quotes)"]


def test_wrong_shapes_each_named(clients, release, model):
    rows = _lines(release)
    rows[0] = [1, 2]
    rows[1]["sample"] = "first"
    rows[2]["answer"] = None
    _refused(_upload(clients["owner"], release, _encode(rows)),
             "line 1: expected an object with id, sample and answer",
             "line 2: sample must be an integer from 0 to 19",
             "line 3: answer must be a string")


def test_missing_items(clients, release, model):
    rows = _lines(release)[:-2]
    details = _refused(_upload(clients["owner"], release, _encode(rows)))
    assert details[0].startswith("2 item(s) have no answer, e.g. ")


def test_empty_file(clients, release, model):
    _refused(_upload(clients["owner"], release, b"\n\n"), "the file holds no generations")


def test_form_errors_use_the_error_body(clients, release, model):
    response = clients["owner"].post("/api/v1/runs/upload/", {"model": "nope", "release": "9.9.9"},
                                     format="multipart")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["details"]) == {"file", "model", "release"}
    assert not EvaluationRun.objects.exists()


def test_reference_answers_make_a_run_whose_items_all_have_generations(clients, release, model,
                                                                       django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _upload(clients["owner"], release, reference_answers(release), with_paper="false")
    assert response.status_code == 201, response.content[:500]
    assert len(callbacks) == 1  # the run is dispatched to the workers once the upload commits
    body = response.json()
    run = EvaluationRun.objects.get(pk=body["id"])
    items = list(version_snippets(version=release))
    assert (body["model"], body["release"], body["total_items"], body["with_paper"]) == (
        "uploader", release.name, len(items), False)
    assert run.created_by.username == "ada"
    generations = {g.snippet_id: g for g in Generation.objects.filter(run=run)}
    assert set(generations) == {s.pk for s in items}
    for snippet in items:
        assert generations[snippet.pk].extracted_code.strip() == snippet.reference_code.strip()
