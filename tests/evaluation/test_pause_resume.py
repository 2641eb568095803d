"""A paused run that is resumed makes progress even when its endpoint still fails the same items: those items are
asked again, and failing again they end (failed, at an owner's endpoint) without pausing the run anew, so it
finishes. Real HTTP to the local OpenAI-compatible server, a real Celery worker, bwrap for the tests."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from benchmarks.models import Snippet
from evaluation import services
from evaluation.models import EvaluationRun, Outcome, RunScore
from evaluation.outcomes import OWNER_ENDPOINT_SAID
from evaluation.selectors.items import run_feed_order
from tests.agents.test_agent_errors import small_release  # noqa: F401 (a fixture)
from tests.conftest import polled, sandbox_backend_or_missing
from tests.evaluation.openai_server import Refused, openai_server

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

NAME = re.compile(r'# TODO: Implement block "([^"]+)"')


@pytest.mark.slow  # a real worker, two passes over three items, one judged on bwrap
def test_a_resumed_run_whose_own_endpoint_still_fails_the_same_items_ends_them_failed_and_finishes(
    small_release,  # noqa: F811 (a fixture)
    celery_worker_factory,
    sandbox_cache,
    settings,
):
    """The owner's endpoint refuses (HTTP 403) the run's first two items in feed order, every time, and answers the
    reference to the third. Two failed calls in a row pause the run; resumed, it asks the two again, they fail
    again, and the run completes: those two failed (the owner's endpoint), the third passed. Before, the items asked
    again were two failures in a row again, and the run paused on every resume, never finishing."""
    sandbox_backend_or_missing("bwrap", sandbox_cache)
    settings.RUN_ITEMS_IN_FLIGHT = settings.USER_ITEMS_IN_FLIGHT = 1000  # every item fed at once, in feed order
    snippets = {s.name: s for s in Snippet.objects.filter(task__versions=small_release)}
    refused: set[str] = set()

    def endpoint(prompt: str, body: dict) -> str:
        name = NAME.findall(prompt)[0]
        if name in refused:
            raise Refused(403)
        return f"```python\n{snippets[name].reference_code}```\n"

    with openai_server(responder=endpoint) as server:
        model = services.model_register(
            name="own-endpoint",
            display_name="Own endpoint",
            litellm_model="openai/solver",
            api_base=server.base_url,
            api_key="sk-test",
        )
        run = services.run_start(model=model, version=small_release, dispatch=False)
        assert run.calls_owner_endpoint and run.total_items == 3
        by_pk = {s.pk: s.name for s in snippets.values()}
        order = [by_pk[snippet_id] for snippet_id, _ in run_feed_order(run)]
        refused.update(order[:2])
        worker = celery_worker_factory(
            queues="default,llm,sandbox",
            SANDBOX_BACKEND="bwrap",
            RUN_PAUSE_AFTER_FAILURES="2",
            RUN_ITEMS_IN_FLIGHT="1000",
            USER_ITEMS_IN_FLIGHT="1000",
        )
        services.run_dispatch(run=run)
        paused = polled(
            lambda: EvaluationRun.objects.filter(pk=run.pk, status="cancelled").exclude(pause_reason="").first(),
            timeout=300,
            what="the pause",
            worker=worker,
        )
        assert "403" in paused.pause_reason
        failed = Outcome.objects.filter(run=run, status="failed", category="owner_endpoint")
        assert {o.snippet.name for o in failed} == refused

        services.run_resume(run=paused)
        ended = polled(
            lambda: EvaluationRun.objects.filter(pk=run.pk).exclude(status="running").first(),
            timeout=300,
            what="the resumed run to end",
            worker=worker,
        )
        assert ended.status == "completed", f"the resumed run paused again: {ended.pause_reason}"

    asked = Counter(NAME.findall(r.prompt)[0] for r in server.chat_requests)
    assert {name: asked[name] for name in refused} == dict.fromkeys(refused, 2), "each refused item asked again once"
    assert asked[order[2]] == 1
    outcomes = {o.snippet.name: o for o in Outcome.objects.filter(run=run).select_related("snippet")}
    assert {name: (o.status, o.category) for name, o in outcomes.items()} == {
        **dict.fromkeys(refused, ("failed", "owner_endpoint")),
        order[2]: ("passed", ""),
    }
    assert all(outcomes[name].detail.startswith(OWNER_ENDPOINT_SAID) for name in refused)
    score = RunScore.objects.get(run=run, paper=None, split="")
    assert (score.passed, score.failed, score.errors) == (1, 2, 0)


@pytest.mark.django_db  # in one transaction: the resume's items are never sent (no worker, no call)
@pytest.mark.usefixtures("fresh_broker")  # the resume queues its items on a broker of the test's own, emptied after
def test_items_asked_for_the_first_time_still_pause_a_resumed_run(small_release, settings):  # noqa: F811
    """Only the items a resume asked again are left out of the pause rule: a failure of an item never asked before
    (the endpoint still down as a whole) pauses the run as ever, and an item asked again once more breaks no streak."""
    settings.RUN_PAUSE_AFTER_FAILURES = 1
    model = services.model_register(
        name="down", display_name="Down", litellm_model="openai/m", api_base="https://models.example.org/v1"
    )
    run = services.run_start(model=model, version=small_release, dispatch=False)
    EvaluationRun.objects.filter(pk=run.pk).update(status="running")
    first, fresh = (Snippet.objects.get(pk=pk) for pk, _ in run_feed_order(run)[:2])
    services.generation_record(run=run, snippet=first, sample=0, prompt="p", error="openai/m: 503")
    assert services.run_pause_if_failing(run=run)
    services.run_resume(run=EvaluationRun.objects.get(pk=run.pk))
    run.refresh_from_db()
    assert run.status == "running" and run.asked_again == [[first.pk, 0]]

    services.generation_record(run=run, snippet=first, sample=0, prompt="p", error="openai/m: 503")
    assert not services.run_pause_if_failing(run=run), "an item asked again that fails again does not pause it"
    services.generation_record(run=run, snippet=fresh, sample=0, prompt="p", error="openai/m: 503")
    assert services.run_pause_if_failing(run=run), "an item asked for the first time does"
