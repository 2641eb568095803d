"""An attempt's rules, through the services and the API: the server's clock with pauses not counted, one attempt
per item per person, held-out items never offered (by id, by the random pick, by the API), others' attempts not
found, and the paste marks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from humans import selectors, services
from humans.models import Attempt
from tests.conftest import client_for
from tests.humans.conftest import dampnest_item

pytestmark = pytest.mark.django_db


def _moved_back(attempt: Attempt, **fields: timedelta) -> None:
    """Put the attempt's timestamps that far in the past, as if that much time had gone by."""
    Attempt.objects.filter(pk=attempt.pk).update(**{k: getattr(attempt, k) - v for k, v in fields.items()})
    attempt.refresh_from_db()


def test_the_clock_counts_working_time_only(held_release, people):
    person = people[0]
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=dampnest_item(held_release).pk)
    _moved_back(attempt, opened_at=timedelta(seconds=600))
    services.attempt_pause(attempt=attempt, user=person)
    attempt.refresh_from_db()
    _moved_back(attempt, opened_at=timedelta(seconds=240), paused_at=timedelta(seconds=240))
    services.attempt_resume(attempt=attempt, user=person)
    attempt.refresh_from_db()
    assert attempt.paused_seconds == pytest.approx(240, abs=2)
    with pytest.raises(services.AttemptRefused, match="not paused"):
        services.attempt_resume(attempt=attempt, user=person)
    # A paused attempt is not submitted: the clock would be read while stopped.
    services.attempt_pause(attempt=attempt, user=person)
    with pytest.raises(services.AttemptRefused, match="resume it to submit"):
        services.attempt_submit(attempt=attempt, user=person, body="st['g_prev'] = g.copy()")
    services.attempt_resume(attempt=attempt, user=person)
    attempt = services.attempt_submit(attempt=attempt, user=person, body="st['g_prev'] = g.copy()", keystrokes=30)
    # 600 s open before the pause, the pause of 240 s left out, and what the test itself took
    assert attempt.active_seconds == pytest.approx(600, abs=5), attempt.active_seconds
    assert attempt.state == "submitted" and attempt.run.mode == "human" and attempt.run.provenance == "self_reported"


def test_one_submission_per_item_per_person(held_release, people):
    person, other = people[0], people[1]
    item = dampnest_item(held_release)
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=item.pk)
    assert services.attempt_open(user=person, version=held_release, snippet_id=item.pk) == attempt, "live: the same"
    services.attempt_submit(attempt=attempt, user=person, body="st['g_prev'] = g.copy()")
    with pytest.raises(services.AttemptRefused, match="is submitted already"):
        services.attempt_submit(attempt=attempt, user=person, body="st['g_prev'] = g")
    with pytest.raises(services.AttemptRefused, match="one attempt per item per person"):
        services.attempt_open(user=person, version=held_release, snippet_id=item.pk)
    # Another person's attempt is not theirs to submit, pause or see.
    mine = services.attempt_open(user=other, version=held_release, snippet_id=item.pk)
    with pytest.raises(services.AttemptNotFound):
        services.attempt_submit(attempt=mine, user=person, body="pass")
    assert selectors.attempt_get(pk=mine.pk, user=person) is None
    # An abandoned item stays attempted: its prompt was seen.
    services.attempt_abandon(attempt=mine, user=other)
    with pytest.raises(services.AttemptRefused, match="abandoned"):
        services.attempt_open(user=other, version=held_release, snippet_id=item.pk)
    assert Attempt.objects.filter(snippet=item).count() == 2


def test_held_out_items_are_never_offered(held_release, held_out_items, public_items, people, maintainer):
    for user in (people[0], maintainer):  # maintainers see held-out items elsewhere; never here
        for item in held_out_items:
            with pytest.raises(services.AttemptNotFound, match=f"has no public item {item.pk}"):
                services.attempt_open(user=user, version=held_release, snippet_id=item.pk)
    # The random pick until none is left (an attempt's masked file shows its file's other items' references, which
    # withdraws them): public items only, each once, and a refusal at the end.
    offered = []
    while selectors.items_offerable(version=held_release, user=maintainer).exists():
        offered.append(attempt := services.attempt_open(user=maintainer, version=held_release))
        services.attempt_abandon(attempt=attempt, user=maintainer)
    assert offered and len({a.snippet_id for a in offered}) == len(offered)
    assert {a.snippet_id for a in offered} <= {s.pk for s in public_items}
    with pytest.raises(services.AttemptRefused, match="no public item of release 1.0.0 is left to offer you"):
        services.attempt_open(user=maintainer, version=held_release)
    # The API: the same refusal, and the same answer as for an id no item has.
    api = client_for(people[1])
    for pk in [held_out_items[0].pk, 999_999]:
        response = api.post(f"/api/v1/releases/{held_release.name}/attempts/", {"item": pk}, format="json")
        assert response.status_code == 404, response.content
        assert f"has no public item {pk}" in response.json()["error"]["message"]
    assert not Attempt.objects.filter(snippet__in=held_out_items).exists()


