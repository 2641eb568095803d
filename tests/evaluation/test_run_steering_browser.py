"""In Chromium at a laptop's 1366 px and a phone's 390 px: a run's owner reaches their run from My runs, cancels it
from its page, sees why a paused run stopped and resumes it there; My models lists their model with its key state;
nothing overflows the screen."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.test import Client

from benchmarks.services.psets import pset_import
from evaluation import services
from evaluation.models import EvaluationRun
from tests.benchmarks.test_phone_width_browser import overflow, too_wide
from tests.conftest import DEMO_PSET, embedded_worker

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)


@pytest.mark.parametrize("width", [1366, 390])
def test_an_owner_cancels_sees_the_pause_and_resumes_from_the_run_page(
    browser_page, live_server, media_root, author, tmp_path, width
):
    # The filesystem broker of a worker of this test's own, as `make run` has: Resume's item tasks wait in the llm
    # queue, which this worker does not take (the model is never called here).
    with embedded_worker(tmp_path, queues="sandbox", env={}):
        _steer(browser_page, live_server.url, author, width)


def _steer(page, base, author, width):
    version = pset_import(root=DEMO_PSET, version_name="1.0.0", publish=True).version
    model = services.model_register(
        name="keyed", display_name="Keyed model", litellm_model="openai/gpt-4o-mini", api_key="sk-mine", owner=author
    )
    run = services.run_start(model=model, version=version, user=author, dispatch=False)
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
    page.set_viewport_size({"width": width, "height": 900})

    def nav_link(name: str):
        menu = page.locator("header.site").get_by_text("Menu", exact=True)
        if menu.is_visible():  # the navigation folds on a phone
            menu.click()
        return page.get_by_role("navigation", name="Main").get_by_role("link", name=name)

    page.goto(f"{base}/")
    nav_link("My models").click()
    page.wait_for_url(f"{base}/models/")
    row = page.locator("tr", has_text="Keyed model")
    assert "stored" in row.inner_text() and overflow(page) <= 0, too_wide(page)
    nav_link("My runs").click()
    page.wait_for_url(f"{base}/runs/")
    assert overflow(page) <= 0, too_wide(page)
    page.get_by_role("link", name=f"#{run.pk}", exact=True).click()
    page.wait_for_url(f"{base}/runs/{run.pk}/")

    page.get_by_role("button", name="Cancel run").click()
    page.wait_for_selector("text=cancelled: items already scored stay")
    assert EvaluationRun.objects.get(pk=run.pk).status == "cancelled"
    assert page.get_by_role("button", name="Resume run").is_visible()
    assert overflow(page) <= 0, too_wide(page)

    # As the worker leaves a run that paused itself (the pause itself: test_run_steering, with a real worker).
    EvaluationRun.objects.filter(pk=run.pk).update(
        pause_reason="API calls are failing: openai/gpt-4o-mini: AuthenticationError: 401 incorrect API key provided"
    )
    page.reload()
    banner = page.locator("[data-run-paused]")
    assert banner.is_visible() and "401 incorrect API key" in banner.inner_text()
    assert "Resume run" in banner.inner_text()
    assert overflow(page) <= 0, f"the paused run page overflows at {width} px: {too_wide(page)}"
    page.get_by_role("button", name="Resume run").click()
    page.wait_for_selector("text=its items without a result are queued again")
    resumed = EvaluationRun.objects.get(pk=run.pk)
    assert resumed.status == "running" and resumed.pause_reason == ""
    assert page.locator("[data-run-paused]").count() == 0
    assert page.get_by_role("button", name="Cancel run").is_visible()


@pytest.mark.parametrize("width", [1366, 390])
def test_a_newcomer_goes_from_the_home_page_to_an_upload_as_the_guide_says(
    browser_page, live_server, media_root, author, tmp_path, width
):
    """Home page, "Evaluate your model", a model of kind uploaded, its Upload generations form with the guide's
    format: code bodies written without indentation are taken silently, an answer dedented below its snippet is
    taken with the guide's warning. (That such an upload scores 100%: test_guide_examples, with a real worker.)"""
    import json
    import textwrap

    from benchmarks.paper2code import code_indent
    from benchmarks.selectors import version_snippets

    version = pset_import(root=DEMO_PSET, version_name="demo-1.0.0", publish=True).version
    snippets = list(version_snippets(version=version))
    indented = next(s for s in snippets if code_indent(s.reference_code))
    lines = [{"id": str(s.pk), "sample": 0, "code": textwrap.dedent(s.reference_code)} for s in snippets]
    number = snippets.index(indented) + 1
    lines[number - 1] = {
        "id": str(indented.pk),
        "sample": 0,
        "answer": f"```python\n{textwrap.dedent(indented.reference_code)}```",
    }
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with embedded_worker(tmp_path, queues="llm", env={}):  # the broker of make run; nothing here is scored
        page, base = browser_page, live_server.url
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
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{base}/")
        page.get_by_role("link", name="Evaluate your model").click()
        page.wait_for_url(f"{base}/models/new/")
        page.get_by_label("Name", exact=True).fill("my-model")
        page.get_by_label("Display name").fill("My model")
        page.locator("input[name=kind][value=uploaded]").check()
        page.get_by_role("button", name="Register").click()
        page.wait_for_url(f"{base}/models/my-model/")
        assert overflow(page) <= 0, too_wide(page)
        page.locator("form[action='/models/my-model/uploads/'] input[name=file]").set_input_files(str(answers))
        page.get_by_role("button", name="Upload and score").click()
        page.wait_for_url(f"{base}/runs/*/")
        messages = page.locator("ul.messages").inner_text()
        assert f"{len(snippets)} answer(s) stored as run" in messages
        assert f"line {number}: item {indented.pk}: the answer's code is indented less than the snippet" in messages
        assert messages.count("indented less than the snippet") == 1
        assert overflow(page) <= 0, f"the run page overflows at {width} px: {too_wide(page)}"
    run = EvaluationRun.objects.get(model__name="my-model")
    assert run.generations.get(snippet=indented).extracted_code == textwrap.dedent(indented.reference_code)
    other = (
        run.generations.exclude(snippet=indented)
        .filter(snippet__in=[s for s in snippets if code_indent(s.reference_code)])
        .first()
    )
    assert other.extracted_code == other.snippet.reference_code, "a code body is re-indented to its snippet's"
