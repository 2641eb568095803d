"""What the run and item pages say of an agent run (issue 23's newcomer walk): budgets from what is given, never a
garble of units; the transcript readable at phone width, its step headers with every budget left, tool arguments as
code, the diff of the agent's answer against the masked start, all before the Tests table; one money format, token
counts with separators, plain plurals."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from django.conf import settings
from django.urls import reverse

from agents.budget import budget_text
from agents.models import AgentStep, AgentTrajectory
from agents.templatetags.agent_runs import tool_arguments
from agents.uploads import uploaded_ended_text
from benchmarks.models import Snippet
from evaluation import services
from evaluation.judging.step import ended_detail
from evaluation.models import EvaluationRun, ModelEntry, Outcome

pytestmark = pytest.mark.django_db

GARBLE = "turn, token, s, unavailable"  # what an empty budget rendered as through the old include


def _run(release, *, budget: dict, uploaded: bool = False, total_items: int = 0) -> EvaluationRun:
    return EvaluationRun.objects.create(
        model=ModelEntry.objects.get(name="reference"),
        version=release,
        mode="agent",
        agent_budget=budget,
        params={"uploaded": True} if uploaded else {},
        status="completed",
        total_items=total_items,
    )


def _item(run, snippet, *, budget: dict, code: str, steps: list[dict], tests: list | None = None) -> Outcome:
    generation = services.generation_record(
        run=run, snippet=snippet, sample=0, prompt="p", raw_answer=code, code=code, prompt_tokens=1234567, cost=None
    )
    outcome = Outcome.objects.create(
        run=run, snippet=snippet, status="passed", generation=generation, tests=tests or []
    )
    trajectory = AgentTrajectory.objects.create(
        run=run,
        snippet=snippet,
        budget=budget,
        ended_by="submitted",
        turns=1,
        prompt_tokens=1234567,
        completion_tokens=8,
        cost=Decimal("0.5"),
        seconds=2.0,
    )
    for index, step in enumerate(steps):
        AgentStep.objects.create(trajectory=trajectory, index=index, **step)
    return outcome


def test_a_budget_is_said_from_what_it_gives():
    assert budget_text({}) == "not given (uploaded)"
    assert budget_text(None) == "not given (uploaded)"
    assert budget_text({"turns": 8, "tokens": 1_000_000, "seconds": 600, "cost": 0.5}) == (
        "8 turns, 1,000,000 tokens, 600 s, $0.50"
    )
    assert budget_text({"turns": 1}) == "1 turn (tokens, wall time, USD not given)"


def test_an_uploaded_run_without_a_budget_never_shows_the_garble(client, release):
    """Before, run.agent_budget == {} rendered "per item at most turn, token, s, unavailable" and "Budget per item:
    turn, token, s, unavailable"; an uploaded trajectory with a partial budget said its missing units the same way."""
    run = _run(release, budget={}, uploaded=True, total_items=33)
    snippet = Snippet.objects.filter(task__versions=release).order_by("pk").first()
    outcome = _item(run, snippet, budget={"turns": 8}, code="x = 1\n", steps=[])
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert GARBLE not in page and "per item at most" not in page
    assert "budget per item not given (uploaded)" in page
    summary = page.split('id="agent-summary-heading"')[1].split("</section>")[0]
    assert "<dt>Budget per item</dt><dd>not given (uploaded)</dd>" in summary
    assert "<dt>Items with a trajectory</dt><dd>1 of 33</dd>" in summary, "not 'Items worked on: 1' for 33 answers"
    assert "1,234,575 (1,234,567 in, 8 out)" in summary
    item = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()
    assert "Budget: 8 turns (tokens, wall time, USD not given)." in item and GARBLE not in item
    assert "1,234,575 tokens (1,234,567 in, 8 out)" in item


