"""A NUL character from anything untrusted is stored, not refused (attack9): an answer printing one made PostgreSQL
refuse its outcome (`text fields cannot contain NUL`), so the item was never recorded, the watchdog dispatched it
again every minute forever and it held a worker slot, starving every other run; a model's endpoint or a submitted
test can print one as well. Every model's text and JSON values lose their NULs before a save (a receiver in
`operations`), and the bulk updates that store a sandbox's words do the same (`common.text.storable`)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DataError, transaction
from django.db.models.signals import pre_save
from rest_framework.test import APIClient

from benchmarks.selectors import version_snippets
from benchmarks.services.psets import pset_import
from common.text import NUL_SHOWN, storable
from evaluation import services
from evaluation.judging.step import item_judge
from evaluation.models import EvaluationRun, ModelEntry, Outcome
from evaluation.outcomes import UNJUDGED, Verdict
from evaluation.tasks import item_evaluate
from operations.apps import text_fields_storable
from tests.conftest import DEMO_PSET

# A wrong answer that prints a NUL on its way to failing.
NUL_ANSWER = 'print("wrong answer \\x00 here")\nraise ValueError("wrong")\n'


def test_storable_replaces_nul_everywhere_and_keeps_a_clean_value_itself():
    clean = {"a": ["b", ("c", 1)], "d": None, "é": "ü \U0001f600"}
    assert storable(clean) is clean
    assert storable("a\ud800b\x00\udfff") == f"a{NUL_SHOWN}b{NUL_SHOWN}{NUL_SHOWN}"  # lone surrogates, a NUL
    dirty = {"k\x00": ["x\x00y", ("z\x00", 2.5)], "n": 3}
    assert storable(dirty) == {f"k{NUL_SHOWN}": [f"x{NUL_SHOWN}y", (f"z{NUL_SHOWN}", 2.5)], "n": 3}


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgresql_refuses_a_nul_unless_the_receiver_replaces_it(release):
    snippet = version_snippets(version=release)[0]
    run = services.run_start(model=ModelEntry.objects.get(name="reference"), version=release, dispatch=False)
    verdict = Verdict("failed", "runtime", "ValueError: wrong \x00", tests=({"test": "t\x00", "status": "failed"},))
    # The attack's storage failure with no receiver: the outcome is refused, so the item is never recorded.
    pre_save.disconnect(dispatch_uid="text_fields_storable")
    try:
        with pytest.raises(DataError), transaction.atomic():
            Outcome.objects.create(run=run, snippet=snippet, sample=0, status="failed", stdout_tail="a\x00b")
    finally:
        pre_save.connect(text_fields_storable, dispatch_uid="text_fields_storable")
    outcome, created = services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict)
    outcome.refresh_from_db()
    assert (
        created and outcome.detail == f"ValueError: wrong {NUL_SHOWN}" and outcome.tests[0]["test"] == f"t{NUL_SHOWN}"
    )
    # A model's answer holding one, or a lone surrogate (an endpoint's JSON escape \ud800), is stored too; the
    # surrogate, with no receiver, is refused before it reaches the database (attack10).
    pre_save.disconnect(dispatch_uid="text_fields_storable")
    try:
        with pytest.raises(UnicodeEncodeError), transaction.atomic():
            services.generation_record(run=run, snippet=snippet, sample=2, prompt="p", raw_answer="y\ud800")
    finally:
        pre_save.connect(text_fields_storable, dispatch_uid="text_fields_storable")
    generation = services.generation_record(run=run, snippet=snippet, sample=1, prompt="p", raw_answer="x\x00\ud800")
    generation.refresh_from_db()
    assert generation.raw_answer == f"x{NUL_SHOWN}{NUL_SHOWN}"


def demo_upload(author, first: Callable[[str], str]):
    """The demo release published and an upload through the API of its reference answers, the first item's made by
    `first` from its reference: (the response, the release's snippets)."""
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    snippets = version_snippets(version=version)
    lines = [
        json.dumps(
            {"id": str(s.pk), "sample": 0, "code": first(s.reference_code) if s == snippets[0] else s.reference_code}
        )
        for s in snippets
    ]
    client = APIClient()
    client.force_authenticate(author)
    response = client.post(
        "/api/v1/runs/upload/",
        {"file": SimpleUploadedFile("a.jsonl", "\n".join(lines).encode()), "model": "uploader", "release": "1.0.0"},
        format="multipart",
    )
    return response, snippets


@pytest.fixture
def nul_upload(media_root, author, sandbox):
    """An upload through the API of the demo's reference answers but one, which prints a NUL and fails."""
    response, snippets = demo_upload(author, lambda reference: NUL_ANSWER)
    assert response.status_code == 201, response.content[:500]
    return EvaluationRun.objects.get(pk=response.json()["id"]), snippets[0]


@pytest.mark.postgres
@pytest.mark.django_db
def test_an_answer_printing_a_nul_through_an_upload_is_judged_and_recorded(nul_upload):
    run, attacked = nul_upload
    # The worker's judging step on the attacked item, in a real bwrap sandbox: its output reaches the database.
    generation = run.generations.get(snippet=attacked)
    outcome = item_judge(run=run, snippet=attacked, sample=0, generation=generation, worker="test")
    outcome.refresh_from_db()
    assert outcome.status == "failed" and f"wrong answer {NUL_SHOWN} here" in outcome.stdout_tail, outcome.stdout_tail
    run.refresh_from_db()
    assert run.done_items == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_an_answer_whose_outcome_the_database_refuses_is_held_as_not_passed(nul_upload):
    """The second line of defence, with the first removed: an item whose recording the database refuses is held for
    review (not passed until a maintainer sets it aside), not lost and queued again forever."""
    run, attacked = nul_upload
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    pre_save.disconnect(dispatch_uid="text_fields_storable")
    try:
        item_evaluate.apply(args=(run.pk, attacked.pk, 0), throw=True)
    finally:
        pre_save.connect(text_fields_storable, dispatch_uid="text_fields_storable")
    outcome = Outcome.objects.get(run=run, snippet=attacked)
    assert (outcome.status, outcome.measured_status, outcome.error_held) == ("flagged", "error", True)
    assert [f["kind"] for f in outcome.findings] == [UNJUDGED] and "DataError" in outcome.detail, outcome.detail
    assert outcome.error_held_said == "an answer the platform could not judge or record"


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "surrogate"])
def test_an_upload_line_with_a_nul_or_a_lone_surrogate_is_refused_saying_where(media_root, author, bad):
    """Before, the database refused the whole upload with a server error (bulk inserts skip the save receiver)."""
    response, _ = demo_upload(author, lambda reference: reference + f"# {bad}\n")
    assert response.status_code == 400, response.content[:500]
    [problem] = response.json()["error"]["details"]
    assert problem.startswith("line 1:") and "NUL character" in problem and "lone surrogate" in problem, problem
