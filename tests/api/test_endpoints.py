"""What the API returns: secrets and reference code never, hashes that match, leaderboards ranked, one error body."""

from __future__ import annotations

import csv
import hashlib
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.throttling import AnonRateThrottle

from benchmarks.models import Snippet
from benchmarks.selectors import version_snippets
from evaluation import services
from evaluation.models import EvaluationRun, Generation, ModelEntry
from evaluation.outcomes import Verdict
from tests.api.conftest import reference_answers
from tests.conftest import download_body

pytestmark = pytest.mark.django_db


def _finish(run: EvaluationRun, *, passing: int) -> EvaluationRun:
    """Record an outcome for every item (the first `passing` pass) and let the run finish and score itself."""
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    for index, snippet in enumerate(version_snippets(version=run.version).order_by("pk")):
        generation = Generation.objects.filter(run=run, snippet=snippet).first()
        verdict = Verdict("passed", "", "") if index < passing else Verdict("failed", "wrong_result", "assert")
        services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)
    assert services.run_maybe_finish(run=run)
    run.refresh_from_db()
    return run


def test_model_api_key_is_write_only(clients, author):
    response = clients["owner"].post(
        "/api/v1/models/",
        {
            "name": "secretive",
            "display_name": "Secretive",
            "litellm_model": "openai/s",
            "api_key": "sk-top-secret",
            "knowledge_cutoff": "2025-01-31",
            "open_weights": True,
        },
        format="json",
    )
    assert response.status_code == 201
    body = response.json()
    assert body["owner"] == "ada" and body["has_api_key"] is True and "api_key" not in body
    assert ModelEntry.objects.get(name="secretive").api_key_get() == "sk-top-secret"
    for url in ("/api/v1/models/", "/api/v1/models/secretive/"):
        assert b"sk-top-secret" not in clients["owner"].get(url).content
    refused = clients["owner"].patch("/api/v1/models/secretive/", {"api_key": ""}, format="json")
    assert refused.status_code == 400 and "api_key is required" in str(refused.json()["error"]["details"]["api_key"])
    assert ModelEntry.objects.get(name="secretive").api_key_get() == "sk-top-secret"
    replaced = clients["owner"].patch("/api/v1/models/secretive/", {"api_key": "sk-new"}, format="json").json()
    assert replaced["has_api_key"] is True and replaced["knowledge_cutoff"] == "2025-01-31"
    assert ModelEntry.objects.get(name="secretive").api_key_get() == "sk-new"
    clients["maintainer"].post(
        "/api/v1/models/",
        {"name": "platform-paid", "display_name": "P", "litellm_model": "openai/p", "api_key": "sk-p"},
        format="json",
    )
    cleared = clients["maintainer"].patch("/api/v1/models/platform-paid/", {"api_key": ""}, format="json").json()
    assert cleared["has_api_key"] is False


def test_model_name_cannot_change_and_duplicates_are_refused(clients, author):
    services.model_register(name="m1", display_name="M1", litellm_model="openai/m1", owner=author, api_key="k")
    clients["owner"].patch("/api/v1/models/m1/", {"name": "m2"}, format="json")
    assert ModelEntry.objects.filter(name="m1").exists()
    duplicate = clients["owner"].post(
        "/api/v1/models/",
        {"name": "m1", "display_name": "x", "litellm_model": "openai/b", "api_key": "k"},
        format="json",
    )
    assert duplicate.status_code == 400 and "name" in duplicate.json()["error"]["details"]


def test_release_lists_downloads_whose_bytes_match_their_sha256(clients, release):
    body = clients["anonymous"].get("/api/v1/releases/1.0.0/").json()
    assert body["manifest_hash"] == release.manifest_hash and body["changelog"] == release.changelog
    for kind, entry in body["downloads"].items():
        response = clients["anonymous"].get(entry["url"])
        assert response.status_code == 200
        assert (
            hashlib.sha256(download_body(response)).hexdigest() == entry["sha256"] == release.downloads[kind]["sha256"]
        )
        assert response["Content-Disposition"] == f'attachment; filename="{entry["filename"]}"'
    missing = clients["anonymous"].get("/api/v1/releases/1.0.0/downloads/secret/")
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == "release 1.0.0 has no download 'secret'; it has: pset, items"


