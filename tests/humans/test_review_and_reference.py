"""What a newcomer's walk found, each shown failing before its fix: a maintainer reviews a flagged attempt (the
evaluation's review, with a reason) and clearing counts it as passed; the paper page keeps an item's reference from
a person who may still attempt it, and showing it withdraws the offer (pages and API); the Humans row gives no
interval over too few items; abandoning asks first; the person's verdict is on the paper page beside the item; the
diff names the person's answer. Verdicts are recorded through evaluation's services (the sandbox runs are the
browser tests' and test_scoring's)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from benchmarks.models import Snippet
from evaluation import services as evaluation
from evaluation.models import EvaluationRun, Generation, Outcome
from evaluation.outcomes import Verdict, outcome_flag
from humans import selectors, services
from humans.models import Attempt, ReferenceSeen
from humans.prompts import attempt_prompt
from submissions.models import Submission
from tests.conftest import client_for, page_text
from tests.humans.conftest import dampnest_item

pytestmark = pytest.mark.django_db

HONEST = 'st["g_prev"] = g.copy()'
WRONG = 'st["g_prev"] = g * 0.5'
FINDING = {"kind": "hidden", "line": 1, "detail": "opens 'optimizer_ref.py' (hidden file)", "source": "runtime"}
# A reference line of the dampnest paper's annotated code that its paper text does not hold.
REFERENCE_LINE = "new_theta = theta - self.lr * (u + self.weight_decay * theta)"


def submitted(version, person, item, body: str = HONEST) -> Attempt:
    attempt = services.attempt_open(user=person, version=version, snippet_id=item.pk)
    return services.attempt_submit(attempt=attempt, user=person, body=body, keystrokes=len(body), pastes=[])


def scored(attempt: Attempt, status: str, *, flagged: bool = False) -> Outcome:
    """Record the attempt's verdict as the pipeline's item task does once the sandbox has run its test."""
    run = attempt.run
    EvaluationRun.objects.filter(pk=run.pk).update(status=EvaluationRun.Status.RUNNING)
    verdict = Verdict(status, "" if status == "passed" else "wrong_result", "")
    if flagged:
        verdict = outcome_flag(verdict, [FINDING])
    outcome, _ = evaluation.outcome_record(
        run=run, snippet=attempt.snippet, sample=0, verdict=verdict, generation=Generation.objects.get(run=run)
    )
    assert evaluation.run_maybe_finish(run=run)
    return outcome


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def paper_page(client: Client, version, slug: str = "dampnest") -> str:
    response = client.get(reverse("paper-detail", args=[version.name, slug]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_maintainer_reviews_a_flagged_attempt_with_a_reason(held_release, people, maintainer):
    item = dampnest_item(held_release)
    first, second = submitted(held_release, people[0], item), submitted(held_release, people[1], item)
    for attempt in (first, second):
        scored(attempt, "passed", flagged=True)  # the test passed; the audit flagged what the answer did
    row = selectors.humans_row(version=held_release, iterations=0)
    assert (row.pass_rate, row.counts["flagged"]) == (0.0, 2), "flagged: not passed until reviewed"

    # The attempt page gives maintainers the evaluation's review form with the evidence; its person sees neither.
    url = reverse("attempt-flag-review", args=[first.pk])
    assert url in logged_in(maintainer).get(reverse("attempt-detail", args=[first.pk])).content.decode()
    mine = logged_in(people[0]).get(reverse("attempt-detail", args=[first.pk])).content.decode()
    assert url not in mine and "hidden file" not in mine
    humans_page = logged_in(maintainer).get(reverse("release-humans", args=[held_release.name])).content.decode()
    assert f"{reverse('attempt-detail', args=[first.pk])}#flags" in humans_page

    # Only maintainers, and only with a reason.
    assert logged_in(people[1]).post(url, {"decision": "cleared", "reason": "fine"}).status_code == 403
    refused = logged_in(maintainer).post(url, {"decision": "cleared", "reason": "  "}, follow=True)
    assert "say why the flag is confirmed or cleared" in refused.content.decode()
    assert selectors.attempt_outcome(attempt=first).status == "flagged"

    logged_in(maintainer).post(url, {"decision": "cleared", "reason": "reads its own file; the name only matches"})
    outcome = selectors.attempt_outcome(attempt=first)
    assert (outcome.status, outcome.review, outcome.reviewed_by) == ("passed", "cleared", maintainer)
    assert outcome.review_reason == "reads its own file; the name only matches"
    services.attempt_flag_review(attempt=second, actor=maintainer, decision="confirmed", reason="copies the reference")
    assert (selectors.attempt_outcome(attempt=second).status, selectors.attempt_outcome(attempt=second).category) == (
        "failed",
        "tampering",
    )
    row = selectors.humans_row(version=held_release, iterations=0)
    assert (row.per_item[item.pk].people, row.per_item[item.pk].passed, row.counts["flagged"]) == (2, 1, 0)
    assert row.pass_rate == 50.0, "the cleared one counts as passed, the confirmed one as failed"
    # Its person reads the decision and the reason with their verdict.
    text = page_text(logged_in(people[0]).get(reverse("attempt-detail", args=[first.pk])).content.decode())
    assert "Cleared: the measured verdict stands (reads its own file; the name only matches)" in text
    result = client_for(people[0]).get(f"/api/v1/attempts/{first.pk}/").json()["result"]
    assert (result["status"], result["review"], result["review_reason"]) == (
        "passed",
        "cleared",
        "reads its own file; the name only matches",
    )
    with pytest.raises(evaluation.EvaluationError, match="is not flagged"):
        services.attempt_flag_review(attempt=first, actor=maintainer, decision="confirmed", reason="changed my mind")


def test_the_reference_is_withheld_beside_the_offer_until_shown(held_release, people, public_items):
    person, other = people[0], people[1]
    item = dampnest_item(held_release)
    task = item.task
    # A surviving mutant is a reference line before and after a change.
    survivor = '1: st["g_prev"] = g.copy() -> st["g_prev"] = g'
    Snippet.objects.filter(pk=item.pk).update(mutation={"generated": 2, "killed": 1, "survivors": [survivor]})
    # A person who may attempt the paper's items: offered, and no reference code on the page.
    html = paper_page(logged_in(person), held_release)
    assert "Try it yourself" in html
    text = page_text(html)
    assert REFERENCE_LINE not in text and "Annotated code optimizer.py" not in text and survivor not in text
    assert escape(survivor) not in html, "nor in a title"
    assert selectors.REFERENCE_RULE in text and "1 surviving mutant, not listed" in text
    # A visitor is offered no attempt (asked to log in) and reads the public reference as before.
    text = page_text(paper_page(Client(), held_release))
    assert REFERENCE_LINE in text and survivor in text

    # Not while an attempt at one of the paper's items is open: its answer would be beside it.
    live = services.attempt_open(user=other, version=held_release, snippet_id=item.pk)
    show = reverse("reference-show", args=[held_release.name, "dampnest"])
    refused = logged_in(other).post(show, follow=True)
    assert f"your attempt {live.pk} at item {item.pk} of this paper is open" in refused.content.decode()
    assert REFERENCE_LINE not in page_text(refused.content.decode())

    # Shown on request: the offer of the paper's items is withdrawn, said on the page, by id and by the random pick.
    shown = logged_in(person).post(show, follow=True).content.decode()
    assert REFERENCE_LINE in page_text(shown) and "Try it yourself" not in shown
    assert ReferenceSeen.objects.filter(user=person, task=task).exists()
    with pytest.raises(services.AttemptRefused, match=f"item {item.pk} is no longer offered to you: you chose to see"):
        services.attempt_open(user=person, version=held_release, snippet_id=item.pk)
    api = client_for(person)
    response = api.post(f"/api/v1/releases/{held_release.name}/attempts/", {"item": item.pk}, format="json")
    assert response.status_code == 400 and "chose to see the reference code" in response.json()["error"]["message"]
    picked = []
    while (record := api.post(f"/api/v1/releases/{held_release.name}/attempts/", {}, format="json")).status_code == 201:
        picked.append(record.json()["item"])
        assert api.post(f"/api/v1/attempts/{record.json()['id']}/abandon/").json()["state"] == "abandoned"
    assert picked and not {s.pk for s in public_items if s.task_id == task.pk} & set(picked), "none of dampnest's"
    assert "no public item of release 1.0.0 is left" in record.json()["error"]["message"]

    # Once none of a paper's items is left to a person (attempted, or its reference seen), nothing is withheld.
    third = people[2]
    services.attempt_abandon(
        attempt=services.attempt_open(user=third, version=held_release, snippet_id=item.pk), user=third
    )
    assert not selectors.task_items_open_to(task=task, user=third).exists(), "its masked file showed the others"
    assert REFERENCE_LINE in page_text(paper_page(logged_in(third), held_release))
    assert not ReferenceSeen.objects.filter(user=third).exists()


def test_an_attempt_withdraws_the_items_whose_reference_it_shows(held_release, people):
    """An attempt's masked file is the whole file less its own snippet (as a model's prompt is): it holds the
    reference of the file's other items, except those nested in it, which its result shows once submitted."""
    person, other = people[0], people[1]
    outer = dampnest_item(held_release, "dampnest update rule")
    nested = dampnest_item(held_release, "remember gradient for next step")
    outside = dampnest_item(held_release, "initialise optimiser state on first step")
    assert outer.start_line < nested.start_line and nested.end_line < outer.end_line
    assert outside.end_line < outer.start_line
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=outer.pk)
    masked = attempt_prompt(attempt=attempt).masked
    assert outside.reference_code.strip().splitlines()[-1].strip() in masked, "the premise: it shows the reference"
    assert nested.reference_code.strip() not in masked
    offerable = set(selectors.items_offerable(version=held_release, user=person).values_list("pk", flat=True))
    assert outside.pk not in offerable and nested.pk in offerable
    page = paper_page(logged_in(person), held_release)
    note = page.split(f'id="snippet-{outside.pk}"')[1].split("</li>")[0]
    assert f"Not offered to you: the masked file of your attempt {attempt.pk}" in note, "the page says why"
    assert "withdraws the other items of its file" in page, "the offer says what opening does"
    with pytest.raises(
        services.AttemptRefused,
        match=f"item {outside.pk} is no longer offered to you: the masked file of your attempt {attempt.pk}",
    ):
        services.attempt_open(user=person, version=held_release, snippet_id=outside.pk)
    services.attempt_submit(attempt=attempt, user=person, body="pass")
    response = client_for(person).post(
        f"/api/v1/releases/{held_release.name}/attempts/", {"item": nested.pk}, format="json"
    )
    assert response.status_code == 400, response.content
    assert (
        f"the result of your attempt {attempt.pk} at item {outer.pk}, which encloses it"
        in response.json()["error"]["message"]
    )
    # Another person's attempts change nothing of theirs.
    assert services.attempt_open(user=other, version=held_release, snippet_id=outside.pk).state == "open"


