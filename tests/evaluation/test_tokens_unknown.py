"""Token totals say they are not reported where they are not (issue 37's walk): an uploaded run's page showed 0
tokens, as did the leaderboard, its exports and the API, since an upload's answers carry no counts; a calibration run,
which calls no model, spends a known 0. The pages said "unknown" until last session's walk, read as the platform's
failure to count: a dash now, "not reported" in its tooltip and to a screen reader; the API and the CSV say null.
One rule (evaluation.scoring.usage_totals) for every aggregate, one way to say it (the `token_count` filter)."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from benchmarks import visibility
from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry, RunScore
from evaluation.outcomes import Verdict
from evaluation.templatetags.scores import TOKENS_UNKNOWN
from tests.conftest import client_for, page_text
from tests.leaderboard.test_leaderboard_browser import calibrate

pytestmark = pytest.mark.django_db


def uploaded(release, owner) -> EvaluationRun:
    """An upload of every public item's reference code, scored as a worker would record it."""
    items = list(visibility.items_public(version=release))
    lines = "".join(json.dumps({"id": str(s.pk), "sample": 0, "code": s.reference_code}) + "\n" for s in items)
    entry = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=owner)
    run = services.run_from_upload(model=entry, version=release, data=lines.encode(), user=owner)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    for generation in run.generations.select_related("snippet"):
        services.outcome_record(
            run=run, snippet=generation.snippet, sample=0, verdict=Verdict("passed", "", ""), generation=generation
        )
    assert services.run_maybe_finish(run=run)
    return run


def test_unknown_tokens_read_not_reported_and_a_known_zero_reads_zero(client, release, author):
    upload = uploaded(release, author)
    reference = calibrate(release, "reference", passed=True)
    overall = {run.pk: RunScore.objects.get(run=run, paper__isnull=True, split="") for run in (upload, reference)}
    totals = {pk: (score.prompt_tokens, score.completion_tokens) for pk, score in overall.items()}
    assert totals == {upload.pk: (None, None), reference.pk: (0, 0)}  # a called run's: tests/test_visibility_matrix.py

    client.force_login(author)
    page = client.get(reverse("run-detail", args=[upload.pk])).content.decode()
    scores = page_text(page[page.index("<h2>Scores</h2>") : page.index("</table>", page.index("<h2>Scores</h2>"))])
    assert "—not reported" in scores and "unknown" not in scores, scores
    not_reported = f'<span class="muted" title="{TOKENS_UNKNOWN}"><span aria-hidden="true">—</span>'
    assert not_reported in page and TOKENS_UNKNOWN.startswith("Not reported")
    assert not [line for line in scores.splitlines() if line.strip() == "0"], "no token total of 0 on the upload"
    reference_page = page_text(client.get(reverse("run-detail", args=[reference.pk])).content.decode())
    assert "not reported" not in reference_page.split("Scores", 1)[1].split("This run", 1)[0], "a known 0 is a number"

    detail = client_for(author).get(f"/api/v1/runs/{upload.pk}/").json()
    assert detail["score"]["prompt_tokens"] is None and detail["score"]["completion_tokens"] is None
    rows = {r["run"]: r for r in client.get(reverse("api-leaderboard", args=[release.name])).json()}
    assert (rows[upload.pk]["tokens"], rows[reference.pk]["tokens"]) == (None, 0)
    text = client.get(reverse("api-leaderboard-csv", args=[release.name])).content.decode()
    exported = {int(r["run"]): r["tokens"] for r in csv.DictReader(io.StringIO(text))}
    assert exported[upload.pk] == "" and exported[reference.pk] == "0"

    board = client.get(reverse("leaderboard", args=[release.name]), {"cols": "tokens"}).content.decode()
    cells = {}
    for row in board.split('id="leaderboard-table"')[1].split("</table>")[0].split("<tr")[1:]:
        if 'data-column="tokens"' in row and 'href="/runs/' in row:
            pk = int(row.split('href="/runs/')[1].split("/")[0])
            cells[pk] = page_text(row.split('data-column="tokens"')[1].split("</td>")[0].split(">", 1)[1])
    assert (cells[upload.pk], cells[reference.pk]) == ("—not reported", "0"), cells
    assert not_reported in board
    # Sorting by tokens puts the unknown apart from the known counts, whatever the direction.
    for direction in ("asc", "desc"):
        ranked = client.get(reverse("api-leaderboard", args=[release.name]), {"sort": "tokens", "dir": direction})
        assert ranked.status_code == 200
    assert ModelEntry.objects.get(name="uploader").kind == "uploaded"


def test_an_uploaded_runs_progress_says_its_answers_were_uploaded(client, release, author):
    """Last session's walk: an upload's progress read "N answers generated", as if the platform had called a model
    for them. An uploaded run (EvaluationRun.is_upload) says "uploaded"; a run the platform called says "generated"."""
    upload = uploaded(release, author)
    reference = calibrate(release, "reference", passed=True)
    assert upload.is_upload and not reference.is_upload
    client.force_login(author)
    page = page_text(client.get(reverse("run-detail", args=[upload.pk])).content.decode())
    answers = upload.generations.count()
    assert f"{answers} answers uploaded." in page and "answers generated" not in page
    polled = page_text(client.get(reverse("run-progress", args=[upload.pk])).content.decode())
    assert f"{answers} answers uploaded." in polled, "the progress the page polls while the run goes"
    called = page_text(client.get(reverse("run-detail", args=[reference.pk])).content.decode())
    assert "answers generated" in called and "answers uploaded" not in called