def test_drafts_are_not_releases(clients, maintainer, media_root):
    from benchmarks.services.psets import pset_import
    from tests.conftest import DEMO_PSET

    pset_import(root=DEMO_PSET, version_name="2.0.0")
    assert clients["maintainer"].get("/api/v1/releases/2.0.0/").status_code == 404
    assert clients["maintainer"].get("/api/v1/releases/").json()["count"] == 0


def test_items_give_their_mutation_score_without_the_surviving_mutants(clients, release):
    """A survivor is a line of the reference body: the API gives the counts and the score only."""
    snippets = list(version_snippets(version=release))
    measured = {
        "generated": 4,
        "killed": 3,
        "survived": 1,
        "score": 0.75,
        "timeouts": [],
        "survivors": [f"line 1: {snippets[0].reference_code.strip().splitlines()[0]}  ->  pass"],
    }
    Snippet.objects.filter(pk=snippets[0].pk).update(mutation=measured)
    items = {i["id"]: i for i in clients["anonymous"].get("/api/v1/releases/1.0.0/items/").json()["results"]}
    assert items[snippets[0].pk]["mutation"] == {"generated": 4, "killed": 3, "survived": 1, "score": 0.75}
    assert items[snippets[1].pk]["mutation"] is None
    assert measured["survivors"][0] not in str(items[snippets[0].pk])


def test_items_show_the_masked_code_never_the_reference(clients, release):
    snippets = list(version_snippets(version=release))
    body = clients["anonymous"].get("/api/v1/releases/1.0.0/items/").json()
    assert body["count"] == len(snippets) and body["page_size"] == 50, "a page says how many items it holds"
    assert set(body["results"][0]) == {"id", "paper", "file", "snippet", "loc", "depth", "masked_code", "mutation"}
    # Other snippets of the same file stay visible (FORMAT.md section 5): only an item's own code is masked.
    masked = {item["id"]: item["masked_code"] for item in body["results"]}
    for snippet in snippets:
        assert snippet.reference_code.strip() not in masked[snippet.pk]
        assert f'TODO: Implement block "{snippet.name}"' in masked[snippet.pk]
    detail = clients["anonymous"].get(f"/api/v1/releases/1.0.0/items/{snippets[0].pk}/?with_paper=false").json()
    assert snippets[0].reference_code.strip() not in detail["prompt"]
    assert detail["masked_code"] in detail["prompt"]
    # Ids and metadata only: what an uploader needs to name its answers, without a whole file per item.
    light = clients["anonymous"].get("/api/v1/releases/1.0.0/items/?masked_code=false").json()
    # Was the field left out, which the schema marks required (issue 37): now always there, null when not asked for.
    assert set(light["results"][0]) == set(body["results"][0])
    assert {i["masked_code"] for i in light["results"]} == {None}
    assert [i["id"] for i in light["results"]] == [i["id"] for i in body["results"]]


def test_results_of_public_items_give_everyone_the_models_code(clients, release, author):
    """Public answers are published, as SWE-bench and LiveCodeBench publish leaderboard entries' completions;
    held-out ones are covered by tests/test_visibility_matrix.py."""
    model = services.model_register(name="up", display_name="Up", kind="uploaded", owner=author)
    uploaded = services.run_from_upload(model=model, version=release, data=reference_answers(release), user=author)
    _finish(uploaded, passing=2)
    for caller in ("owner", "other", "anonymous"):
        results = clients[caller].get(f"/api/v1/runs/{uploaded.pk}/results/").json()["results"]
        assert {r["status"] for r in results} == {"passed", "failed"}
        assert all(r["extracted_code"] for r in results)

    reference = services.run_start(
        model=ModelEntry.objects.get(name="reference"), version=release, user=author, dispatch=False
    )
    for snippet in version_snippets(version=release):
        services.calibration_generation(run=reference, snippet=snippet, sample=0)
    _finish(reference, passing=100)
    body = clients["other"].get(f"/api/v1/runs/{reference.pk}/results/").json()
    assert body["count"] == reference.total_items  # the release is all public: its reference code is downloadable
    assert all(r["extracted_code"] for r in body["results"])


