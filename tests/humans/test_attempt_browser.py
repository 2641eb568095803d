"""In a real browser (Debian's Chromium driven by Playwright), at desktop and phone width: a person opens an item
from its paper page, pauses, resumes and submits in the Ace editor; the clock leaves the pause out; the answer is
scored by the pipeline in bwrap and the verdict, tests and reference diff shown; a second attempt is refused and a
held-out item is never offered (by id or by the random pick); the Humans row, the difficulty table and the
leaderboard show the attempt. A second test submits with JavaScript off: the plain form still works. Screenshots go
to test-artifacts/humans/."""

from __future__ import annotations

import json
import time

import pytest
from playwright.sync_api import expect

from benchmarks import visibility
from evaluation import services
from humans.models import Attempt
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import REPO
from tests.evaluation.test_upload_browser import sign_in
from tests.humans.conftest import HELD_OUT_PAPER, dampnest_item

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)
ARTIFACTS = REPO / "test-artifacts" / "humans"
BODY = 'st["g_prev"] = g.copy()'
PAUSE_SECONDS = 3.0


def model_scored(version, owner) -> None:
    """An uploaded model's row on the release (every public item answered with its reference), scored by the
    pipeline: the difficulty tables list the items models have answers for, with the people's rate beside."""
    answers = "".join(
        json.dumps({"id": str(s.pk), "sample": 0, "code": s.reference_code}) + "\n"
        for s in visibility.items_public(version=version)
    )
    model = services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=owner)
    services.run_from_upload(model=model, version=version, data=answers.encode(), user=owner)


def shot(page, name: str, width: int) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    assert overflow(page) <= 0, too_wide(page)


def post_open(page, item: int) -> None:
    """Post the Humans page's own form (its CSRF token) with an item id, as a hand-made request would."""
    page.evaluate(
        """pk => { const f = document.querySelector('form.try-random'); const i = document.createElement('input');
        i.type = 'hidden'; i.name = 'item'; i.value = String(pk); f.appendChild(i); f.submit(); }""",
        item,
    )
    page.wait_for_load_state()


