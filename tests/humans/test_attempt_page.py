"""The attempt page, as the Django test client sees it (issue 37's walk): an empty answer is refused beside the
field with the body kept, and once the verdict is in the page's badge says it instead of "Submitted" (the heading's,
the polled result's out-of-band copy, and the person's list on the Humans page)."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from evaluation import services as evaluation
from evaluation.models import Generation
from evaluation.outcomes import Verdict
from humans import services
from humans.models import Attempt
from tests.conftest import page_text
from tests.humans.conftest import dampnest_item

pytestmark = pytest.mark.django_db


def _badge(html: str) -> str:
    start = html.index('data-testid="attempt-state"')
    return page_text(html[html.index(">", start) + 1 : html.index("</span>", start)])


def test_an_empty_answer_is_refused_beside_the_field_and_nothing_is_lost(client, held_release, people):
    person = people[0]
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=dampnest_item(held_release).pk)
    client.force_login(person)
    url = reverse("attempt-detail", args=[attempt.pk])
    body = "   \n\t  \n"  # passes the browser's `required`, says nothing
    response = client.post(url, {"body": body, "keystrokes": "7", "pastes": ""})
    assert response.status_code == 400, "the form again, not a redirect that drops what was typed"
    html = response.content.decode()
    error = html[html.index('id="attempt-body_error"') :]
    error = error[error.index(">") + 1 : error.index("</p>")]
    assert error == services.EMPTY_BODY, "what is wrong, beside the field"
    assert 'aria-invalid="true"' in html and 'aria-describedby="attempt-body_error"' in html
    assert f">{body}</textarea>" in html, "the body as it was sent"
    attempt.refresh_from_db()
    assert attempt.state == Attempt.State.OPEN and attempt.run is None, "nothing submitted, the attempt still open"
    # A refusal that is not the form's (a paused attempt) is still the page's message after a redirect.
    services.attempt_pause(attempt=attempt, user=person)
    paused = client.post(url, {"body": "x = 1"}, follow=True)
    assert "resume it to submit" in paused.content.decode()
    # A page with nothing wrong shows no error.
    services.attempt_resume(attempt=Attempt.objects.get(pk=attempt.pk), user=person)
    fresh = client.get(url).content.decode()
    assert re.search(r'<p class="error"[^>]*id="attempt-body_error"[^>]*hidden></p>', fresh), "no error shown"


@pytest.mark.parametrize(
    ("verdict", "badge"),
    [(Verdict("passed", "", ""), "passed"), (Verdict("failed", "wrong_result", "assertion failed"), "not passed")],
)
def test_the_badge_says_the_verdict_once_it_is_in(client, held_release, people, verdict, badge):
    person = people[0]
    item = dampnest_item(held_release)
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=item.pk)
    attempt = services.attempt_submit(attempt=attempt, user=person, body="st['g_prev'] = g.copy()")
    client.force_login(person)
    url = reverse("attempt-detail", args=[attempt.pk])
    humans = reverse("release-humans", args=[held_release.name])
    assert _badge(client.get(url).content.decode()) == "being scored"
    # While scored the polled result carries no badge; the heading's says "being scored".
    assert (
        'id="attempt-state"'
        not in client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="attempt-result").content.decode()
    )

    evaluation.outcome_record(
        run=attempt.run, snippet=item, sample=0, verdict=verdict, generation=Generation.objects.get(run=attempt.run)
    )
    page = client.get(url).content.decode()
    assert _badge(page) == badge, "the heading's badge says the verdict, not Submitted"
    polled = client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="attempt-result").content.decode()
    assert 'hx-swap-oob="true"' in polled and _badge(polled) == badge, "the poll replaces the heading's badge"
    mine = client.get(humans).content.decode()
    listed = mine[mine.index('<ul class="attempts">') :]
    listed = page_text(listed[: listed.index("</ul>")])
    assert badge in listed and "submitted" not in listed, "the person's list says the verdict too"
