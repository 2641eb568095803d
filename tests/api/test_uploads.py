"""Uploading generations: every bad line named precisely, nothing stored on refusal, a perfect upload scored whole;
a line gives either a raw `answer` (extracted by the protocol, spliced unchanged) or the snippet's `code`
(re-indented to the snippet's indentation)."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from benchmarks.paper2code import code_indent
from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, Generation
from evaluation.services import MAX_ANSWER_CHARS
from tests.api.conftest import reference_answers

pytestmark = pytest.mark.django_db


@pytest.fixture
def model(author):
    return services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)


def _upload(client, release, content: bytes, model_name: str = "uploader", **extra):
    form = {"file": SimpleUploadedFile("answers.jsonl", content), "model": model_name, "release": release.name, **extra}
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
    _refused(
        _upload(clients["owner"], release, _encode(rows)),
        f"line {len(rows)}: unknown item id '999999' in release {release.name}",
    )


def test_duplicate_sample(clients, release, model):
    rows = _lines(release)
    rows.append(dict(rows[0]))
    _refused(
        _upload(clients["owner"], release, _encode(rows)),
        f"line {len(rows)}: item {rows[0]['id']} sample 0 appears twice",
    )


def test_over_long_answer(clients, release, model):
    rows = _lines(release)
    rows[1]["answer"] = "x" * (MAX_ANSWER_CHARS + 1)
    _refused(
        _upload(clients["owner"], release, _encode(rows)),
        f"line 2: answer is {MAX_ANSWER_CHARS + 1} characters; at most {MAX_ANSWER_CHARS}",
    )


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
    _refused(
        _upload(clients["owner"], release, _encode(rows)),
        'line 1: expected an object with "id", "sample" and one of "answer" or "code"',
        "line 2: sample must be an integer from 0 to 19",
        "line 3: answer must be a string",
    )


def test_missing_items(clients, release, model):
    rows = _lines(release)[:-2]
    details = _refused(_upload(clients["owner"], release, _encode(rows)))
    assert details[0].startswith("2 item(s) have no answer, e.g. ")


def test_empty_file(clients, release, model):
    _refused(_upload(clients["owner"], release, b"\n\n"), "the file holds no generations")


def test_form_errors_use_the_error_body(clients, release, model):
    response = clients["owner"].post("/api/v1/runs/upload/", {"model": "nope", "release": "9.9.9"}, format="multipart")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["details"]) == {"file", "model", "release"}
    assert not EvaluationRun.objects.exists()


def test_reference_answers_make_a_run_whose_items_all_have_generations(
    clients, release, model, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = _upload(clients["owner"], release, reference_answers(release), with_paper="false")
    assert response.status_code == 201, response.content[:500]
    assert len(callbacks) == 1  # the run is dispatched to the workers once the upload commits
    body = response.json()
    run = EvaluationRun.objects.get(pk=body["id"])
    items = list(version_snippets(version=release))
    assert (body["model"], body["release"], body["total_items"], body["with_paper"]) == (
        "uploader",
        release.name,
        len(items),
        False,
    )
    assert run.created_by.username == "ada"
    generations = {g.snippet_id: g for g in Generation.objects.filter(run=run)}
    assert set(generations) == {s.pk for s in items}
    for snippet in items:
        assert generations[snippet.pk].extracted_code.strip() == snippet.reference_code.strip()


def test_code_lines_are_the_snippet_body(clients, release, model, django_capture_on_commit_callbacks):
    """`code` is the snippet body itself: no fence needed, nothing extracted, stored at the snippet's indentation."""
    items = list(version_snippets(version=release))
    rows = [{"id": str(s.pk), "sample": 0, "code": s.reference_code} for s in items]
    rows[0]["code"] = "x = '```python\\nnot a fence'\n"  # fence-like text inside code stays code
    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(clients["owner"], release, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    assert response.json()["warnings"] == []
    generations = {g.snippet_id: g for g in Generation.objects.filter(run_id=response.json()["id"])}
    assert generations[items[0].pk].extracted_code == code_indent(items[0].reference_code) + rows[0]["code"]
    assert {g.cost for g in generations.values()} == {None}, "what an uploader paid is unknown, not zero"
    for snippet in items[1:]:
        assert generations[snippet.pk].extracted_code == snippet.reference_code
        assert generations[snippet.pk].raw_answer == ""


def test_answer_and_code_lines_mix_in_one_file(clients, release, model, django_capture_on_commit_callbacks):
    rows = _lines(release)
    snippet = version_snippets(version=release).get(pk=int(rows[1]["id"]))
    rows[1] = {"id": rows[1]["id"], "sample": 0, "code": snippet.reference_code}
    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(clients["owner"], release, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    stored = Generation.objects.get(run_id=response.json()["id"], snippet=snippet)
    assert stored.extracted_code == snippet.reference_code
    first = Generation.objects.get(run_id=response.json()["id"], snippet_id=int(rows[0]["id"]))
    assert first.raw_answer == rows[0]["answer"] and first.extracted_code in rows[0]["answer"]


def test_answer_without_a_fenced_block_is_refused_with_its_line(clients, release, model):
    rows = _lines(release)
    rows[3]["answer"] = rows[3]["answer"].replace("```python\n", "").replace("```", "")  # bare code, no fence
    rows[5]["answer"] = "```py\nx = 1\n```"  # not a python fence for rcb-v1
    rows[6]["answer"] = "```python\nx = 1\n"  # never closed
    _refused(
        _upload(clients["owner"], release, _encode(rows)),
        *[
            f"line {n}: answer has no fenced python block (```python ... ```), so protocol rcb-v1 would extract "
            'nothing; wrap the code in one, or send the snippet body as "code"'
            for n in (4, 6, 7)
        ],
    )


def test_a_line_with_both_or_neither_is_refused(clients, release, model):
    rows = _lines(release)
    rows[0]["code"] = "x = 1\n"
    del rows[2]["answer"]
    rows[4] = {"id": rows[4]["id"], "sample": 0, "code": 7}
    details = _refused(
        _upload(clients["owner"], release, _encode(rows)),
        'line 1: give either "answer" (a raw model response) or "code" (the snippet body), not both',
        'line 3: no "answer" (a raw model response) or "code" (the snippet body)',
        "line 5: code must be a string",
    )
    assert len(details) == 3


def test_the_schema_documents_answer_and_code(clients):
    schema = clients["anonymous"].get("/api/v1/schema/", {"format": "json"}).json()
    upload = schema["paths"]["/api/v1/runs/upload/"]["post"]
    assert "fenced python block is refused with its line number" in upload["description"]
    body = upload["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[1]
    fields = schema["components"]["schemas"][body]["properties"]
    assert (
        '"code" is the snippet body given directly, at any consistent indentation: it is re-indented'
        in (fields["file"]["description"])
    )
    assert "splices it into the file unchanged" in fields["file"]["description"]
    assert "protocol" in fields


def test_a_user_has_only_so_many_runs_at_once(clients, release, model, settings):
    # The workers are shared: a signed-in user cannot queue runs without end, by upload, start or resume.
    settings.RUNS_ACTIVE_PER_USER = 2
    data = reference_answers(release)
    first, second = (_upload(clients["owner"], release, data) for _ in range(2))
    assert first.status_code == second.status_code == 201
    ids = [first.json()["id"], second.json()["id"]]
    refused = _upload(clients["owner"], release, data)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_runs"
    assert f"2 runs queued or running (#{ids[0]}, #{ids[1]})" in refused.json()["error"]["message"]
    assert EvaluationRun.objects.count() == 2, "nothing stored for the refused one"

    assert clients["owner"].post(f"/api/v1/runs/{ids[0]}/cancel/").status_code == 200
    third = _upload(clients["owner"], release, data)
    assert third.status_code == 201
    resumed = clients["owner"].post(f"/api/v1/runs/{ids[0]}/resume/")
    assert resumed.status_code == 429, "a cancelled run resumed counts as a new one"
    assert EvaluationRun.objects.get(pk=ids[0]).status == "cancelled"
    # Maintainers run the platform's own work and are not limited.
    assert all(_upload(clients["maintainer"], release, data).status_code == 201 for _ in range(3))


def _nested(release):
    """A snippet whose reference is indented and has a nested block, so a shape's block structure shows."""
    for snippet in version_snippets(version=release):
        lines = [ln for ln in snippet.reference_code.splitlines() if ln.strip()]
        indent = code_indent(snippet.reference_code)
        if indent and any(ln.startswith(indent + " ") for ln in lines):
            return snippet
    raise AssertionError("the demo release has no indented snippet with a nested block")


def _shape(reference: str, indent: str, *, unit: str) -> str:
    """The reference at no common indentation, each level of 4 spaces written as `unit`."""
    out = []
    for line in reference.splitlines(keepends=True):
        body = line[len(indent) :] if line.strip() else line
        spaces = len(body) - len(body.lstrip(" "))
        out.append(unit * (spaces // 4) + " " * (spaces % 4) + body.lstrip(" ") if line.strip() else line)
    return "".join(out)


@pytest.mark.parametrize("shape", ["unindented", "already indented", "indented deeper", "tabs", "mixed"])
def test_a_code_body_at_any_consistent_indentation_is_spliced_at_the_snippets(
    clients, release, model, django_capture_on_commit_callbacks, shape
):
    """However the body's indentation is written, what the test runs is the reference at the file's indentation:
    the body is correct, so it cannot fail for its indentation."""
    snippet = _nested(release)
    indent = code_indent(snippet.reference_code)
    flat = _shape(snippet.reference_code, indent, unit="    ")
    body = {
        "unindented": flat,
        "already indented": snippet.reference_code,
        "indented deeper": "".join("\t" + ln if ln.strip() else ln for ln in snippet.reference_code.splitlines(True)),
        # A tab is 8 columns to Python: one tab per level keeps the structure (levels 8 apart, still valid).
        "tabs": _shape(snippet.reference_code, indent, unit="\t"),
        # First level as a tab, deeper ones as a tab and spaces: as Python reads it, 8 then 12 columns.
        "mixed": "".join("\t" + ln if ln.strip() else ln for ln in flat.splitlines(True)),
    }[shape]
    rows = [
        {"id": row["id"], "sample": 0, "code": body} if row["id"] == str(snippet.pk) else row for row in _lines(release)
    ]
    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(clients["owner"], release, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    stored = Generation.objects.get(run_id=response.json()["id"], snippet=snippet).extracted_code
    assert all(ln.startswith(indent) and not ln.startswith(indent + "\t") for ln in stored.splitlines() if ln.strip())
    compile(
        "def f():\n    for _ in ():\n"
        + "".join("        " + ln[len(indent) :] + "\n" if ln.strip() else "\n" for ln in stored.splitlines()),
        "snippet",
        "exec",
    )
    if shape != "tabs":  # tabs put the levels 8 columns apart, the same blocks
        assert stored == snippet.reference_code


def test_an_answer_indented_less_than_its_snippet_is_taken_with_a_warning_per_line(
    clients, release, model, django_capture_on_commit_callbacks
):
    """rcb-v1 splices an answer unchanged, as the original harness did: a dedented answer is not re-indented (that
    would change the benchmark), but the upload says, per line, that it will likely fail."""
    snippet = _nested(release)
    indent = code_indent(snippet.reference_code)
    rows = _lines(release)
    number = next(n for n, row in enumerate(rows, start=1) if row["id"] == str(snippet.pk))
    flat = _shape(snippet.reference_code, indent, unit="    ")
    rows[number - 1]["answer"] = f"Here it is:\n```python\n{flat}```"
    with django_capture_on_commit_callbacks(execute=False):
        response = _upload(clients["owner"], release, _encode(rows))
    assert response.status_code == 201, response.content[:500]
    [warning] = response.json()["warnings"]
    assert warning.startswith(
        f"line {number}: item {snippet.pk}: the answer's code is indented less than the "
        f"snippet ({len(indent)} columns) on its line(s) 1, 2"
    )
    assert "protocol rcb-v1 splices an answer unchanged" in warning and 'send the snippet body as "code"' in warning
    stored = Generation.objects.get(run_id=response.json()["id"], snippet=snippet)
    assert stored.extracted_code == flat  # unchanged, as the protocol treats answers