def test_the_api_opens_pauses_resumes_and_submits_once(held_release, people):
    api = client_for(people[0])
    item = dampnest_item(held_release)
    opened = api.post(f"/api/v1/releases/{held_release.name}/attempts/", {"item": item.pk}, format="json")
    assert opened.status_code == 201, opened.content
    record = opened.json()
    assert record["state"] == "open" and record["masked_code"] in record["prompt"]
    assert item.reference_code.strip() not in record["prompt"], "the reference is not in the prompt"
    pk = record["id"]
    assert api.post(f"/api/v1/attempts/{pk}/pause/").json()["state"] == "paused"
    assert "prompt" not in api.get(f"/api/v1/attempts/{pk}/").json(), "a paused attempt hides the item"
    assert api.post(f"/api/v1/attempts/{pk}/resume/").json()["state"] == "open"
    submitted = api.post(
        f"/api/v1/attempts/{pk}/submit/",
        {"body": "st['g_prev'] = g.copy()", "keystrokes": 25, "pastes": [{"at": 3.5, "chars": 5}]},
        format="json",
    )
    assert submitted.status_code == 202, submitted.content
    assert submitted.json()["state"] == "submitted" and submitted.json()["result"] is None
    again = api.post(f"/api/v1/attempts/{pk}/submit/", {"body": "pass"}, format="json")
    assert again.status_code == 400 and "submitted already" in again.json()["error"]["message"]
    assert client_for(people[1]).get(f"/api/v1/attempts/{pk}/").status_code == 404, "results are private"
    bad = api.post(f"/api/v1/releases/{held_release.name}/attempts/", {}, format="json").json()["id"]
    refused = api.post(f"/api/v1/attempts/{bad}/submit/", {"body": "x", "pastes": [{"at": -1}]}, format="json")
    assert refused.status_code == 400 and "pastes[0]" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("pastes", "keystrokes", "seconds", "marked"),
    [
        ([{"at": 4.0, "chars": 24}], 2, 30, True),  # the whole body in one paste, seconds after opening
        ([{"at": 400.0, "chars": 24}], 2, 500, False),  # pasted late: worked on elsewhere, maybe, but not fast
        ([{"at": 4.0, "chars": 5}], 40, 30, False),  # a small paste among typing
        (None, None, 10, True),  # a plain form (no events) submitted within the limit
        (None, None, 300, False),
    ],
)
def test_a_fast_paste_is_marked(held_release, people, pastes, keystrokes, seconds, marked):
    attempt = services.attempt_open(user=people[0], version=held_release, snippet_id=dampnest_item(held_release).pk)
    _moved_back(attempt, opened_at=timedelta(seconds=seconds))
    attempt = services.attempt_submit(
        attempt=attempt, user=people[0], body="st['g_prev'] = g.copy()", keystrokes=keystrokes, pastes=pastes
    )
    assert attempt.fast_paste is marked
    assert attempt.pastes == (pastes or [])


def test_a_maintainer_excludes_an_attempt_with_a_reason(held_release, people, maintainer):
    attempt = services.attempt_open(user=people[0], version=held_release, snippet_id=dampnest_item(held_release).pk)
    attempt = services.attempt_submit(attempt=attempt, user=people[0], body="st['g_prev'] = g.copy()")
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        services.attempt_exclude(attempt=attempt, actor=people[1], reason="looks pasted")
    with pytest.raises(services.AttemptRefused, match="say why"):
        services.attempt_exclude(attempt=attempt, actor=maintainer, reason="  ")
    services.attempt_exclude(attempt=attempt, actor=maintainer, reason="pasted from the paper's repository")
    attempt.refresh_from_db()
    assert attempt.excluded_by == maintainer and attempt.excluded_at <= timezone.now()


def test_the_humans_model_is_neither_run_nor_uploaded_to(held_release, maintainer):
    """Its rows are people's attempts only: a maintainer's run or upload in its name would put a model row called
    Humans on the leaderboard."""
    from evaluation import services as evaluation
    from evaluation.models import EvaluationRun

    humans = services.humans_model()
    with pytest.raises(evaluation.EvaluationError, match="people's attempts"):
        evaluation.run_start(model=humans, version=held_release, user=maintainer, dispatch=False)
    with pytest.raises(evaluation.EvaluationError, match="people's attempts"):
        evaluation.run_from_upload(model=humans, version=held_release, data=b"", user=maintainer)
    assert not EvaluationRun.objects.exists()