def test_too_few_items_give_no_interval(held_release, people, settings):
    scored(submitted(held_release, people[0], dampnest_item(held_release)), "passed")
    row = selectors.humans_row(version=held_release)
    assert (row.items, row.pass_rate) == (1, 100.0)
    assert row.pass_ci is None and row.scaled_ci is None, "one item: no [100, 100]"
    text = page_text(Client().get(reverse("release-humans", args=[held_release.name])).content.decode())
    assert "no interval (1 item)" in text and "[100.0, 100.0]" not in text
    assert "under 10 items none is given" in text
    api = client_for(None).get(f"/api/v1/releases/{held_release.name}/humans/").json()
    assert (api["pass_rate_ci"], api["scaled_pass_rate_ci"], api["interval_min_items"]) == (None, None, 10)
    settings.HUMAN_INTERVAL_MIN_ITEMS = 1
    row = selectors.humans_row(version=held_release)
    assert (row.pass_ci.low, row.pass_ci.high) == (100.0, 100.0), "the setting moves the minimum"


def test_abandoning_asks_for_confirmation_without_javascript(held_release, people):
    person = people[0]
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=dampnest_item(held_release).pk)
    client = logged_in(person)
    page = client.get(reverse("attempt-detail", args=[attempt.pk])).content.decode()
    assert '<details class="confirm-abandon">' in page and "Abandoning cannot be undone" in page
    bare = client.post(reverse("attempt-abandon", args=[attempt.pk]), follow=True)
    assert "abandoning cannot be undone: confirm it" in bare.content.decode()
    attempt.refresh_from_db()
    assert attempt.state == "open", "a post without the confirmation abandons nothing"
    client.post(reverse("attempt-abandon", args=[attempt.pk]), {"confirm": "abandon"})
    attempt.refresh_from_db()
    assert attempt.state == "abandoned"