@pytest.mark.parametrize("width", [1366, 390])
def test_a_person_attempts_an_item_in_the_browser(
    browser_page, live_server, held_release, held_out_items, people, sandbox, scoring_inline, width
):
    page, base, person = browser_page, live_server.url, people[0]
    page.set_viewport_size({"width": width, "height": 900})
    item = dampnest_item(held_release)
    model_scored(held_release, people[2])
    sign_in(page, base, person)

    page.goto(f"{base}/versions/{held_release.name}/papers/dampnest/")
    # Offered its items, the person is not shown their reference beside the offer (the rule is on the page).
    expect(page.get_by_test_id("reference-withheld")).to_be_visible()
    assert "Annotated code" not in page.inner_text("main")
    shot(page, "paper", width)
    started = time.monotonic()
    page.locator(f"#snippet-{item.pk} form.try-it").get_by_role("button", name="Try it yourself").click()
    page.wait_for_url(f"{base}/attempts/*/")
    attempt = Attempt.objects.get(user=person)
    editor = page.get_by_test_id("code-editor")
    expect(editor).to_be_visible()
    expect(page.locator(".ace_content")).to_be_visible()
    to_editor = time.monotonic() - started
    expect(page.locator("figure figcaption")).to_contain_text("with the snippet masked")
    assert item.reference_code.strip() not in page.content(), "no reference on the attempt page"
    shot(page, "open", width)

    time.sleep(1.2)  # the clock ticks in the page
    assert page.locator("#attempt-clock").inner_text() != "0 min 00 s"
    page.get_by_role("button", name="Pause").click()
    expect(page.get_by_test_id("paused-note")).to_be_visible()
    expect(page.locator("figure")).to_have_count(0)  # the item is hidden while paused
    shot(page, "paused", width)
    time.sleep(PAUSE_SECONDS)
    page.get_by_role("button", name="Resume").click()
    expect(page.get_by_test_id("attempt-state")).to_have_text("Open")

    page.locator(".ace_content").click()
    page.keyboard.type(BODY)
    submitted = time.monotonic()
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(f"{base}/attempts/{attempt.pk}/")
    expect(page.get_by_test_id("attempt-verdict")).to_have_text("passed", timeout=120_000)
    to_verdict = time.monotonic() - submitted
    # The platform's overhead on a person: opening to a ready editor, and submitting to the verdict on screen.
    print(f"overhead at {width} px: {to_editor:.2f} s to the editor, {to_verdict:.2f} s to the verdict")
    assert to_editor + to_verdict < 60
    expect(page.locator("table.item-tests")).to_contain_text("passed")
    shot(page, "result", width)

    attempt.refresh_from_db()
    wall = (attempt.ended_at - attempt.opened_at).total_seconds()
    assert attempt.body.strip() == BODY, attempt.body
    assert attempt.paused_seconds >= PAUSE_SECONDS
    assert attempt.active_seconds == pytest.approx(wall - attempt.paused_seconds, abs=0.01)
    assert attempt.keystrokes >= len(BODY) and attempt.pastes == [] and not attempt.fast_paste

    # One attempt per item: the paper page no longer offers it, and a hand-made request is refused.
    page.goto(f"{base}/versions/{held_release.name}/papers/dampnest/")
    expect(page.locator(f"#snippet-{item.pk} form.try-it")).to_have_count(0)
    # Their own verdict beside the item. The attempt's masked file showed the reference of the file's other items:
    # none is offered any more, so the paper's reference code is no longer withheld.
    expect(page.locator(f"#snippet-{item.pk}").get_by_test_id("my-attempt-verdict").first).to_have_text("passed")
    expect(page.locator("form.try-it")).to_have_count(0)
    expect(page.get_by_test_id("reference-withheld")).to_have_count(0)
    expect(page.locator("details.source summary", has_text="Annotated code")).to_have_count(1)
    shot(page, "paper-after", width)
    page.goto(f"{base}/versions/{held_release.name}/humans/")
    post_open(page, item.pk)
    expect(page.locator("ul.messages")).to_contain_text("one attempt per item per person")
    # A held-out item by id: refused as an item that does not exist; its paper page is not there for a person.
    post_open(page, held_out_items[0].pk)
    expect(page.locator("ul.messages")).to_contain_text(f"has no public item {held_out_items[0].pk}")
    assert page.goto(f"{base}/versions/{held_release.name}/papers/{HELD_OUT_PAPER}/").status == 404
    # The random pick offers public items only.
    page.goto(f"{base}/versions/{held_release.name}/humans/")
    page.get_by_role("button", name="Try a random item").click()
    page.wait_for_url(f"{base}/attempts/*/")
    picked = Attempt.objects.exclude(pk=attempt.pk).get(user=person)
    assert picked.snippet.task.paper.slug != HELD_OUT_PAPER
    # Abandoning asks first: the warning, then the button that does it.
    page.get_by_text("Abandon…").click()
    expect(page.get_by_test_id("abandon-warning")).to_be_visible()
    shot(page, "abandon-confirm", width)
    expect(page.get_by_test_id("attempt-state")).to_have_text("Open")
    page.get_by_role("button", name="Yes, abandon this item").click()
    expect(page.get_by_test_id("attempt-state")).to_have_text("Abandoned")

    page.goto(f"{base}/versions/{held_release.name}/humans/")
    expect(page.get_by_test_id("humans-people")).to_have_text("1")
    expect(page.get_by_test_id("humans-attempts")).to_have_text("1")
    expect(page.get_by_test_id("humans-pass")).to_contain_text("100.0%")
    expect(page.get_by_test_id("humans-pass")).to_contain_text("no interval (1 item)")  # not [100.0, 100.0]
    shot(page, "humans", width)
    page.goto(f"{base}/versions/{held_release.name}/leaderboard/")
    expect(page.locator("#humans-row")).to_contain_text("self-reported")
    expect(page.get_by_test_id("humans-scaled")).to_contain_text("100.0%")
    shot(page, "leaderboard", width)
    page.goto(f"{base}/versions/{held_release.name}/difficulty/")
    row = page.locator("#difficulty-table tr", has_text=item.name)
    expect(row.get_by_test_id("human-rate")).to_have_text("1 of 1 (100%) thin")
    others = page.get_by_test_id("human-rate").all_inner_texts()
    assert others.count("—") == len(others) - 1, "no one else attempted an item"
    shot(page, "difficulty", width)


def test_the_plain_form_works_without_javascript(
    browser_page, live_server, held_release, people, sandbox, scoring_inline
):
    context = browser_page.context.browser.new_context(
        java_script_enabled=False, viewport={"width": 1366, "height": 900}
    )
    page, base, person = context.new_page(), live_server.url, people[1]
    sign_in(page, base, person)
    item = dampnest_item(held_release)
    page.goto(f"{base}/versions/{held_release.name}/papers/dampnest/")
    page.locator(f"#snippet-{item.pk} form.try-it").get_by_role("button", name="Try it yourself").click()
    attempt = Attempt.objects.get(user=person)
    page.get_by_label("Your snippet body (Python)").fill("        " + BODY)
    shot(page, "nojs-open", 1366)
    # Scored inline in the request: the first item of a session builds the task's environment first (minutes).
    page.get_by_role("button", name="Submit").click(timeout=600_000)
    page.goto(f"{base}/attempts/{attempt.pk}/")  # no polling without JavaScript: a reload shows the verdict
    expect(page.get_by_test_id("attempt-verdict")).to_have_text("passed")
    attempt.refresh_from_db()
    # No events from a plain form, and submitted within seconds: marked, as a paste would be.
    assert attempt.keystrokes is None and attempt.fast_paste
    expect(page.get_by_test_id("fast-paste")).to_be_visible()
    shot(page, "nojs-result", 1366)
    # Abandoning asks first without JavaScript too: the disclosure is HTML's own.
    page.goto(f"{base}/versions/{held_release.name}/humans/")
    page.get_by_role("button", name="Try a random item").click()
    page.get_by_text("Abandon…").click()
    expect(page.get_by_test_id("abandon-warning")).to_be_visible()
    expect(page.get_by_test_id("attempt-state")).to_have_text("Open")
    page.get_by_role("button", name="Yes, abandon this item").click()
    expect(page.get_by_test_id("attempt-state")).to_have_text("Abandoned")
    context.close()