def test_run_status_progress_and_actions(clients, release, author):
    services.model_register(
        name="mine", display_name="Mine", litellm_model="openai/mine", owner=author, api_key="sk-mine"
    )
    started = (
        clients["owner"]
        .post(
            "/api/v1/runs/",
            {"model": "mine", "release": "1.0.0", "samples": 2, "params": {"temperature": 0}},
            format="json",
        )
        .json()
    )
    run = EvaluationRun.objects.get(pk=started["id"])
    assert (run.samples, run.params, run.created_by) == (2, {"temperature": 0}, author)
    assert started["progress"]["total"] == run.total_items and started["score"] is None
    cancelled = clients["owner"].post(f"/api/v1/runs/{run.pk}/cancel/").json()
    assert cancelled["status"] == "cancelled"
    again = clients["owner"].post(f"/api/v1/runs/{run.pk}/cancel/")
    assert again.status_code == 400 and "only queued or running runs" in again.json()["error"]["message"]
    assert clients["owner"].post(f"/api/v1/runs/{run.pk}/resume/").json()["status"] == "running"


def test_run_start_refuses_bad_settings_with_the_error_body(clients, release):
    response = clients["maintainer"].post(
        "/api/v1/runs/", {"model": "reference", "release": "1.0.0", "samples": 99}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid" and "samples" in response.json()["error"]["details"]


def test_leaderboard_ranks_completed_runs_by_scaled_pass_rate(clients, release, author):
    weak = services.model_register(
        name="weak", display_name="Weak", litellm_model="openai/weak", owner=author, api_key="sk-weak"
    )
    strong = services.model_register(
        name="strong", display_name="Strong", kind="uploaded", owner=author, organization="Lab", open_weights=True
    )
    for model, passing in ((weak, 1), (strong, 4)):
        run = services.run_from_upload(model=model, version=release, data=reference_answers(release), user=author)
        _finish(run, passing=passing)
    services.run_start(model=weak, version=release, user=author, dispatch=False)  # still queued: not ranked
    rows = clients["anonymous"].get("/api/v1/releases/1.0.0/leaderboard/").json()
    # 3 items only the strong upload passes: McNemar p = 2 / 2**3 = 0.25, so the two tie, listed by score.
    assert [(r["rank"], r["model"]) for r in rows] == [(1, "strong"), (1, "weak")]
    assert rows[0]["organization"] == "Lab" and rows[0]["open_weights"] is True
    assert rows[0]["scaled_ci_low"] <= rows[0]["scaled_pass_rate"] <= rows[0]["scaled_ci_high"]
    for url in ("/api/v1/releases/1.0.0/leaderboard/?format=csv", "/api/v1/releases/1.0.0/leaderboard.csv"):
        response = clients["anonymous"].get(url)
        assert response["Content-Type"].startswith("text/csv")
        table = list(csv.DictReader(io.StringIO(response.content.decode())))
        assert [row["model"] for row in table] == ["strong", "weak"]
        assert float(table[0]["scaled_pass_rate"]) == pytest.approx(rows[0]["scaled_pass_rate"])


@pytest.mark.parametrize(
    "hostile",
    ['=HYPERLINK("https://evil.example","x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(1,2)", "\tstart", "\rstart"],
)
def test_leaderboard_csv_neutralises_cells_a_spreadsheet_would_run(clients, release, author, hostile):
    model = services.model_register(
        name="sly", display_name=hostile, kind="uploaded", owner=author, organization=hostile
    )
    _finish(
        services.run_from_upload(model=model, version=release, data=reference_answers(release), user=author), passing=2
    )
    response = clients["anonymous"].get("/api/v1/releases/1.0.0/leaderboard.csv")
    row = next(csv.DictReader(io.StringIO(response.content.decode(), newline="")))
    assert row["display_name"] == "'" + hostile and row["organization"] == "'" + hostile
    assert row["model"] == "sly" and int(row["passed"]) == 2 and 0 < float(row["pass_rate"]) < 100


def test_csv_cell_keeps_numbers_and_plain_text():
    from common.csv_export import csv_cell

    assert [csv_cell(v) for v in (-0.5, "-0.5", "1e-3", "Lab", None, "=1")] == [
        -0.5,
        "-0.5",
        "1e-3",
        "Lab",
        None,
        "'=1",
    ]


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/nowhere/",
        "/api/v1/releases/9.9.9/",
        "/api/v1/runs/12345/",
        "/api/v1/models/nobody/",
        "/api/v1/releases/9.9.9/leaderboard.csv",
    ],
)
def test_not_found_has_the_error_body(clients, url):
    response = clients["anonymous"].get(url)
    assert response.status_code == 404
    if response["Content-Type"].startswith("text/csv"):
        assert response.content.decode().splitlines()[1].startswith("not_found,")
    else:
        assert response.json()["error"]["code"] == "not_found"