def test_the_paper_page_shows_my_verdict_beside_the_item(held_release, people):
    person = people[0]
    item = dampnest_item(held_release)
    attempt = submitted(held_release, person, item)

    def beside_item(user) -> str:
        html = paper_page(logged_in(user), held_release)
        start = html.index(f'id="snippet-{item.pk}"')
        return page_text(html[start : html.index("</li>", start)])

    assert "Your attempt: being scored" in beside_item(person)
    scored(attempt, "passed")
    assert "Your attempt: passed" in beside_item(person)
    assert reverse("attempt-detail", args=[attempt.pk]) in paper_page(logged_in(person), held_release)
    assert "Your attempt" not in beside_item(people[1]), "a person's result is theirs"
    other = submitted(held_release, people[1], item, WRONG)
    scored(other, "failed")
    assert "Your attempt: not passed" in beside_item(people[1])


def test_the_diff_names_the_persons_answer(held_release, people):
    attempt = submitted(held_release, people[0], dampnest_item(held_release), WRONG)
    scored(attempt, "failed")
    diff = selectors.attempt_result(attempt=attempt).diff
    assert diff.startswith("--- reference\n+++ person's answer\n") and "model's answer" not in diff
    record = client_for(people[0]).get(f"/api/v1/attempts/{attempt.pk}/").json()
    assert "+++ person's answer" in record["result"]["reference_diff"]
    text = page_text(logged_in(people[0]).get(reverse("attempt-detail", args=[attempt.pk])).content.decode())
    assert "+++ person's answer" in text and "model's" not in text