def test_the_item_page_transcript_wraps_says_what_is_left_and_shows_code_and_the_diff(client, release):
    run = _run(release, budget={"turns": 8, "tokens": 100000, "seconds": 600, "cost": 0.5})
    snippet = Snippet.objects.filter(task__versions=release).order_by("pk").first()
    edit = {
        "path": snippet.file_path,
        "old_string": '# TODO: Implement block "x"',
        "new_string": "def agent_made(value):\n    return value * 2",
    }
    steps = [
        {"role": "system", "content": "x" * 3000},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "edit_file", "arguments": json.dumps(edit)}],
            "prompt_tokens": 1200,
            "completion_tokens": 30,
            "cost": Decimal("0.0012"),
            "duration": 1.5,
            "budget_left": {"turns": 7, "tokens": 98770, "seconds": 540.4, "cost": 0.4988},
        },
        {"role": "tool", "tool_name": "edit_file", "content": "ok", "budget_left": {"turns": 7, "cost": None}},
    ]
    tests = [{"id": "test_x", "outcome": "passed", "passed": True}]
    outcome = _item(run, snippet, budget=run.agent_budget, code="    return 2\n", steps=steps, tests=tests)
    page = client.get(reverse("run-item", args=[run.pk, outcome.pk])).content.decode()

    start = page.index('id="trajectory-heading"')
    trajectory = page[start : page.index("</section>", start)]
    assert page.index('id="trajectory-heading"') < page.index('id="tests-heading"'), "the story before the Tests table"
    assert "Budget: 8 turns, 100,000 tokens, 600 s, $0.50." in trajectory, "no space before the full stop"
    header = trajectory.split('class="step step-assistant"')[1].split("</span>")[0]
    assert "1,200 in / 30 out · cost $0.0012 · left: 7 turns, 98,770 tokens, 540 s, $0.4988" in header
    assert "left: 7 turns, unavailable" in trajectory.split('class="step step-tool"')[1], "an unknown cost left"
    # Tool arguments that are code are highlighted by the file's language, each argument on its own.
    assert '<dt>new_string</dt><dd><div class="highlight">' in trajectory
    assert '<span class="k">def</span>' in trajectory and "agent_made" in trajectory
    # The diff from the masked placeholder to the snippet body read from the final file, said as such.
    assert 'id="trajectory-diff-heading"' in trajectory and "masked start (the placeholder" in trajectory
    assert "the agent&#x27;s final snippet body" in trajectory or "the agent's final snippet body" in trajectory
    assert "# TODO: Implement block" in trajectory and "return 2" in trajectory
    css = (settings.BASE_DIR / "static" / "css" / "site.css").read_text()
    assert (
        ".agent-trajectory pre, .agent-trajectory div.highlight pre { white-space: pre-wrap; overflow-wrap: anywhere; }"
        in css
    )
    assert 'class="transcript-text"' in trajectory, "long steps are transcript blocks the stylesheet wraps"


def test_tool_arguments_that_are_not_an_object_are_shown_as_sent_and_escaped():
    assert str(tool_arguments("<script>")) == '<pre class="transcript-text">&lt;script&gt;</pre>'
    shown = str(tool_arguments(json.dumps({"command": "ls -la", "path": "a/b.py"})))
    assert "<dt>command</dt>" in shown and '<div class="highlight">' in shown and "<code>a/b.py</code>" in shown


def test_outcome_details_and_uploaded_items_read_as_sentences():
    assert ended_detail("the agent submitted", "") == "the agent submitted.", "no bare semicolon"
    assert ended_detail("the agent submitted", "all 3 tests passed") == "the agent submitted; all 3 tests passed"
    trajectory = AgentTrajectory(ended_by="submitted", turns=1)
    assert (
        uploaded_ended_text(trajectory) == "an uploaded agent answer (self-reported: the agent submitted after 1 turn)"
    )
    trajectory = AgentTrajectory(ended_by="turns", turns=12)
    assert uploaded_ended_text(trajectory).endswith("its turn budget ran out after 12 turns)")


def test_the_upload_form_links_the_agent_runs_guide_not_a_repository_path(client, author, release):
    services.model_register(name="uploader", display_name="Uploader", kind="uploaded", owner=author)
    client.force_login(author)
    page = client.get(reverse("model-detail", args=["uploader"])).content.decode()
    assert "Upload generations" in page and "docs/AGENT_RUNS.md" not in page
    assert page.count(f'<a href="{reverse("guide", args=["agent-runs"])}">') >= 2, "the file's help and the mode's"
    assert "extracts the last fenced python block (```python ... ```)" in page


def test_the_run_form_says_token_maximums_with_separators(client, maintainer, release):
    client.force_login(maintainer)
    page = client.get(reverse("model-detail", args=["reference"])).content.decode()
    budget = page.split("data-agent-budget>")[1].split("</fieldset>")[0]
    assert "e+0" not in budget and ",000 tokens" in budget


def test_the_leaderboards_token_cells_have_thousands_separators():
    from types import SimpleNamespace

    from leaderboard.selectors.columns import LEADERBOARD_COLUMNS
    from leaderboard.templatetags.leaderboard import leaderboard_cell

    tokens = next(c for c in LEADERBOARD_COLUMNS if c.key == "tokens")
    row = SimpleNamespace(tokens=1234567, score=None)
    assert leaderboard_cell(row, tokens) == "1,234,567"