def test_anonymous_callers_are_throttled_with_the_error_body(clients, monkeypatch):
    monkeypatch.setattr(AnonRateThrottle, "THROTTLE_RATES", {"anon": "2/hour", "user": "1000/hour"})
    for _ in range(2):
        assert clients["anonymous"].get("/api/v1/models/").status_code == 200
    refused = clients["anonymous"].get("/api/v1/models/")
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "throttled" and refused.json()["error"]["details"]["wait"] > 0
    assert clients["owner"].get("/api/v1/models/").status_code == 200


def test_docs_page_is_served_without_a_cdn(client):
    page = client.get("/api/v1/docs/").content.decode()
    assert "drf_spectacular_sidecar/swagger-ui-dist" in page
    assert "cdn" not in page.lower()


def test_upload_needs_a_file(clients, release, author):
    services.model_register(name="up", display_name="Up", kind="uploaded", owner=author)
    response = clients["owner"].post(
        "/api/v1/runs/upload/",
        {"model": "up", "release": "1.0.0", "file": SimpleUploadedFile("empty.jsonl", b"")},
        format="multipart",
    )
    assert response.status_code == 400 and "file" in response.json()["error"]["details"]


def test_a_missing_slash_is_pointed_out(clients):
    response = clients["anonymous"].get("/api/v1/releases")
    assert response.status_code == 404
    assert response.json()["error"]["message"] == "no endpoint at /api/v1/releases; did you mean /api/v1/releases/ ?"


@pytest.mark.parametrize(
    ("url", "body", "where"),
    [
        ("/api/v1/runs/", {"model": "\x00m", "release": "1.0.0"}, "body.model"),
        ("/api/v1/runs/", {"model": "m", "release": "1.0.0", "params": {"seed\x00": 1}}, "body.params: a key"),
        (
            "/api/v1/models/",
            {"name": "n", "display_name": "N", "litellm_model": "a/b", "tags": ["x", "\x00"]},
            "body.tags[1]",
        ),
    ],
)
def test_nul_characters_in_bodies_are_refused_saying_where(clients, release, url, body, where):
    # PostgreSQL stores no NUL in text or jsonb: schemathesis found a 500 there; now a 400 on every database.
    response = clients["owner"].post(url, body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == f"{where} contains a NUL character (\\u0000), which text may not hold"


def test_nul_characters_in_a_multipart_upload_are_refused(clients, release):
    upload = SimpleUploadedFile("answers.jsonl", reference_answers(release))
    response = clients["owner"].post(
        "/api/v1/runs/upload/", {"file": upload, "model": "\x00", "release": "1.0.0"}, format="multipart"
    )
    assert response.status_code == 400 and "body.model contains a NUL character" in response.json()["error"]["message"]