def test_opening_a_nested_item_while_attempting_its_encloser_is_refused(held_release, people):
    """Attack review: a nested item's masked file holds the enclosing item's reference but for its own lines, so
    opening it while attempting the encloser would hand the person the encloser's answer."""
    person = people[0]
    outer = dampnest_item(held_release, "dampnest update rule")
    nested = dampnest_item(held_release, "remember gradient for next step")
    attempt = services.attempt_open(user=person, version=held_release, snippet_id=outer.pk)
    reference = [
        line.strip() for line in outer.reference_code.splitlines() if line.strip() and "paper2code" not in line
    ]
    shown = attempt_prompt(attempt=services.attempt_open(user=people[1], version=held_release, snippet_id=nested.pk))
    assert sum(line in shown.masked for line in reference) > len(reference) // 2, "the premise: it shows the encloser"
    with pytest.raises(services.AttemptRefused, match=f"shows the reference of item {outer.pk}, which you are"):
        services.attempt_open(user=person, version=held_release, snippet_id=nested.pk)
    assert not Attempt.objects.filter(user=person, snippet=nested).exists()
    services.attempt_abandon(attempt=attempt, user=person)
    assert services.attempt_open(user=person, version=held_release, snippet_id=nested.pk).state == "open"


def test_a_body_faster_than_typing_is_a_fast_paste_whatever_the_client_reports():
    """Attack review: the client's keystroke count is its own word; the server's clock is not."""
    body = "x = compute(a, b)\n" * 40  # 720 characters, with 900 keystrokes and no paste claimed
    assert services.fast_paste(body=body, pastes=[], keystrokes=900, active_seconds=0.5)
    assert services.fast_paste(body=body, pastes=[], keystrokes=900, active_seconds=30.0)
    assert not services.fast_paste(body=body, pastes=[], keystrokes=900, active_seconds=300.0)


def test_an_attempts_run_is_private_in_the_manifest_api_too(held_release, people, maintainer):
    """Attack review: the run of a person's attempt is nobody's run page; its manifest was readable by anyone."""
    person, other = people[0], people[1]
    attempt = submitted(held_release, person, dampnest_item(held_release))
    url = f"/api/v1/runs/{attempt.run.pk}/manifest/"
    assert Client().get(url).status_code == 404
    assert client_for(other).get(url).status_code == 404
    for viewer in (person, maintainer):  # as its run's own API answers them (the attempt's page is theirs)
        assert (
            client_for(viewer).get(url).status_code
            == client_for(viewer).get(f"/api/v1/runs/{attempt.run.pk}/").status_code
        )


def test_the_author_of_a_task_is_not_offered_its_items(held_release, people):
    """attack7: the paper page shows a task's author their own reference (they wrote it), so its items are seen: no
    attempt by id, none by the random pick, and the page offers none, or the person who wrote the answers would add
    passes to the Humans row."""
    author, other = people[0], people[1]
    item = dampnest_item(held_release)
    Submission.objects.create(author=author, task=item.task, state=Submission.State.ACCEPTED, title="DampNest")
    mine = set(Snippet.objects.filter(task=item.task).values_list("pk", flat=True))
    assert item.pk in set(selectors.task_items_open_to(task=item.task, user=other).values_list("pk", flat=True))
    assert not selectors.task_items_open_to(task=item.task, user=author).exists()
    assert not mine & set(selectors.items_offerable(version=held_release, user=author).values_list("pk", flat=True))
    with pytest.raises(services.AttemptRefused, match=f"item {item.pk} is no longer offered to you: you wrote"):
        services.attempt_open(user=author, version=held_release, snippet_id=item.pk)
    html = paper_page(logged_in(author), held_release)
    assert REFERENCE_LINE in page_text(html) and "Try it yourself" not in html
