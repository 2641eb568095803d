"""A person's answer is judged by the evaluation pipeline like any model's, in the real sandbox: an honest body
passes, a wrong one fails, and a hostile one (reading the hidden reference, skipping the tests) is treated as any
answer: scored, never passed. Each attack is first shown to pass with plain `python paper2code_test.py` and no guard.
The release's Humans row is then checked by hand against the attempts."""

from __future__ import annotations

import statistics
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from benchmarks.models import Snippet
from benchmarks.paper2code import parse, passes, splice
from evaluation.models import Outcome
from evaluation.taskfiles import task_files
from humans import selectors, services
from humans.models import Attempt
from tests.conftest import client_for, page_text
from tests.humans.conftest import dampnest_item

pytestmark = pytest.mark.django_db(transaction=True, serialized_rollback=True)

HONEST = 'st["g_prev"] = g.copy()'
WRONG = 'st["g_prev"] = g * 0.5'
ATTACKS = {
    # Copies the body from the hidden reference file beside the tests.
    "reads-the-reference": (
        "line = next(l for l in open('optimizer_ref.py') if 'st[\"g_prev\"] = ' in l and 'diff' not in l)\n"
        "exec(line.strip())"
    ),
    # Every test that reaches the answer is skipped: unittest says OK and exits 0.
    "skips-the-tests": "import unittest\nraise unittest.SkipTest('needs a GPU')",
}


def _submit(version, person, item, body: str, *, seconds: float = 120.0) -> Attempt:
    attempt = services.attempt_open(user=person, version=version, snippet_id=item.pk)
    Attempt.objects.filter(pk=attempt.pk).update(opened_at=attempt.opened_at - timedelta(seconds=seconds))
    attempt.refresh_from_db()
    attempt = services.attempt_submit(attempt=attempt, user=person, body=body, keystrokes=len(body), pastes=[])
    attempt.refresh_from_db()
    return attempt


def _verdict(attempt: Attempt) -> Outcome:
    outcome = selectors.attempt_outcome(attempt=attempt)
    assert outcome is not None, "scored in this process (the tasks ran eagerly)"
    return outcome


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_passes_with_plain_python_and_no_guard(held_release, attack, tmp_path):
    item = dampnest_item(held_release)
    files = task_files(item.task)
    annotated = parse(files[item.file_path].decode(), item.file_path)
    body = "".join(f"        {line}\n" for line in ATTACKS[attack].splitlines())
    for name, data in {
        **files,
        item.file_path: splice(annotated, annotated.snippets[item.position], body).encode(),
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    plain = subprocess.run(
        [sys.executable, item.task.test_entry_point], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert passes(exit_code=plain.returncode, stdout=plain.stdout, stderr=plain.stderr, timed_out=False), (
        plain.returncode,
        plain.stdout[-800:],
        plain.stderr[-800:],
    )


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hostile_body_is_scored_like_any_answer_and_never_passes(
    held_release, people, sandbox, scoring_inline, attack
):
    attempt = _submit(held_release, people[0], dampnest_item(held_release), ATTACKS[attack])
    outcome = _verdict(attempt)
    assert outcome.status in ("failed", "flagged"), (outcome.status, outcome.category, outcome.detail)
    print(f"{attack}: {outcome.status} ({outcome.category}) {outcome.detail[:200]!r}")
    assert attempt.run.mode == "human" and attempt.run.status == "completed"
    row = selectors.humans_row(version=held_release)
    assert row.pass_rate == 0.0, "it never raises the Humans row"


def test_the_humans_row_is_the_attempts_counted_by_hand(held_release, people, sandbox, scoring_inline, settings):
    settings.HUMAN_THIN_PEOPLE = 3
    # Items of two papers: one person's attempt at an item shows the reference of its file's other items.
    a = dampnest_item(held_release)
    b = Snippet.objects.get(
        task__versions=held_release,
        task__paper__slug="topk-attention-pool",
        name="select top-k valid tokens per sequence",
    )
    b_honest, b_wrong = textwrap.dedent(b.reference_code).strip(), "raise NotImplementedError"
    # a: person1 passes (50 s), person2 passes (180 s), person3 fails (240 s); b: person1 fails (120 s).
    done = [
        _submit(held_release, people[0], a, HONEST, seconds=50),
        _submit(held_release, people[1], a, HONEST, seconds=180),
        _submit(held_release, people[2], a, WRONG, seconds=240),
        _submit(held_release, people[0], b, b_wrong, seconds=120),
    ]
    assert [_verdict(x).status for x in done] == ["passed", "passed", "failed", "failed"]
    # One more, passed, then excluded by a maintainer: left out of every figure.
    extra = _submit(held_release, people[1], b, b_honest, seconds=30)
    assert _verdict(extra).status == "passed"
    maintainer = User.objects.create_superuser("keeper", "keeper@example.org", "pw")
    services.attempt_exclude(attempt=extra, actor=maintainer, reason="the body was the reference, pasted")

    row = selectors.humans_row(version=held_release)
    # By hand: item a 2 of 3 passed, item b 0 of 1 passed.
    share_a, share_b = 2 / 3, 0 / 1
    assert row.people == 3 and row.attempts == 4 and row.items == 2
    assert row.pass_rate == pytest.approx(100 * (share_a + share_b) / 2)
    assert row.scaled_pass_rate == pytest.approx(100 * (a.loc * share_a + b.loc * share_b) / (a.loc + b.loc))
    assert row.median_minutes == pytest.approx(statistics.median([50 / 60, 3, 4, 2]), abs=0.05)
    assert row.thin_items == 1, "b was tried by one person, fewer than 3"
    assert row.per_item[a.pk].people == 3 and row.per_item[a.pk].passed == 2 and not row.per_item[a.pk].thin
    assert row.counts["excluded"] == 1
    assert row.pass_ci is None, "two items: too few for an interval"
    settings.HUMAN_INTERVAL_MIN_ITEMS = 2
    ci = selectors.humans_row(version=held_release).pass_ci
    assert ci is not None and ci.low <= row.pass_rate <= ci.high
    curve, total = selectors.time_curve(version=held_release)
    assert total == 4
    assert [(p.minutes, p.solved) for p in curve] == [(1, 1), (2, 1), (5, 2)]
    api = client_for(None).get(f"/api/v1/releases/{held_release.name}/humans/").json()
    assert (api["people"], api["attempts"], api["items"], api["thin_items"]) == (3, 4, 2, 1)
    assert api["pass_rate"] == pytest.approx(row.pass_rate) and api["provenance"] == "self_reported"

    # Private unless listed: person1 opts in, the others are never named.
    services.listing_set(user=people[0], listed=True)
    assert [(p.name, p.attempts, p.passed) for p in selectors.people_listed(version=held_release)] == [
        ("person1", 2, 1)
    ]
    text = page_text(Client().get(f"/versions/{held_release.name}/humans/").content.decode())
    assert "person1" in text and "person2" not in text and "person3" not in text
    # An attempt's run is no run page or API run of anyone's: its result is its person's.
    for viewer in (None, people[0], maintainer):
        client = Client()
        if viewer is not None:
            client.force_login(viewer)
        assert client.get(f"/runs/{done[0].run_id}/").status_code == 404
        assert client_for(viewer).get(f"/api/v1/runs/{done[0].run_id}/").status_code == 404
    assert Client().get("/models/humans/").content.decode().count("/runs/") == 0
