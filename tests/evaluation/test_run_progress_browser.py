"""In Chromium: a run's page opened before its first item is scored keeps up with the run without a reload. Its
progress poll brings along when the run started and, as items get their outcome, its list of items; when the run ends
the page reloads itself, so the scores show and the Cancel button goes (walk 3: "Running 3 of 33 items done" beside
"Started —" and "No item has an outcome yet", then "Completed" with the Cancel button still there)."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import EvaluationRun
from evaluation.outcomes import Verdict
from tests.benchmarks.test_phone_width_browser import overflow, too_wide

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

WAIT_MS = 20_000  # the poll runs every 2 s; a loaded machine answers late


def _score(run, snippet, passed: bool) -> None:
    """One item scored as a worker records it: the model's answer, then its outcome."""
    generation = services.generation_record(
        run=run,
        snippet=snippet,
        sample=0,
        prompt="p",
        raw_answer=f"```python\nanswer_{snippet.pk} = 1\n```",
        prompt_tokens=10,
        completion_tokens=5,
    )
    verdict = Verdict("passed", "", "") if passed else Verdict("failed", "wrong_result", "assert")
    services.outcome_record(run=run, snippet=snippet, sample=0, verdict=verdict, generation=generation)


def test_the_run_page_shows_the_start_the_items_and_the_end_as_they_happen(browser_page, live_server, release, author):
    page, base = browser_page, live_server.url
    model = services.model_register(
        name="keyed", display_name="Keyed model", litellm_model="openai/gpt-4o-mini", api_key="sk-mine", owner=author
    )
    run = services.run_start(model=model, version=release, user=author, dispatch=False)
    snippets = list(Snippet.objects.filter(task__versions=release).order_by("pk"))
    signed_in = Client()
    signed_in.force_login(author)
    page.context.add_cookies(
        [
            {
                "name": django_settings.SESSION_COOKIE_NAME,
                "url": base,
                "value": signed_in.cookies[django_settings.SESSION_COOKIE_NAME].value,
            }
        ]
    )
    page.set_viewport_size({"width": 1366, "height": 900})
    page.goto(f"{base}/runs/{run.pk}/")
    assert page.locator("#run-started").inner_text() == "—"
    assert "No item has an outcome yet" in page.locator("#run-items").inner_text()
    assert page.get_by_role("button", name="Cancel run").is_visible()

    # The run starts (as run_dispatch marks it): the page says when, with no reload.
    started = timezone.now()
    EvaluationRun.objects.filter(pk=run.pk).update(status="running", started_at=started, last_progress_at=started)
    page.wait_for_function("document.querySelector('#run-started').textContent.trim() !== '—'", timeout=WAIT_MS)
    assert page.locator("#run-started").inner_text() == timezone.localtime(started).strftime("%Y-%m-%d %H:%M")

    # Two items scored: the progress line and the list of items say the same.
    _score(run, snippets[0], True)
    _score(run, snippets[1], False)
    page.wait_for_selector("#run-items details.item >> nth=1", timeout=WAIT_MS)
    assert page.locator("#run-items details.item").count() == 2
    assert "No item has an outcome yet" not in page.locator("#run-items").inner_text()
    assert f"2 of {len(snippets)} items done" in page.locator("#run-progress").inner_text()
    assert page.get_by_role("button", name="Cancel run").is_visible()
    # An item opened stays open while nothing more is scored (the list is swapped only when it grows).
    page.locator("#run-items details.item summary").first.click()
    page.wait_for_timeout(4500)
    assert page.locator("#run-items details.item[open]").count() == 1

    # The rest scored, the run finishes: the page reloads itself with the scores, and no Cancel button.
    for snippet in snippets[2:]:
        _score(run, snippet, True)
    assert services.run_maybe_finish(run=run)
    page.get_by_role("heading", name="Scores").wait_for(timeout=WAIT_MS)
    assert page.get_by_role("button", name="Cancel run").count() == 0
    assert page.locator("#run-finished").inner_text() != "—"
    assert page.locator("#run-items details.item").count() == min(len(snippets), 100)
    assert f"{len(snippets)} of {len(snippets)} items done" in page.locator("#run-progress").inner_text()
    assert overflow(page) <= 0, too_wide(page)
