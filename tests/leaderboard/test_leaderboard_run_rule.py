"""Which run is a model's leaderboard row (issue 22): the run its owner pinned, else the latest completed run; the
model page lists every run with its score and says which is the row; only the owner or a maintainer moves the pin."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from evaluation import services
from evaluation.models import EvaluationRun, ModelEntry
from evaluation.selectors import runs as runs_selectors
from leaderboard.selectors.columns import leaderboard_record
from leaderboard.selectors.table import leaderboard_rows
from tests.conftest import client_for, page_text
from tests.leaderboard.test_leaderboard import evaluate, model

pytestmark = pytest.mark.django_db


def board_runs(release) -> set[int]:
    return {row.run.pk for row in leaderboard_rows(version=release)}


def test_the_latest_completed_run_is_the_row_until_one_is_pinned(release, author):
    entry = model("owned", owner=author)
    better = evaluate(release, entry, lambda s: True)
    worse = evaluate(release, entry, lambda s: False)
    assert worse.pk in board_runs(release) and better.pk not in board_runs(release), "latest, with no pin"
    services.run_pin(run=better, actor=author)
    assert better.pk in board_runs(release) and worse.pk not in board_runs(release)
    later = evaluate(release, entry, lambda s: False)  # an upload or run after the pin never replaces it
    assert better.pk in board_runs(release) and later.pk not in board_runs(release)
    services.run_unpin(run=better, actor=author)
    assert later.pk in board_runs(release), "unpinned: the latest again"


def test_the_rule_chooses_per_release_and_setting_by_finish_time_not_id(release, author):
    entry = model("owned", owner=author)
    with_paper = evaluate(release, entry, lambda s: True, with_paper=True)
    without = evaluate(release, entry, lambda s: False, with_paper=False)
    first, second = (evaluate(release, entry, lambda s: s.loc > 2, with_paper=True) for _ in range(2))
    # The later id finished earlier (e.g. a resumed run): finishing time decides.
    EvaluationRun.objects.filter(pk=second.pk).update(finished_at=timezone.now() - timedelta(days=1))
    chosen = runs_selectors.leaderboard_choose(EvaluationRun.objects.filter(model=entry))
    assert chosen == {
        (release.pk, entry.pk, "single", True, ""): first,
        (release.pk, entry.pk, "single", False, ""): without,
    }
    services.run_pin(run=with_paper, actor=author)
    assert (
        runs_selectors.leaderboard_choose(EvaluationRun.objects.filter(model=entry))[
            (release.pk, entry.pk, "single", True, "")
        ]
        == with_paper
    ), "pinned beats later"
    queued = services.run_start(model=entry, version=release, dispatch=False)
    EvaluationRun.objects.filter(pk=queued.pk).update(pinned_at=None)
    assert queued not in runs_selectors.leaderboard_choose(EvaluationRun.objects.filter(model=entry)).values()


def test_one_pin_per_setting_moves_with_the_owners_choice(release, author):
    entry = model("owned", owner=author)
    a, b = evaluate(release, entry, lambda s: True), evaluate(release, entry, lambda s: False)
    other_setting = evaluate(release, entry, lambda s: True, with_paper=False)
    services.run_pin(run=a, actor=author)
    services.run_pin(run=other_setting, actor=author)
    services.run_pin(run=b, actor=author)
    pins = set(EvaluationRun.objects.filter(model=entry, pinned_at__isnull=False).values_list("pk", flat=True))
    assert pins == {b.pk, other_setting.pk}
    assert EvaluationRun.objects.get(pk=b.pk).pinned_by == author


def test_only_the_owner_or_a_maintainer_pins_and_only_a_completed_run(release, author, other_author, maintainer):
    from django.core.exceptions import PermissionDenied

    entry = model("owned", owner=author)
    run = evaluate(release, entry, lambda s: True)
    with pytest.raises(PermissionDenied):
        services.run_pin(run=run, actor=other_author)
    services.run_pin(run=run, actor=maintainer)
    queued = services.run_start(model=entry, version=release, dispatch=False)
    with pytest.raises(services.EvaluationError, match="only a completed run"):
        services.run_pin(run=queued, actor=author)


def test_the_model_page_lists_every_run_marks_the_row_and_pins(client, release, author, other_author):
    entry = model("owned", owner=author)
    better = evaluate(release, entry, lambda s: True)
    worse = evaluate(release, entry, lambda s: False)
    url = reverse("model-detail", args=["owned"])
    client.force_login(author)
    body = client.get(url).content.decode()
    runs = body.split('id="model-runs"')[1].split("</table>")[0]
    assert reverse("run-detail", args=[better.pk]) in runs and reverse("run-detail", args=[worse.pk]) in runs
    assert "100.0%" in runs and "0.0%" in runs, "every run with its score"
    row_of = {
        pk: runs.split(f'href="{reverse("run-detail", args=[pk])}"')[1].split("</tr>")[0]
        for pk in (better.pk, worse.pk)
    }
    assert (
        "on the leaderboard</strong> (latest)" in row_of[worse.pk]
        and "on the leaderboard</strong>" not in row_of[better.pk]
    )
    assert runs_selectors.LEADERBOARD_RUN_RULE in page_text(body)

    response = client.post(reverse("run-pin", args=[better.pk]), {"pinned": "yes"})
    assert response.status_code == 302 and response["Location"].endswith(url + "#runs")
    body = client.get(url).content.decode()
    assert (
        "on the leaderboard</strong> (pinned)"
        in body.split(f'href="{reverse("run-detail", args=[better.pk])}"')[1].split("</tr>")[0]
    )
    board = client.get(reverse("leaderboard", args=["1.0.0"])).content.decode()
    assert reverse("run-detail", args=[better.pk]) in board and reverse("run-detail", args=[worse.pk]) not in board
    assert "pinned by the model&#x27;s owner" in board

    stranger = client_for(None)
    stranger.force_login(other_author)
    assert stranger.post(reverse("run-pin", args=[worse.pk]), {"pinned": "yes"}).status_code == 403
    assert "Pin to the leaderboard" not in stranger.get(url).content.decode()
    assert client.post(reverse("run-pin", args=[better.pk]), {"pinned": "no"}).status_code == 302
    assert EvaluationRun.objects.get(pk=better.pk).pinned_at is None


def test_the_leaderboard_and_the_api_state_the_rule(client, release, author):
    entry = model("owned", owner=author)
    run = evaluate(release, entry, lambda s: True)
    evaluate(release, ModelEntry.objects.get(name="reference"), lambda s: True)
    body = page_text(client.get(reverse("leaderboard", args=["1.0.0"])).content.decode())
    assert f"One row per model and setting: {runs_selectors.LEADERBOARD_RUN_RULE}." in body
    assert runs_selectors.LEADERBOARD_RUN_RULE in page_text(
        client.get(reverse("release-difficulty", args=["1.0.0"])).content.decode()
    )
    services.run_pin(run=run, actor=author)
    rows = {r["model"]: r for r in client.get(reverse("api-leaderboard", args=["1.0.0"])).json()}
    assert rows["owned"]["pinned"] is True and rows["reference"]["pinned"] is False


def test_an_agent_run_is_a_row_of_its_own_never_the_newer_row_of_the_single_shot_one(release, author, client):
    """A newcomer's agent run of a model replaced its single-shot row (one row per model and paper setting): mode is
    part of the setting, on the board, in its CSV and JSON, and on the model page."""
    entry = model("owned", owner=author)
    single = evaluate(release, entry, lambda s: True)
    agent = evaluate(release, entry, lambda s: False)
    EvaluationRun.objects.filter(pk=agent.pk).update(mode="agent")
    rows = leaderboard_rows(version=release)
    assert {(row.run.pk, row.setting) for row in rows if row.run.model_id == entry.pk} == {
        (single.pk, "with paper"),
        (agent.pk, "agent, with paper"),
    }
    records = [leaderboard_record(row) for row in rows if row.run.model_id == entry.pk]
    assert sorted(r["mode"] for r in records) == ["agent", "single"]
    services.run_pin(run=single, actor=author)
    services.run_pin(run=agent, actor=author)
    assert EvaluationRun.objects.filter(model=entry, pinned_at__isnull=False).count() == 2, "one pin per mode"
    page = page_text(client.get(reverse("model-detail", args=[entry.name])).content.decode())
    assert "agent, with paper" in page
